// Designs of the cooperative schedule that splits a tile's columns between its two consumer warpgroups
// (sm90.ws.coopn: each takes all BM rows by BN/2 columns), the 192-row tiles among them: both epilogues (the
// TMA-store epilogue's whole 64-column chunks of each warpgroup's columns by TMA, the rest from registers),
// clusters, serial split-K, stream-K, swap, BK 32 and 128, and an nn design (each warpgroup whole 64-column
// swizzle atoms of the N-major B tile). The sm90 sweep compiles them (tests/generate) and the GPU test runs them
// on ragged shapes (tests/run).
#pragma once

#include <string>
#include <vector>

namespace rlgemm::test {

inline const std::vector<std::string> kCoopColumnsDesigns = {
    "sm90.ws.coopn/192x192x64/s3/c1x1/raster_n.g8/splitk1/epi_tma",
    "sm90.ws.coopn/192x192x64/s4/c1x1/raster_n.g8/splitk1/epi_reg",
    "sm90.ws.coopn/192x160x64/s4/c2x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coopn/192x208x32/s6/c1x2/raster_n.g4/splitk1/epi_tma",
    "sm90.ws.coopn/256x128x64/s4/c1x1/raster_m.g8/splitk2.serial/epi_reg",
    "sm90.ws.coopn/192x96x64/s5/c2x1/raster_m.g8/streamk/epi_reg",
    "sm90.ws.coopn/64x128x128/s4/c1x1/raster_n.g8/streamk/epi_tma",
    "sm90.ws.coopn/128x256x64/s3/c1x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coopn/64x32x64/s8/c1x1/raster_m.g8/splitk1/epi_reg/swap",
    // Wider than 256 (tn): each warpgroup a wgmma N of BN/2, the B tile loaded as two multicast parts of at most
    // 256 rows; the A tile is read once for both halves.
    "sm90.ws.coopn/128x336x64/s3/c2x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coopn/128x320x64/s3/c2x1/raster_n.g4/splitk1/epi_reg",
    "sm90.ws.coopn/64x512x64/s2/c2x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coopn/128x336x64/s3/c2x1/raster_m.g8/splitk2.serial/epi_reg",
};

}  // namespace rlgemm::test
