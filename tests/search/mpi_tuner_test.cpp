// `mpirun -np 3 rlgemm tune --mpi` on the synthetic backend: the same database as one process given the same
// seeds; a rank killed in the middle of the run, and the same command again completes it without measuring
// anything twice. Without MPI in the build, --mpi is refused with exit code 2.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <thread>

#include "search/search_test_util.h"
#include "search/synthetic_measurer.h"
#include "support/cli.h"

namespace rlgemm::search {
namespace {

using rlgemm::testing::read_text;
using rlgemm::testing::rlgemm_binary;
using rlgemm::testing::run_command;
using testing::recorded;
using testing::TempDir;

const std::vector<Shape> kShapes = {{1024, 1024, 1024}, {256, 4096, 2048}, {4096, 512, 512}};

std::vector<Problem> problems() {
  std::vector<Problem> out;
  for (Layout layout : {Layout::kTN, Layout::kNN})
    for (const Shape& s : kShapes) out.push_back({s, layout});
  return out;
}

std::filesystem::path write_shapes(const TempDir& dir) {
  const auto path = dir / "shapes.csv";
  std::ofstream out(path);
  out << "M,N,K\n";
  for (const Shape& s : kShapes) out << s.m << "," << s.n << "," << s.k << "\n";
  return path;
}

#ifdef RLGEMM_HAVE_MPI

class MpiTune : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system((std::string(RLGEMM_MPIEXEC) + " --version > /dev/null 2>&1").c_str()) != 0)
      GTEST_SKIP() << "no mpirun (" << RLGEMM_MPIEXEC << ")";
    // CI runs as root; shared memory between ranks without ptrace permissions (containers).
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
    ::setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 1);
  }
  static std::string mpirun(int ranks) {
    return std::string(RLGEMM_MPIEXEC) + " -np " + std::to_string(ranks) + " --oversubscribe " + rlgemm_binary();
  }
  // The tune arguments both runs share: every shape in both layouts, the rl strategy, one seed.
  std::string tune_args(const TempDir& dir, const std::string& db, int budget, double delay_ms) const {
    return " tune --shapes " + write_shapes(dir).string() + " --layout both --budget " + std::to_string(budget) +
           " --backend synthetic --round 4 --strategy rl --seed 7 --delay-ms " + std::to_string(delay_ms) + " --db " +
           (dir / db).string();
  }
};

// Sum of the measured_now column (the eighth) of tune's CSV.
int measured_now(const std::string& output) {
  std::istringstream in(output);
  int total = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("tn,", 0) != 0 && line.rfind("nn,", 0) != 0) continue;
    std::istringstream row(line);
    std::string cell;
    for (int column = 0; column < 8 && std::getline(row, cell, ','); ++column) {}  // measured_now
    total += std::stoi(cell);
  }
  return total;
}

TEST_F(MpiTune, ThreeRanksRecordWhatOneProcessRecords) {
  TempDir dir;
  const auto one = run_command(rlgemm_binary() + tune_args(dir, "one.db", 12, 0) + " --independent-shapes --policy " +
                               (dir / "one.policy").string());
  ASSERT_EQ(one.code, 0) << one.output;
  const auto three =
      run_command(mpirun(3) + tune_args(dir, "mpi.db", 12, 0) + " --mpi --policy " + (dir / "mpi.policy").string());
  ASSERT_EQ(three.code, 0) << three.output;
  // Rank 0 folded what each shape taught into the policy file.
  EXPECT_NE(read_text(dir / "mpi.policy").find("rlgemm-policy 1"), std::string::npos);
  // Every rank tuned a shape; rank 0 printed the results, once.
  EXPECT_NE(three.output.find("(rank 1)"), std::string::npos) << three.output;
  EXPECT_NE(three.output.find("(rank 2)"), std::string::npos) << three.output;
  EXPECT_EQ(measured_now(three.output), 6 * 12) << three.output;

  const GpuIdentity gpu = SyntheticMeasurer().gpu();
  Store single(dir / "one.db"), ranks(dir / "mpi.db");
  const auto expected = recorded(single, gpu, problems());
  ASSERT_EQ(expected.size(), 6u * 12);
  EXPECT_EQ(recorded(ranks, gpu, problems()), expected);
  EXPECT_EQ(ranks.count_measurements(), single.count_measurements());
}

