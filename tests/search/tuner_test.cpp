// The tuning loop: budgets, progress, resume after SIGKILL with no repeated measurement, two tuners on one
// database, isolated and multi-worker measuring.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <set>
#include <thread>

#include "rlgemm/error.h"
#include "search/rl_policy.h"
#include "search/search_test_util.h"
#include "search/synthetic_measurer.h"
#include "search/tuner.h"
#include "search/worker.h"

namespace rlgemm::search {
namespace {

using testing::small_spec;
using testing::TempDir;

const std::vector<Problem> kProblems = {{{1024, 1024, 1024}, Layout::kTN},
                                        {{256, 4096, 2048}, Layout::kTN},
                                        {{4096, 512, 512}, Layout::kNN}};

// A tuner with the random strategy over the synthetic GPU, on a database of its own in a fresh folder.
struct RandomTuner {
  RandomTuner(const std::string& db, uint64_t seed, BackendOptions backend = {}, const SpaceSpec& spec = small_spec())
      : store(dir / db), measurer(backend), strategy(make_random_strategy(seed)), tuner(store, measurer, *strategy, spec) {}
  TempDir dir;
  Store store;
  SyntheticMeasurer measurer;
  StrategyPtr strategy;
  Tuner tuner;
};

TEST(Budget, ParsesEvaluationsAndMinutes) {
  EXPECT_EQ(Budget::parse("200").evaluations, 200);
  EXPECT_DOUBLE_EQ(Budget::parse("30min").minutes, 30);
  EXPECT_DOUBLE_EQ(Budget::parse("1.5m").minutes, 1.5);
  EXPECT_THROW(Budget::parse("ten"), Error);
  EXPECT_THROW(Budget::parse("0"), Error);
  EXPECT_THROW(Budget::parse("20s"), Error);
  EXPECT_THROW(Budget::parse("2.5"), Error);
}

// Runs a tuner over kProblems; returns the number of measurements it made.
int64_t tune(const std::filesystem::path& db, const std::string& strategy_name, int budget, uint64_t seed,
             double delay_ms = 0, std::FILE* progress = nullptr) {
  Store store(db);
  BackendOptions options;
  options.delay_ms = delay_ms;
  SyntheticMeasurer measurer(options);
  DesignSpace space(small_spec(), Layout::kTN);
  Policy policy(space, RlOptions{}, seed);
  StrategyPtr strategy = strategy_name == "rl" ? make_rl_strategy(policy, seed)
                         : strategy_name == "evo" ? make_evo_strategy(seed)
                                                  : make_random_strategy(seed);
  Tuner tuner(store, measurer, *strategy, small_spec());
  TuneOptions tune;
  tune.confirm = false;  // the search's own measurements, counted: no second measurement
  tune.problems = kProblems;
  tune.budget.evaluations = budget;
  tune.progress = progress;
  const auto outcomes = tuner.run(tune);
  for (const auto& o : outcomes) EXPECT_GE(int(o.evaluations.size()), budget);
  return measurer.measure_calls();
}

TEST(Tuner, SeedDesignsAreMeasuredFirstCountedAndNotRepeated) {
  TempDir dir;
  const std::vector<Design> seeds = {
      parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg"),
      parse_design("sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg"),
      // valid for the layout, but 64 slices of 64 need K >= 4096: skipped on these shapes
      parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk64.serial/epi_reg")};
  auto run = [&](uint64_t seed) {
    Store store(dir / "s.db");
    SyntheticMeasurer measurer(BackendOptions{});
    StrategyPtr strategy = make_evo_strategy(seed);
    Tuner tuner(store, measurer, *strategy, small_spec());
    TuneOptions tune;
    tune.confirm = false;  // the search's own measurements, counted: no second measurement
    tune.problems = {kProblems[0]};
    tune.budget.evaluations = 10;
    tune.seed_designs = seeds;
    const auto outcomes = tuner.run(tune);
    EXPECT_EQ(outcomes[0].evaluations.size(), 10u);
    return std::make_pair(outcomes[0], measurer.measure_calls());
  };
  const auto [first, calls] = run(1);
  EXPECT_EQ(calls, 10);
  ASSERT_GE(first.evaluations.size(), 2u);
  EXPECT_EQ(first.evaluations[0].design, to_string(seeds[0]));
  EXPECT_EQ(first.evaluations[1].design, to_string(seeds[1]));
  EXPECT_TRUE(first.evaluations[0].measured_now);
  Store store(dir / "s.db");
  const auto rows = store.measurements(store.gpu_id(SyntheticMeasurer(BackendOptions{}).gpu()), kProblems[0],
                                       TimingMode::kGraph);
  EXPECT_EQ(std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.strategy == "seed"; }), 2);
  // Rerun: the seeds (and everything else) are in the store already.
  EXPECT_EQ(run(1).second, 0);
}

// A problem's own first guesses (the predictor's, in `rlgemm tune`) follow the common seeds, count against the
// budget, are recorded as "predicted", and a duplicate of a common seed is measured once.
TEST(Tuner, PerProblemGuessesFollowTheSeeds) {
  const Design common = parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg");
  const Design guess = parse_design("sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg");
  RandomTuner t("g.db", 3);
  auto& [dir, store, measurer, strategy, tuner] = t;
  TuneOptions tune;
  tune.confirm = false;  // the search's own measurements, counted: no second measurement
  tune.problems = {kProblems[0], kProblems[1], kProblems[2]};
  tune.budget.evaluations = 5;
  tune.seed_designs = {common};
  std::vector<Problem> asked;
  std::vector<std::thread::id> asked_on;
  tune.seeds_for = [&](const Problem& p) {
    asked.push_back(p);
    asked_on.push_back(std::this_thread::get_id());
    return std::vector<Design>{common, guess};
  };
  const auto outcomes = tuner.run(tune);
  // Each problem's guesses are asked for once: the second problem's first round was worked out while the first
  // problem was measured, and its kernels were asked to be built then (prefetch), all of that round and nothing
  // else. The third problem's guesses were asked for on another thread while the first was measured.
  ASSERT_EQ(asked.size(), 3u);
  EXPECT_EQ(asked[1], kProblems[1]);
  EXPECT_EQ(asked[2], kProblems[2]);
  EXPECT_EQ(asked_on[0], std::this_thread::get_id());
  EXPECT_EQ(asked_on[1], std::this_thread::get_id());
  EXPECT_NE(asked_on[2], std::this_thread::get_id());
  int64_t first_rounds = 0;  // of the problems after the first
  for (const Problem& p : {kProblems[1], kProblems[2]}) {
    const auto rows = store.measurements(store.gpu_id(measurer.gpu()), p, TimingMode::kGraph);
    first_rounds += std::count_if(rows.begin(), rows.end(), [](const auto& r) {
      return r.strategy == "seed" || r.strategy == "predicted" || r.strategy == "wave-fit";
    });
  }
  EXPECT_EQ(measurer.prefetches_asked(), first_rounds);
  EXPECT_GE(measurer.prefetches_asked(), 4);
  for (const auto& o : outcomes) {
    ASSERT_EQ(o.evaluations.size(), 5u);
    EXPECT_EQ(o.evaluations[0].design, to_string(common));
    EXPECT_EQ(o.evaluations[1].design, to_string(guess));
    const auto rows = store.measurements(store.gpu_id(measurer.gpu()), o.problem, TimingMode::kGraph);
    EXPECT_EQ(std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.strategy == "predicted"; }), 1);
    EXPECT_EQ(std::count_if(rows.begin(), rows.end(), [](const auto& r) { return r.strategy == "seed"; }), 1);
  }
}

