// sm90 epi_tma designs with /bulktail: the columns past each warpgroup's last whole 64-column chunk (40 of 168, 32 of
// 96) are staged in shared memory with the chunks and stored with one bulk copy per row. Tails of an odd and an even
// count of 8-column blocks, both schedules and the column split, one buffer (ping-pong) and two (cooperative, with
// an odd count of chunks), 64-row pieces (coopn 192x192), clusters, serial split-K, stream-K and bf16. The sm90
// sweep compiles the fp16 ones (tests/generate) and the GPU test runs them all on ragged shapes (tests/run).
#pragma once

#include <string>
#include <vector>

namespace rlgemm::test {

inline const std::vector<std::string> kBulkTailDesigns = {
    "sm90.ws.pingpong/128x168x64/s5/c2x1/raster_m.g8/splitk1/epi_tma/bulktail",
    "sm90.ws.pingpong/128x96x64/s6/c1x1/raster_n.g4/splitk1/epi_tma/bulktail",
    "sm90.ws.coop/128x168x64/s5/c1x1/raster_m.g8/splitk1/epi_tma/bulktail",
    "sm90.ws.coopn/192x192x64/s4/c1x1/raster_n.g8/splitk1/epi_tma/bulktail",
    "sm90.ws.coop/256x168x64/s3/c1x2/raster_n.g8/splitk2.serial/epi_tma/bulktail",
    "sm90.ws.coop/128x168x64/s4/c1x1/raster_m.g8/streamk/epi_tma/bulktail",
};

inline const std::vector<std::string> kBulkTailBf16Designs = {
    "sm90.ws.pingpong/128x168x64/s5/c1x2/raster_n.g8/splitk1/epi_tma/bulktail/bf16",
};

}  // namespace rlgemm::test
