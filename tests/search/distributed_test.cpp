// Tuning over several lanes at once (in this process; over MPI ranks in mpi_tuner_test): the same
// measurements as one process, a slow lane given fewer problems, a failing lane's problem finished by another,
// lanes on different GPUs refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "rlgemm/error.h"
#include "search/distributed.h"
#include "search/rl_policy.h"
#include "search/search_test_util.h"
#include "search/synthetic_measurer.h"
#include "search/tuner.h"

namespace rlgemm::search {
namespace {

using testing::recorded;
using testing::small_spec;
using testing::TempDir;

const std::vector<Problem> kProblems = {{{1024, 1024, 1024}, Layout::kTN}, {{256, 4096, 2048}, Layout::kTN},
                                        {{4096, 512, 512}, Layout::kNN},   {{2048, 2048, 512}, Layout::kTN},
                                        {{128, 8192, 1024}, Layout::kTN},  {{512, 1024, 4096}, Layout::kNN}};
constexpr int kBudget = 16;

struct Plan {
  DesignSpace space{small_spec(), Layout::kTN};
  Policy start{space, RlOptions{}, 9};
  StrategyFactory factory = [this](const Problem& p) { return make_rl_strategy_from(start, problem_seed(9, p)); };
  TuneOptions options() const {
    TuneOptions o;
    o.confirm = false;  // the lanes' measurements, counted: no second measurement
    o.problems = kProblems;
    o.budget.evaluations = kBudget;
    o.batch = 4;
    return o;
  }
};

// What one process records, tuning the problems in turn.
std::vector<std::string> one_process(const std::filesystem::path& db, Plan& plan) {
  Store store(db);
  SyntheticMeasurer measurer;
  Tuner tuner(store, measurer, plan.factory, small_spec());
  tuner.run(plan.options());
  return recorded(store, measurer.gpu(), kProblems);
}

// Gives up its GPU after `calls` measurements, as a lane whose device is lost.
class LosesItsGpu : public SyntheticMeasurer {
 public:
  explicit LosesItsGpu(int calls) : calls_(calls) {}
  Measurement measure(const Design& design, const Problem& problem, TimingMode mode) override {
    if (calls_-- <= 0) throw Error(ErrorKind::kNoDevice, "the GPU fell off the bus");
    return SyntheticMeasurer::measure(design, problem, mode);
  }

 private:
  int calls_;
};

TEST(Distributed, LanesRecordWhatOneProcessRecordsAndASlowLaneTunesLess) {
  TempDir dir;
  Plan plan;
  const auto expected = one_process(dir / "one.db", plan);
  ASSERT_EQ(expected.size(), kProblems.size() * kBudget);

  BackendOptions slow;
  slow.delay_ms = 15;
  SyntheticMeasurer fast1, fast2, slow_lane(slow);
  Store store(dir / "lanes.db");
  std::vector<ProblemOutcome> outcomes;
  {
    LocalLanes lanes({&fast1, &slow_lane, &fast2});
    std::FILE* progress = std::tmpfile();
    TuneOptions options = plan.options();
    options.progress = progress;
    outcomes = tune_distributed(store, lanes, plan.factory, small_spec(), options);
    std::rewind(progress);
    std::string text(8192, '\0');
    text.resize(std::fread(text.data(), 1, text.size(), progress));
    std::fclose(progress);
    EXPECT_NE(text.find("[6/6] "), std::string::npos) << text;
    EXPECT_NE(text.find("(lane 1)"), std::string::npos) << text;
  }
  ASSERT_EQ(outcomes.size(), kProblems.size());
  for (size_t i = 0; i < outcomes.size(); ++i) {
    EXPECT_EQ(outcomes[i].problem, kProblems[i]);  // in the order of the list, whoever finished first
    EXPECT_EQ(outcomes[i].evaluations.size(), size_t(kBudget));
    EXPECT_EQ(outcomes[i].measured_now, kBudget);
  }
  EXPECT_EQ(recorded(store, fast1.gpu(), kProblems), expected);
  // Every lane started a problem; the slow one finished fewer than the fast ones.
  EXPECT_GE(slow_lane.measure_calls(), kBudget);
  EXPECT_LT(slow_lane.measure_calls(), fast1.measure_calls() + fast2.measure_calls());
  EXPECT_EQ(fast1.measure_calls() + fast2.measure_calls() + slow_lane.measure_calls(),
            int64_t(kProblems.size() * kBudget));
}

TEST(Distributed, AFailingLaneHandsItsBatchToAnother) {
  TempDir dir;
  Plan plan;
  const auto expected = one_process(dir / "one.db", plan);
  LosesItsGpu dying(kBudget + 2);  // fails in the middle of its second problem's first batch
  SyntheticMeasurer healthy;
  Store store(dir / "lanes.db");
  std::FILE* progress = std::tmpfile();
  {
    LocalLanes lanes({&dying, &healthy});
    TuneOptions options = plan.options();
    options.progress = progress;
    const auto outcomes = tune_distributed(store, lanes, plan.factory, small_spec(), options);
    for (const auto& o : outcomes) EXPECT_EQ(o.evaluations.size(), size_t(kBudget));
  }
  std::rewind(progress);
  std::string text(8192, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), progress));
  std::fclose(progress);
  EXPECT_NE(text.find("lane 0 is retired (the GPU fell off the bus)"), std::string::npos) << text;
  // The retired lane's batch was measured again elsewhere: nothing lost, nothing different.
  EXPECT_EQ(recorded(store, healthy.gpu(), kProblems), expected);
}

