// The speed predictor: for a GPU, a problem and a kernel design, the design's time and its uncertainty; for a
// GPU and a problem, cuBLASLt's time (lt_auto: its fastest heuristic candidate) and its uncertainty; and from
// both, the design's gain over cuBLASLt, which the dispatcher's route rule and the tuner's first guesses use.
//
// Two models, each an ensemble of gradient-boosted trees (boosted_trees.h) trained on bootstrap resamples of
// the measured shapes (train.h):
//   cuBLASLt:  ln t_lt_auto                     from the shape features
//   design:    ln (t_design / t_lt_auto)        from the design features; the ratio of two times measured in
//                                               the same run, so the machine's state and the shape's own
//                                               difficulty cancel out of it
// A prediction's mean is the members' mean; its standard deviation (in ln units) is the members' spread
// widened by the measurement noise the out-of-bag residuals showed and scaled so that, out of bag, half the
// errors fall within 0.674 standard deviations (as for a normal error). Two things the members cannot see
// are added in quadrature (Extrapolation): a GPU the model was not trained on (designs rank alike on GPUs of
// one architecture, but nothing measured says by how much their ratios move), and a shape far from every
// shape it was trained on (trees predict flat beyond their data, and agree while doing so).
//
// File: JSON (format "rlgemm-predictor", version 1): the GPUs and timing mode it was trained on, the shapes,
// the two models with their feature names (a model whose features differ from this build's is refused), and
// a free-form "trained_on" record of the sources. data/predictors/*.json are built into the library
// (builtin_predictor).
#pragma once

#include <array>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "predict/boosted_trees.h"
#include "predict/features.h"
#include "rlgemm/design.h"
#include "rlgemm/problem.h"
#include "store/measurement.h"

namespace rlgemm::search {
class DesignSpace;
}