// The processes below `root` (children, grandchildren, ...).
std::vector<pid_t> descendants(pid_t root) {
  std::map<pid_t, pid_t> parent;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(text.substr(close + 2));
    char state;
    pid_t ppid = 0;
    rest >> state >> ppid;
    parent[pid_t(std::stol(name))] = ppid;
  }
  std::vector<pid_t> out;
  for (auto [pid, ppid] : parent) {
    for (pid_t up = ppid; up > 1; up = parent.count(up) ? parent[up] : 0) {
      if (up == root) {
        out.push_back(pid);
        break;
      }
    }
  }
  return out;
}

// The tuning process of MPI rank `rank` below `root` (not its measuring workers, which share its
// environment): its command line says "tune".
pid_t find_rank(pid_t root, int rank) {
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (pid_t pid : descendants(root)) {
    const std::string proc = "/proc/" + std::to_string(pid);
    const std::string environ = read_text(proc + "/environ");
    const std::string cmdline = read_text(proc + "/cmdline");
    if (cmdline.find(std::string("\0tune\0", 6)) == std::string::npos) continue;
    size_t at = 0;
    for (size_t end; (end = environ.find('\0', at)) != std::string::npos; at = end + 1)
      if (environ.compare(at, end - at, want) == 0) return pid;
  }
  return -1;
}

TEST_F(MpiTune, ARankKilledMidRunAndTheRerunCompletes) {
  for (int victim : {2, 0}) {
    SCOPED_TRACE("killing rank " + std::to_string(victim));
    TempDir dir;
    constexpr int kBudget = 24;
    const auto db = dir / "t.db";
    { Store create(db); }
    const std::string command = mpirun(3) + tune_args(dir, "t.db", kBudget, 40) + " --mpi";
    const pid_t launcher = ::fork();
    ASSERT_GE(launcher, 0);
    if (launcher == 0) {
      const std::string exec = "exec " + command + " > " + (dir / "first.log").string() + " 2>&1";
      ::execl("/bin/sh", "sh", "-c", exec.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Kill the rank while the run is about a third through. The wait ends as soon as it is; its limit is long,
    // since on a busy machine (the whole suite in parallel on two cores) the ranks' start alone took 30 s.
    Store store(db);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    while (store.count_measurements() < 2 * kBudget && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const pid_t rank = find_rank(launcher, victim);
    ASSERT_GT(rank, 0) << "rank " << victim << " not found below mpirun " << launcher;
    ASSERT_EQ(::kill(rank, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(launcher, &status, 0), launcher);
    EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "mpirun ended well without rank " << victim;
    const int64_t before = store.count_measurements();
    ASSERT_GE(before, 2 * kBudget);
    ASSERT_LT(before, 6 * kBudget) << "the run finished before the rank was killed";
    EXPECT_EQ(store.integrity_check(), "ok");

    // The same command again: it measures only what the first run did not record.
    const auto rerun = run_command(command);
    ASSERT_EQ(rerun.code, 0) << rerun.output;
    EXPECT_EQ(measured_now(rerun.output), 6 * kBudget - before) << rerun.output;
    EXPECT_EQ(store.count_measurements(), 6 * kBudget);
    const int64_t gpu = store.gpu_id(SyntheticMeasurer().gpu());
    for (const auto& p : problems()) EXPECT_EQ(store.count_measurements(gpu, p, TimingMode::kGraph), kBudget);
  }
}

TEST_F(MpiTune, BadInputEndsEveryRankWithExitCode2) {
  TempDir dir;
  const std::string tune = mpirun(2) + " tune --mpi --backend synthetic --shapes " + write_shapes(dir).string() + " --budget 4 --db " +
                           (dir / "t.db").string();
  const auto strategy = run_command(tune + " --strategy bogus");
  EXPECT_EQ(strategy.code, 2) << strategy.output;
  EXPECT_NE(strategy.output.find("unknown strategy 'bogus'"), std::string::npos) << strategy.output;
  // Two ranks on one machine must not share GPUs: each takes a count of its own.
  const auto listed = run_command(tune + " --gpus 0,1");
  EXPECT_EQ(listed.code, 2) << listed.output;
  EXPECT_NE(listed.output.find("give each rank a count of GPUs"), std::string::npos) << listed.output;
}

#else

TEST(MpiTune, RefusedWithoutMpiInTheBuild) {
  TempDir dir;
  const auto r = rlgemm::testing::run_rlgemm("tune --shapes " + write_shapes(dir).string() +
                                             " --budget 4 --mpi --db " + (dir / "t.db").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("built without MPI"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "t.db"));
}

#endif

}  // namespace
}  // namespace rlgemm::search
