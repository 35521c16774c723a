// Pretraining a policy on logged results (search/pretrain.h): with a fixed design set "measured" by the
// synthetic cost model on many shapes, the policy learns which design wins where, and proposes well for
// shapes it was not trained on; rl-warm starts from such a policy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "rlgemm/error.h"
#include "search/compare.h"
#include "search/cost_model.h"
#include "search/pretrain.h"
#include "search/search_test_util.h"
#include "search/synthetic_measurer.h"
#include "support/cli.h"

namespace rlgemm::search {
namespace {

using testing::small_spec;
using testing::TempDir;

std::vector<Design> design_set(const DesignSpace& space) {
  std::vector<Design> set;
  for (int i = 0; i < 12; ++i) set.push_back(space.design(space.size() * size_t(i) / 12 + 7));
  return set;
}

std::vector<Shape> shapes(int count, int offset) {
  const int64_t sizes[] = {64, 256, 1024, 4096, 16384};
  std::vector<Shape> out;
  for (int i = offset; int(out.size()) < count; ++i) out.push_back({sizes[i % 5], sizes[(i / 5) % 5], sizes[(i * 3 + 1) % 5]});
  return out;
}

std::vector<LoggedResult> log_results(const std::vector<Design>& set, const std::vector<Shape>& on) {
  CostModel model;
  std::vector<LoggedResult> results;
  for (const Shape& s : on)
    for (const Design& d : set) results.push_back({{s, Layout::kTN}, to_string(d), 100.0 / model.time_us(d, {s, Layout::kTN})});
  return results;
}

TEST(Pretrain, LearnsWhichLoggedDesignWinsWhereAndCarriesItToHeldOutShapes) {
  DesignSpaces spaces(small_spec(), 232448);
  const DesignSpace& space = spaces.of(Layout::kTN);
  const auto set = design_set(space);
  const auto train = shapes(25, 0);
  const auto held_out = std::vector<Shape>{{2048, 512, 8192}, {128, 8192, 1024}, {8192, 8192, 512}, {512, 128, 2048}};
  auto results = log_results(set, train);
  const auto extra = log_results(set, held_out);
  results.insert(results.end(), extra.begin(), extra.end());

  Policy policy(space, RlOptions{}, 3);
  PretrainOptions options;
  options.epochs = 40;
  options.exclude = held_out;
  const PretrainReport report = pretrain(policy, spaces, results, options);
  EXPECT_EQ(report.problems, train.size());  // the held-out shapes were left out
  EXPECT_EQ(report.samples, train.size() * set.size());
  EXPECT_EQ(report.outside_space, 0u);
  EXPECT_GE(report.proposal_quality, 0.9);
  EXPECT_EQ(report.unlogged_proposals, 0u);

  // On shapes it never saw, the proposal is better than the set's median design.
  CostModel model;
  for (const Shape& s : held_out) {
    const Problem p{s, Layout::kTN};
    const Design d = propose(policy, space, p, 132);
    std::vector<double> times;
    for (const Design& x : set) times.push_back(model.time_us(x, p));
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    EXPECT_LE(model.time_us(d, p), times[times.size() / 2]) << s.to_string() << ": " << to_string(d);
  }
}

// Independent problems tune on copies of the starting policy; the policy file learns from each outcome.
TEST(Pretrain, LearnsFromATunedProblemsOutcome) {
  DesignSpaces spaces(small_spec(), 232448);
  const DesignSpace& space = spaces.of(Layout::kTN);
  const Problem problem{{2048, 512, 8192}, Layout::kTN};
  CostModel model;
  ProblemOutcome outcome;
  outcome.problem = problem;
  const double reference_us = model.reference_us(problem);
  Design best;
  for (const Design& d : design_set(space)) {
    const double t = model.time_us(d, problem);
    const double log_ratio = std::log(reference_us / t);
    outcome.evaluations.push_back({to_string(d), MeasureStatus::kOk, t, log_ratio, true,
                                   PairedGain{reference_us, log_ratio, std::expm1(log_ratio), std::expm1(log_ratio), 15}});
    if (outcome.best_us == 0 || t < outcome.best_us) {
      outcome.best_us = t;
      best = d;
    }
  }
  const auto features = shape_features(problem, 132);
  auto log_p = [&](const Policy& policy) {
    double sum = 0;
    for (const auto& step : policy.replay(space, features, space.encode(best)).steps) sum += step.log_prob;
    return sum;
  };
  Policy policy(space, RlOptions{}, 4);
  const double before = log_p(policy);
  ASSERT_TRUE(learn_from_outcome(policy, spaces, outcome, 132, 5));
  EXPECT_GT(log_p(policy), before + 0.5);  // the problem's best design became much likelier
  EXPECT_EQ(policy.updates(), 5);

  // One correct design teaches nothing about choosing: the policy is left as it was.
  for (size_t i = 1; i < outcome.evaluations.size(); ++i) outcome.evaluations[i].status = MeasureStatus::kWrong;
  const double now = log_p(policy);
  EXPECT_FALSE(learn_from_outcome(policy, spaces, outcome, 132, 5));
  EXPECT_EQ(log_p(policy), now);
}

TEST(Pretrain, RefusesWhatItCannotLearnFrom) {
  DesignSpaces spaces(small_spec(), 232448);
  const DesignSpace& space = spaces.of(Layout::kTN);
  Policy policy(space, RlOptions{}, 3);
  EXPECT_THROW(pretrain(policy, spaces, {}, {}), Error);
  auto results = log_results(design_set(space), shapes(2, 0));
  results[3].speedup = -1;
  EXPECT_THROW(pretrain(policy, spaces, results, {}), Error);
  // One design per shape teaches no choice.
  EXPECT_THROW(pretrain(policy, spaces, log_results({space.design(0)}, shapes(3, 0)), {}), Error);
}

TEST(Pretrain, RlWarmStartsFromTheFileAndNeedsOne) {
  TempDir dir;
  DesignSpaces spaces(small_spec(), 232448);
  const DesignSpace& space = spaces.of(Layout::kTN);
  Policy policy(space, RlOptions{}, 3);
  PretrainOptions options;
  options.epochs = 5;
  pretrain(policy, spaces, log_results(design_set(space), shapes(10, 0)), options);
  policy.save(dir / "warm.txt");

  Store store(dir / "t.db");
  SyntheticMeasurer measurer;
  CompareOptions compare;
  compare.problems = {{{1024, 2048, 4096}, Layout::kTN}, {{256, 8192, 1024}, Layout::kTN}};
  compare.strategies = {"rl-warm", "random"};
  compare.budget = 12;
  compare.spec = small_spec();
  EXPECT_THROW(compare_strategies(store, measurer, compare), Error);  // no --warm-policy
  compare.warm_policy = (dir / "warm.txt").string();
  compare.save_policy = (dir / "after.txt").string();
  const auto result = compare_strategies(store, measurer, compare);
  ASSERT_EQ(result.rows.size(), 4u);
  EXPECT_EQ(result.rows[0].strategy, "rl-warm");
  EXPECT_GT(Policy::load(dir / "after.txt").updates(), policy.updates());  // it went on learning, and was saved
}

// tune-compare --sample spreads over M, N and K on the grid (K varies fastest in its order): --sample 50 is
// the committed bench/shapes/sample50.csv.
TEST(TuneCompareCli, SampleOfTheGridIsTheCommittedSampleFile) {
  TempDir dir;
  const auto out = dir / "s.csv";
  const auto r = rlgemm::testing::run_rlgemm("tune-compare --backend synthetic --shapes cudal2 --sample 50 --strategies random --budget 1 --db " +
                                             (dir / "s.db").string() + " --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream csv(out), file(std::string(RLGEMM_SOURCE_DIR) + "/bench/shapes/sample50.csv");
  std::string line, sampled, committed;
  std::getline(csv, line);  // header: gpu,layout,m,n,k,...
  while (std::getline(csv, line)) {
    std::stringstream ss(line);
    std::string gpu, layout, m, n, k;
    std::getline(ss, gpu, ','), std::getline(ss, layout, ','), std::getline(ss, m, ','), std::getline(ss, n, ',');
    std::getline(ss, k, ',');
    sampled += m + "," + n + "," + k + "\n";
  }
  while (std::getline(file, line))
    if (!line.empty() && line[0] != '#' && line != "M,N,K") committed += line + "\n";
  EXPECT_EQ(sampled, committed);
}

}  // namespace
}  // namespace rlgemm::search
