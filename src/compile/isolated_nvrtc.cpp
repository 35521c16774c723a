#include "compile/isolated_nvrtc.h"

#include <nvrtc.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>

#include "generate/embedded_headers.h"

namespace rlgemm {
namespace {

// ---- byte streams over file descriptors ----

bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) {
      const ssize_t m = ::write(fd, p, size);
      if (m < 0 && errno == EINTR) continue;
      if (m <= 0) return false;
      p += m, size -= size_t(m);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n, size -= size_t(n);
  }
  return true;
}

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void put_bytes(std::string& out, const void* data, size_t size) {
  put_u64(out, size);
  out.append(static_cast<const char*>(data), size);
}
void put_string(std::string& out, const std::string& s) { put_bytes(out, s.data(), s.size()); }

// Reads exactly `size` bytes; `deadline` bounds the wait (steady clock), or none when it is max().
enum class ReadResult { kOk, kEof, kTimeout, kError };
ReadResult read_exact(int fd, void* data, size_t size, std::chrono::steady_clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    if (deadline != std::chrono::steady_clock::time_point::max()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return ReadResult::kTimeout;
      pollfd pfd{fd, POLLIN, 0};
      const int r = ::poll(&pfd, 1, int(std::min<long long>(left.count(), 1 << 30)));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return ReadResult::kError;
      if (r == 0) return ReadResult::kTimeout;
    }
    const ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ReadResult::kError;
    if (n == 0) return ReadResult::kEof;
    p += n, size -= size_t(n);
  }
  return ReadResult::kOk;
}

constexpr auto kNoDeadline = std::chrono::steady_clock::time_point::max();

bool read_u64(int fd, uint64_t& v) { return read_exact(fd, &v, 8, kNoDeadline) == ReadResult::kOk; }
bool read_string(int fd, std::string& s) {
  uint64_t n = 0;
  if (!read_u64(fd, n) || n > (uint64_t(1) << 31)) return false;
  s.resize(n);
  return read_exact(fd, s.data(), n, kNoDeadline) == ReadResult::kOk;
}

// ---- the compiler process ----

// Runs job.exec with its output as the log; returns whether it exited 0 and wrote job.output, whose bytes
// land in `result`.
bool run_program(const NvrtcJob& job, std::string& log, std::vector<char>& result) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) {
    log = "could not create a pipe for the compiler";
    return false;
  }
  const pid_t child = ::fork();
  if (child < 0) {
    log = "could not fork the compiler";
    return false;
  }
  if (child == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::dup2(pipe_fds[1], 1);
    ::dup2(pipe_fds[1], 2);
    ::close(pipe_fds[0]);
    ::close(pipe_fds[1]);
    std::vector<char*> argv;
    for (const auto& a : job.exec) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "could not run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(pipe_fds[1]);
  char buffer[1 << 14];
  while (true) {
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (log.size() < (size_t(1) << 20)) log.append(buffer, size_t(n));  // a runaway log is cut at 1 MiB
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    log += WIFSIGNALED(status) ? "\n" + job.exec[0] + " was killed by signal " + std::to_string(WTERMSIG(status))
                               : "\n" + job.exec[0] + " exited with status " + std::to_string(WEXITSTATUS(status));
    return false;
  }
  std::ifstream in(job.output, std::ios::binary);
  result.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (result.empty()) log += "\n" + job.exec[0] + " wrote no " + job.output;
  return !result.empty();
}

