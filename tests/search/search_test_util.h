// Shared set-up of the search tests: a small design space whose optimum exhaustive search finds quickly,
// temporary database files.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

#include "search/design_space.h"

namespace rlgemm::search::testing {

// sm90 kernels only, with the decisions that matter most: a few thousand valid designs.
inline SpaceSpec small_spec() {
  SpaceSpec s;
  s.families = {Family::kSm90};
  s.tile_m = {64, 128, 256};
  s.tile_n = {64, 128, 256};
  s.tile_k = {32, 64};
  s.stages = {2, 3, 4, 6};
  s.groups = {1, 8};
  s.static_shape = {false};
  return s;
}

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("rlgemm-search-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  static int& counter() { static int c = 0; return c; }
  std::filesystem::path path_;
};

}  // namespace rlgemm::search::testing
