#include "bench/torch_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "rlgemm/error.h"

namespace rlgemm::bench {
namespace {

namespace fs = std::filesystem;
using Ms = std::chrono::milliseconds;
constexpr const char* kScriptName = "rlgemm_torch_worker.py";

std::string seconds_text(Ms ms) { return std::to_string(ms.count() / 1000) + " s"; }

// Waits up to `grace` for `pid` to exit by itself, then kills it; returns the wait status.
int reap(pid_t pid, Ms grace) {
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return status;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(Ms(20));
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

std::string status_text(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return std::string("was killed by signal ") + strsignal(WTERMSIG(status));
  return "ended";
}

Timing timing_from(const nlohmann::json& j) {
  Timing t;
  t.time_us = j.at("time_us").get<double>();
  t.min_us = j.at("min_us").get<double>();
  t.max_us = j.at("max_us").get<double>();
  t.samples = j.at("samples").get<int>();
  t.batch = j.at("batch").get<int>();
  return t;
}

}  // namespace

std::string find_torch_worker_script(std::string* looked_in) {
  std::vector<fs::path> candidates;
  std::error_code ec;
  if (const char* env = std::getenv("RLGEMM_TORCH_WORKER"); env && *env) {
    candidates.emplace_back(env);  // a path given explicitly is the only one tried
  } else {
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) candidates.push_back(exe.parent_path() / kScriptName);
    candidates.push_back(fs::path(RLGEMM_TORCH_WORKER_SOURCE_DIR) / kScriptName);
  }
  std::string tried;
  for (const auto& c : candidates) {
    if (fs::is_regular_file(c, ec)) return c.string();
    tried += (tried.empty() ? "" : ", ") + c.string();
  }
  if (looked_in) *looked_in = tried;
  return "";
}

std::unique_ptr<TorchWorker> TorchWorker::start(int device, Ms handshake_timeout) {
  std::string tried;
  const std::string script = find_torch_worker_script(&tried);
  if (script.empty())
    throw Error(ErrorKind::kRuntime, std::string("the torch worker script ") + kScriptName + " was not found (looked in " +
                                         tried + "; set RLGEMM_TORCH_WORKER to its path)");
  const char* python_env = std::getenv("RLGEMM_PYTHON");
  const std::string python = python_env && *python_env ? python_env : "python3";
  const std::string device_text = std::to_string(device);
  std::vector<const char*> argv{python.c_str(), script.c_str(), "--device", device_text.c_str(), nullptr};

  // A worker that dies must surface as EPIPE on write, not as a signal that ends this process.
  std::signal(SIGPIPE, SIG_IGN);

  int to_child[2], from_child[2], exec_report[2];
  if (pipe2(to_child, O_CLOEXEC) || pipe2(from_child, O_CLOEXEC) || pipe2(exec_report, O_CLOEXEC))
    throw Error(ErrorKind::kRuntime, std::string("cannot create pipes for the torch worker: ") + std::strerror(errno));
  std::string err_template = (fs::temp_directory_path() / "rlgemm-torch-stderr-XXXXXX").string();
  const int err_file = mkostemp(err_template.data(), O_CLOEXEC);
  if (err_file < 0) throw Error(ErrorKind::kRuntime, "cannot create a file for the torch worker's stderr");
  unlink(err_template.c_str());  // lives as long as the descriptors do

  const pid_t pid = fork();
  if (pid < 0) throw Error(ErrorKind::kRuntime, std::string("cannot start the torch worker: ") + std::strerror(errno));
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec. Its own process group keeps a terminal's Ctrl-C,
    // which the parent handles by stopping between problems, from killing it mid-answer.
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    dup2(err_file, 2);
    setpgid(0, 0);
    execvp(argv[0], const_cast<char* const*>(argv.data()));
    const int e = errno;
    (void)!write(exec_report[1], &e, sizeof e);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  close(exec_report[1]);

  std::unique_ptr<TorchWorker> w(new TorchWorker);
  w->pid_ = pid;
  w->to_worker_ = to_child[1];
  w->from_worker_ = from_child[0];
  w->stderr_file_ = err_file;

  int exec_errno = 0;
  ssize_t got;
  while ((got = read(exec_report[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {
  }
  close(exec_report[0]);
  if (got > 0)
    throw Error(ErrorKind::kRuntime, "cannot run '" + python + "' for the torch worker: " + std::strerror(exec_errno) +
                                         " (set RLGEMM_PYTHON to a Python with PyTorch)");

  const std::string line = w->read_line(handshake_timeout);
  nlohmann::json hello;
  try {
    hello = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception&) {
    w->fail_dead("sent a malformed handshake '" + line.substr(0, 200) + "'");
  }
  if (hello.contains("error")) throw Error(ErrorKind::kRuntime, hello["error"].get<std::string>());
  if (!hello.contains("hello")) w->fail_dead("sent no handshake");
  const auto& h = hello["hello"];
  w->torch_version_ = h.value("torch", "");
  w->cuda_version_ = h.value("cuda", "");
  w->device_name_ = h.value("device", "");
  return w;
}

TorchWorker::~TorchWorker() {
  if (to_worker_ >= 0) close(to_worker_);  // end of input: the worker exits
  if (pid_ > 0) reap(pid_, Ms(5000));
  if (from_worker_ >= 0) close(from_worker_);
  if (stderr_file_ >= 0) close(stderr_file_);
}

std::string TorchWorker::stderr_tail() const {
  const off_t size = lseek(stderr_file_, 0, SEEK_END);
  const off_t from = size > 2000 ? size - 2000 : 0;
  std::string text(size_t(size - from), '\0');
  const ssize_t got = pread(stderr_file_, text.data(), text.size(), from);
  text.resize(got > 0 ? size_t(got) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

void TorchWorker::fail_dead(const std::string& what) {
  std::string message = "the torch worker " + what;
  if (to_worker_ >= 0) close(to_worker_);  // end of input lets a worker that still lives exit by itself
  to_worker_ = -1;
  if (pid_ > 0) {
    message += "; it " + status_text(reap(pid_, Ms(2000)));
    pid_ = -1;
  }
  const std::string tail = stderr_tail();
  if (!tail.empty()) message += "; its stderr ends with:\n" + tail;
  throw Error(ErrorKind::kRuntime, message);
}

void TorchWorker::send_line(const std::string& line) {
  const std::string text = line + "\n";
  for (size_t sent = 0; sent < text.size();) {
    const ssize_t n = write(to_worker_, text.data() + sent, text.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail_dead(std::string("stopped reading its requests (") + std::strerror(errno) + ")");
    sent += size_t(n);
  }
}

std::string TorchWorker::read_line(Ms timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (const size_t eol = pending_.find('\n'); eol != std::string::npos) {
      std::string line = pending_.substr(0, eol);
      pending_.erase(0, eol + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<Ms>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      if (pid_ > 0) kill(pid_, SIGKILL);
      fail_dead("did not answer within " + seconds_text(timeout));
    }
    pollfd p{from_worker_, POLLIN, 0};
    const int ready = poll(&p, 1, int(std::min<long long>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) fail_dead(std::string("cannot be read from: ") + std::strerror(errno));
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = read(from_worker_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_dead("ended without answering");
    pending_.append(buf, size_t(n));
  }
}

TorchMeasurement TorchWorker::measure(const Problem& p, const std::vector<Mode>& modes, const TimingOptions& o,
                                      uint64_t seed, Ms timeout) {
  if (pid_ <= 0) throw Error(ErrorKind::kRuntime, "the torch worker is no longer running");
  nlohmann::json request = {
      {"m", p.shape.m},
      {"n", p.shape.n},
      {"k", p.shape.k},
      {"layout", std::string(to_string(p.layout))},
      {"dtype", std::string(to_string(p.dtype))},
      {"seed", seed & ((uint64_t(1) << 48) - 1)},  // room for the worker's per-set offsets below 2^64
      {"timing",
       {{"batch_target_us", o.batch_target_us},
        {"batches", o.batches},
        {"max_warmup_batches", o.max_warmup_batches},
        {"samples", o.samples},
        {"gap_mean_ms", o.gap_mean_ms}}}};
  request["modes"] = nlohmann::json::array();
  for (Mode m : modes) request["modes"].push_back(std::string(to_string(m)));
  send_line(request.dump());

  const std::string where = " on " + p.shape.to_string() + " " + std::string(to_string(p.layout)) + " " +
                            std::string(to_string(p.dtype));
  const std::string line = read_line(timeout);
  TorchMeasurement out;
  try {
    const auto reply = nlohmann::json::parse(line);
    if (reply.contains("error")) {
      const std::string error = reply["error"].get<std::string>();
      if (reply.value("out_of_memory", false)) throw Error(ErrorKind::kOutOfMemory, "torch" + where + ": " + error);
      out.detail = "torch worker: " + error;  // the worker lives on: this problem failed, not the run
      return out;
    }
    out.correct = reply.at("correct").get<bool>();
    out.detail = reply.at("detail").get<std::string>();
    if (out.correct)
      for (Mode m : modes) out.timing[m] = timing_from(reply.at("modes").at(std::string(to_string(m))));
  } catch (const nlohmann::json::exception& e) {
    fail_dead("sent a malformed answer" + where + " (" + e.what() + "): '" + line.substr(0, 200) + "'");
  }
  return out;
}

bool torch_available(std::string* why, int device) {
  try {
    TorchWorker::start(device);
    return true;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return false;
  }
}

}  // namespace rlgemm::bench
