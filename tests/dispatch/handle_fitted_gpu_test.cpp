// The predicted route with tile widths fitted to the GPU's waves, on a GPU (skipped without one): where the
// built-in predictor's design leaves a wave of tiles part-empty, the handle checks the same design at the width
// that fills the waves (predict::fitted_guess), beside the guess where the guess clears the route rule, alone
// where only the fitted design's estimate does; the faster serves, or the floor, and every call is right.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "core/cuda_util.h"
#include "predict/predictor.h"
#include "rlgemm/rlgemm.h"
#include "store/measurement.h"
#include "support/gpu.h"
#include "support/handle_case.h"

namespace rlgemm {
namespace {

class HandleFittedGpu : public test::GpuTestWithDir {};

// The handle's predicted route rule.
constexpr double kRouteZ = predict::kCheckedRouteZ;

TEST_F(HandleFittedGpu, PredictedRouteChecksTheGuessAtTheWidthThatFillsTheWaves) {
  const predict::GpuTraits traits = predict::traits_of(identity_of(device_));
  const predict::Predictor* predictor = predict::builtin_predictor(traits);
  if (!predictor) GTEST_SKIP() << "no built-in predictor for " << traits.name;
  // LLM layers (bench/shapes/llm-tune.csv, never the held-out set) where the H100 predictor's design leaves a wave
  // part-empty and the fitted design's estimate clears the route rule (rlgemm predict --top 1 --z 1); on the
  // last, the guess clears it too, and both are checked.
  const std::vector<Shape> candidates = {{2048, 576, 2048}, {512, 2816, 2048}, {128, 10944, 2048},
                                         {128, 28672, 4096}, {512, 22016, 4096}, {1, 50304, 2048}};
  // An empty tuned table: every shape is untuned.
  const auto table = dir_ / "tuned.csv";
  std::ofstream(table) << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto\n";
  HandleOptions options;
  options.tuned_table = table.string();
  options.predicted_kernels = true;
  Handle handle(options);
  int taken = 0;
  for (const Shape shape : candidates) {
    const Problem problem{shape, Layout::kTN};
    const auto guesses = predictor->best_guesses(traits, problem, 1);
    ASSERT_FALSE(guesses.empty()) << shape.to_string();
    const int smem = smem_limit_or_hopper(device_.smem_per_block_optin);
    const auto fitted = predict::fitted_guess(guesses.front(), problem, device_.sm_count, smem);
    const bool guess_taken = predict::take_kernel_route(guesses.front().gain, kRouteZ);
    const bool fitted_taken = fitted && predict::take_kernel_route(fitted->gain, kRouteZ);
    if (!fitted || !(guess_taken || fitted_taken)) continue;
    ++taken;
    const test::Case c(shape, Layout::kTN, shape.n + 7);
    c.poison();
    c.run(handle);
    c.run(handle);
    const std::string route = handle.describe(shape.m, shape.n, shape.k, Layout::kTN);
    EXPECT_EQ(c.check(), "") << route;
    const std::string guess_text = to_string(guesses.front().design);
    const std::string fitted_text = to_string(fitted->design);
    const bool floor =
        route.rfind("cublaslt floor", 0) == 0 && route.find("measured on first use") != std::string::npos;
    if (guess_taken) {
      // Two kernels checked: the guess or its fitted design serves, or the floor after "the best of 2 kernels".
      const bool kernel =
          route.rfind("predicted " + guess_text, 0) == 0 || route.rfind("predicted " + fitted_text, 0) == 0;
      EXPECT_TRUE(kernel || (floor && route.find("the best of 2 kernels") != std::string::npos)) << route;
    } else {
      // The fitted design alone, predicted from the guess.
      const bool kernel = route.rfind("predicted " + fitted_text, 0) == 0 &&
                          route.find("as " + guess_text + " fitted to the waves") != std::string::npos;
      EXPECT_TRUE(kernel || floor) << route;
    }
  }
  if (taken == 0) GTEST_SKIP() << "on " << traits.name << " the predictor takes no fitted design on these shapes";
  const Stats s = handle.stats();
  EXPECT_EQ(s.predicted + s.cublaslt, uint64_t(2 * taken));
}

}  // namespace
}  // namespace rlgemm
