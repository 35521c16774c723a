// Isolated measuring: a worker that segfaults, hangs or computes wrong results costs one candidate; the
// worker restarts and nothing else is lost.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "rlgemm/error.h"
#include "search/synthetic_measurer.h"
#include "search/worker.h"

namespace rlgemm::search {
namespace {

WorkerLaunch forked_synthetic() {
  WorkerLaunch launch;
  launch.child = [] {
    BackendOptions o;
    o.simulate_faults = true;
    return serve_worker(o, 0, 1);
  };
  return launch;
}

std::unique_ptr<WorkerMeasurer> make_worker(double timeout_s) {
  WorkerLimits limits;
  limits.request_timeout_s = timeout_s;
  limits.startup_timeout_s = 20;
  return std::make_unique<WorkerMeasurer>(forked_synthetic(), limits);
}

const Problem kProblem{{1024, 512, 2048}, Layout::kTN};
const char* kGood = "sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma";

TEST(Worker, AnswersLikeTheBackendInProcess) {
  auto worker = make_worker(20);
  SyntheticMeasurer local;
  EXPECT_EQ(worker->gpu(), local.gpu());
  const Measurement m = worker->measure(parse_design(kGood), kProblem, TimingMode::kOffline);
  const Measurement l = local.measure(parse_design(kGood), kProblem, TimingMode::kOffline);
  EXPECT_EQ(m.status, MeasureStatus::kOk) << m.error;
  EXPECT_DOUBLE_EQ(m.timing.median_us, l.timing.median_us);
  EXPECT_EQ(m.source_hash, l.source_hash);
  // The paired comparison crosses the protocol whole.
  ASSERT_TRUE(m.paired && l.paired);
  EXPECT_DOUBLE_EQ(m.paired->reference_us, l.paired->reference_us);
  EXPECT_DOUBLE_EQ(m.paired->log_ratio, l.paired->log_ratio);
  EXPECT_DOUBLE_EQ(m.paired->low, l.paired->low);
  EXPECT_DOUBLE_EQ(m.paired->high, l.paired->high);
  EXPECT_EQ(m.paired->rounds, l.paired->rounds);
  EXPECT_EQ(measurement_from_json(to_json(Measurement{})).paired, std::nullopt);
  // So does where its time went.
  Measurement timed;
  timed.seconds = {0.25, 1.5, 0.125, 0.75, 2.0, 0.0625};
  const PhaseSeconds back = measurement_from_json(to_json(timed)).seconds;
  EXPECT_DOUBLE_EQ(back.operands, 0.25);
  EXPECT_DOUBLE_EQ(back.reference, 1.5);
  EXPECT_DOUBLE_EQ(back.check, 0.125);
  EXPECT_DOUBLE_EQ(back.rounds, 0.75);
  EXPECT_DOUBLE_EQ(back.build, 2.0);
  EXPECT_DOUBLE_EQ(back.load, 0.0625);
  EXPECT_DOUBLE_EQ(back.total(), 4.6875);
  EXPECT_NEAR(worker->reference(kProblem, TimingMode::kServer).median_us,
              local.reference(kProblem, TimingMode::kServer).median_us, 1e-9);
  // A design the backend rejects is a failed candidate, not a broken worker.
  const Measurement bad = worker->measure(parse_design("sm90.ws.coop/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma"),
                                          kProblem, TimingMode::kOffline);
  EXPECT_EQ(bad.status, MeasureStatus::kFailed);
  EXPECT_NE(bad.error.find("cooperative"), std::string::npos) << bad.error;
  EXPECT_EQ(worker->restarts(), 0);
}

// Whether process `pid` has ended (gone, or a zombie nobody has reaped yet).
bool ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t close = line.rfind(')');
  return close == std::string::npos || (close + 2 < line.size() && line[close + 2] == 'Z');
}

// A worker has a process group of its own, so that Ctrl-C (or timeout(1)'s signal to the group) asks the tuner to
// stop after the batch in flight and does not kill the measurement; and it outlives no tuner: where the tuner is
// killed, the worker exits, even while a hung candidate holds it.
TEST(Worker, HasAGroupOfItsOwnAndExitsWhenItsTunerIsKilledEvenInAHungCandidate) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t tuner = ::fork();
  ASSERT_GE(tuner, 0);
  if (tuner == 0) {
    ::close(fds[0]);
    auto worker = make_worker(600);
    worker->gpu();  // started and ready
    const pid_t pid = worker->pid();
    if (::write(fds[1], &pid, sizeof pid) != sizeof pid) ::_exit(2);
    worker->measure(parse_design("test.hang"), kProblem, TimingMode::kOffline);  // never answers
    ::_exit(0);
  }
  ::close(fds[1]);
  pid_t worker = 0;
  ASSERT_EQ(::read(fds[0], &worker, sizeof worker), ssize_t(sizeof worker));
  ::close(fds[0]);
  EXPECT_EQ(::getpgid(worker), worker);
  EXPECT_NE(::getpgid(worker), ::getpgid(tuner));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the hung request is in flight
  EXPECT_FALSE(ended(worker));
  ::kill(tuner, SIGKILL);
  ::waitpid(tuner, nullptr, 0);
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gone = ended(worker);
  }
  EXPECT_TRUE(gone) << "worker " << worker << " outlived its tuner";
  if (!gone) ::kill(worker, SIGKILL);
}

