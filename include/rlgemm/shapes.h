// Shape lists: the built-in 1000-shape grid (M, N, K in {64, ..., 16384}) and CSV files of "M,N,K" rows.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

#include "rlgemm/problem.h"

namespace rlgemm {

// The 1000 shapes of the CUDA-L2 grid, in the order of data/cudal2_grid.csv (compiled into the binary).
const std::vector<Shape>& cudal2_grid();

// Reads "M,N,K" rows. Blank lines and lines starting with '#' are skipped; a header line "M,N,K" (any
// case) is allowed as the first row. Any other malformed row or a shape breaking the rules throws Error
// naming the file and the line number.
std::vector<Shape> load_shapes_csv(const std::filesystem::path& path);

// "cudal2" -> the grid; anything else is a CSV path.
std::vector<Shape> resolve_shapes(std::string_view spec);

// One of N parts of a list, for N runs that share it out (several GPUs or machines): the items i with
// i % count == index.
struct Shard {
  int index = 0;
  int count = 1;
};
// "I/N" with 0 <= I < N; throws Error(kInvalidInput) saying "--shard takes I/N ..." for anything else.
Shard parse_shard(std::string_view text);
// The shard's part of `shapes`, in their order.
std::vector<Shape> shard_of(const std::vector<Shape>& shapes, Shard shard);

}  // namespace rlgemm
