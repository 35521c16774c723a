// sm90 ping-pong designs whose warpgroup holds 129-168 accumulators per thread (a whole tile of 128x136..168,
// 192x88..112 or 256x72..80): valid without a split of K (design.cpp). Clusters along M and N, both epilogues,
// swap, BK 32 and 128. The sm90 sweep compiles them without spills (tests/generate) and the GPU test runs them on
// ragged shapes (tests/run).
#pragma once

#include <string>
#include <vector>

namespace rlgemm::test {

inline const std::vector<std::string> kPingpongWideDesigns = {
    "sm90.ws.pingpong/128x168x64/s5/c1x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/128x168x64/s5/c1x2/raster_n.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/128x160x32/s8/c1x1/raster_n.g1/splitk1/epi_reg",
    "sm90.ws.pingpong/128x144x128/s3/c2x1/raster_m.g4/splitk1/epi_tma",
    "sm90.ws.pingpong/192x112x64/s4/c2x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/256x80x64/s4/c1x1/raster_m.g8/splitk1/epi_reg/swap",
};

}  // namespace rlgemm::test