TEST(Worker, FaultHangAndWrongCostOneCandidateEach) {
  auto worker = make_worker(1.5);
  const Design good = parse_design(kGood);
  ASSERT_EQ(worker->measure(good, kProblem, TimingMode::kOffline).status, MeasureStatus::kOk);
  const pid_t first = worker->pid();

  const Measurement fault = worker->measure(parse_design("test.fault"), kProblem, TimingMode::kOffline);
  EXPECT_EQ(fault.status, MeasureStatus::kCrashed);
  EXPECT_NE(fault.error.find("signal 11"), std::string::npos) << fault.error;
  EXPECT_EQ(worker->measure(good, kProblem, TimingMode::kOffline).status, MeasureStatus::kOk);
  EXPECT_EQ(worker->restarts(), 1);
  EXPECT_NE(worker->pid(), first);

  const auto start = std::chrono::steady_clock::now();
  const Measurement hang = worker->measure(parse_design("test.hang"), kProblem, TimingMode::kOffline);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(hang.status, MeasureStatus::kTimeout);
  EXPECT_NE(hang.error.find("watchdog"), std::string::npos) << hang.error;
  EXPECT_GE(waited, 1.4);
  EXPECT_LT(waited, 10);
  EXPECT_EQ(worker->measure(good, kProblem, TimingMode::kOffline).status, MeasureStatus::kOk);
  EXPECT_EQ(worker->restarts(), 2);

  const Measurement wrong = worker->measure(parse_design("test.wrong"), kProblem, TimingMode::kOffline);
  EXPECT_EQ(wrong.status, MeasureStatus::kWrong);
  EXPECT_EQ(worker->restarts(), 2);  // a wrong result does not take the worker down
  EXPECT_EQ(worker->measure(good, kProblem, TimingMode::kOffline).status, MeasureStatus::kOk);
}

// A batch goes to the worker as a "build" request (its kernels compiled at once), then a measurement per design:
// the results are the backend's own, and the batch's build time arrives with the first.
TEST(Worker, BuildsABatchAheadThenMeasuresEachDesign) {
  auto worker = make_worker(20);
  SyntheticMeasurer local;
  const std::vector<Design> designs = {parse_design(kGood),
                                       parse_design("sm90.ws.coop/128x128x64/s6/c1x1/raster_m.g8/splitk1/epi_tma"),
                                       parse_design("sm80/64x64x64/w32x32/s3/swz/raster_m.g8/splitk1/epi_reg")};
  // What the batch's compiles would take at once: the longest of them (6 stages), for kernels not built yet.
  EXPECT_DOUBLE_EQ(local.build_ahead(designs, kProblem), 0.35 + 0.05 * 6);
  EXPECT_EQ(local.builds_asked(), 3);
  EXPECT_EQ(local.compilations(), 0);  // an estimate: nothing counts as compiled before it is measured
  const auto results = worker->measure_batch(designs, kProblem, TimingMode::kGraph);
  ASSERT_EQ(results.size(), designs.size());
  for (size_t i = 0; i < designs.size(); ++i) {
    const Measurement l = local.measure(designs[i], kProblem, TimingMode::kGraph);
    EXPECT_EQ(results[i].status, MeasureStatus::kOk) << results[i].error;
    EXPECT_DOUBLE_EQ(results[i].timing.median_us, l.timing.median_us) << i;
    EXPECT_DOUBLE_EQ(results[i].compile_seconds, l.compile_seconds) << i;  // each design's own, at its first
  }
  EXPECT_DOUBLE_EQ(results[0].seconds.build, 0.35 + 0.05 * 6);  // the worker's account, through the protocol
  EXPECT_DOUBLE_EQ(results[1].seconds.build + results[2].seconds.build, 0);
  // Built and measured already: building them again costs nothing.
  EXPECT_DOUBLE_EQ(worker->build_ahead(designs, kProblem), 0);
  EXPECT_DOUBLE_EQ(local.build_ahead(designs, kProblem), 0);
  // A prefetch (the next problem's round, built in the background) is answered at once; measuring follows.
  const Problem next{{512, 1024, 4096}, Layout::kNN};
  worker->prefetch(designs, next);
  const auto later = worker->measure_batch(designs, next, TimingMode::kGraph);
  ASSERT_EQ(later.size(), designs.size());
  for (const Measurement& m : later) EXPECT_EQ(m.status, MeasureStatus::kOk) << m.error;
  // Each design is still measured alone: one that crashes its worker costs itself only.
  const auto faulty = worker->measure_batch({parse_design("test.fault"), parse_design(kGood)}, kProblem,
                                            TimingMode::kGraph);
  ASSERT_EQ(faulty.size(), 2u);
  EXPECT_EQ(faulty[0].status, MeasureStatus::kCrashed);
  EXPECT_EQ(faulty[1].status, MeasureStatus::kOk) << faulty[1].error;
}

