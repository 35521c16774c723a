// sm90 designs with /evictAB: the TMA loads of the problem's A and B carry an L2 eviction policy (evict_first or
// evict_last, made once by the producer). Each hint on each operand, both schedules, the column split, multicast
// loads of both operands (2x1 and 1x2 clusters), MN-major operands (the nn layout), swap (the kernel's A' is the
// problem's B), stream-K and bf16. The sm90 sweep compiles the fp16 ones (tests/generate) and the GPU test runs
// them all on ragged shapes (tests/run).
#pragma once

#include <string>
#include <vector>

namespace rlgemm::test {

inline const std::vector<std::string> kEvictHintDesigns = {
    "sm90.ws.pingpong/128x168x64/s5/c2x1/raster_m.g8/splitk1/epi_tma/evictnl/bulktail",
    "sm90.ws.coop/128x256x64/s4/c1x2/raster_n.g8/splitk1/epi_tma/evictfl",
    "sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/splitk1/epi_reg/evictlf",
    "sm90.ws.coopn/192x192x64/s4/c1x1/raster_n.g8/splitk1/epi_tma/evictfn",
    "sm90.ws.pingpong/64x64x128/s6/c1x1/raster_n.g4/splitk1/epi_reg/swap/evictln",
    "sm90.ws.coop/128x192x64/s4/c1x1/raster_m.g8/streamk/epi_tma/evictff",
};

inline const std::vector<std::string> kEvictHintBf16Designs = {
    "sm90.ws.pingpong/128x168x64/s5/c1x2/raster_n.g8/splitk1/epi_tma/evictfl/bulktail/bf16",
};

}  // namespace rlgemm::test