// The next problem's first round is worked out while the current one is measured: a shape listed twice in a
// row measures its seeds once (the second time, the store holds them).
TEST(Tuner, AShapeListedTwiceInARowMeasuresNothingTwice) {
  RandomTuner t("twice.db", 4);
  auto& [dir, store, measurer, strategy, tuner] = t;
  TuneOptions tune;
  tune.problems = {kProblems[0], kProblems[0]};
  tune.budget.evaluations = 4;
  tune.seeds_for = [](const Problem&) {
    return std::vector<Design>{parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg"),
                               parse_design("sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg")};
  };
  const auto outcomes = tuner.run(tune);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_EQ(outcomes[0].measured_now, 4);
  EXPECT_EQ(outcomes[1].measured_now, 0);
  EXPECT_EQ(store.count_measurements(), 4);
}

// A run going on after a stop does not ask the predictor again for problems whose budget the store holds: the
// guesses were most of a resumed grid tune's time (0.17 s a problem, before the first unfinished one). The
// outcomes are the same, nothing is measured, and a seed named since (the table's, the command line's) still is.
TEST(Tuner, AResumedRunAsksNoGuessesForProblemsItHasTuned) {
  const Design guess = parse_design("sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg");
  RandomTuner t("resume.db", 6);
  auto& [dir, store, measurer, strategy, tuner] = t;
  TuneOptions tune;
  tune.problems = {kProblems[0], kProblems[1]};
  tune.budget.evaluations = 4;
  int asked = 0;
  tune.seeds_for = [&](const Problem&) {
    ++asked;
    return std::vector<Design>{guess};
  };
  const auto first = tuner.run(tune);
  EXPECT_EQ(asked, 2);
  asked = 0;
  const auto again = tuner.run(tune);
  EXPECT_EQ(asked, 0);
  ASSERT_EQ(again.size(), 2u);
  for (size_t i = 0; i < again.size(); ++i) {
    EXPECT_EQ(again[i].measured_now, 0);
    EXPECT_EQ(again[i].best_design, first[i].best_design);
    EXPECT_EQ(again[i].evaluations.size(), 4u);
  }
  // A seed the store lacks: measured as before (past the budget), and the guesses with it.
  const Design seed = parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg");
  tune.seed_designs = {seed};
  const auto seeded = tuner.run(tune);
  EXPECT_EQ(asked, 2);
  for (const auto& o : seeded) {
    EXPECT_EQ(o.measured_now, 1);
    EXPECT_TRUE(store.measured(store.gpu_id(measurer.gpu()), o.problem, to_string(seed), TimingMode::kGraph));
  }
  // A problem short of its budget is guessed for as before.
  tune.seed_designs.clear();
  tune.budget.evaluations = 8;
  asked = 0;
  tuner.run(tune);
  EXPECT_EQ(asked, 2);
}

