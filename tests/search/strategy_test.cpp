// The strategies against the synthetic cost model: rl must reach 98% of the exhaustive optimum in fewer
// evaluations than random, on average over shapes and seeds; evo must find good designs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "search/compare.h"
#include "search/rl_policy.h"
#include "search/search_test_util.h"
#include "search/synthetic_measurer.h"
#include "search/tuner.h"

namespace rlgemm::search {
namespace {

using testing::small_spec;
using testing::TempDir;

std::vector<Problem> test_problems() {
  return {{{512, 4096, 1024}, Layout::kTN},  {{8192, 8192, 2048}, Layout::kTN}, {{128, 1024, 8192}, Layout::kTN},
          {{2048, 256, 4096}, Layout::kTN},  {{4096, 1024, 512}, Layout::kTN},  {{1024, 1024, 16384}, Layout::kTN}};
}

// The exhaustive optimum of the small space for each problem.
double optimum_us(const DesignSpace& space, const CostModel& model, const Problem& p) {
  double best = 1e300;
  for (size_t i = 0; i < space.size(); ++i) best = std::min(best, model.time_us(space.design(i), p));
  return best;
}

struct Efficiency {
  double mean_evals = 0;
  int unreached = 0;
};

Efficiency run(const std::string& name, int seeds, int budget) {
  TempDir dir;
  Store store(dir / "tune.db");
  SyntheticMeasurer measurer;
  const auto problems = test_problems();
  DesignSpace space(small_spec(), Layout::kTN);
  Efficiency out;
  int runs = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    std::unique_ptr<Policy> policy;
    StrategyPtr strategy;
    if (name == "rl") {
      policy = std::make_unique<Policy>(space, RlOptions{}, seed);
      strategy = make_rl_strategy(*policy, seed);
    } else if (name == "evo") {
      strategy = make_evo_strategy(seed);
    } else {
      strategy = make_random_strategy(seed);
    }
    Tuner tuner(store, measurer, *strategy, small_spec());
    TuneOptions options;
    options.problems = problems;
    options.budget.evaluations = budget;
    options.own_evaluations_only = true;
    const auto outcomes = tuner.run(options);
    for (const auto& o : outcomes) {
      // Within 2% of the optimum's speedup over the reference.
      const double target = 0.98 * measurer.model().reference_us(o.problem) / optimum_us(space, measurer.model(), o.problem);
      const int evals = evaluations_to_reach(o, target);
      out.mean_evals += evals > 0 ? evals : budget;
      out.unreached += evals == 0;
      ++runs;
    }
  }
  out.mean_evals /= runs;
  return out;
}

TEST(Strategies, SmallSpaceHasAMeaningfulOptimum) {
  DesignSpace space(small_spec(), Layout::kTN);
  ASSERT_GT(space.size(), 500u);
  ASSERT_LT(space.size(), 50000u);
  CostModel model;
  for (const auto& p : test_problems()) {
    // Designs within 2% of the optimum are rare: finding one is a search problem.
    const double target = optimum_us(space, model, p) / 0.98;
    size_t good = 0;
    for (size_t i = 0; i < space.size(); ++i) good += model.time_us(space.design(i), p) <= target;
    std::printf("%s: %zu of %zu designs within 2%% of the optimum\n", p.shape.to_string().c_str(), good, space.size());
    EXPECT_LT(double(good) / double(space.size()), 0.02) << p.shape.to_string();
  }
}

TEST(Strategies, RlReachesTheTargetInFewerEvaluationsThanRandom) {
  const int budget = 400, seeds = 3;
  const Efficiency rl = run("rl", seeds, budget);
  const Efficiency random = run("random", seeds, budget);
  std::printf("evaluations to 98%% of the optimum: rl %.1f (%d unreached), random %.1f (%d unreached)\n",
              rl.mean_evals, rl.unreached, random.mean_evals, random.unreached);
  EXPECT_LT(rl.mean_evals, random.mean_evals);
}

TEST(Strategies, EvoBeatsRandom) {
  const int budget = 400, seeds = 3;
  const Efficiency evo = run("evo", seeds, budget);
  const Efficiency random = run("random", seeds, budget);
  std::printf("evaluations to 98%% of the optimum: evo %.1f (%d unreached), random %.1f (%d unreached)\n",
              evo.mean_evals, evo.unreached, random.mean_evals, random.unreached);
  EXPECT_LT(evo.mean_evals, random.mean_evals);
}

}  // namespace
}  // namespace rlgemm::search
