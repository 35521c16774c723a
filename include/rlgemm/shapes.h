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

}  // namespace rlgemm
