// The gain of a rescheduled kernel with its confidence interval, on synthetic paired timings: noise alone is
// not kept, a real 5% gain with modest noise is, a drift of the GPU's clock that falls on both sides of each
// round cancels, and one stray slow batch widens the interval instead of faking a gain.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/gain_interval.h"
#include "measure/sass_opt_record.h"
#include "rlgemm/error.h"

namespace rlgemm::measure {
namespace {

struct Rounds {
  std::vector<double> original, candidate;
};

// `n` rounds: the original takes `base` us, the candidate base / (1 + gain), each batch with independent
// relative noise of standard deviation `noise`, and both sides of a round scaled by a common drift factor.
Rounds simulate(int n, double base, double gain, double noise, double drift, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> jitter(0.0, noise);
  Rounds r;
  for (int i = 0; i < n; ++i) {
    const double clock = 1.0 + drift * std::sin(0.3 * i);  // slow spells of the GPU, the same for both
    r.original.push_back(base * clock * (1 + jitter(rng)));
    r.candidate.push_back(base / (1 + gain) * clock * (1 + jitter(rng)));
  }
  return r;
}

TEST(GainInterval, StudentQuantilesMatchTheTable) {
  EXPECT_NEAR(student_t_975(1), 12.706, 1e-3);
  EXPECT_NEAR(student_t_975(10), 2.228, 1e-3);
  EXPECT_NEAR(student_t_975(30), 2.042, 1e-3);
  EXPECT_NEAR(student_t_975(31), 2.040, 1e-3);  // the expansion takes over
  EXPECT_NEAR(student_t_975(59), 2.001, 1e-3);
  EXPECT_NEAR(student_t_975(120), 1.980, 1e-3);
  EXPECT_NEAR(student_t_975(100000), 1.960, 1e-3);
  for (int dof = 2; dof < 200; ++dof) EXPECT_LT(student_t_975(dof), student_t_975(dof - 1)) << dof;
}

TEST(GainInterval, NoisyPairsWithoutAGainAreNotKept) {
  // 3% noise per batch and no gain: over many seeds the interval holds zero about 95% of the time; a schedule
  // is kept in the other cases only if the interval lies above zero, about 2.5%.
  int kept = 0;
  const int trials = 400;
  for (int t = 0; t < trials; ++t) {
    const Rounds r = simulate(60, 100.0, 0.0, 0.03, 0.0, 1000 + t);
    const GainInterval g = gain_interval(r.original, r.candidate);
    EXPECT_LT(g.low, g.gain);
    EXPECT_GT(g.high, g.gain);
    kept += decide_keep(g, 0.0).kept;
  }
  EXPECT_LE(kept, trials * 6 / 100) << kept << " of " << trials << " no-gain pairs were kept";
  // One such pair: its interval straddles zero, and the verdict says so.
  const Rounds r = simulate(60, 100.0, 0.0, 0.03, 0.0, 7);
  const GainInterval g = gain_interval(r.original, r.candidate);
  EXPECT_FALSE(g.significant()) << g.to_string();
  EXPECT_FALSE(decide_keep(g, 0.0).kept);
  EXPECT_NE(decide_keep(g, 0.0).verdict.find("does not exclude zero"), std::string::npos);
}

TEST(GainInterval, ARealFivePercentGainWithModestNoiseIsKept) {
  // 2% noise per batch, 60 rounds: every trial is kept, and the interval holds the true gain in about 95%.
  int covered = 0;
  const int trials = 200;
  for (uint64_t seed = 1; seed <= trials; ++seed) {
    const Rounds r = simulate(60, 80.0, 0.05, 0.02, 0.0, seed);
    const GainInterval g = gain_interval(r.original, r.candidate);
    EXPECT_TRUE(g.significant()) << g.to_string();
    EXPECT_NEAR(g.gain, 0.05, 0.02) << g.to_string();
    covered += g.low < 0.05 && 0.05 < g.high;
    const KeepDecision d = decide_keep(g, 0.0);
    EXPECT_TRUE(d.kept) << d.verdict;
    // A floor above the gain refuses it, naming the floor.
    const KeepDecision floor = decide_keep(g, 0.2);
    EXPECT_FALSE(floor.kept);
    EXPECT_NE(floor.verdict.find("floor"), std::string::npos) << floor.verdict;
  }
  EXPECT_GE(covered, trials * 90 / 100) << covered << " of " << trials << " intervals held the true gain";
}

TEST(GainInterval, ADriftCommonToBothSidesCancels) {
  // The GPU's clock swinging by 20% over the rounds, on both sides of each round alike: with 1% noise the
  // interval stays narrow around the true 2% gain.
  const Rounds r = simulate(60, 50.0, 0.02, 0.01, 0.2, 3);
  const GainInterval g = gain_interval(r.original, r.candidate);
  EXPECT_TRUE(g.significant()) << g.to_string();
  EXPECT_NEAR(g.gain, 0.02, 0.005) << g.to_string();
  EXPECT_LT(g.high - g.low, 0.01) << g.to_string();
}

TEST(GainInterval, AStraySlowBatchOfTheOriginalWidensTheIntervalInsteadOfFakingAGain) {
  Rounds r = simulate(30, 100.0, 0.0, 0.005, 0.0, 11);
  const GainInterval clean = gain_interval(r.original, r.candidate);
  r.original[17] *= 1.5;  // one batch hit by a host interrupt
  const GainInterval hit = gain_interval(r.original, r.candidate);
  EXPECT_GT(hit.gain, clean.gain);
  EXPECT_GT(hit.high - hit.low, 5 * (clean.high - clean.low)) << clean.to_string() << " / " << hit.to_string();
  EXPECT_FALSE(hit.significant()) << hit.to_string();
}

TEST(GainInterval, BadInputIsRefused) {
  EXPECT_THROW(gain_interval({1.0, 2.0}, {1.0}), Error);
  EXPECT_THROW(gain_interval({1.0}, {1.0}), Error);
  EXPECT_THROW(gain_interval({1.0, 0.0}, {1.0, 1.0}), Error);
  EXPECT_THROW(gain_interval({1.0, NAN}, {1.0, 1.0}), Error);
  EXPECT_THROW(student_t_975(0), Error);
  const GainInterval same = gain_interval({10, 10, 10}, {10, 10, 10});
  EXPECT_EQ(same.gain, 0);
  EXPECT_FALSE(same.significant());
}

}  // namespace
}  // namespace rlgemm::measure