namespace rlgemm::predict {

GpuTraits traits_of(const GpuIdentity& gpu);

// A predicted time: mean_us = exp(log_mean), sd_us = mean_us * log_sd (the spread of a ratio).
struct Prediction {
  double mean_us = 0;
  double sd_us = 0;
  double log_mean = 0;  // ln microseconds
  double log_sd = 0;
};

// A design's predicted gain over cuBLASLt: speedup = t_cublaslt / t_design = exp(log_mean).
struct Gain {
  double speedup = 1;
  double log_mean = 0;
  double log_sd = 0;
};

struct Candidate {
  Design design;
  Prediction time;
  Gain gain;
};

// The route rule: take the kernel route only where the predicted gain clears its uncertainty,
// ln(speedup) - z * sd > ln(margin), i.e. the kernel is faster than cuBLASLt by `margin` at z standard
// deviations of confidence. Pure: the dispatcher and the tests call it with predictions of their own.
// z = 3, chosen on the H100 measurements of the predictor's picks for the 371 LLM tuning shapes
// (bench/results/h100/predictor-picks-llm-tune.csv, shapes it was not trained on): z = 2 put kernels on 38
// shapes, 10 of them slower than cuBLASLt, down to 0.57 (single-token rows of K = 2048, where the predicted
// gain of about 1.2x had an sd of 0.1: the errors' tails are heavier than a normal's); z = 2.5 left one such
// shape, z = 3 none (9 shapes, 1.008 over all 371). On the grid's held-out shapes
// (bench/results/cpu/predictor-route-z.csv) z = 1.5 and above already left none.
inline constexpr double kRouteZ = 3.0;
bool take_kernel_route(const Gain& gain, double z = kRouteZ, double margin = 1.0);

// The route rule where every kernel it proposes is timed against the floor before it serves (the handle's
// predicted route, verified at the shape's first use): one standard deviation. On the measured picks for the LLM
// tuning shapes, z = 1 proposed 62 kernels of which 40 measured more than 2% faster than cuBLASLt (z = 0: 204 and
// 64; z = 3: 9 and 9), so each first-use compile is more often worth it.
inline constexpr double kCheckedRouteZ = 1.0;

// `guess` with its tile width fitted to the problem's waves (search::fitted_alternatives), where its width leaves a
// wave part-empty and the fitted width costs at least 5% less; its predicted time and gain scaled by the ratio of
// the two costs (search::fit_cost: a wave of whole tiles takes time in proportion to a tile's area and its fixed
// cost), with the guess's uncertainty. The predictors were trained before those widths existed and propose none of
// them. On the H100, such designs measured 0.94-1.03 of that ratio, 9 of 11 faster than the design they were
// fitted from (bench/results/h100/wave-fit-ab-pairs.csv). nullopt where no width fits better, or sm_count < 1.
std::optional<Candidate> fitted_guess(const Candidate& guess, const Problem& problem, int sm_count,
                                      int smem_limit_bytes = kHopperSmemPerBlock);

class Predictor;

// What a default handle checks for `problem` at its first use when the predictor proposes (the "predicted"
// route, src/dispatch/handle.cpp): the predictor's best guess for the fp16 problem of the same shape, where its
// gain clears the route rule at `z`, and that guess fitted to the waves (fitted_guess), checked beside it, or
// alone where only its estimated gain clears the rule. `runnable` says whether a design (in the problem's element
// type) can run the problem here; a fitted design that cannot is dropped. The tuner measures these designs first
// (`rlgemm tune`'s "route" seeds), so that what a tune stores for a shape is never slower than what the handle
// would have served it without the tune.
struct RouteGuess {
  Candidate guess;                 // the predictor's best guess (fp16)
  std::optional<Candidate> fitted;  // it fitted to the waves, runnable here
  bool take_guess = false;         // the guess's own gain clears the rule; else the fitted design's does
  Design served(DType dtype) const;                 // the design that serves if it passes its check
  std::optional<Design> beside(DType dtype) const;  // the design checked beside it, if any
  std::vector<Design> designs(DType dtype) const;   // both, the served first
};
std::optional<RouteGuess> route_guess(const Predictor& predictor, const GpuTraits& gpu, const Problem& problem,
                                      int sm_count, int smem_limit_bytes, double z,
                                      const std::function<bool(const Design&)>& runnable);

struct BestGuessOptions {
  double risk = 0;          // rank by log gain - risk * sd (0: by the predicted gain itself)
  bool static_shape = false;  // also designs baked for the exact shape (they compile per shape)
  int max_similar = 1;      // at most this many designs sharing family, schedule, tile, cluster, split and swap
  size_t prefilter = 2048;  // designs ranked by the whole ensemble, after a first pass with one member's
  size_t prefilter_trees = 40;  // first trees
  int threads = 0;          // threads of the first pass (0: one per core); the guesses are the same on any number
};

// An ensemble of tree models with its calibration.
struct Ensemble {
  std::vector<BoostedTrees> members;
  double noise_sd = 0;  // ln units, added in quadrature to the members' spread
  double scale = 1;     // applied to the result
  // Mean and calibrated standard deviation over the members.
  std::pair<double, double> estimate(const double* features) const;
  nlohmann::json to_json(const std::vector<std::string>& feature_names) const;
  static Ensemble from_json(const nlohmann::json& json, const std::vector<std::string>& feature_names,
                            const std::string& source);
};

// The uncertainty added beyond the ensembles' own (ln units, in quadrature).
struct Extrapolation {
  double unseen_gpu_sd = 0.1;  // for a GPU the measurements do not cover
  // For a shape whose distance to the nearest trained shape (Euclidean in ln M, ln N, ln K) exceeds
  // `spacing`, the median distance between neighbouring trained shapes: this much per ln unit beyond it.
  double sd_per_ln_beyond = 0.05;
  double spacing = 0;
};

class Predictor {
 public:
  Predictor() = default;
  Predictor(const Predictor& other);
  Predictor& operator=(const Predictor& other);

  // Throws Error(kInvalidInput) naming `source` and the rule when the text is not a predictor of this
  // format and version, or its features are not this build's.
  static Predictor parse(const std::string& text, const std::string& source);
  static Predictor load(const std::filesystem::path& path);
  // Writes atomically (a temporary file renamed over the target).
  void save(const std::filesystem::path& path) const;
  nlohmann::json to_json() const;

