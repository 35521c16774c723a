// sm90 epi_tma designs whose stages end 512 bytes short of a 1024-byte boundary: BK 32 (64-byte rows), a BN of 8
// mod 16 and an odd stage count, so (BM + BN) x 64 x stages bytes is an odd multiple of 512. The TMA-store
// epilogue's 128-byte swizzled staging must start on 1024 bytes (sm90::epilogue_offset); started right after the
// stages, every value it stored was wrong (4096x8192x1024, ping-pong 64x200x32 with 3 stages, bf16, H200). Both
// schedules, the registers' tail (BN 72, 200), the bulk-copy tail, bf16. The sm90 sweep compiles the fp16 ones
// (tests/generate), the layout test checks the offsets, and the GPU test runs them all on ragged shapes (tests/run).
#pragma once

#include <string>
#include <vector>

namespace rlgemm::test {

inline const std::vector<std::string> kEpilogueAlignmentDesigns = {
    "sm90.ws.pingpong/64x200x32/s3/c1x1/raster_m.g4/splitk1/epi_tma",
    "sm90.ws.pingpong/64x72x32/s5/c1x1/raster_n.g4/splitk1/epi_tma",
    "sm90.ws.coop/128x200x32/s3/c1x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/64x200x32/s3/c1x1/raster_m.g4/splitk1/epi_tma/bulktail",
};

inline const std::vector<std::string> kEpilogueAlignmentBf16Designs = {
    "sm90.ws.pingpong/64x200x32/s3/c1x1/raster_m.g4/splitk1/epi_tma/bf16",
    "sm90.ws.coop/128x200x32/s3/c1x1/raster_m.g8/splitk1/epi_tma/bf16",
};

}  // namespace rlgemm::test