// Runs NVRTC (or job.exec) and writes: u8 success, log, cubin.
[[noreturn]] void compiler_process(int out_fd, const NvrtcJob& job) {
  if (job.fault == CompilerFault::kCrash) {
    ::signal(SIGSEGV, SIG_DFL);
    ::raise(SIGSEGV);
  }
  if (job.fault == CompilerFault::kHang)
    for (;;) ::pause();
  if (job.memory_limit_bytes) {
    const rlimit limit{job.memory_limit_bytes, job.memory_limit_bytes};
    ::setrlimit(RLIMIT_AS, &limit);
  }
  if (!job.exec.empty()) {
    std::string log, reply;
    std::vector<char> result;
    const bool ok = run_program(job, log, result);
    reply.push_back(char(ok));
    put_string(reply, log);
    put_bytes(reply, result.data(), result.size());
    write_all(out_fd, reply.data(), reply.size());
    ::_exit(0);
  }
  std::vector<const char*> names, texts;
  for (const auto& h : embedded_headers()) names.push_back(h.name), texts.push_back(h.text);
  std::vector<const char*> options;
  for (const auto& o : job.options) options.push_back(o.c_str());
  std::string reply;
  nvrtcProgram program = nullptr;
  nvrtcResult status = nvrtcCreateProgram(&program, job.source.c_str(), job.name.c_str(), int(names.size()),
                                          texts.data(), names.data());
  std::string log;
  std::vector<char> cubin;
  if (status == NVRTC_SUCCESS) {
    status = nvrtcCompileProgram(program, int(options.size()), options.data());
    size_t log_size = 0;
    nvrtcGetProgramLogSize(program, &log_size);
    log.resize(log_size);
    if (log_size) nvrtcGetProgramLog(program, log.data());
    while (!log.empty() && log.back() == '\0') log.pop_back();
    if (status == NVRTC_SUCCESS) {
      size_t size = 0;
      status = nvrtcGetCUBINSize(program, &size);
      cubin.resize(size);
      if (status == NVRTC_SUCCESS && size) status = nvrtcGetCUBIN(program, cubin.data());
    }
    nvrtcDestroyProgram(&program);
  }
  if (status != NVRTC_SUCCESS) log = std::string(nvrtcGetErrorString(status)) + "\n" + log;
  reply.push_back(char(status == NVRTC_SUCCESS && !cubin.empty()));
  put_string(reply, log);
  put_bytes(reply, cubin.data(), cubin.size());
  write_all(out_fd, reply.data(), reply.size());
  ::_exit(0);
}

// ---- the worker: one per job, child of the zygote ----

// Reads the job from `fd`, runs the compiler process, and answers with
//   'P' i32 compiler pid      (so the caller can kill it on timeout)
//   'R' i32 wait status, payload (what the compiler process wrote)
[[noreturn]] void worker(int fd) {
  ::signal(SIGCHLD, SIG_DFL);  // the zygote ignores it; the worker needs waitpid
  NvrtcJob job;
  uint64_t fields = 0, fault = 0, timeout_s = 0, exec_fields = 0;
  if (!read_u64(fd, fields) || fields < 2 || fields > 4096 || !read_u64(fd, fault) || !read_u64(fd, timeout_s) ||
      !read_u64(fd, job.memory_limit_bytes) || !read_u64(fd, exec_fields) || exec_fields > 4096 ||
      !read_string(fd, job.output) || !read_string(fd, job.name) || !read_string(fd, job.source))
    ::_exit(1);
  for (uint64_t i = 2; i < fields; ++i) {
    std::string option;
    if (!read_string(fd, option)) ::_exit(1);
    job.options.push_back(std::move(option));
  }
  for (uint64_t i = 0; i < exec_fields; ++i) {
    std::string arg;
    if (!read_string(fd, arg)) ::_exit(1);
    job.exec.push_back(std::move(arg));
  }
  job.fault = CompilerFault(fault);
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) ::_exit(1);
  const pid_t compiler = ::fork();
  if (compiler < 0) ::_exit(1);
  if (compiler == 0) {
    ::close(pipe_fds[0]);
    ::close(fd);
    ::setpgid(0, 0);  // the caller's timeout kills the group: an exec'd compiler's own children too
    ::alarm(unsigned(timeout_s) + 30);  // even if the caller is gone, a runaway compile ends
    compiler_process(pipe_fds[1], job);
  }
  ::close(pipe_fds[1]);
  std::string frame(1, 'P');
  const int32_t pid32 = int32_t(compiler);
  frame.append(reinterpret_cast<const char*>(&pid32), 4);
  write_all(fd, frame.data(), frame.size());
  std::string payload;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(pipe_fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    payload.append(buffer, size_t(n));
  }
  int status = 0;
  while (::waitpid(compiler, &status, 0) < 0 && errno == EINTR) {
  }
  frame.assign(1, 'R');
  const int32_t status32 = status;
  frame.append(reinterpret_cast<const char*>(&status32), 4);
  put_string(frame, payload);
  write_all(fd, frame.data(), frame.size());
  ::_exit(0);
}

