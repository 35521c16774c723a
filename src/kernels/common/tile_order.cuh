// The order in which a grid's blocks visit output tiles. Consecutive blocks run at the same time, so
// visiting tiles in groups (a band of `group` tile-rows swept across N, or tile-columns swept across M)
// keeps the A and B panels they share in L2.
#pragma once

#include "common/types.cuh"

namespace rlgemm {

struct TileCoord {
  int m;  // tile row
  int n;  // tile column
};

// Tile visited by linear block index `t` of a tiles_m x tiles_n grid of tiles.
//   raster along M, group G: bands of G tile-rows; within a band the tile row varies fastest.
//   raster along N, group G: bands of G tile-columns; within a band the tile column varies fastest.
// G = 1 gives plain row-major (raster M) or column-major (raster N) order.
template <bool RASTER_M>
__device__ __forceinline__ TileCoord tile_of_block(int t, int tiles_m, int tiles_n, int group) {
  const int band_tiles = RASTER_M ? tiles_m : tiles_n;  // tiles along the banded dimension
  const int sweep_tiles = RASTER_M ? tiles_n : tiles_m;  // tiles along the swept dimension
  const int per_band = group * sweep_tiles;
  const int band = t / per_band;
  const int first = band * group;
  const int width = min_of(group, band_tiles - first);
  const int r = t - band * per_band;
  const int banded = first + r % width;
  const int swept = r / width;
  return RASTER_M ? TileCoord{banded, swept} : TileCoord{swept, banded};
}

}  // namespace rlgemm
