#include "search/worker.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "rlgemm/error.h"

namespace rlgemm::search {

using nlohmann::json;

// ---- JSON forms ----

json to_json(const Measurement& m) {
  json j = {{"status", std::string(to_string(m.status))}, {"error", m.error}, {"source_hash", m.source_hash},
            {"compile_seconds", m.compile_seconds}, {"median_us", m.timing.median_us},
            {"min_us", m.timing.min_us}, {"max_us", m.timing.max_us}, {"samples", m.timing.samples}};
  if (m.paired)
    j["paired"] = {{"reference_us", m.paired->reference_us}, {"log_ratio", m.paired->log_ratio},
                   {"low", m.paired->low}, {"high", m.paired->high}, {"rounds", m.paired->rounds}};
  j["seconds"] = {{"operands", m.seconds.operands}, {"reference", m.seconds.reference}, {"check", m.seconds.check},
                  {"rounds", m.seconds.rounds}, {"build", m.seconds.build}, {"load", m.seconds.load}};
  return j;
}

Measurement measurement_from_json(const json& j) {
  Measurement m;
  m.status = parse_measure_status(j.at("status").get<std::string>());
  m.error = j.value("error", "");
  m.source_hash = j.value("source_hash", "");
  m.compile_seconds = j.value("compile_seconds", 0.0);
  m.timing = {j.value("median_us", 0.0), j.value("min_us", 0.0), j.value("max_us", 0.0), j.value("samples", 0)};
  if (j.contains("paired")) {
    const json& p = j.at("paired");
    m.paired = PairedGain{p.at("reference_us").get<double>(), p.at("log_ratio").get<double>(),
                          p.at("low").get<double>(), p.at("high").get<double>(), p.at("rounds").get<int>()};
  }
  if (j.contains("seconds")) {
    const json& s = j.at("seconds");
    m.seconds = {s.value("operands", 0.0), s.value("reference", 0.0), s.value("check", 0.0), s.value("rounds", 0.0),
                 s.value("build", 0.0),    s.value("load", 0.0)};
  }
  return m;
}

json to_json(const GpuIdentity& g) {
  return {{"name", g.name}, {"sm_count", g.sm_count}, {"cc_major", g.cc_major}, {"cc_minor", g.cc_minor},
          {"sm_clock_khz", g.sm_clock_khz}, {"mem_clock_khz", g.mem_clock_khz},
          {"driver_version", g.driver_version}, {"smem_per_block_optin", g.smem_per_block_optin}};
}

GpuIdentity gpu_from_json(const json& j) {
  GpuIdentity g;
  g.name = j.at("name").get<std::string>();
  g.sm_count = j.at("sm_count").get<int>();
  g.cc_major = j.value("cc_major", 0);
  g.cc_minor = j.value("cc_minor", 0);
  g.sm_clock_khz = j.value("sm_clock_khz", 0);
  g.mem_clock_khz = j.value("mem_clock_khz", 0);
  g.driver_version = j.value("driver_version", 0);
  g.smem_per_block_optin = j.value("smem_per_block_optin", 0);
  return g;
}

json to_json(const TimingStats& t) {
  return {{"median_us", t.median_us}, {"min_us", t.min_us}, {"max_us", t.max_us}, {"samples", t.samples}};
}

TimingStats timing_from_json(const json& t) {
  return {t.at("median_us").get<double>(), t.at("min_us").get<double>(), t.at("max_us").get<double>(),
          t.at("samples").get<int>()};
}

json problem_json(const Problem& p, TimingMode mode) {
  return {{"m", p.shape.m}, {"n", p.shape.n}, {"k", p.shape.k}, {"layout", std::string(to_string(p.layout))},
          {"dtype", std::string(to_string(p.dtype))}, {"mode", std::string(to_string(mode))}};
}

Problem problem_from_json(const json& j) {
  Problem p;
  p.shape = {j.at("m").get<int64_t>(), j.at("n").get<int64_t>(), j.at("k").get<int64_t>()};
  p.layout = parse_layout(j.at("layout").get<std::string>());
  p.dtype = parse_dtype(j.value("dtype", std::string("fp16")));
  return p;
}

namespace {

bool write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// Reads one line from a blocking descriptor; false at end of input.
bool read_blocking_line(int fd, std::string& buffer, std::string& line) {
  for (;;) {
    const auto nl = buffer.find('\n');
    if (nl != std::string::npos) {
      line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      return true;
    }
    char chunk[4096];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    buffer.append(chunk, size_t(n));
  }
}

// A request that names designs of a problem ("build", "prefetch"), and the designs it names.
json designs_request(const char* op, const std::vector<Design>& designs, const Problem& problem) {
  json message = problem_json(problem, TimingMode::kOffline);
  message["op"] = op;
  message["designs"] = json::array();
  for (const Design& d : designs) message["designs"].push_back(to_string(d));
  return message;
}

std::vector<Design> designs_of(const json& request) {
  std::vector<Design> designs;
  for (const json& text : request.at("designs")) designs.push_back(parse_design(text.get<std::string>()));
  return designs;
}

// Member `member`'s share of a batch spread over `members` of a pool: designs member, member + members, ...
std::vector<Design> share_of(const std::vector<Design>& designs, size_t member, size_t members) {
  std::vector<Design> share;
  for (size_t i = member; i < designs.size(); i += members) share.push_back(designs[i]);
  return share;
}

}  // namespace

// ---- the worker side ----

int serve_worker(const BackendOptions& options, int in_fd, int out_fd) {
  // A worker outlives no tuner. It has a process group of its own (WorkerMeasurer::start), so Ctrl-C does not
  // reach it; where its tuner dies without ending it (killed, or ended by a signal it does not catch), the worker
  // sees that here, even while a hung kernel holds its main thread, and exits.
  const pid_t parent = ::getppid();
  std::thread([parent] {
    while (::getppid() == parent) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    std::_Exit(1);
  }).detach();
  auto send = [&](const json& j) { return write_all(out_fd, j.dump() + "\n"); };
  MeasurerPtr backend;
  try {
    backend = make_backend(options);
    if (!send({{"ready", true}, {"gpu", to_json(backend->gpu())}})) return 1;
  } catch (const Error& e) {
    send({{"ready", false}, {"error", e.what()}, {"kind", int(e.kind())}});
    return exit_code(e.kind());
  }
  std::string buffer, line;
  while (read_blocking_line(in_fd, buffer, line)) {
    json reply;
    try {
      const json request = json::parse(line);
      const std::string op = request.at("op").get<std::string>();
      if (op == "evaluate") {
        reply = {{"ok", true}, {"record", backend->evaluate(request)}};
        if (!send(reply)) return 1;
        continue;
      }
      const Problem problem = problem_from_json(request);
      const TimingMode mode = parse_timing_mode(request.at("mode").get<std::string>());
      if (op == "reference") {
        reply = {{"ok", true}, {"timing", to_json(backend->reference(problem, mode))}};
      } else if (op == "measure") {
        const Design design = parse_design(request.at("design").get<std::string>());
        reply = {{"ok", true}, {"measurement", to_json(backend->measure(design, problem, mode))}};
      } else if (op == "prefetch") {
        backend->prefetch(designs_of(request), problem);
        reply = {{"ok", true}};
      } else if (op == "build") {
        reply = {{"ok", true}, {"seconds", backend->build_ahead(designs_of(request), problem)}};
      } else {
        reply = {{"ok", false}, {"error", "unknown worker request '" + op + "'"}, {"kind", 2}};
      }
    } catch (const Error& e) {
      reply = {{"ok", false}, {"error", e.what()}, {"kind", int(e.kind())}};
    } catch (const std::exception& e) {
      reply = {{"ok", false}, {"error", std::string("bad worker request: ") + e.what()}, {"kind", 2}};
    }
    if (!send(reply)) return 1;
  }
  return 0;
}

// ---- the tuner side ----

WorkerMeasurer::WorkerMeasurer(WorkerLaunch launch, WorkerLimits limits)
    : launch_(std::move(launch)), limits_(limits) {
  if (launch_.argv.empty() && !launch_.child) fail("a worker needs a command line or a child function");
}

WorkerMeasurer::~WorkerMeasurer() { stop(false); }

void WorkerMeasurer::start() {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw Error(ErrorKind::kRuntime, std::string("cannot create the worker's socket pair: ") + std::strerror(errno));
  std::vector<char*> argv;
  for (auto& a : launch_.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(ErrorKind::kRuntime, std::string("cannot fork a worker: ") + std::strerror(errno));
  }
  if (pid == 0) {
    // Child: the protocol on stdin and stdout; every other inherited descriptor closed, so that sibling
    // workers never hold each other's sockets open. A process group of its own: Ctrl-C, or timeout(1)'s signal to
    // the tuner's group, asks the tuner to stop (it ends after the batch in flight), and must not kill the worker
    // in the middle of a measurement; the tuner ends its workers itself, and a worker whose tuner is gone sees
    // its input close and exits.
    ::setpgid(0, 0);
    ::dup2(fds[1], 0);
    ::dup2(fds[1], 1);
    ::close_range(3, ~0u, 0);
    if (!launch_.argv.empty()) {
      ::execv(argv[0], argv.data());
      std::fprintf(stderr, "rlgemm: cannot start worker %s: %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    int code = 1;
    try {
      code = launch_.child();
    } catch (...) {
    }
    std::fflush(nullptr);
    ::_exit(code);
  }
  ::close(fds[1]);
  pid_ = pid;
  fd_ = fds[0];
  ever_started_ = true;
  buffer_.clear();
  std::string line;
  Reply failure;
  if (!read_line(line, limits_.startup_timeout_s, failure)) {
    const std::string why = failure.why;
    stop(true);
    throw Error(ErrorKind::kRuntime, "the measuring worker did not start: " + why);
  }
  json hello;
  try {
    hello = json::parse(line);
  } catch (const std::exception&) {
    stop(true);
    throw Error(ErrorKind::kRuntime, "the measuring worker said '" + line + "' instead of its ready line");
  }
  if (!hello.value("ready", false)) {
    const std::string why = hello.value("error", std::string("no reason given"));
    const auto kind = ErrorKind(hello.value("kind", int(ErrorKind::kRuntime)));
    stop(true);
    throw Error(kind, why);
  }
  gpu_ = gpu_from_json(hello.at("gpu"));
  have_gpu_ = true;
}

std::string WorkerMeasurer::reap() {
  if (pid_ <= 0) return "no worker";
  int status = 0;
  pid_t r;
  do r = ::waitpid(pid_, &status, 0); while (r < 0 && errno == EINTR);
  pid_ = -1;
  if (r < 0) return "worker lost";
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "worker died on signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "worker exited with code " + std::to_string(WEXITSTATUS(status));
  return "worker ended";
}

void WorkerMeasurer::stop(bool kill_first) {
  if (fd_ >= 0) {
    ::close(fd_);  // end of input: a healthy worker exits by itself
    fd_ = -1;
  }
  if (pid_ > 0) {
    if (!kill_first) {
      // Give a healthy worker a moment to exit on end of input before killing it.
      for (int i = 0; i < 100; ++i) {
        int status;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) { pid_ = -1; return; }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    ::kill(pid_, SIGKILL);
    reap();
  }
}

bool WorkerMeasurer::read_line(std::string& line, double timeout_s, Reply& failure) {
  using clock = std::chrono::steady_clock;
  const auto deadline = clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    const auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) {
      ::kill(pid_, SIGKILL);
      failure.kind = Reply::Kind::kTimeout;
      failure.why = "watchdog: no answer within " + std::to_string(int(timeout_s)) + " s; " + reap();
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    // Short slices: a worker that died while a descendant still holds its socket open gives no end of
    // input, so its exit is checked between slices.
    const int ready = ::poll(&p, 1, int(std::min<long long>(left, 100)));
    if (ready < 0 && errno != EINTR) {
      failure.why = std::string("poll: ") + std::strerror(errno);
      ::kill(pid_, SIGKILL);
      reap();
      return false;
    }
    if (ready > 0) {
      char chunk[65536];
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n > 0) {
        buffer_.append(chunk, size_t(n));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      failure.kind = Reply::Kind::kDied;
      failure.why = reap();
      return false;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      failure.kind = Reply::Kind::kDied;
      failure.why = WIFSIGNALED(status) ? "worker died on signal " + std::to_string(WTERMSIG(status)) + " (" +
                                              ::strsignal(WTERMSIG(status)) + ")"
                                        : "worker exited with code " + std::to_string(WEXITSTATUS(status));
      return false;
    }
  }
}

WorkerMeasurer::Reply WorkerMeasurer::request(const json& message, double timeout_s) {
  if (pid_ <= 0) {
    if (consecutive_failures_ >= limits_.max_consecutive_restarts)
      throw Error(ErrorKind::kRuntime, "the measuring worker failed " + std::to_string(consecutive_failures_) +
                                           " times in a row without answering: the backend is broken");
    if (ever_started_) ++restarts_;
    start();
  }
  Reply reply;
  if (!write_all(fd_, message.dump() + "\n")) {
    ++consecutive_failures_;
    ::kill(pid_, SIGKILL);
    reply.kind = Reply::Kind::kDied;
    reply.why = reap();
    ::close(fd_);
    fd_ = -1;
    return reply;
  }
  std::string line;
  if (!read_line(line, timeout_s, reply)) {
    ++consecutive_failures_;
    ::close(fd_);
    fd_ = -1;
    return reply;
  }
  consecutive_failures_ = 0;
  try {
    reply.answer = json::parse(line);
  } catch (const std::exception&) {
    stop(true);
    reply.kind = Reply::Kind::kDied;
    reply.why = "worker answered '" + line.substr(0, 200) + "', not JSON";
    return reply;
  }
  reply.kind = Reply::Kind::kAnswer;
  return reply;
}

GpuIdentity WorkerMeasurer::gpu() {
  if (!have_gpu_) start();
  return gpu_;
}

TimingStats WorkerMeasurer::reference(const Problem& problem, TimingMode mode) {
  json message = problem_json(problem, mode);
  message["op"] = "reference";
  const Reply reply = request(message, limits_.request_timeout_s);
  if (reply.kind != Reply::Kind::kAnswer)
    throw Error(ErrorKind::kRuntime, "measuring the reference of " + problem.shape.to_string() + ": " + reply.why);
  if (!reply.answer.value("ok", false))
    throw Error(ErrorKind(reply.answer.value("kind", int(ErrorKind::kRuntime))),
                reply.answer.value("error", std::string("reference failed")));
  return timing_from_json(reply.answer.at("timing"));
}

Measurement WorkerMeasurer::measure(const Design& design, const Problem& problem, TimingMode mode) {
  json message = problem_json(problem, mode);
  message["op"] = "measure";
  message["design"] = to_string(design);
  const Reply reply = request(message, limits_.request_timeout_s);
  Measurement m;
  switch (reply.kind) {
    case Reply::Kind::kTimeout:
      m.status = MeasureStatus::kTimeout;
      m.error = reply.why;
      return m;
    case Reply::Kind::kDied:
      m.status = MeasureStatus::kCrashed;
      m.error = reply.why;
      return m;
    case Reply::Kind::kAnswer: break;
  }
  if (!reply.answer.value("ok", false)) {
    const auto kind = ErrorKind(reply.answer.value("kind", int(ErrorKind::kRuntime)));
    // The backend itself is unusable (no device, out of memory): not the candidate's fault.
    if (kind == ErrorKind::kNoDevice || kind == ErrorKind::kOutOfMemory)
      throw Error(kind, reply.answer.value("error", std::string("worker failed")));
    m.status = MeasureStatus::kFailed;
    m.error = reply.answer.value("error", std::string("worker failed"));
    return m;
  }
  return measurement_from_json(reply.answer.at("measurement"));
}

void WorkerMeasurer::prefetch(const std::vector<Design>& designs, const Problem& problem) {
  // Answered at once; a worker that fails here is restarted by the next request, which builds what it needs.
  (void)request(designs_request("prefetch", designs, problem), limits_.request_timeout_s);
}

double WorkerMeasurer::build_ahead(const std::vector<Design>& designs, const Problem& problem) {
  const auto start = std::chrono::steady_clock::now();
  const json message = designs_request("build", designs, problem);
  // A worker that hangs or dies while building costs only the head start: it is restarted by the next
  // request, and each measure() compiles its own kernel, reporting what fails.
  const Reply reply = request(message, limits_.request_timeout_s);
  if (reply.kind == Reply::Kind::kAnswer && reply.answer.value("ok", false) && reply.answer.contains("seconds"))
    return reply.answer.at("seconds").get<double>();  // the backend's own account (the synthetic one's estimate)
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

json WorkerMeasurer::evaluate(const json& submission) {
  json message = submission;
  message["op"] = "evaluate";
  const Reply reply = request(message, limits_.request_timeout_s);
  switch (reply.kind) {
    case Reply::Kind::kTimeout: return {{"worker_failed", "timeout"}, {"why", reply.why}};
    case Reply::Kind::kDied: return {{"worker_failed", "died"}, {"why", reply.why}};
    case Reply::Kind::kAnswer: break;
  }
  if (!reply.answer.value("ok", false))
    throw Error(ErrorKind(reply.answer.value("kind", int(ErrorKind::kRuntime))),
                reply.answer.value("error", std::string("the worker could not evaluate the submission")));
  return reply.answer.at("record");
}

// ---- several workers ----

PoolMeasurer::PoolMeasurer(std::vector<MeasurerPtr> members)
    : members_(std::move(members)), busy_(members_.size(), false) {
  if (members_.empty()) fail("a measurer pool needs at least one member");
}

json PoolMeasurer::evaluate(const json& request) {
  size_t member = 0;
  {
    std::unique_lock lock(idle_mutex_);
    idle_changed_.wait(lock, [&] { return std::find(busy_.begin(), busy_.end(), false) != busy_.end(); });
    member = size_t(std::find(busy_.begin(), busy_.end(), false) - busy_.begin());
    busy_[member] = true;
  }
  struct Release {
    PoolMeasurer& pool;
    size_t member;
    ~Release() {
      {
        std::lock_guard lock(pool.idle_mutex_);
        pool.busy_[member] = false;
      }
      pool.idle_changed_.notify_one();
    }
  } release{*this, member};
  json record = members_[member]->evaluate(request);
  record["worker"] = member;  // which of the pool's GPUs
  return record;
}

TimingStats PoolMeasurer::reference(const Problem& problem, TimingMode mode) {
  return members_.front()->reference(problem, mode);
}

Measurement PoolMeasurer::measure(const Design& design, const Problem& problem, TimingMode mode) {
  return members_.front()->measure(design, problem, mode);
}

double PoolMeasurer::build_ahead(const std::vector<Design>& designs, const Problem& problem) {
  return members_.front()->build_ahead(designs, problem);
}

void PoolMeasurer::prefetch(const std::vector<Design>& designs, const Problem& problem) {
  // Each member the share of the batch that measure_batch will give it.
  if (members_.size() == 1 || designs.size() <= 1) return members_.front()->prefetch(designs, problem);
  const size_t used = std::min(members_.size(), designs.size());
  for (size_t w = 0; w < used; ++w) members_[w]->prefetch(share_of(designs, w, used), problem);
}

std::vector<Measurement> PoolMeasurer::measure_batch(const std::vector<Design>& designs, const Problem& problem,
                                                     TimingMode mode) {
  if (members_.size() == 1 || designs.size() <= 1) return members_.front()->measure_batch(designs, problem, mode);
  // Member w takes designs w, w + members, ...: each builds its share's kernels at once, then measures them.
  std::vector<Measurement> out(designs.size());
  const size_t used = std::min(members_.size(), designs.size());
  std::vector<std::exception_ptr> errors(used);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < used; ++w) {
    threads.emplace_back([&, w] {
      try {
        const std::vector<Design> share = share_of(designs, w, used);
        std::vector<Measurement> results = members_[w]->measure_batch(share, problem, mode);
        if (results.size() != share.size()) fail("a pool member answered a batch with the wrong count");
        for (size_t j = 0; j < results.size(); ++j) out[w + j * used] = std::move(results[j]);
      } catch (...) {
        errors[w] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

}  // namespace rlgemm::search

namespace rlgemm::search {

std::vector<int> parse_gpu_selection(const std::string& gpus, const BackendOptions& backend, int first) {
  std::vector<int> ordinals;
  const bool count_form = gpus != "all" && gpus.find(',') == std::string::npos;
  if (first > 0 && !count_form)
    fail("--gpus '" + gpus + "' with several ranks on one machine: give each rank a count of GPUs (e.g. 1), "
         "the ranks of a machine take consecutive ones");
  auto number = [&](const std::string& s) {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 4)
      fail("--gpus '" + gpus + "': use all, a count of GPUs (e.g. 2), or GPU ordinals separated by commas (e.g. 0,2)");
    return std::stoi(s);
  };
  if (gpus == "all") {
    const int count = backend_device_count(backend);
    if (count < 1) throw Error(ErrorKind::kNoDevice, "--gpus all: the " + backend.backend + " backend sees no GPU");
    for (int i = 0; i < count; ++i) ordinals.push_back(i);
  } else if (gpus.find(',') == std::string::npos) {
    const int count = number(gpus);
    if (count < 1) fail("--gpus '" + gpus + "': the count of GPUs must be at least 1");
    for (int i = 0; i < count; ++i) ordinals.push_back(first + i);
  } else {
    size_t start = 0;
    while (start <= gpus.size()) {
      const size_t comma = std::min(gpus.find(',', start), gpus.size());
      const int ordinal = number(gpus.substr(start, comma - start));
      if (std::find(ordinals.begin(), ordinals.end(), ordinal) != ordinals.end())
        fail("--gpus '" + gpus + "': GPU " + std::to_string(ordinal) + " is listed twice");
      ordinals.push_back(ordinal);
      start = comma + 1;
    }
  }
  return ordinals;
}

MeasurerPtr make_measurer(const MeasurerSetup& setup) {
  const std::vector<int> ordinals = parse_gpu_selection(setup.gpus, setup.backend, setup.first_gpu);
  if (!setup.isolated) {
    if (ordinals.size() != 1) fail("measuring in-process works on one GPU; drop --in-process to use several");
    BackendOptions options = setup.backend;
    options.gpu_ordinal = ordinals.front();
    options.simulate_faults = false;
    return make_backend(options);
  }
  if (setup.worker_exe.empty()) fail("isolated measuring needs the path of the rlgemm executable");
  std::vector<MeasurerPtr> members;
  for (int ordinal : ordinals) {
    WorkerLaunch launch;
    launch.argv = {setup.worker_exe, "worker", "--backend", setup.backend.backend, "--gpu", std::to_string(ordinal)};
    if (setup.backend.delay_ms > 0) {
      launch.argv.push_back("--delay-ms");
      launch.argv.push_back(std::to_string(setup.backend.delay_ms));
    }
    WorkerLimits limits;
    limits.request_timeout_s = setup.timeout_s;
    auto worker = std::make_unique<WorkerMeasurer>(launch, limits);
    worker->gpu();  // start now: a backend that cannot start fails here with its own message
    members.push_back(std::move(worker));
  }
  if (members.size() == 1) return std::move(members.front());
  return std::make_unique<PoolMeasurer>(std::move(members));
}

}  // namespace rlgemm::search
