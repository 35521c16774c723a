// NVRTC compilation in a separate process, so that a compiler crash (NVRTC 13.0 has segfaulted inside
// nvrtcCompileProgram on some wgmma code) or a runaway compile cannot take the calling program down.
//
// Processes: at first use the caller forks a small "zygote" process that does nothing but fork. For each
// compile the zygote forks a worker, and the worker forks the compiler process that runs NVRTC; the
// worker reports the compiler's exit status (a crash's signal included) and output. Forking from the
// single-threaded zygote, never from the (multi-threaded, possibly CUDA-initialized) caller, keeps the
// children free of locks held by other threads. The caller's side is thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace rlgemm {

// Test hooks: make the compiler process misbehave, to check that the caller survives.
enum class CompilerFault { kNone, kCrash, kHang };

struct NvrtcJob {
  std::string name;     // file name shown in diagnostics
  std::string source;
  std::vector<std::string> options;
  CompilerFault fault = CompilerFault::kNone;
  // Instead of NVRTC, run this program (argv[0] a path) in the compiler process, in a process group of its own
  // that a timeout kills whole; its stdout and stderr become the log, and the file `output` it writes becomes
  // the result's bytes (NvrtcOutcome::cubin). `source` is then unused. For nvcc, which host code needs.
  std::vector<std::string> exec;
  std::string output;
  // Address-space limit of the compiler process (and what it runs), in bytes; 0: none. A compile that needs
  // more fails with the compiler's own out-of-memory message (or a crash) instead of taking the machine's memory.
  uint64_t memory_limit_bytes = 0;
};

struct NvrtcOutcome {
  enum class Status { kOk, kCompileError, kCrashed, kTimedOut, kInternal } status = Status::kInternal;
  std::string log;            // NVRTC's program log (errors, or ptxas -v resource usage)
  std::vector<char> cubin;    // when kOk
  std::string detail;         // what happened, for kCrashed / kTimedOut / kInternal
  bool ok() const { return status == Status::kOk; }
};

// Compiles `job` with NVRTC (or its exec program) in an isolated process, giving up (and killing it) after `timeout`. The kernel
// headers embedded in the library are offered to the program by name. Never throws for compile failures.
NvrtcOutcome compile_isolated(const NvrtcJob& job, std::chrono::milliseconds timeout);

// Starts the zygote now. Optional: call it early, before threads or CUDA exist, for the cleanest fork.
void start_compile_service();

// "13.0": the NVRTC version this process links.
std::string nvrtc_version_string();

}  // namespace rlgemm
