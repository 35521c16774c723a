// The predictor trained on cost-model measurements: accuracy on shapes it never saw, calibrated uncertainty,
// best guesses that beat random designs, the file round trip, and the route rule.
#include "predict/predictor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "predict/evaluate.h"
#include "predict/predict_test_util.h"
#include "predict/train.h"
#include "rlgemm/error.h"
#include "search/cost_model.h"
#include "search/wave_fit.h"

namespace rlgemm::predict {
namespace {

using testing::cost_model_samples;
using testing::shapes_between;
using testing::small_training;
using testing::synthetic_gpu;

struct Trained {
  std::vector<Shape> train_shapes, test_shapes;
  std::vector<Sample> train, test;
  Predictor predictor;
  TrainReport report;
};

const Trained& trained() {
  static const Trained t = [] {
    Trained t;
    const auto shapes = shapes_between(200, 7);
    t.train_shapes.assign(shapes.begin(), shapes.begin() + 160);
    t.test_shapes.assign(shapes.begin() + 160, shapes.end());
    t.train = cost_model_samples(t.train_shapes, 24, 11);
    t.test = cost_model_samples(t.test_shapes, 24, 12);
    std::vector<Sample> all = t.train;
    all.insert(all.end(), t.test.begin(), t.test.end());
    TrainOptions o = small_training();
    o.exclude = t.test_shapes;  // held out by the trainer itself
    t.predictor = train_predictor(all, o, &t.report);
    return t;
  }();
  return t;
}

TEST(Predictor, TrainerLeavesExcludedShapesOut) {
  const Trained& t = trained();
  EXPECT_EQ(t.report.shapes, t.train_shapes.size());
  EXPECT_EQ(t.report.excluded_samples, t.test.size());
  EXPECT_EQ(t.report.design_rows, t.train.size() - t.train_shapes.size());
  EXPECT_EQ(t.report.cublaslt_rows, t.train_shapes.size());
}

TEST(Predictor, OneGpuPerPredictor) {
  auto samples = cost_model_samples(shapes_between(12, 3), 4, 5);
  auto other = samples;
  for (Sample& s : other) s.gpu.name = "NVIDIA H200";
  samples.insert(samples.end(), other.begin(), other.end());
  TrainOptions o = small_training();
  o.members = 2;
  EXPECT_THROW(train_predictor(samples, o), Error);  // the features could not tell the GPUs apart
  o.only_gpu = "NVIDIA H200";
  const Predictor p = train_predictor(samples, o);
  ASSERT_EQ(p.gpus().size(), 1u);
  EXPECT_EQ(p.gpus()[0].name, "NVIDIA H200");
}

TEST(Predictor, AccurateOnHeldOutShapes) {
  const Trained& t = trained();
  const HeldOutAccuracy a = evaluate_accuracy(t.predictor, merge_samples(t.test, "offline"));
  EXPECT_EQ(a.cublaslt.rows, t.test_shapes.size());
  // The trivial prediction (every design as fast as cuBLASLt) is off by the designs' spread.
  std::vector<double> ratios;
  for (const Sample& s : t.test)
    if (s.lt_us > 0) ratios.push_back(std::abs(std::log(s.time_us / s.lt_us)));
  std::nth_element(ratios.begin(), ratios.begin() + long(ratios.size() / 2), ratios.end());
  const double trivial = ratios[ratios.size() / 2];
  EXPECT_LT(a.design_gain.median_abs_ln_error, 0.5 * trivial);
  EXPECT_GT(a.design_gain.spearman, 0.8);
  EXPECT_GT(a.mean_shape_spearman, 0.6);
  EXPECT_LT(a.cublaslt.median_abs_ln_error, 0.25);
  EXPECT_GT(a.cublaslt.spearman, 0.95);
  // Calibrated out of bag: about half the errors within 0.674 sd means 40-85% within one sd, and most within two.
  EXPECT_GT(a.design_gain.within_1sd, 0.4);
  EXPECT_LT(a.design_gain.within_1sd, 0.9);
  EXPECT_GT(a.design_gain.within_2sd, 0.75);
}

TEST(Predictor, BestGuessesBeatRandomDesigns) {
  const Trained& t = trained();
  const search::CostModel model;
  double log_guess = 0, log_median_sampled = 0;
  for (const Shape& s : t.test_shapes) {
    const Problem p{s, Layout::kTN};
    const auto guesses = t.predictor.best_guesses(synthetic_gpu(), p, 5);
    ASSERT_EQ(guesses.size(), 5u);
    std::set<std::string> distinct;
    for (size_t i = 0; i < guesses.size(); ++i) {
      const Design& d = guesses[i].design;
      EXPECT_FALSE(why_invalid(d, p.layout)) << to_string(d);
      EXPECT_FALSE(why_unfit(d, p)) << to_string(d);
      EXPECT_FALSE(d.static_shape);
      EXPECT_TRUE(distinct.insert(to_string(d)).second);
      if (i) EXPECT_LE(guesses[i].gain.log_mean, guesses[i - 1].gain.log_mean);
      EXPECT_GT(guesses[i].time.mean_us, 0);
      EXPECT_GT(guesses[i].gain.log_sd, 0);
    }
    log_guess += std::log(model.reference_us(p) / model.time_us(guesses[0].design, p));
    std::vector<double> sampled;
    for (const Sample& x : t.test)
      if (x.problem.shape == s && x.lt_us > 0) sampled.push_back(std::log(x.lt_us / x.time_us));
    std::nth_element(sampled.begin(), sampled.begin() + long(sampled.size() / 2), sampled.end());
    log_median_sampled += sampled[sampled.size() / 2];
  }
  // The first guess, measured by the cost model, beats the median random design by 15% on average.
  EXPECT_GT(log_guess / double(t.test_shapes.size()), log_median_sampled / double(t.test_shapes.size()) + 0.14);
}

// The predictor proposes only tile widths it was trained on: its trees would extrapolate to others from
// neighbouring widths. The widths travel in its file; a file from before they were recorded reads the widths
// the search offered then.
TEST(Predictor, ProposesOnlyTheTileWidthsItWasTrainedOn) {
  const Trained& t = trained();
  std::vector<Sample> narrow;
  for (const Sample& x : t.train)
    if (is_cublaslt_sample(x) || parse_design(x.impl).bn == 64 || parse_design(x.impl).bn == 128) narrow.push_back(x);
  ASSERT_LT(narrow.size(), t.train.size());  // the samples had other widths too
  const Predictor p = train_predictor(narrow, small_training());
  EXPECT_EQ(p.tile_widths(), (std::vector<int>{64, 128}));
  for (const Shape& s : t.test_shapes)
    for (const Candidate& c : p.best_guesses(synthetic_gpu(), {s, Layout::kTN}, 8))
      EXPECT_TRUE(c.design.bn == 64 || c.design.bn == 128) << to_string(c.design);
  nlohmann::json j = p.to_json();
  EXPECT_EQ(Predictor::parse(j.dump(), "p.json").tile_widths(), p.tile_widths());
  j.erase("tile_widths");
  EXPECT_EQ(Predictor::parse(j.dump(), "old.json").tile_widths(), (std::vector<int>{64, 128, 192, 256}));
}

TEST(Predictor, DesignTimeIsCublasLtTimeOverGain) {
  const Trained& t = trained();
  const Problem p{t.test_shapes[0], Layout::kTN};
  const Design d = parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg");
  const Prediction lt = t.predictor.predict_cublaslt(synthetic_gpu(), p);
  const Gain g = t.predictor.predict_gain(synthetic_gpu(), p, d);
  const Prediction time = t.predictor.predict_design(synthetic_gpu(), p, d);
  EXPECT_NEAR(time.mean_us, lt.mean_us / g.speedup, 1e-9 * time.mean_us);
  EXPECT_NEAR(time.log_sd, std::hypot(lt.log_sd, g.log_sd), 1e-12);
  EXPECT_NEAR(time.sd_us, time.mean_us * time.log_sd, 1e-9);
}

TEST(Predictor, UnseenGpuIsLessCertain) {
  const Trained& t = trained();
  const Problem p{{512, 4096, 4096}, Layout::kTN};
  const Design d = parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg");
  GpuTraits other = synthetic_gpu();
  other.name = "NVIDIA H200";
  EXPECT_TRUE(t.predictor.trained_on_gpu(synthetic_gpu().name));
  EXPECT_FALSE(t.predictor.trained_on_gpu(other.name));
  const Gain seen = t.predictor.predict_gain(synthetic_gpu(), p, d);
  const Gain unseen = t.predictor.predict_gain(other, p, d);
  EXPECT_DOUBLE_EQ(unseen.log_mean, seen.log_mean);
  EXPECT_NEAR(unseen.log_sd, std::hypot(seen.log_sd, t.predictor.unseen_gpu_sd()), 1e-12);
  EXPECT_NEAR(t.predictor.extrapolation_sd(other, p.shape),
              std::hypot(t.predictor.extrapolation_sd(synthetic_gpu(), p.shape), t.predictor.unseen_gpu_sd()), 1e-12);
}

TEST(Predictor, ShapesFarFromTheTrainedOnesAreLessCertain) {
  const Trained& t = trained();
  const Extrapolation& x = t.predictor.extrapolation();
  EXPECT_GT(x.spacing, 0.0);  // the trained shapes' neighbours are a power of two or more apart
  EXPECT_EQ(t.predictor.distance_to_trained(t.train_shapes[0]), 0.0);
  EXPECT_EQ(t.predictor.extrapolation_sd(synthetic_gpu(), t.train_shapes[0]), 0.0);
  // M = 1 lies ln 64 from the smallest trained M: the uncertainty grows with the distance beyond the spacing.
  const Shape near = t.train_shapes[0];
  const Shape far{1, near.n, near.k};
  const double d = t.predictor.distance_to_trained(far);
  EXPECT_GT(d, 3.0);
  EXPECT_NEAR(t.predictor.extrapolation_sd(synthetic_gpu(), far), x.sd_per_ln_beyond * (d - x.spacing), 1e-12);
  const Design design = parse_design("sm90.ws.pingpong/64x64x128/s6/c1x1/raster_m.g8/splitk1/epi_reg");
  EXPECT_GT(t.predictor.predict_gain(synthetic_gpu(), {far, Layout::kTN}, design).log_sd,
            t.predictor.predict_gain(synthetic_gpu(), {near, Layout::kTN}, design).log_sd);
}

TEST(Predictor, FileRoundTripAndRefusals) {
  const Trained& t = trained();
  const auto dir = std::filesystem::temp_directory_path() / ("rlgemm-predictor-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "p.json";
  t.predictor.save(path);
  const Predictor back = Predictor::load(path);
  for (const Shape& s : t.test_shapes) {
    const Problem p{s, Layout::kTN};
    const Design d = parse_design("sm90.ws.pingpong/64x128x64/s6/c1x1/raster_m.g8/splitk1/epi_reg");
    EXPECT_EQ(back.predict_design(synthetic_gpu(), p, d).mean_us, t.predictor.predict_design(synthetic_gpu(), p, d).mean_us);
    EXPECT_EQ(back.predict_cublaslt(synthetic_gpu(), p).log_sd, t.predictor.predict_cublaslt(synthetic_gpu(), p).log_sd);
  }
  EXPECT_EQ(back.gpus().front().name, synthetic_gpu().name);

  nlohmann::json j = t.predictor.to_json();
  auto refused = [&](nlohmann::json bad, const std::string& words) {
    try {
      Predictor::parse(bad.dump(), "bad.json");
      ADD_FAILURE() << "accepted: " << words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("bad.json"), std::string::npos) << e.what();
    }
  };
  nlohmann::json v = j;
  v["version"] = 99;
  refused(v, "version 99");
  nlohmann::json f = j;
  f["design"]["features"][0] = "something_else";
  refused(f, "other features");
  nlohmann::json g = j;
  g["gpus"] = nlohmann::json::array();
  refused(g, "gpus");
  nlohmann::json e = j;
  e["extrapolation"]["sd_per_ln_beyond"] = -1;
  refused(e, "extrapolation");
  nlohmann::json sh = j;
  sh["shapes"][0] = {64, 60, 64};
  refused(sh, "problem rules");
  refused(nlohmann::json{{"format", "other"}}, "not a predictor file");
  EXPECT_THROW(Predictor::parse("{", "x"), Error);
  EXPECT_THROW(Predictor::load(dir / "missing.json"), Error);
  std::filesystem::remove_all(dir);
}

TEST(RouteRule, KernelOnlyWhereTheGainClearsItsUncertainty) {
  auto gain = [](double speedup, double sd) { return Gain{speedup, std::log(speedup), sd}; };
  EXPECT_TRUE(take_kernel_route(gain(1.20, 0.10), 1.0));    // ln 1.2 = 0.18 > 0.10
  EXPECT_FALSE(take_kernel_route(gain(1.05, 0.10), 1.0));   // 0.049 < 0.10: not sure enough
  EXPECT_FALSE(take_kernel_route(gain(0.90, 0.01), 1.0));   // slower
  EXPECT_TRUE(take_kernel_route(gain(1.05, 0.10), 0.0));    // z = 0: by the mean alone
  EXPECT_FALSE(take_kernel_route(gain(1.20, 0.10), 2.0));   // 0.18 < 0.20
  EXPECT_FALSE(take_kernel_route(gain(1.20, 0.0), 1.0, 1.25));  // the margin: 20% faster is not 25%
  EXPECT_TRUE(take_kernel_route(gain(1.30, 0.0), 1.0, 1.25));
  EXPECT_FALSE(take_kernel_route(gain(1.0, 0.0)));          // a tie keeps cuBLASLt
  // The default asks for three standard deviations.
  EXPECT_FALSE(take_kernel_route(gain(1.30, 0.10)));        // 0.262 < 0.30
  EXPECT_TRUE(take_kernel_route(gain(1.36, 0.10)));         // 0.307 > 0.30
}

// A guess whose width leaves a wave part-empty comes back at the width that fills the waves, its predicted time and
// gain scaled by the costs: on 512x5120, 128x192 tiles are 108 (one wave, 24 SMs idle), 128x160 tiles 128, so each
// wave costs (160 + 8) / (192 + 8) as much (search::fit_cost, 8 columns of fixed cost a tile). A guess the route
// rule refuses may then pass it.
TEST(FittedGuess, TheWidthThatFillsTheWavesWithItsTimeScaledByTheWaveCost) {
  Candidate guess;
  guess.design = parse_design("sm90.ws.coop/128x192x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  guess.time = Prediction{24.0, 2.4, std::log(24.0), 0.1};
  guess.gain = Gain{0.95, std::log(0.95), 0.05};
  const Problem problem{{512, 5120, 4096}, Layout::kTN};
  const auto fitted = fitted_guess(guess, problem, 132);
  ASSERT_TRUE(fitted);
  EXPECT_EQ(to_string(fitted->design), "sm90.ws.coop/128x160x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  const double ratio = double(192 + search::kTileFixedColumns) / double(160 + search::kTileFixedColumns);
  EXPECT_NEAR(fitted->time.mean_us, 24.0 / ratio, 1e-9);
  EXPECT_NEAR(fitted->time.sd_us, 2.4 / ratio, 1e-9);
  EXPECT_NEAR(fitted->time.log_mean, std::log(24.0 / ratio), 1e-9);
  EXPECT_EQ(fitted->time.log_sd, 0.1);
  EXPECT_NEAR(fitted->gain.speedup, 0.95 * ratio, 1e-9);
  EXPECT_NEAR(fitted->gain.log_mean, std::log(0.95 * ratio), 1e-9);
  EXPECT_EQ(fitted->gain.log_sd, 0.05);
  EXPECT_FALSE(take_kernel_route(guess.gain, 1.0));
  EXPECT_TRUE(take_kernel_route(fitted->gain, 1.0));
  // A width that fills its waves already, a kernel without waves of whole tiles, a GPU without SMs: nothing.
  guess.design = parse_design("sm90.ws.coop/128x160x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_FALSE(fitted_guess(guess, problem, 132));
  guess.design = parse_design("sm90.ws.coop/128x192x64/s4/c1x1/raster_m.g8/streamk/epi_tma");
  EXPECT_FALSE(fitted_guess(guess, problem, 132));
  guess.design = parse_design("sm90.ws.coop/128x192x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_FALSE(fitted_guess(guess, problem, 0));
}

// What a default handle checks for a shape (route_guess): the predictor's best guess where its gain clears the
// checked-route rule, its design fitted to the waves beside it (or alone where only the fitted estimate clears the
// rule), a bf16 problem the fp16 twin's designs in bf16, and a fitted design that cannot run dropped.
TEST(RouteGuess, TheGuessAndItsFittedWidthAsTheHandleChecksThem) {
  if (builtin_predictor_names().empty()) GTEST_SKIP() << "no built-in predictor";
  GpuTraits h100;
  h100.name = "NVIDIA H100 80GB HBM3";
  const Predictor* p = builtin_predictor(h100);
  ASSERT_NE(p, nullptr);
  const auto anything = [](const Design&) { return true; };
  int routes = 0, beside = 0, fitted_alone = 0;
  // LLM layers (bench/shapes/llm-tune.csv) where the guess leaves a wave part-empty, and decode shapes.
  for (const Shape shape : {Shape{2048, 576, 2048}, Shape{512, 2816, 2048}, Shape{128, 10944, 2048},
                            Shape{128, 28672, 4096}, Shape{512, 22016, 4096}, Shape{1, 50304, 2048},
                            Shape{16, 2048, 4608}, Shape{4096, 4096, 4096}}) {
    const Problem problem{shape, Layout::kTN};
    const auto guesses = p->best_guesses(h100, problem, 1);
    ASSERT_EQ(guesses.size(), 1u);
    const auto fitted = fitted_guess(guesses[0], problem, h100.sm_count);
    const bool take_guess = take_kernel_route(guesses[0].gain, kCheckedRouteZ);
    const bool take_fitted = fitted && take_kernel_route(fitted->gain, kCheckedRouteZ);
    const auto route = route_guess(*p, h100, problem, h100.sm_count, kHopperSmemPerBlock, kCheckedRouteZ, anything);
    ASSERT_EQ(bool(route), take_guess || take_fitted) << shape.to_string();
    if (!route) continue;
    ++routes;
    EXPECT_EQ(route->guess.design, guesses[0].design);
    EXPECT_EQ(route->take_guess, take_guess);
    const Design served = take_guess ? guesses[0].design : fitted->design;
    EXPECT_EQ(route->served(DType::kF16), served);
    std::vector<Design> expected{served};
    if (take_guess && fitted) {
      expected.push_back(fitted->design);
      ++beside;
    }
    if (!take_guess) ++fitted_alone;
    EXPECT_EQ(route->designs(DType::kF16), expected) << shape.to_string();
    // A bf16 problem: the same designs in bf16.
    const auto bf16 = route_guess(*p, h100, Problem{shape, Layout::kTN, DType::kBF16}, h100.sm_count,
                                  kHopperSmemPerBlock, kCheckedRouteZ, anything);
    ASSERT_TRUE(bf16);
    for (size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(bf16->designs(DType::kBF16).at(i), with_dtype(expected[i], DType::kBF16));
    // A fitted design that cannot run here is dropped: the guess alone, or nothing where only the fitted passed.
    const auto refused = route_guess(*p, h100, problem, h100.sm_count, kHopperSmemPerBlock, kCheckedRouteZ,
                                     [&](const Design& d) { return !fitted || d != fitted->design; });
    EXPECT_EQ(bool(refused), take_guess);
    if (refused) EXPECT_EQ(refused->designs(DType::kF16), std::vector<Design>{guesses[0].design});
  }
  // The shapes were picked so that every case occurs (rlgemm predict --top 1 --z 1 on the H100's predictor).
  EXPECT_GT(routes, 0);
  EXPECT_GT(beside + fitted_alone, 0);
}

// The first pass scores the space in chunks on several threads: the guesses are the same as on one.
TEST(Predictor, GuessesAreTheSameOnAnyNumberOfThreads) {
  if (builtin_predictor_names().empty()) GTEST_SKIP() << "no built-in predictor";
  GpuTraits h100;
  h100.name = "NVIDIA H100 80GB HBM3";
  const Predictor* p = builtin_predictor(h100);
  ASSERT_NE(p, nullptr);
  for (const Problem problem : {Problem{{512, 11008, 4096}, Layout::kTN}, Problem{{16, 4096, 14336}, Layout::kNN}}) {
    BestGuessOptions one, many;
    one.threads = 1;
    many.threads = 5;
    const auto a = p->best_guesses(h100, problem, 6, one);
    const auto b = p->best_guesses(h100, problem, 6, many);
    ASSERT_EQ(a.size(), 6u);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].design, b[i].design) << problem.shape.to_string() << " guess " << i;
      EXPECT_EQ(a[i].gain.log_mean, b[i].gain.log_mean);
    }
  }
}

TEST(Predictor, BuiltInPredictorsFollowTheGpu) {
  GpuTraits a100;
  a100.name = "NVIDIA A100-SXM4-80GB";
  a100.cc_major = 8;
  EXPECT_EQ(builtin_predictor(a100), nullptr);  // no predictor was trained on an sm_80 GPU
  for (const std::string& name : builtin_predictor_names()) EXPECT_NE(name.find(".json"), std::string::npos);
  GpuTraits h200;
  h200.name = "NVIDIA H200";
  if (!builtin_predictor_names().empty()) {
    const Predictor* p = builtin_predictor(h200);
    ASSERT_NE(p, nullptr);  // same architecture: the H100's predictor, with the unseen-GPU uncertainty
    const Problem problem{{128, 4096, 4096}, Layout::kTN};
    const auto guesses = p->best_guesses(h200, problem, 3);
    ASSERT_EQ(guesses.size(), 3u);
    for (const auto& c : guesses) EXPECT_GE(c.gain.log_sd, p->unseen_gpu_sd());
  }
}

// A tune in CUDA graphs starts from the predictor learned in graphs: the GPU's own (data/predictors/h200-graph.json
// on the H200), else its architecture's (h100-graph.json); the library's handle and offline tunes keep an offline
// one, even where the GPU's own file is a graph predictor, and a mode no predictor learned takes the offline one.
TEST(Predictor, BuiltInPredictorsFollowTheTimingMode) {
  const auto names = builtin_predictor_names();
  if (std::find(names.begin(), names.end(), "h100-graph.json") == names.end()) GTEST_SKIP() << "no graph predictor";
  GpuTraits h100;
  h100.name = "NVIDIA H100 80GB HBM3";
  h100.cc_major = 9;
  GpuTraits h200;
  h200.name = "NVIDIA H200";
  h200.cc_major = 9;
  for (const GpuTraits& gpu : {h100, h200}) {
    ASSERT_NE(builtin_predictor(gpu, "graph"), nullptr);
    EXPECT_EQ(builtin_predictor(gpu, "graph")->mode(), "graph");
    EXPECT_EQ(builtin_predictor(gpu)->mode(), "offline");
    EXPECT_EQ(builtin_predictor(gpu, "server")->mode(), "offline");
  }
  EXPECT_TRUE(builtin_predictor(h100, "graph")->trained_on_gpu(h100.name));
  if (std::find(names.begin(), names.end(), "h200-graph.json") != names.end()) {
    EXPECT_TRUE(builtin_predictor(h200, "graph")->trained_on_gpu(h200.name));
    EXPECT_FALSE(builtin_predictor(h200)->trained_on_gpu(h200.name));  // the H100's offline predictor
  }
  // Another GPU of the architecture with no file of its own takes the H100's graph predictor in graphs.
  GpuTraits h20;
  h20.name = "NVIDIA H20";
  h20.cc_major = 9;
  EXPECT_TRUE(builtin_predictor(h20, "graph")->trained_on_gpu(h100.name));
  EXPECT_EQ(builtin_predictor(h20)->mode(), "offline");
}

}  // namespace
}  // namespace rlgemm::predict