// Receives one file descriptor over the control socket; -1 at end of stream.
int receive_fd(int control) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov, msg.msg_iovlen = 1;
  msg.msg_control = space, msg.msg_controllen = sizeof(space);
  ssize_t n;
  do n = ::recvmsg(control, &msg, 0);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return -1;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (!c || c->cmsg_type != SCM_RIGHTS) return -2;
  int fd;
  std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
  return fd;
}

[[noreturn]] void zygote(int control) {
  // Keep nothing of the caller's open files but stdio and the control socket.
  if (control != 3) {
    ::dup2(control, 3);
    control = 3;
  }
  ::close_range(4, ~0u, 0);
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGCHLD, SIG_IGN);  // workers are reaped automatically
  while (true) {
    const int fd = receive_fd(control);
    if (fd == -1) ::_exit(0);  // the caller closed the control socket (or exited)
    if (fd < 0) continue;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(control);
      worker(fd);
    }
    ::close(fd);
  }
}

class CompileService {
 public:
  static CompileService& instance() {
    static CompileService service;
    return service;
  }

  void start() {
    std::lock_guard lock(mutex_);
    if (control_ < 0) spawn();
  }

  // A connected socket to a fresh worker, or -1.
  int open_job() {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return -1;
    std::lock_guard lock(mutex_);
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (control_ < 0) spawn();
      if (control_ >= 0 && send_fd(pair[1])) {
        ::close(pair[1]);
        return pair[0];
      }
      // The zygote is gone (killed from outside): reap it and start another.
      if (control_ >= 0) ::close(control_), control_ = -1;
      if (zygote_pid_ > 0) ::waitpid(zygote_pid_, nullptr, WNOHANG), zygote_pid_ = -1;
    }
    ::close(pair[0]);
    ::close(pair[1]);
    return -1;
  }

 private:
  void spawn() {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return;
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(pair[0]), ::close(pair[1]);
      return;
    }
    if (pid == 0) {
      ::close(pair[0]);
      zygote(pair[1]);
    }
    ::close(pair[1]);
    control_ = pair[0];
    zygote_pid_ = pid;
  }

  bool send_fd(int fd) {
    char byte = 'J';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char space[CMSG_SPACE(sizeof(int))];
    std::memset(space, 0, sizeof(space));
    msghdr msg{};
    msg.msg_iov = &iov, msg.msg_iovlen = 1;
    msg.msg_control = space, msg.msg_controllen = sizeof(space);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET, c->cmsg_type = SCM_RIGHTS, c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    ssize_t n;
    do n = ::sendmsg(control_, &msg, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n == 1;
  }

  std::mutex mutex_;
  int control_ = -1;
  pid_t zygote_pid_ = -1;
};

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "the compiler process was killed by signal " + std::to_string(sig) + " (SIG" + (name ? name : "?") + ")";
  }
  if (WIFEXITED(status)) return "the compiler process exited with status " + std::to_string(WEXITSTATUS(status));
  return "the compiler process ended abnormally";
}

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

void start_compile_service() { CompileService::instance().start(); }

