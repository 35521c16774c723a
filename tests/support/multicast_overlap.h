// sm90 designs with a 2x1 cluster whose B tile's halves are not whole swizzle atoms (BN/2 not a multiple of 8:
// BN 168, 152, 88, 40): each CTA multicasts a part rounded up to whole atoms, and the parts overlap
// (kernels/sm90/params.h, multicast_part_rows). Both schedules, both epilogues, BK 32 (64-byte swizzle) and 128
// (two k-atoms), swap (the kernel's B is then the problem's A). The sm90 sweep compiles them (tests/generate),
// the GPU test runs them on ragged shapes (tests/run).
#pragma once

#include <string>
#include <vector>

namespace rlgemm::test {

inline const std::vector<std::string> kMulticastOverlapDesigns = {
    "sm90.ws.pingpong/128x168x64/s5/c2x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coop/128x168x64/s4/c2x1/raster_m.g8/splitk1/epi_reg",
    "sm90.ws.pingpong/128x152x32/s8/c2x1/raster_m.g4/splitk1/epi_tma",
    "sm90.ws.coop/256x88x128/s2/c2x1/raster_m.g8/splitk2.serial/epi_tma",
    "sm90.ws.pingpong/64x40x64/s6/c2x1/raster_m.g8/splitk1/epi_reg/swap",
};

}  // namespace rlgemm::test
