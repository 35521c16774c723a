// torch.matmul as a benchmarked implementation. PyTorch lives in Python, so it runs in a worker process
// (python/rlgemm_torch_worker.py) that applies the same correctness gate and timing modes as this harness
// and answers one JSON line per problem.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "rlgemm/problem.h"

namespace rlgemm::bench {

inline constexpr const char* kTorchImplementation = "torch";

struct TorchMeasurement {
  bool correct = false;
  std::string detail;             // torch version and worst error, or why the gate failed
  std::map<Mode, Timing> timing;  // every requested mode when correct, none otherwise
};

// The worker script: $RLGEMM_TORCH_WORKER when set, else the first found of: beside the running executable
// (the build copies it there), the source tree's python/ folder. Empty when none exists; `looked_in` lists
// the places tried.
std::string find_torch_worker_script(std::string* looked_in = nullptr);

class TorchWorker {
 public:
  // Starts `python3 <script> --device N` ($RLGEMM_PYTHON replaces python3) and waits for its handshake.
  // Throws Error(kRuntime) saying why when the script, Python, PyTorch or its CUDA device is missing.
  static std::unique_ptr<TorchWorker> start(int device = 0,
                                            std::chrono::milliseconds handshake_timeout = std::chrono::seconds(120));
  ~TorchWorker();
  TorchWorker(const TorchWorker&) = delete;
  TorchWorker& operator=(const TorchWorker&) = delete;

  const std::string& torch_version() const { return torch_version_; }
  const std::string& cuda_version() const { return cuda_version_; }
  const std::string& device_name() const { return device_name_; }

  // Checks and times torch.matmul on one problem, fresh inputs drawn from `seed`. A problem that fails the
  // gate, or that torch rejects while the worker lives on, is a measurement (correct = false, the reason in
  // detail). Throws Error(kOutOfMemory) when torch runs out of device memory, Error(kRuntime) when the
  // worker dies, hangs past `timeout` or breaks the protocol.
  TorchMeasurement measure(const Problem& problem, const std::vector<Mode>& modes, const TimingOptions& timing,
                           uint64_t seed, std::chrono::milliseconds timeout = std::chrono::minutes(10));

 private:
  TorchWorker() = default;
  void send_line(const std::string& line);
  // The next line from the worker; throws, with the worker's exit status and stderr, when it ends first.
  std::string read_line(std::chrono::milliseconds timeout);
  [[noreturn]] void fail_dead(const std::string& what);
  std::string stderr_tail() const;

  pid_t pid_ = -1;
  int to_worker_ = -1;    // its stdin
  int from_worker_ = -1;  // its stdout
  int stderr_file_ = -1;  // its stderr, an unlinked temporary file read back for error messages
  std::string pending_;   // bytes read past the last line
  std::string torch_version_, cuda_version_, device_name_;
};

// True when the worker starts and PyTorch sees a CUDA device; otherwise false and `why` says what is missing.
bool torch_available(std::string* why = nullptr, int device = 0);

}  // namespace rlgemm::bench
