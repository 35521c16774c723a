// Shared set-up of the search tests: a small design space whose optimum exhaustive search finds quickly,
// temporary database files.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "search/design_space.h"
#include "store/store.h"

namespace rlgemm::search::testing {

// sm90 kernels only, with the decisions that matter most: a few thousand valid designs. Split-K up to 8
// slices (the tests' problems have K down to 512, too shallow for 16 slices of 64) and no pdl (the synthetic
// GPU times no launch gaps, so a /pdl design would only repeat its plain twin).
inline SpaceSpec small_spec() {
  SpaceSpec s;
  s.families = {Family::kSm90};
  s.tile_m = {64, 128, 256};
  s.tile_n = {64, 128, 256};
  s.tile_k = {32, 64};
  s.warp_tiles = {{32, 32}, {32, 64}, {64, 32}, {64, 64}};
  s.stages = {2, 3, 4, 6};
  s.groups = {1, 8};
  s.splits = {{SplitK::kNone, 1},     {SplitK::kSerial, 2},   {SplitK::kSerial, 4}, {SplitK::kSerial, 8},
              {SplitK::kParallel, 2}, {SplitK::kParallel, 4}, {SplitK::kStreamK, 1}};
  s.static_shape = {false};
  s.pdl = {false};
  // Every cluster with every raster: the tests tune on the cost model, which has no cost for a cluster across
  // the raster (the GPU does).
  s.clusters_along_raster = false;
  return s;
}

// What a store holds for these problems on this GPU, one line per measurement with its paired comparison,
// sorted: what two runs of the same problems and seeds must agree on. Left out: row ids, times of day and
// compile times (which worker compiled a design first depends on how problems were spread over workers).
inline std::vector<std::string> recorded(Store& store, const GpuIdentity& gpu, const std::vector<Problem>& problems,
                                         TimingMode mode = TimingMode::kGraph) {
  std::vector<std::string> lines;
  const int64_t id = store.gpu_id(gpu);
  char buf[1024];
  for (const Problem& p : problems) {
    const std::string problem = std::string(to_string(p.layout)) + " " + p.shape.to_string();
    for (const auto& r : store.measurements(id, p, mode)) {
      const auto& m = r.measurement;
      const PairedGain g = m.paired.value_or(PairedGain{});
      std::snprintf(buf, sizeof buf, "%s %s %s [%s] %s %.17g %.17g %.17g %d %.17g %s paired %d %.17g %.17g %.17g %d",
                    problem.c_str(), r.design.c_str(), std::string(to_string(m.status)).c_str(), m.error.c_str(),
                    m.source_hash.c_str(), m.timing.median_us, m.timing.min_us, m.timing.max_us, m.timing.samples,
                    r.reward, r.strategy.c_str(), m.paired ? 1 : 0, g.reference_us, g.low, g.high, g.rounds);
      lines.push_back(buf);
    }
  }
  std::sort(lines.begin(), lines.end());
  return lines;
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