// Each problem's outcome sums where its measurements took their time: the synthetic GPU's pace (--delay-ms) is
// all timed rounds, and each design's compile counts once; and its wall time, of which the waiting for them.
TEST(Tuner, OutcomesSumTheirMeasurementsTimeByPhase) {
  BackendOptions backend;
  backend.delay_ms = 4;
  RandomTuner t("p.db", 5, backend);
  auto& [dir, store, measurer, strategy, tuner] = t;
  TuneOptions tune;
  tune.confirm = false;  // the search's own measurements, counted: no second measurement
  tune.problems = {kProblems[0]};
  tune.budget.evaluations = 6;
  const auto outcomes = tuner.run(tune);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].measured_now, 6);
  EXPECT_NEAR(outcomes[0].seconds.rounds, 6 * 0.004, 1e-12);
  EXPECT_DOUBLE_EQ(outcomes[0].seconds.operands + outcomes[0].seconds.reference + outcomes[0].seconds.check, 0);
  EXPECT_GT(outcomes[0].compile_seconds, 0);
  // The tuner's own clock: it waited at least for the synthetic GPU's pace, and the problem took longer still.
  EXPECT_GE(outcomes[0].waiting_seconds, 6 * 0.004);
  EXPECT_GE(outcomes[0].wall_seconds, outcomes[0].waiting_seconds);
  EXPECT_LT(outcomes[0].wall_seconds, 60);
  // Measured again from the store, nothing is spent.
  const auto again = tuner.run(tune);
  EXPECT_EQ(again[0].measured_now, 0);
  EXPECT_DOUBLE_EQ(again[0].seconds.total() + again[0].compile_seconds, 0);
}