  Prediction predict_cublaslt(const GpuTraits& gpu, const Problem& problem) const;
  Prediction predict_design(const GpuTraits& gpu, const Problem& problem, const Design& design) const;
  Gain predict_gain(const GpuTraits& gpu, const Problem& problem, const Design& design) const;

  // The k designs of the search's design space for this GPU (search::SpaceSpec::for_gpu) that the predictor
  // expects to beat cuBLASLt by the most, best first, each with its predicted time and gain. Designs that
  // cannot run the problem (why_invalid, why_unfit) are never proposed, nor designs of a tile width (BN) no
  // design it was trained on had: its trees would extrapolate from other widths, which the measurements of
  // widths it knows do not support (new widths are the tuner's to try).
  std::vector<Candidate> best_guesses(const GpuTraits& gpu, const Problem& problem, int k,
                                      const BestGuessOptions& options = {}) const;

  // Was this GPU (by name) among those the predictor was trained on?
  bool trained_on_gpu(const std::string& name) const;
  const std::vector<GpuTraits>& gpus() const { return gpus_; }
  const std::string& mode() const { return mode_; }
  double unseen_gpu_sd() const { return extrapolation_.unseen_gpu_sd; }
  const Extrapolation& extrapolation() const { return extrapolation_; }
  // The uncertainty added for this GPU and shape (0 for a trained GPU and a shape among the trained ones).
  double extrapolation_sd(const GpuTraits& gpu, const Shape& shape) const;
  // Distance (ln M, ln N, ln K) from the shape to the nearest trained shape.
  double distance_to_trained(const Shape& shape) const;
  const nlohmann::json& provenance() const { return trained_on_; }
  // The tile widths (BN) of the designs it was trained on, ascending.
  const std::vector<int>& tile_widths() const { return tile_widths_; }
  const Ensemble& cublaslt_model() const { return lt_; }
  const Ensemble& design_model() const { return design_; }

  static constexpr int kVersion = 1;

 private:
  friend Predictor make_predictor(std::vector<GpuTraits>, std::string, Extrapolation, std::vector<Shape>,
                                  std::vector<int>, nlohmann::json, Ensemble, Ensemble);
  // The designs best_guesses ranks for this GPU and layout (with or without static designs), built once: nullptr
  // when the search offers none of the widths it was trained on.
  const search::DesignSpace* space(const GpuTraits& gpu, Layout layout, bool static_shape) const;

  std::vector<GpuTraits> gpus_;
  std::string mode_ = "offline";
  Extrapolation extrapolation_;
  std::vector<Shape> shapes_;  // trained on, each once
  std::vector<std::array<double, 3>> ln_shapes_;  // their ln M, ln N, ln K
  std::vector<int> tile_widths_;  // BN of the designs trained on
  nlohmann::json trained_on_ = nlohmann::json::object();
  Ensemble lt_, design_;
  mutable std::mutex spaces_mutex_;
  mutable std::map<std::tuple<int, int, Layout, bool>, std::shared_ptr<const search::DesignSpace>> spaces_;
};

// A predictor from its parts; `extrapolation.spacing` is worked out from `shapes` here, `tile_widths` (the BN of
// the designs trained on) sorted and made unique.
Predictor make_predictor(std::vector<GpuTraits> gpus, std::string mode, Extrapolation extrapolation,
                         std::vector<Shape> shapes, std::vector<int> tile_widths, nlohmann::json trained_on,
                         Ensemble cublaslt, Ensemble design);

// The predictors built into the library (data/predictors/*.json at build time), by file name.
std::vector<std::string> builtin_predictor_names();
// The built-in predictor trained in `mode` (its measurements' timing mode: "offline", "graph") on this GPU (by
// name), else in that mode on a GPU of the same compute capability (its predictions then carry the unseen-GPU
// uncertainty); then the same for an offline one, then any mode; else nullptr. The mode comes first: an H200's
// offline lookup takes the H100's offline predictor before the H200's graph one. Parsed once, kept.
const Predictor* builtin_predictor(const GpuTraits& gpu, const std::string& mode = "offline");

}  // namespace rlgemm::predict
