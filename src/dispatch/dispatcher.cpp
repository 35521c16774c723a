#include "dispatch/dispatcher.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "rlgemm/error.h"

namespace rlgemm {

const char* to_string(Path path) {
  switch (path) {
    case Path::kTuned: return "tuned";
    case Path::kNearest: return "nearest";
    case Path::kPolicy: return "policy";
    case Path::kDefault: return "default";
    case Path::kCublasLt: return "cublaslt";
    case Path::kPredicted: return "predicted";
  }
  return "?";
}

namespace dispatch {

std::string Choice::describe() const {
  if (path == Path::kCublasLt) {
    if (cublaslt_candidate) return "cublaslt candidate " + std::to_string(*cublaslt_candidate);
    return floor ? "cublaslt floor" : "cublaslt";
  }
  std::string text = std::string(to_string(path)) + " " + to_string(design);
  if (borrowed_from) text += " (from " + borrowed_from->to_string() + ")";
  return text;
}

Choice floor_choice() {
  Choice floor{Path::kCublasLt, {}, std::nullopt, std::nullopt};
  floor.floor = true;
  return floor;
}

std::optional<std::string> why_not_runnable(const Design& design, const Problem& problem, const Target& target) {
  const int cc = target.cc_major * 10 + target.cc_minor;
  switch (design.family) {
    case Family::kTest: return "test designs are never dispatched";
    case Family::kSm90:
      if (cc != 90) return "sm90 designs need a compute capability 9.0 GPU (this one is " + std::to_string(cc / 10) +
                           "." + std::to_string(cc % 10) + ")";
      break;
    case Family::kSm80:
      if (cc < 80) return "sm80 designs need compute capability 8.0 or later";
      break;
  }
  if (design.pdl && cc < 90) return "programmatic dependent launch (/pdl) needs compute capability 9.0 or later";
  if (auto why = why_invalid(design, problem.layout, smem_limit_or_hopper(target.smem_per_block_optin)))
    return why;
  return why_unfit(design, problem);
}

Design default_design(const Target& target) {
  // Mid-size tiles with no split-K: correct for every shape, no workspace, fine for large problems.
  if (target.cc_major == 9 && target.cc_minor == 0)
    return parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg");
  return parse_design("sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg");
}

double log_distance(const Shape& a, const Shape& b) {
  auto d = [](int64_t x, int64_t y) { return std::log(double(x)) - std::log(double(y)); };
  const double dm = d(a.m, b.m), dn = d(a.n, b.n), dk = d(a.k, b.k);
  return std::sqrt(dm * dm + dn * dn + dk * dk);
}

std::vector<Design> nearest_designs(const std::vector<TunedRow>& rows, const Problem& problem) {
  struct Near {
    long long distance;  // log_distance in millionths: shapes as far by ratio are as near, whatever the rounding
    double gain;
    size_t index;
  };
  std::vector<Near> near;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Problem& p = rows[i].problem;
    if (p.layout != problem.layout || (p.shape == problem.shape && p.dtype == problem.dtype)) continue;
    const long long distance = std::llround(log_distance(p.shape, problem.shape) * 1e6);
    near.push_back({distance, rows[i].speedup_vs_lt_auto.value_or(0), i});
  }
  std::sort(near.begin(), near.end(), [](const Near& a, const Near& b) {
    return std::tie(a.distance, b.gain, a.index) < std::tie(b.distance, a.gain, b.index);
  });
  std::vector<Design> designs;
  for (const Near& n : near) {
    const Design d = with_dtype(rows[n.index].design, problem.dtype);
    if (std::find(designs.begin(), designs.end(), d) == designs.end()) designs.push_back(d);
  }
  return designs;
}

std::vector<Design> runnable_nearest_designs(const std::vector<TunedRow>& rows, const Problem& problem,
                                             const Target& target, int count, const std::vector<Design>& taken) {
  std::vector<Design> designs;
  for (Design d : nearest_designs(rows, problem)) {
    if (int(designs.size()) >= count) break;
    d.static_shape = false;
    if (why_not_runnable(d, problem, target) || std::find(taken.begin(), taken.end(), d) != taken.end() ||
        std::find(designs.begin(), designs.end(), d) != designs.end())
      continue;
    designs.push_back(d);
  }
  return designs;
}

std::vector<std::pair<Design, std::string>> beside_tuned_row(const std::optional<Design>& tuned,
                                                             const std::vector<std::pair<Design, std::string>>& untuned,
                                                             const Problem& problem, const Target& target) {
  const auto generic = [](Design d) {
    d.static_shape = false;
    return d;
  };
  std::vector<Design> taken;
  if (tuned) taken.push_back(generic(*tuned));
  std::vector<std::pair<Design, std::string>> out;
  for (const auto& [design, label] : untuned) {
    if (std::find(taken.begin(), taken.end(), generic(design)) != taken.end()) continue;
    if (why_not_runnable(design, problem, target)) continue;
    taken.push_back(generic(design));
    out.emplace_back(design, label);
  }
  return out;
}

Dispatcher::Dispatcher(const std::vector<TunedRow>& rows, Target target, bool prefer_cublaslt, Proposer proposer,
                       Proposer predictor)
    : target_(std::move(target)),
      prefer_cublaslt_(prefer_cublaslt),
      proposer_(std::move(proposer)),
      predictor_(std::move(predictor)) {
  std::map<std::tuple<DType, Layout, Shape>, const TunedRow*> seen;
  for (const TunedRow& row : rows) {
    if (row.gpu != target_.name) continue;
    const auto [it, inserted] = seen.emplace(std::tuple{row.problem.dtype, row.problem.layout, row.problem.shape}, &row);
    if (!inserted)
      fail("two tuned rows for " + row.gpu + " " + row.problem.shape.to_string() + " " +
           std::string(to_string(row.problem.layout)) + " " + std::string(to_string(row.problem.dtype)) + ": " +
           it->second->source + " and " + row.source);
  }
  for (const auto& [key, row] : seen) rows_.push_back(*row);  // sorted by (dtype, layout, shape)
}

Choice Dispatcher::choose(const Problem& problem) const {
  validate(problem.shape);
  // The rows of the problem's element type and layout (a design computes its own element type only).
  const auto kind = [](const TunedRow& r) { return std::pair{r.problem.dtype, r.problem.layout}; };
  const auto wanted = std::pair{problem.dtype, problem.layout};
  const auto layout_first = std::lower_bound(rows_.begin(), rows_.end(), wanted,
                                             [&](const TunedRow& r, const auto& w) { return kind(r) < w; });
  const auto layout_last = std::upper_bound(rows_.begin(), rows_.end(), wanted,
                                            [&](const auto& w, const TunedRow& r) { return w < kind(r); });

  // The exact shape: its measured-best design, or cuBLASLt where that measured faster.
  const auto exact = std::lower_bound(layout_first, layout_last, problem.shape,
                                      [](const TunedRow& r, const Shape& s) { return r.problem.shape < s; });
  if (exact != layout_last && exact->problem.shape == problem.shape) {
    if (prefer_cublaslt_ && exact->speedup_vs_lt_auto && *exact->speedup_vs_lt_auto < kCublasLtBelow)
      return Choice{Path::kCublasLt, exact->design, std::nullopt, exact->cublaslt_candidate};
    // A kernel serves the shape where it was measured against cuBLASLt (or where cuBLASLt is not wanted).
    if (!why_not_runnable(exact->design, problem, target_) && (exact->speedup_vs_lt_auto || !prefer_cublaslt_))
      return Choice{Path::kTuned, exact->design, std::nullopt, std::nullopt};
  }

  // Borrowed designs run shape-generic, so one kernel serves every shape that borrows them.
  auto generic = [](Design d) {
    d.static_shape = false;
    return d;
  };

  if (proposer_) {
    // A policy proposes tiles and schedules; the kernel computes the problem's element type.
    if (const std::optional<Design> proposed = proposer_(problem)) {
      const Design d = generic(with_dtype(*proposed, problem.dtype));
      if (!why_not_runnable(d, problem, target_)) return Choice{Path::kPolicy, d, std::nullopt, std::nullopt};
    }
  }

  if (predictor_) {
    if (const std::optional<Design> predicted = predictor_(problem)) {
      const Design d = generic(*predicted);
      if (!why_not_runnable(d, problem, target_)) return Choice{Path::kPredicted, d, std::nullopt, std::nullopt};
    }
  }

  // The floor: without measured evidence that a kernel beats cuBLASLt here, cuBLASLt (lt_auto's choice, made
  // once per machine by the handle). A design borrowed from the nearest tuned shape measured 0.90 of the best
  // vendor call on 242 untuned LLM layer shapes of the H100, down to 0.42; the built-in default on a GPU
  // without rows, 0.63 on the H200.
  if (prefer_cublaslt_) return floor_choice();

  const TunedRow* nearest = nullptr;
  double best = 0;
  for (auto it = layout_first; it != layout_last; ++it) {
    if (why_not_runnable(generic(it->design), problem, target_)) continue;
    const double distance = log_distance(it->problem.shape, problem.shape);
    if (!nearest || distance < best) nearest = &*it, best = distance;
  }
  if (nearest) return Choice{Path::kNearest, generic(nearest->design), nearest->problem.shape, std::nullopt};

  return Choice{Path::kDefault, with_dtype(default_design(target_), problem.dtype), std::nullopt, std::nullopt};
}

}  // namespace dispatch
}  // namespace rlgemm