// The first designs again with the width whose waves fill the GPU (TuneOptions::wave_fit): 512x5120 in 128x192
// tiles is 108 tiles, one wave of 132 with 24 SMs idle; 128x160 makes 128. Recorded as "wave-fit", after the
// guesses, within the budget; a design that already fills its waves (128x128: 160 tiles in 2 waves, no width 3%
// cheaper in this space) gets none, and wave_fit 0 asks for none.
TEST(Tuner, GuessesAreMeasuredAgainWithTheirWidthFittedToTheWaves) {
  const Design guess = parse_design("sm90.ws.coop/128x192x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  const Design filled = parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  SpaceSpec spec = small_spec();
  spec.tile_n = {64, 128, 160, 192, 256};
  spec.epilogues = {EpilogueOption::kStaged};
  const Problem problem{{512, 5120, 4096}, Layout::kTN};
  for (int wave_fit : {0, 2}) {
    RandomTuner t("w" + std::to_string(wave_fit) + ".db", 3, {}, spec);
    auto& [dir, store, measurer, strategy, tuner] = t;
    ASSERT_GT(measurer.gpu().sm_count, 0);
    TuneOptions tune;
    tune.confirm = false;  // the search's own measurements, counted: no second measurement
    tune.problems = {problem};
    tune.budget.evaluations = 4;
    tune.wave_fit = wave_fit;
    tune.seeds_for = [&](const Problem&) { return std::vector<Design>{filled, guess}; };
    const auto outcomes = tuner.run(tune);
    ASSERT_EQ(outcomes.size(), 1u);
    const auto rows = store.measurements(store.gpu_id(measurer.gpu()), problem, TimingMode::kGraph);
    std::vector<std::string> fitted;
    for (const auto& r : rows)
      if (r.strategy == "wave-fit") fitted.push_back(r.design);
    if (wave_fit == 0) {
      EXPECT_TRUE(fitted.empty());
    } else {
      ASSERT_EQ(fitted.size(), 1u);
      EXPECT_EQ(fitted[0], "sm90.ws.coop/128x160x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
      EXPECT_EQ(outcomes[0].evaluations[2].design, fitted[0]);  // right after the two guesses
    }
  }
}

// A bf16 problem: the seeds, the guesses and the strategy's designs all run as bf16 designs (the search
// explores tiles; the element type is the problem's), recorded under the bf16 problem only.
TEST(Tuner, Bf16ProblemsAreTunedWithBf16Designs) {
  RandomTuner t("b.db", 5);
  auto& [dir, store, measurer, strategy, tuner] = t;
  TuneOptions tune;
  const Problem bf16{{1024, 1024, 1024}, Layout::kTN, DType::kBF16};
  tune.problems = {bf16};
  tune.budget.evaluations = 6;
  tune.seed_designs = {parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg")};
  tune.seeds_for = [](const Problem&) {
    return std::vector<Design>{parse_design("sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg")};
  };
  const auto outcomes = tuner.run(tune);
  ASSERT_EQ(outcomes.size(), 1u);
  ASSERT_EQ(outcomes[0].evaluations.size(), 6u);
  EXPECT_EQ(outcomes[0].evaluations[0].design, "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg/bf16");
  for (const auto& e : outcomes[0].evaluations) EXPECT_TRUE(e.design.ends_with("/bf16")) << e.design;
  const int64_t gpu = store.gpu_id(measurer.gpu());
  EXPECT_EQ(store.count_measurements(gpu, bf16, TimingMode::kGraph), 6);
  EXPECT_EQ(store.count_measurements(gpu, {bf16.shape, bf16.layout}, TimingMode::kGraph), 0);
  const auto best = store.best_designs();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].problem.dtype, DType::kBF16);
  EXPECT_TRUE(best[0].speedup);  // against the bf16 reference
}

// A stop asked for from outside (TuneOptions::stop, set by SIGINT or SIGTERM) ends the run once the batch in flight
// is recorded: that problem is the last outcome, cut short; a run without the stop goes on from there.
TEST(Tuner, AStopEndsTheRunAfterTheBatchInFlight) {
  RandomTuner t("s.db", 5);
  auto& [dir, store, measurer, strategy, tuner] = t;
  TuneOptions tune;
  tune.problems = {kProblems[0], kProblems[1], kProblems[2]};
  tune.budget.evaluations = 12;
  tune.batch = 4;
  std::atomic<bool> stop{true};
  tune.stop = &stop;
  const auto cut = tuner.run(tune);
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_TRUE(cut[0].cut_short);
  EXPECT_EQ(cut[0].measured_now, 4);
  EXPECT_EQ(store.count_measurements(), 4);
  stop = false;
  const auto rest = tuner.run(tune);
  ASSERT_EQ(rest.size(), 3u);
  EXPECT_EQ(rest[0].measured_now, 8);  // the first 4 came from the database
  for (const auto& o : rest) EXPECT_FALSE(o.cut_short);
  EXPECT_EQ(store.count_measurements(), 36);
}

TEST(Tuner, RecordsEveryMeasurementAndTheBest) {
  TempDir dir;
  std::FILE* progress = std::tmpfile();
  EXPECT_EQ(tune(dir / "t.db", "evo", 24, 1, 0, progress), 3 * 24);
  Store store(dir / "t.db");
  EXPECT_EQ(store.count_measurements(), 3 * 24);
  const auto best = store.best_designs();
  ASSERT_EQ(best.size(), 3u);
  for (const auto& b : best) {
    ASSERT_TRUE(b.speedup);
    EXPECT_GT(*b.speedup, 0.5);
    EXPECT_EQ(b.measurements, 24);
    const auto rows = store.measurements(b.gpu_id, b.problem, TimingMode::kGraph);
    for (const auto& r : rows) {
      EXPECT_EQ(r.strategy, "evo");
      // The reward is the paired log ratio of the row's own rounds, and the best design has the highest.
      ASSERT_TRUE(r.measurement.paired);
      EXPECT_DOUBLE_EQ(r.reward, r.measurement.paired->log_ratio);
      EXPECT_LE(r.reward, b.paired.log_ratio);
    }
  }
  std::rewind(progress);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), progress));
  std::fclose(progress);
  EXPECT_NE(text.find("[3/3] nn 4096,512,512  evals 24/24  best "), std::string::npos) << text;
  EXPECT_NE(text.find("left"), std::string::npos);
  // Rerunning with the same budget measures nothing: everything is in the database.
  EXPECT_EQ(tune(dir / "t.db", "evo", 24, 2), 0);
  // A larger budget measures only the difference.
  EXPECT_EQ(tune(dir / "t.db", "random", 30, 3), 3 * 6);
}

