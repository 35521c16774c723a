// sm90 designs whose BK 32 stages ((BM + BN) x 64 bytes) do not all end on 1024 bytes, where 128-byte swizzled
// buffers must start:
// - epi_tma with a BN of 8 mod 16 and an odd stage count: the stages end 512 bytes short, and the TMA-store
//   epilogue's staging starts on the next 1024 bytes (sm90::epilogue_offset); started right after the stages, every
//   value it stored was wrong (4096x8192x1024, ping-pong 64x200x32 with 3 stages, bf16, H200). Both schedules, the
//   registers' tail (BN 72, 200), the bulk-copy tail, bf16;
// - swap with BK 32 and a BN that is a multiple of 16, the nn layout's N-major A tiles on 1024 bytes at every stage
//   (a BN of 8 mod 16 is refused there: DesignRules.StageTilesStartOnTheirSwizzleAtoms).
// The sm90 sweep compiles the fp16 ones (tests/generate), and the GPU test runs them all on ragged shapes in every
// layout they are valid for (tests/run).
#pragma once

#include <string>
#include <vector>

namespace rlgemm::test {

inline const std::vector<std::string> kSwizzleAlignmentDesigns = {
    "sm90.ws.pingpong/64x200x32/s3/c1x1/raster_m.g4/splitk1/epi_tma",
    "sm90.ws.pingpong/64x72x32/s5/c1x1/raster_n.g4/splitk1/epi_tma",
    "sm90.ws.coop/128x200x32/s3/c1x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/64x200x32/s3/c1x1/raster_m.g4/splitk1/epi_tma/bulktail",
    "sm90.ws.pingpong/64x80x32/s3/c1x1/raster_n.g4/splitk1/epi_reg/swap",
};

inline const std::vector<std::string> kSwizzleAlignmentBf16Designs = {
    "sm90.ws.pingpong/64x200x32/s3/c1x1/raster_m.g4/splitk1/epi_tma/bf16",
    "sm90.ws.coop/128x200x32/s3/c1x1/raster_m.g8/splitk1/epi_tma/bf16",
};

}  // namespace rlgemm::test