TEST(Distributed, NoLaneLeftEndsTheRunAndTheRerunCompletes) {
  TempDir dir;
  Plan plan;
  const auto expected = one_process(dir / "one.db", plan);
  {
    Store store(dir / "lanes.db");
    LosesItsGpu dying(kBudget * 2 + 3);
    LocalLanes lanes({&dying});
    try {
      tune_distributed(store, lanes, plan.factory, small_spec(), plan.options());
      FAIL() << "the run finished without a lane";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("run the same command again"), std::string::npos) << e.what();
    }
    EXPECT_EQ(store.count_measurements(), kBudget * 2);  // what came back was recorded as it came
  }
  Store store(dir / "lanes.db");
  SyntheticMeasurer healthy;
  LocalLanes lanes({&healthy});
  const auto outcomes = tune_distributed(store, lanes, plan.factory, small_spec(), plan.options());
  int measured = 0;
  for (const auto& o : outcomes) measured += o.measured_now;
  EXPECT_EQ(measured, int(kProblems.size()) * kBudget - kBudget * 2);  // nothing measured twice
  EXPECT_EQ(store.count_measurements(), int64_t(kProblems.size()) * kBudget);
}

TEST(Distributed, RefusesLanesOnDifferentGpus) {
  TempDir dir;
  Plan plan;
  SyntheticGpu other;
  other.identity.name = "synthetic A100 (cost model)";
  other.identity.cc_major = 8;
  SyntheticMeasurer h100, a100(BackendOptions{}, CostModel(other));
  Store store(dir / "t.db");
  LocalLanes lanes({&h100, &a100});
  try {
    tune_distributed(store, lanes, plan.factory, small_spec(), plan.options());
    FAIL() << "lanes on two kinds of GPU were accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("one tuning run tunes one kind of GPU"), std::string::npos) << e.what();
  }
  EXPECT_EQ(store.count_measurements(), 0);
}

TEST(Distributed, ServesJobsInTheWorkerProtocolsForms) {
  SyntheticMeasurer measurer;
  nlohmann::json job = {{"op", "measure"}, {"m", 1024}, {"n", 1024}, {"k", 1024}, {"layout", "tn"},
                        {"mode", "offline"},
                        {"designs", {"sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma", "test.wrong"}}};
  const auto answer = serve_job(measurer, job);
  ASSERT_TRUE(answer.value("ok", false)) << answer.dump();
  ASSERT_EQ(answer.at("measurements").size(), 2u);
  EXPECT_EQ(answer["measurements"][0]["status"], "ok");
  EXPECT_EQ(answer["measurements"][1]["status"], "failed");  // fault designs act out only in a worker
  job["designs"] = {"not a design"};
  const auto bad = serve_job(measurer, job);
  EXPECT_FALSE(bad.value("ok", true));
  EXPECT_EQ(bad.value("kind", 0), int(ErrorKind::kInvalidInput));
}

}  // namespace
}  // namespace rlgemm::search