TEST(Tuner, ResumesAfterSigkillWithoutRepeatingAMeasurement) {
  TempDir dir;
  const auto db = dir / "t.db";
  constexpr int kBudget = 40;
  { Store create(db); }
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try { tune(db, "rl", kBudget, 1, 4.0); } catch (...) {}
    ::_exit(0);
  }
  // Kill it in the middle of the second problem, while it writes.
  Store store(db);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (store.count_measurements() < kBudget + 10 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the tuner finished before it could be killed";
  const int64_t before = store.count_measurements();
  ASSERT_GE(before, kBudget + 10);
  ASSERT_LT(before, 3 * kBudget);
  EXPECT_EQ(store.integrity_check(), "ok");

  const int64_t measured = tune(db, "rl", kBudget, 1);
  EXPECT_EQ(measured, 3 * kBudget - before);  // nothing measured twice
  EXPECT_EQ(store.count_measurements(), 3 * kBudget);
  const int64_t gpu = store.gpu_id(SyntheticMeasurer().gpu());
  for (const auto& p : kProblems) EXPECT_EQ(store.count_measurements(gpu, p, TimingMode::kGraph), kBudget);
}

TEST(Tuner, TwoTunersOnOneDatabase) {
  TempDir dir;
  const auto db = dir / "t.db";
  constexpr int kBudget = 30;
  pid_t children[2];
  for (int i = 0; i < 2; ++i) {
    children[i] = ::fork();
    ASSERT_GE(children[i], 0);
    if (children[i] == 0) {
      int code = 0;
      try { tune(db, i == 0 ? "rl" : "random", kBudget, 10 + i, 0.5); } catch (const std::exception& e) {
        std::fprintf(stderr, "tuner %d: %s\n", i, e.what());
        code = 1;
      }
      ::_exit(code);
    }
  }
  for (pid_t c : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(c, &status, 0), c);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  Store store(db);
  EXPECT_EQ(store.integrity_check(), "ok");
  const int64_t gpu = store.gpu_id(SyntheticMeasurer().gpu());
  for (const auto& p : kProblems) {
    const auto rows = store.measurements(gpu, p, TimingMode::kGraph);
    EXPECT_GE(rows.size(), size_t(kBudget));
    EXPECT_LE(rows.size(), size_t(2 * kBudget));
    std::set<std::string> designs;
    for (auto& r : rows) designs.insert(r.design);
    EXPECT_EQ(designs.size(), rows.size());
  }
  // Both runs are complete: a third with the same budget has nothing to measure.
  EXPECT_EQ(tune(db, "evo", kBudget, 3), 0);
}

