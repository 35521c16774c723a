// Designs of the tile widths the search offers beside 64..256 in steps of 64 (search/design_space.h): narrow
// tiles (32) for tiny problems and fitted widths (96, 144, 160, 176, 200, 224, 240, and of the steps of 8 the
// tuner, autotuning and the predicted route fit to, 88, 112, 152, 168, 184 and 248) that waves of tiles fill
// better, with clusters, split-K in the kernel (serial and parallel), stream-K, swap and both epilogues (the
// TMA-store epilogue's whole 64-column chunks by TMA, the rest from registers). The sm90 sweep compiles them
// (tests/generate) and the GPU test runs them on ragged shapes (tests/run).
#pragma once

#include <string>
#include <vector>

namespace rlgemm::test {

inline const std::vector<std::string> kNewTileWidthDesigns = {
    "sm90.ws.pingpong/64x32x128/s6/c1x1/raster_n.g1/splitk4.parallel/epi_reg",
    "sm90.ws.coop/128x96x64/s5/c1x1/raster_m.g8/streamk/epi_reg",
    "sm90.ws.pingpong/64x160x64/s5/c2x1/raster_m.g8/splitk1/epi_reg",
    "sm90.ws.coop/128x224x64/s4/c1x2/raster_n.g4/splitk2.serial/epi_reg",
    "sm90.ws.pingpong/64x96x64/s6/c1x1/raster_m.g8/splitk1/epi_reg/swap",
    "sm90.ws.pingpong/64x224x64/s5/c1x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coop/128x224x64/s4/c1x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coop/128x96x64/s6/c2x1/raster_m.g8/splitk3.parallel/epi_tma",
    "sm90.ws.pingpong/64x96x64/s8/c1x2/raster_n.g4/streamk/epi_tma",
    "sm90.ws.coop/256x160x64/s3/c1x1/raster_m.g8/splitk2.serial/epi_tma",
    "sm90.ws.coop/128x176x64/s4/c2x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/64x200x64/s5/c1x1/raster_n.g8/splitk1/epi_tma",
    "sm90.ws.coop/128x144x64/s5/c1x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coop/128x240x64/s4/c1x2/raster_m.g8/splitk1/epi_tma",
    // Widths fitted in steps of 8 (search/wave_fit.h; the tuner, autotuning and the predicted route): 168 (40
    // columns from registers), 184 (56), 152 (24), and widths the predicted route takes on LLM layers (rlgemm
    // predict --top 1 --z 1 on bench/shapes/llm-tune.csv): 248, 112, 88 swapped.
    "sm90.ws.coop/128x168x64/s5/c1x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/64x184x64/s5/c1x2/raster_n.g8/splitk2.serial/epi_tma",
    "sm90.ws.coop/128x152x64/s5/c1x2/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coop/128x248x64/s4/c1x2/raster_n.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/128x112x64/s5/c1x1/raster_n.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/128x88x64/s6/c1x1/raster_n.g4/splitk1/epi_reg/swap",
};

}  // namespace rlgemm::test
