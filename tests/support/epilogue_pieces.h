// sm90 designs whose pipeline leaves too little shared memory for the TMA-store epilogue to stage 64-column
// chunks of a warpgroup's whole rows: they stage 64x64 pieces (one m64 block of rows each) instead
// (kernels/sm90/params.h, epilogue_rows). Both cooperative schedules, a cluster, serial split-K. The sm90 sweep
// compiles them (tests/generate) and the GPU test runs them on ragged shapes (tests/run).
#pragma once

#include <string>
#include <vector>

namespace rlgemm::test {

inline const std::vector<std::string> kEpiloguePiecesDesigns = {
    "sm90.ws.coopn/192x192x64/s4/c1x1/raster_n.g8/splitk1/epi_tma",
    "sm90.ws.coopn/192x192x64/s4/c2x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coopn/192x192x64/s4/c1x1/raster_m.g8/splitk2.serial/epi_tma",
    "sm90.ws.coop/256x128x64/s4/c1x1/raster_n.g8/splitk1/epi_tma",
    "sm90.ws.coop/256x128x64/s4/c1x2/raster_n.g8/splitk1/epi_tma",
};

}  // namespace rlgemm::test