TEST(Tuner, MeasuresThroughWorkersOnSeveralGpus) {
  TempDir dir;
  Store store(dir / "t.db");
  std::vector<MeasurerPtr> members;
  for (int i = 0; i < 2; ++i) {
    WorkerLaunch launch;
    launch.child = [] {
      BackendOptions o;
      o.simulate_faults = true;
      return serve_worker(o, 0, 1);
    };
    members.push_back(std::make_unique<WorkerMeasurer>(launch));
  }
  PoolMeasurer pool(std::move(members));
  auto strategy = make_random_strategy(4);
  Tuner tuner(store, pool, *strategy, small_spec());
  TuneOptions options;
  options.problems = {kProblems[0], kProblems[2]};
  options.budget.evaluations = 20;
  const auto outcomes = tuner.run(options);
  ASSERT_EQ(outcomes.size(), 2u);
  for (const auto& o : outcomes) {
    EXPECT_EQ(o.evaluations.size(), 20u);
    EXPECT_EQ(o.measured_now, 20);
    EXPECT_GT(o.speedup(), 0);
    for (const auto& e : o.evaluations) EXPECT_EQ(e.status, MeasureStatus::kOk) << e.design;
  }
  EXPECT_EQ(store.count_measurements(), 40);
}

// The reward is paired. On a GPU whose speed drifts between measurements (here 4% faster with each), a ratio of
// the reference timed once up front to a candidate timed later credits the drift to the candidate, as the
// tuner's old reward did ("1.13x" that the harness then measured at 0.97-1.02). The paired reward divides
// times of the same rounds and finds each design's true speed against the reference.
TEST(Tuner, PairedRewardsAreBlindToAGpuThatDrifts) {
  TempDir dir;
  Store store(dir / "drift.db");
  BackendOptions drifting;
  drifting.drift = 0.04;
  SyntheticMeasurer measurer(drifting);
  const Problem problem = kProblems[0];
  const double apart_us = measurer.reference(problem, TimingMode::kGraph).median_us;  // timed once, first
  auto strategy = make_random_strategy(11);
  Tuner tuner(store, measurer, *strategy, small_spec());
  TuneOptions options;
  options.problems = {problem};
  options.budget.evaluations = 30;
  const ProblemOutcome outcome = tuner.run(options).at(0);
  ASSERT_FALSE(outcome.best_design.empty());

  const CostModel& model = measurer.model();
  int credited_to_drift = 0;
  for (const Evaluation& e : outcome.evaluations) {
    if (e.status != MeasureStatus::kOk) continue;
    ASSERT_TRUE(e.paired) << e.design;
    const double truth = std::log(model.reference_us(problem) / model.time_us(parse_design(e.design), problem));
    EXPECT_NEAR(e.reward, truth, 0.01) << e.design;  // the rounds' noise only (0.5% a side)
    EXPECT_DOUBLE_EQ(e.reward, e.paired->log_ratio);
    const double unpaired = std::log(apart_us / e.time_us);
    if (truth < 0 && unpaired > 0.05) ++credited_to_drift;  // a loss an unpaired reward calls a 5% gain
  }
  EXPECT_GT(credited_to_drift, 0) << "the drift was too small to fool an unpaired reward";
  // The best is the highest paired gain; it counts as faster only where its interval clears 1.
  const double truth = model.reference_us(problem) / model.time_us(parse_design(outcome.best_design), problem);
  EXPECT_NEAR(outcome.speedup(), truth, 0.01 * truth);
  EXPECT_EQ(outcome.faster(), outcome.best.low > 0);
  EXPECT_LT(outcome.best.low, outcome.speedup() - 1);
  EXPECT_GT(outcome.best.high, outcome.speedup() - 1);
  // The store holds every row paired, with its interval.
  const auto rows = store.measurements(store.gpu_id(measurer.gpu()), problem, TimingMode::kGraph);
  ASSERT_EQ(rows.size(), outcome.evaluations.size());
  for (const auto& r : rows)
    if (r.measurement.status == MeasureStatus::kOk) EXPECT_EQ(r.measurement.paired->rounds, kSyntheticRounds);
}

