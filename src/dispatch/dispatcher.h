// The dispatcher's choice: which kernel serves a problem on one GPU, given the tuned rows of that GPU, an
// optional design proposer (the RL policy) and the cuBLASLt preference. Pure host logic, no CUDA calls, so
// it is tested on machines without a GPU. The order of the paths is documented in include/rlgemm/rlgemm.h.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/tuned_table.h"
#include "rlgemm/design.h"
#include "rlgemm/rlgemm.h"

namespace rlgemm::dispatch {

// What the dispatcher needs to know of the GPU.
struct Target {
  std::string name;  // as the CUDA runtime reports it
  int cc_major = 9;
  int cc_minor = 0;
  int smem_per_block_optin = kHopperSmemPerBlock;
};

// A design proposed for a problem, or nullopt when the proposer has none.
using Proposer = std::function<std::optional<Design>(const Problem&)>;

struct Choice {
  Path path = Path::kDefault;
  Design design;                     // unused for kCublasLt
  std::optional<Shape> borrowed_from;  // kNearest: the tuned shape whose design is used
  // kCublasLt: the heuristic candidate lt_auto measured fastest; none: the handle chooses it as lt_auto does,
  // once per machine (the floor, and table rows recorded without one).
  std::optional<int> cublaslt_candidate;
  bool floor = false;                // kCublasLt with no measured evidence for any kernel
  // "tuned <design>", "nearest <design> (from M,N,K)", "cublaslt candidate I", "cublaslt floor", ...
  std::string describe() const;
};

// The floor: cuBLASLt with lt_auto's choice, where nothing measured says a kernel beats it.
Choice floor_choice();

// Why `design` cannot run for `layout` on `target`, or nullopt when it can: the design's own rules
// (why_invalid) plus the family's architecture (sm90 kernels need compute capability 9.0, sm80 kernels 8.0 or
// later, test designs are never dispatched).
// Why the design cannot run this problem on this GPU (family and architecture, why_invalid, why_unfit).
std::optional<std::string> why_not_runnable(const Design& design, const Problem& problem, const Target& target);

// The built-in design for a GPU with nothing tuned: an sm90 design on compute capability 9.0, sm80 elsewhere.
// Valid for both layouts.
Design default_design(const Target& target);

// Distance between shapes in log space: sqrt(sum over M, N, K of (ln a - ln b)^2).
double log_distance(const Shape& a, const Shape& b);

// The designs of `rows` (one GPU's table) of the problem's layout, the nearest shape first (log_distance; between
// rows as near, the larger gain over lt_auto, then the earlier row), each in the problem's element type and each
// once: a bf16 row and an fp16 row of one design give it once. The problem's own row (its shape and element type)
// is left out; a row of its shape in the other element type comes first. What other shapes found fast, for a
// shape's tune to measure first (`rlgemm tune --seed-neighbors`).
std::vector<Design> nearest_designs(const std::vector<TunedRow>& rows, const Problem& problem);

// The first `count` of nearest_designs that run the problem on `target` as shape-generic kernels (as borrowed
// designs run) and are not among `taken`: the autotuned route's neighbours (HandleOptions::autotune_neighbors).
std::vector<Design> runnable_nearest_designs(const std::vector<TunedRow>& rows, const Problem& problem,
                                             const Target& target, int count, const std::vector<Design>& taken);

// The designs a shape's tuned row is checked beside at first use: what the shape would be served without the row
// (`untuned`: the predicted route's design and those checked beside it, each with its label for describe()), those
// that run the problem on `target`, each once, and none the row's own (`tuned`, where the row names a kernel;
// designs compared as shape-generic kernels run them). A tune measures its designs against cuBLASLt when it runs;
// the predictor and the fitted widths may since offer a faster kernel, which the row would otherwise shadow.
std::vector<std::pair<Design, std::string>> beside_tuned_row(const std::optional<Design>& tuned,
                                                             const std::vector<std::pair<Design, std::string>>& untuned,
                                                             const Problem& problem, const Target& target);

// The cuBLASLt route takes an exact shape only where its row records lt_auto at least 3% faster offline than
// the shape's best rlgemm kernel (speedup_vs_lt_auto < kCublasLtBelow). Offline timing hides a call's host
// time, and a cublasLtMatmul call spends more of it than a kernel launch: on the H100 grid, the 147 shapes
// whose kernels had measured 0.78-1.0x lt_auto offline ran 1.16x lt_auto in server mode as kernels and
// 1.00x through cuBLASLt (bench/results/h100/tuned-candidates-server.csv, tuned-minlt-server.csv), while
// offline the route changed them by under 1%.
inline constexpr double kCublasLtBelow = 0.97;

// The order of the routes (include/rlgemm/rlgemm.h):
//   1. the exact shape's tuned row: cuBLASLt where it records lt_auto 3% or more faster (kCublasLtBelow),
//      else its design -- measured evidence either way;
//   2. a proposer the user asked for (a policy file): its design;
//   3. a predictor the user asked for: a design predicted to beat cuBLASLt beyond its uncertainty;
//   4. the floor, with `prefer_cublaslt`: cuBLASLt, for every shape where nothing measured says a kernel beats
//      it. Without `prefer_cublaslt` (kernels only): the nearest tuned row's design, else the architecture's
//      default design.
class Dispatcher {
 public:
  // `rows` may hold other GPUs' rows: only those of target.name are used. Throws Error(kInvalidInput) when
  // two rows name the same (GPU, shape, layout, dtype). A problem is served by rows of its own element type.
  Dispatcher(const std::vector<TunedRow>& rows, Target target, bool prefer_cublaslt = true,
             Proposer proposer = nullptr, Proposer predictor = nullptr);

  Choice choose(const Problem& problem) const;

  const Target& target() const { return target_; }
  size_t tuned_rows() const { return rows_.size(); }
  const std::vector<TunedRow>& rows() const { return rows_; }  // this GPU's

 private:
  Target target_;
  bool prefer_cublaslt_;
  Proposer proposer_;
  Proposer predictor_;
  std::vector<TunedRow> rows_;  // this GPU's, sorted by (dtype, layout, shape)
};

}  // namespace rlgemm::dispatch
