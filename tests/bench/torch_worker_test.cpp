// The torch worker's C++ side: finding and starting the worker, the handshake, answers, and clear errors
// when PyTorch is missing or the worker dies or hangs. Stand-in worker scripts play the Python side where
// PyTorch is not needed to exercise the protocol.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "bench/torch_worker.h"
#include "rlgemm/error.h"
#include "support/cli.h"

namespace {

using namespace rlgemm;
using namespace rlgemm::bench;
using namespace std::chrono_literals;

// Beside the rlgemm binary under test (tests/support/cli.h: this build's, or $RLGEMM_BINARY's).
const std::string kBuiltScript =
    (std::filesystem::path(rlgemm::testing::rlgemm_binary()).parent_path() / "rlgemm_torch_worker.py").string();

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { old_ ? (void)setenv(name_, old_->c_str(), 1) : (void)unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

// A stand-in worker: `body` is Python run after the hello line.
std::string stand_in(const std::string& name, const std::string& body, bool hello = true) {
  const auto path = std::filesystem::temp_directory_path() / ("rlgemm_torch_" + name + ".py");
  std::ofstream out(path);
  out << "import json, sys, time\n";
  if (hello) out << "print(json.dumps({'hello': {'torch': '9.9', 'cuda': '13.0', 'device': 'Stand-in GPU'}}), flush=True)\n";
  out << body << "\n";
  return path.string();
}

Problem problem() { return Problem{Shape{64, 64, 64}, Layout::kTN}; }

std::string error_of(const std::function<void()>& f, ErrorKind* kind = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (kind) *kind = e.kind();
    return e.what();
  }
  return "";
}

TEST(TorchWorker, ScriptIsBuiltBesideTheExecutable) {
  EXPECT_TRUE(std::filesystem::is_regular_file(kBuiltScript)) << kBuiltScript;
}

TEST(TorchWorker, UnavailableWithoutPyTorchSaysWhy) {
  ScopedEnv script("RLGEMM_TORCH_WORKER", kBuiltScript);
  std::string why;
  if (torch_available(&why)) GTEST_SKIP() << "PyTorch with CUDA is installed here";
  EXPECT_NE(why.find("PyTorch"), std::string::npos) << why;  // not installed, or it sees no CUDA device
}

TEST(TorchWorker, MissingScriptOrPythonIsNamed) {
  {
    ScopedEnv script("RLGEMM_TORCH_WORKER", "/nonexistent/worker.py");
    std::string why;
    EXPECT_FALSE(torch_available(&why));
    EXPECT_NE(why.find("was not found"), std::string::npos) << why;
    EXPECT_NE(why.find("/nonexistent/worker.py"), std::string::npos) << why;
  }
  ScopedEnv script("RLGEMM_TORCH_WORKER", kBuiltScript);
  ScopedEnv python("RLGEMM_PYTHON", "/nonexistent/python3");
  std::string why;
  EXPECT_FALSE(torch_available(&why));
  EXPECT_NE(why.find("cannot run '/nonexistent/python3'"), std::string::npos) << why;
}

TEST(TorchWorker, HandshakeAndAnswersAreRead) {
  ScopedEnv script("RLGEMM_TORCH_WORKER", stand_in("answers", R"(
for line in sys.stdin:
    r = json.loads(line)
    assert r['layout'] == 'tn' and r['m'] == 64 and r['timing']['samples'] == 15, r
    t = {'time_us': 5.0, 'min_us': 4.0, 'max_us': 6.0, 'samples': 7, 'batch': 200}
    print(json.dumps({'correct': True, 'detail': 'fine', 'modes': {m: t for m in r['modes']}}), flush=True)
)"));
  auto worker = TorchWorker::start(0, 20s);
  EXPECT_EQ(worker->torch_version(), "9.9");
  EXPECT_EQ(worker->device_name(), "Stand-in GPU");
  for (int round = 0; round < 2; ++round) {  // one worker serves many problems
    const auto m = worker->measure(problem(), {Mode::kOffline, Mode::kServer}, TimingOptions{}, 42);
    EXPECT_TRUE(m.correct);
    EXPECT_EQ(m.detail, "fine");
    ASSERT_EQ(m.timing.size(), 2u);
    EXPECT_DOUBLE_EQ(m.timing.at(Mode::kServer).time_us, 5.0);
    EXPECT_EQ(m.timing.at(Mode::kOffline).batch, 200);
  }
}

TEST(TorchWorker, ReportedFailuresAreRowsOrErrors) {
  ScopedEnv script("RLGEMM_TORCH_WORKER", stand_in("failures", R"(
for i, line in enumerate(sys.stdin):
    if i == 0: print(json.dumps({'correct': False, 'detail': 'normal inputs: 3 elements of C not written', 'modes': {}}), flush=True)
    if i == 1: print(json.dumps({'error': 'RuntimeError: no kernel', 'out_of_memory': False}), flush=True)
    if i == 2: print(json.dumps({'error': 'CUDA out of memory', 'out_of_memory': True}), flush=True)
)"));
  auto worker = TorchWorker::start(0, 20s);
  auto failed = worker->measure(problem(), {Mode::kOffline}, TimingOptions{}, 1);
  EXPECT_FALSE(failed.correct);
  EXPECT_NE(failed.detail.find("not written"), std::string::npos);
  EXPECT_TRUE(failed.timing.empty());
  auto rejected = worker->measure(problem(), {Mode::kOffline}, TimingOptions{}, 2);
  EXPECT_FALSE(rejected.correct);
  EXPECT_NE(rejected.detail.find("no kernel"), std::string::npos);
  ErrorKind kind = ErrorKind::kRuntime;
  const auto why = error_of([&] { worker->measure(problem(), {Mode::kOffline}, TimingOptions{}, 3); }, &kind);
  EXPECT_EQ(kind, ErrorKind::kOutOfMemory) << why;
}

TEST(TorchWorker, DeathIsAClearError) {
  ScopedEnv script("RLGEMM_TORCH_WORKER", stand_in("dies", R"(
sys.stdin.readline()
sys.stderr.write('Traceback: something broke inside torch\n')
sys.exit(7)
)"));
  auto worker = TorchWorker::start(0, 20s);
  ErrorKind kind = ErrorKind::kInvalidInput;
  const auto why = error_of([&] { worker->measure(problem(), {Mode::kOffline}, TimingOptions{}, 1); }, &kind);
  EXPECT_EQ(kind, ErrorKind::kRuntime);
  EXPECT_NE(why.find("ended without answering"), std::string::npos) << why;
  EXPECT_NE(why.find("exited with status 7"), std::string::npos) << why;
  EXPECT_NE(why.find("something broke inside torch"), std::string::npos) << why;
  // Writing to it again is an error too, not a SIGPIPE.
  EXPECT_FALSE(error_of([&] { worker->measure(problem(), {Mode::kOffline}, TimingOptions{}, 1); }).empty());
}

TEST(TorchWorker, SilenceTimesOut) {
  {
    ScopedEnv script("RLGEMM_TORCH_WORKER", stand_in("mute", "time.sleep(60)", false));
    const auto why = error_of([] { TorchWorker::start(0, 300ms); });
    EXPECT_NE(why.find("did not answer"), std::string::npos) << why;
  }
  ScopedEnv script("RLGEMM_TORCH_WORKER", stand_in("hangs", "sys.stdin.readline()\ntime.sleep(60)"));
  auto worker = TorchWorker::start(0, 20s);
  const auto why = error_of([&] { worker->measure(problem(), {Mode::kOffline}, TimingOptions{}, 1, 300ms); });
  EXPECT_NE(why.find("did not answer"), std::string::npos) << why;
  EXPECT_NE(why.find("killed"), std::string::npos) << why;
}

TEST(TorchWorker, MalformedAnswerIsAClearError) {
  ScopedEnv script("RLGEMM_TORCH_WORKER", stand_in("garbled", "sys.stdin.readline()\nprint('not json', flush=True)\nsys.stdin.readline()"));
  auto worker = TorchWorker::start(0, 20s);
  const auto why = error_of([&] { worker->measure(problem(), {Mode::kOffline}, TimingOptions{}, 1); });
  EXPECT_NE(why.find("malformed answer"), std::string::npos) << why;
}

using rlgemm::testing::CliResult;

CliResult rlgemm_cli(const std::string& args) { return rlgemm::testing::run_rlgemm(args); }

TEST(TorchWorker, CliAskingForTorchWithoutItFailsBeforeGpuWork) {
  if (torch_available()) GTEST_SKIP() << "PyTorch with CUDA is installed here";
  const auto out = std::filesystem::temp_directory_path() / "rlgemm_cli_torch.csv";
  std::filesystem::remove(out);
  const auto r = rlgemm_cli("bench --shape 64,64,64 --impl lt_auto,torch --out " + out.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("implementation 'torch' cannot run here"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("PyTorch"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(TorchWorker, CliDefaultListLeavesTorchOutWithANote) {
  if (torch_available()) GTEST_SKIP() << "PyTorch with CUDA is installed here";
  const auto r = rlgemm_cli("bench --shape 64,64,64 --layout tn --quick --no-progress --out " +
                            (std::filesystem::temp_directory_path() / "rlgemm_cli_torch_default.csv").string());
  EXPECT_NE(r.output.find("note: torch left out"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("cannot run here"), std::string::npos) << r.output;
}

}  // namespace