// The reference has states of its own (BackendOptions::reference_states: 20% slow in a third of the measurements,
// steady through each, as a cuBLASLt kernel's were from batch to batch on an H200). Paired with it in a slow
// measurement, a design measures a gain it does not have, and the highest gain of a search is often such a one.
// Once a problem's search ends, its best design is measured again and the weaker of the two stands: the gains the
// tuner keeps are then true ones, the rows it confirmed say so, and the outcome's best is the store's.
TEST(Tuner, AClaimedGainIsMeasuredAgainAndTheWeakerStands) {
  std::vector<Problem> problems;
  for (int64_t m : {256, 512, 1024, 2048})
    for (int64_t n : {1024, 4096}) problems.push_back({{m, n, 2048}, Layout::kTN});
  struct Run {
    int claims = 0, inflated = 0, confirmations = 0;
  };
  auto run = [&](bool confirm) {
    BackendOptions states;
    states.reference_states = 0.2;
    RandomTuner t(confirm ? "confirm.db" : "once.db", 5, states);
    Store& store = t.store;
    SyntheticMeasurer& measurer = t.measurer;
    TuneOptions options;
    options.problems = problems;
    options.budget.evaluations = 16;
    options.confirm = confirm;
    Run r;
    const int64_t gpu = store.gpu_id(measurer.gpu());
    for (const ProblemOutcome& o : t.tuner.run(options)) {
      EXPECT_LE(o.confirmations, confirm ? TuneOptions::kMaxConfirmations : 0);
      EXPECT_EQ(int(o.evaluations.size()), 16) << "a second measurement is no evaluation";
      r.confirmations += o.confirmations;
      if (!o.faster()) continue;
      ++r.claims;
      const CostModel& model = measurer.model();
      const double truth = model.reference_us(o.problem) / model.time_us(parse_design(o.best_design), o.problem);
      if (o.speedup() > 1.08 * truth) ++r.inflated;  // the reference's slow state taken for the design's gain
      const auto best = store.best(gpu, o.problem, TimingMode::kGraph);
      const auto row = store.find(gpu, o.problem, o.best_design, TimingMode::kGraph);
      EXPECT_TRUE(best && row) << o.problem.shape.to_string();
      if (!best || !row) continue;
      EXPECT_EQ(best->design, o.best_design);
      EXPECT_DOUBLE_EQ(best->paired.log_ratio, o.best.log_ratio);
      // Confirmed, unless the confirmations ran out (each best before it fell back).
      if (!confirm || o.confirmations < TuneOptions::kMaxConfirmations)
        EXPECT_EQ(row->strategy.ends_with(Store::kConfirmedSuffix), confirm) << row->strategy;
    }
    return r;
  };
  const Run once = run(false), twice = run(true);
  EXPECT_GT(once.inflated, 0) << "the reference's states fooled no single measurement: the test shows nothing";
  EXPECT_LT(twice.inflated, once.inflated);
  EXPECT_GT(twice.confirmations, 0);
  std::printf("[ confirm ] claims %d, inflated %d without a second measurement; claims %d, inflated %d with %d\n",
              once.claims, once.inflated, twice.claims, twice.inflated, twice.confirmations);
}

