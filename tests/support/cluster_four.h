// sm90 designs with clusters of four CTAs: 2x2 shares both operands (each CTA loads half of its A tile and half
// of its B tile and multicasts each to the CTA beside it), 4x1 and 1x4 share one operand four ways (parts of
// whole swizzle atoms that overlap where they do not divide the tile: BN 168 and 40 in four). Every schedule,
// both epilogues, BK 32 / 64 / 128, the split-K modes and stream-K, swap. A stage's empty barrier waits for the
// consumers of its cluster row and column only (gemm.cuh, kStageWriters). The sm90 sweep compiles them
// (tests/generate), the GPU test runs them on ragged shapes (tests/run).
#pragma once

#include <string>
#include <vector>

namespace rlgemm::test {

inline const std::vector<std::string> kClusterFourDesigns = {
    "sm90.ws.coop/128x128x64/s5/c2x2/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/128x168x64/s5/c2x2/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coopn/192x192x64/s4/c2x2/raster_n.g8/splitk1/epi_tma",
    "sm90.ws.coop/128x256x64/s4/c4x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/128x128x64/s5/c1x4/raster_n.g4/splitk1/epi_reg",
    "sm90.ws.coop/128x128x32/s6/c2x2/raster_m.g4/streamk/epi_reg",
    "sm90.ws.pingpong/64x64x128/s4/c2x2/raster_m.g8/splitk2.serial/epi_reg/swap",
    "sm90.ws.coop/128x128x64/s4/c2x2/raster_n.g2/splitk3.parallel/epi_reg",
    "sm90.ws.pingpong/64x40x64/s6/c4x1/raster_m.g8/splitk1/epi_reg/swap",
};

}  // namespace rlgemm::test
