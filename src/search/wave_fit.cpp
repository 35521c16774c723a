#include "search/wave_fit.h"

#include <algorithm>
#include <string>

#include "design/sm90_shape.h"
#include "kernels/sm90/params.h"
#include "rlgemm/error.h"

namespace rlgemm::search {

std::vector<int> fitting_widths() {
  std::vector<int> widths;
  for (int width = 64; width <= 256; width += 8) widths.push_back(width);
  return widths;
}

namespace {

// Waves of whole tiles of `design` on `problem`; 0 for designs without them.
long long waves_of(const Design& design, const Problem& problem, int sm_count) {
  if (sm_count < 1) throw Error(ErrorKind::kInvalidInput, "wave_cost: sm_count must be at least 1");
  if (design.family != Family::kSm90 || design.split == SplitK::kStreamK) return 0;
  const long long m = design.swap_ab ? problem.shape.n : problem.shape.m;
  const long long n = design.swap_ab ? problem.shape.m : problem.shape.n;
  // The kernel's units: cluster tiles x K slices, one cluster of CTAs each, as many clusters at once as the
  // SMs hold (the launch plan of src/generate/sm90_family.cpp).
  const long long units = sm90::cluster_tiles_along(m, design.bm, design.cluster_m) *
                          sm90::cluster_tiles_along(n, design.bn, design.cluster_n) *
                          (design.split == SplitK::kNone ? 1 : design.splits);
  const long long clusters = std::max(1, sm_count / (design.cluster_m * design.cluster_n));
  return (units + clusters - 1) / clusters;
}

}  // namespace

long long wave_cost(const Design& design, const Problem& problem, int sm_count) {
  return waves_of(design, problem, sm_count) * design.bm * design.bn;
}

long long fit_cost(const Design& design, const Problem& problem, int sm_count) {
  return waves_of(design, problem, sm_count) * design.bm * (design.bn + kTileFixedColumns);
}

std::optional<Design> wave_fitted(const Design& design, const Problem& problem, int sm_count,
                                  std::span<const int> widths, double min_gain, int smem_limit_bytes) {
  const long long own = fit_cost(design, problem, sm_count);
  if (own == 0) return std::nullopt;
  std::optional<Design> best;
  long long best_cost = own;
  for (int width : widths) {
    Design fitted = design;
    fitted.bn = width;
    if (width == design.bn || width < 64 || 3 * width < 2 * design.bn) continue;
    // /bulktail stores the columns past a warpgroup's whole 64-column chunks: a width without any keeps none.
    if (fitted.bulk_tail && sm90::warpgroup_cols(sm90_shape(fitted)) % 64 == 0) fitted.bulk_tail = false;
    // A wider tile's stages may not fit in shared memory: the most stages that do, down to 3 (ping-pong 128x128
    // with six stages fits to 128x168 with five).
    while (fitted.stages > 3 && why_invalid(fitted, problem.layout, smem_limit_bytes)) --fitted.stages;
    if (why_invalid(fitted, problem.layout, smem_limit_bytes) || why_unfit(fitted, problem)) continue;
    const long long cost = fit_cost(fitted, problem, sm_count);
    if (cost < best_cost || (cost == best_cost && best && width > best->bn)) {
      best = fitted;
      best_cost = cost;
    }
  }
  if (!best || static_cast<double>(best_cost) > (1.0 - min_gain) * static_cast<double>(own)) return std::nullopt;
  return best;
}

std::vector<Design> fitted_alternatives(std::span<const Design> designs, const Problem& problem, int sm_count,
                                        int smem_limit_bytes) {
  static const std::vector<int> widths = fitting_widths();
  std::vector<Design> out;
  for (const Design& design : designs) {
    const auto fitted = wave_fitted(design, problem, sm_count, widths, kFitMinGain, smem_limit_bytes);
    if (fitted && std::find(designs.begin(), designs.end(), *fitted) == designs.end() &&
        std::find(out.begin(), out.end(), *fitted) == out.end())
      out.push_back(*fitted);
  }
  return out;
}

}  // namespace rlgemm::search