// A backend that times a candidate without the reference beside it is refused: nothing unpaired is learned.
TEST(Tuner, AnUnpairedMeasurementIsRefused) {
  class Unpaired : public SyntheticMeasurer {
   public:
    Measurement measure(const Design& d, const Problem& p, TimingMode mode) override {
      Measurement m = SyntheticMeasurer::measure(d, p, mode);
      m.paired.reset();
      return m;
    }
  };
  TempDir dir;
  Store store(dir / "unpaired.db");
  Unpaired measurer;
  auto strategy = make_random_strategy(3);
  Tuner tuner(store, measurer, *strategy, small_spec());
  TuneOptions options;
  options.problems = {kProblems[0]};
  options.budget.evaluations = 4;
  try {
    tuner.run(options);
    FAIL() << "an unpaired time was learned from";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("paired"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store.count_measurements(), 0);
}

// Independent problems: each problem's candidates come from its own strategy, seeded from the problem, so
// tuning the problems in another order records the same measurements.
TEST(Tuner, IndependentProblemsRecordTheSameInAnyOrder) {
  TempDir dir;
  DesignSpace space(small_spec(), Layout::kTN);
  const Policy start(space, RlOptions{}, 5);
  for (const std::string name : {"rl", "evo"}) {
    auto factory = [&](uint64_t seed) -> StrategyFactory {
      return [&, seed](const Problem& p) {
        return name == "rl" ? make_rl_strategy_from(start, problem_seed(seed, p))
                            : make_evo_strategy(problem_seed(seed, p));
      };
    };
    auto run = [&](const std::string& db, std::vector<Problem> problems, uint64_t seed = 5) {
      Store store(dir / db);
      SyntheticMeasurer measurer;
      Tuner tuner(store, measurer, factory(seed), small_spec());
      TuneOptions options;
      options.problems = problems;
      options.budget.evaluations = 20;
      options.batch = 4;
      for (const auto& o : tuner.run(options)) EXPECT_EQ(o.evaluations.size(), 20u);
      return testing::recorded(store, measurer.gpu(), kProblems);
    };
    std::vector<Problem> reversed(kProblems.rbegin(), kProblems.rend());
    const auto in_order = run(name + "-in-order.db", kProblems);
    EXPECT_EQ(in_order.size(), 3u * 20u);  // the measurements, each with its own reference time
    EXPECT_EQ(in_order, run(name + "-reversed.db", reversed)) << name;
    // The seed is what a problem's candidates depend on: another seed, other designs.
    EXPECT_NE(in_order, run(name + "-other-seed.db", kProblems, 6)) << name;
  }
  EXPECT_NE(problem_seed(5, kProblems[0]), problem_seed(5, kProblems[1]));
  EXPECT_NE(problem_seed(5, {{1024, 1024, 1024}, Layout::kTN}), problem_seed(5, {{1024, 1024, 1024}, Layout::kNN}));
}

TEST(Tuner, MinutesBudgetStopsInTime) {
  BackendOptions slow;
  slow.delay_ms = 20;
  RandomTuner t("t.db", 1, slow);
  TuneOptions options;
  options.problems = {kProblems[0], kProblems[1]};
  options.budget = Budget::parse("0.02min");  // 1.2 s for both problems
  const auto start = std::chrono::steady_clock::now();
  const auto outcomes = t.tuner.run(options);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 3.0);
  ASSERT_EQ(outcomes.size(), 2u);
  for (const auto& o : outcomes) EXPECT_GT(o.evaluations.size(), 5u);
}

}  // namespace
}  // namespace rlgemm::search