TEST(Worker, PoolOfWorkersKeepsOrderAndSurvivesFaults) {
  std::vector<MeasurerPtr> members;
  members.push_back(make_worker(1.5));
  members.push_back(make_worker(1.5));
  PoolMeasurer pool(std::move(members));
  EXPECT_EQ(pool.parallelism(), 2);
  std::vector<Design> designs = {parse_design(kGood), parse_design("test.fault"),
                                 parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma"),
                                 parse_design("test.wrong"), parse_design("test.hang"), parse_design(kGood)};
  const auto results = pool.measure_batch(designs, kProblem, TimingMode::kOffline);
  ASSERT_EQ(results.size(), designs.size());
  EXPECT_EQ(results[0].status, MeasureStatus::kOk);
  EXPECT_EQ(results[1].status, MeasureStatus::kCrashed);
  EXPECT_EQ(results[2].status, MeasureStatus::kOk);
  EXPECT_EQ(results[3].status, MeasureStatus::kWrong);
  EXPECT_EQ(results[4].status, MeasureStatus::kTimeout);
  EXPECT_EQ(results[5].status, MeasureStatus::kOk);
  EXPECT_DOUBLE_EQ(results[0].timing.median_us, results[5].timing.median_us);
  // Each member built its share (designs 0, 2, 4 and 1, 3, 5) at once, before measuring it.
  EXPECT_DOUBLE_EQ(results[0].seconds.build, 0.35 + 0.05 * 4);
}

TEST(Worker, ABackendThatCannotStartIsReportedWithItsReason) {
  WorkerLaunch launch;
  launch.child = [] {
    BackendOptions o;
    o.backend = "gpu";
    return serve_worker(o, 0, 1);
  };
  WorkerMeasurer worker(launch);
  try {
    worker.gpu();
    FAIL() << "a missing backend started";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not available in this build"), std::string::npos) << e.what();
  }
}

TEST(Worker, GpuSelection) {
  BackendOptions synthetic;
  EXPECT_EQ(parse_gpu_selection("all", synthetic), std::vector<int>{0});
  EXPECT_EQ(parse_gpu_selection("2", synthetic), (std::vector<int>{0, 1}));
  EXPECT_EQ(parse_gpu_selection("0,3", synthetic), (std::vector<int>{0, 3}));
  EXPECT_THROW(parse_gpu_selection("0,0", synthetic), Error);
  EXPECT_THROW(parse_gpu_selection("some", synthetic), Error);
  EXPECT_THROW(parse_gpu_selection("0", synthetic), Error);
}

TEST(Worker, TheRlgemmWorkerSubcommandServesTheProtocol) {
  const std::filesystem::path exe = std::filesystem::path(RLGEMM_BINARY_DIR) / "rlgemm";
  if (!std::filesystem::exists(exe)) GTEST_SKIP() << "the rlgemm executable is not built in " << RLGEMM_BINARY_DIR;
  MeasurerSetup setup;
  setup.worker_exe = exe.string();
  setup.timeout_s = 2;
  auto measurer = make_measurer(setup);
  EXPECT_EQ(measurer->measure(parse_design(kGood), kProblem, TimingMode::kOffline).status, MeasureStatus::kOk);
  EXPECT_EQ(measurer->measure(parse_design("test.fault"), kProblem, TimingMode::kOffline).status,
            MeasureStatus::kCrashed);
  EXPECT_EQ(measurer->measure(parse_design(kGood), kProblem, TimingMode::kOffline).status, MeasureStatus::kOk);
}

}  // namespace
}  // namespace rlgemm::search