std::string nvrtc_version_string() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return std::to_string(major) + "." + std::to_string(minor);
}

NvrtcOutcome compile_isolated(const NvrtcJob& job, std::chrono::milliseconds timeout) {
  NvrtcOutcome out;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const int fd = CompileService::instance().open_job();
  FdCloser closer{fd};
  if (fd < 0) {
    out.detail = "could not start the compiler process (fork or socket failed: " + std::string(std::strerror(errno)) + ")";
    return out;
  }
  std::string request;
  put_u64(request, 2 + job.options.size());
  put_u64(request, uint64_t(job.fault));
  put_u64(request, uint64_t(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()));
  put_u64(request, job.memory_limit_bytes);
  put_u64(request, job.exec.size());
  put_string(request, job.output);
  put_string(request, job.name);
  put_string(request, job.source);
  for (const auto& o : job.options) put_string(request, o);
  for (const auto& a : job.exec) put_string(request, a);
  if (!write_all(fd, request.data(), request.size())) {
    out.detail = "the compiler worker did not accept the job";
    return out;
  }
  char tag = 0;
  int32_t compiler_pid = -1;
  auto fail_read = [&](ReadResult r, const char* what) {
    if (r == ReadResult::kTimeout) {
      if (compiler_pid > 0) ::kill(-compiler_pid, SIGKILL), ::kill(compiler_pid, SIGKILL);
      out.status = NvrtcOutcome::Status::kTimedOut;
      out.detail = "compilation exceeded the " + std::to_string(timeout.count()) + " ms limit and was killed";
    } else {
      out.status = NvrtcOutcome::Status::kInternal;
      out.detail = std::string("lost contact with the compiler worker while reading ") + what;
    }
    return out;
  };
  if (auto r = read_exact(fd, &tag, 1, deadline); r != ReadResult::kOk || tag != 'P') return fail_read(r, "its pid");
  if (auto r = read_exact(fd, &compiler_pid, 4, deadline); r != ReadResult::kOk) return fail_read(r, "its pid");
  int32_t status = 0;
  uint64_t size = 0;
  if (auto r = read_exact(fd, &tag, 1, deadline); r != ReadResult::kOk || tag != 'R') return fail_read(r, "the result");
  if (auto r = read_exact(fd, &status, 4, deadline); r != ReadResult::kOk) return fail_read(r, "the result");
  if (auto r = read_exact(fd, &size, 8, deadline); r != ReadResult::kOk) return fail_read(r, "the result");
  std::string payload(size, '\0');
  if (auto r = read_exact(fd, payload.data(), size, deadline); r != ReadResult::kOk) return fail_read(r, "the result");

  // payload: u8 success, u64 log size, log, u64 cubin size, cubin
  const bool clean_exit = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  size_t pos = 0;
  auto take_u64 = [&](uint64_t& v) {
    if (pos + 8 > payload.size()) return false;
    std::memcpy(&v, payload.data() + pos, 8);
    pos += 8;
    return true;
  };
  uint64_t log_size = 0, cubin_size = 0;
  const bool complete = payload.size() >= 1 && (pos = 1, take_u64(log_size)) && pos + log_size <= payload.size() &&
                        (out.log.assign(payload.data() + pos, log_size), pos += log_size, take_u64(cubin_size)) &&
                        pos + cubin_size == payload.size();
  if (!clean_exit || !complete) {
    out.status = NvrtcOutcome::Status::kCrashed;
    out.detail = describe_status(status) + (complete ? "" : " before it reported a result");
    return out;
  }
  out.cubin.assign(payload.data() + pos, payload.data() + pos + cubin_size);
  out.status = payload[0] ? NvrtcOutcome::Status::kOk : NvrtcOutcome::Status::kCompileError;
  if (!out.ok()) out.detail = job.exec.empty() ? "NVRTC rejected the program" : job.exec[0] + " rejected the program";
  return out;
}

}  // namespace rlgemm
