// Isolated measuring: candidates run in a worker process, so that an illegal memory access, a crash of the
// kernel or of the compiler, or a hang, costs one candidate and not the tuner.
//
// Protocol: one JSON object per line over a socket pair that is the worker's stdin and stdout.
//   worker -> tuner, once at start: {"ready":true,"gpu":{...}} or {"ready":false,"error":"...","kind":N}
//   tuner -> worker: {"op":"reference","m":M,"n":N,"k":K,"layout":"tn","mode":"offline"}
//                    {"op":"measure","design":"<text>","m":M,"n":N,"k":K,"layout":"tn","mode":"offline"}
//   worker -> tuner: {"ok":true,"timing":{...}} | {"ok":true,"measurement":{...}} | {"ok":false,"error":"..."}
// The worker serves requests in order until its input closes. The tuner side (WorkerMeasurer) runs a
// watchdog per request: no answer within the timeout kills the worker (status timeout); a worker that dies
// (status crashed, with its signal) is restarted for the next candidate.
#pragma once

#include <condition_variable>
#include <mutex>

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "search/measurer.h"

namespace rlgemm::search {

// Serves the protocol on `in_fd` / `out_fd` with a backend built from `options` (in this process).
// Returns the process exit code: 0 at end of input.
int serve_worker(const BackendOptions& options, int in_fd = 0, int out_fd = 1);

nlohmann::json to_json(const Measurement& m);
Measurement measurement_from_json(const nlohmann::json& j);
nlohmann::json to_json(const GpuIdentity& g);
GpuIdentity gpu_from_json(const nlohmann::json& j);
nlohmann::json to_json(const TimingStats& t);
TimingStats timing_from_json(const nlohmann::json& j);
// A problem and timing mode as the fields of a request: "m", "n", "k", "layout", "mode".
nlohmann::json problem_json(const Problem& p, TimingMode mode);
Problem problem_from_json(const nlohmann::json& j);

// How to start a worker: exec `argv` (e.g. {"/proc/self/exe", "worker", "--backend", "gpu", "--gpu", "1"}),
// or, when argv is empty, fork and call `child` (it gets the protocol on fds 0 and 1 and returns the exit
// code). Fork without exec is for processes that have not initialised CUDA (tests, the synthetic backend).
struct WorkerLaunch {
  std::vector<std::string> argv;
  std::function<int()> child;
};

struct WorkerLimits {
  double request_timeout_s = 300;  // compile + correctness gate + timing of one candidate
  double startup_timeout_s = 120;  // until the worker says ready (device open)
  int max_consecutive_restarts = 32;  // failures without one answered request between: the backend is broken
};

class WorkerMeasurer : public Measurer {
 public:
  WorkerMeasurer(WorkerLaunch launch, WorkerLimits limits = {});
  ~WorkerMeasurer() override;

  GpuIdentity gpu() override;
  TimingStats reference(const Problem& problem, TimingMode mode) override;
  Measurement measure(const Design& design, const Problem& problem, TimingMode mode) override;
  // Asks the worker to build the batch's kernels at once (the "build" request); the wall time it took.
  double build_ahead(const std::vector<Design>& designs, const Problem& problem) override;
  // Asks the worker to build them in the background (the "prefetch" request, answered at once).
  void prefetch(const std::vector<Design>& designs, const Problem& problem) override;
  // The worker's answer, or, when it hung or died on the request, {"worker_failed": "timeout" | "died", "why": ...}
  // (a key of its own: a pool tags every record it passes on with "worker", the member that evaluated it).
  nlohmann::json evaluate(const nlohmann::json& request) override;
  void set_request_timeout(double seconds) { limits_.request_timeout_s = seconds; }

  int restarts() const { return restarts_; }
  pid_t pid() const { return pid_; }

 private:
  struct Reply {
    enum class Kind { kAnswer, kTimeout, kDied } kind = Kind::kDied;
    nlohmann::json answer;
    std::string why;
  };
  void start();
  void stop(bool kill_first);
  Reply request(const nlohmann::json& message, double timeout_s);
  bool read_line(std::string& line, double timeout_s, Reply& failure);
  std::string reap();  // waits for the dead or killed worker, describes how it ended

  WorkerLaunch launch_;
  WorkerLimits limits_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
  GpuIdentity gpu_;
  bool have_gpu_ = false;
  bool ever_started_ = false;
  int restarts_ = 0;
  int consecutive_failures_ = 0;
};

// Spreads each batch over several measurers (one worker per GPU), one thread each: member w builds and measures
// designs w, w + n, ... of the batch (n members), so every GPU's share is compiled at once. Results in order.
class PoolMeasurer : public Measurer {
 public:
  explicit PoolMeasurer(std::vector<MeasurerPtr> members);
  GpuIdentity gpu() override { return members_.front()->gpu(); }
  TimingStats reference(const Problem& problem, TimingMode mode) override;
  Measurement measure(const Design& design, const Problem& problem, TimingMode mode) override;
  double build_ahead(const std::vector<Design>& designs, const Problem& problem) override;
  void prefetch(const std::vector<Design>& designs, const Problem& problem) override;
  std::vector<Measurement> measure_batch(const std::vector<Design>& designs, const Problem& problem,
                                         TimingMode mode) override;
  int parallelism() const override { return int(members_.size()); }
  // Thread-safe: each call waits for an idle member (one request per GPU at a time) and runs on it.
  nlohmann::json evaluate(const nlohmann::json& request) override;
  Measurer& member(size_t i) { return *members_[i]; }

 private:
  std::vector<MeasurerPtr> members_;
  std::mutex idle_mutex_;
  std::condition_variable idle_changed_;
  std::vector<bool> busy_;
};

}  // namespace rlgemm::search

namespace rlgemm::search {

// The measurer the CLI builds: one backend per selected GPU, each in its own worker process unless
// `isolated` is off (then one GPU, in this process).
struct MeasurerSetup {
  BackendOptions backend;
  std::string gpus = "1";       // "all" | a count ("2": the first two) | ordinals ("0,2")
  int first_gpu = 0;            // where a count starts (parse_gpu_selection)
  bool isolated = true;
  double timeout_s = 300;       // watchdog per candidate
  std::string worker_exe;       // the rlgemm executable that serves `rlgemm worker`
};

// The GPU ordinals a --gpus value selects; a count starts at ordinal `first` (ranks of one machine take
// consecutive GPUs), which "all" and a list of ordinals do not allow. Throws Error(kInvalidInput) naming the
// accepted forms.
std::vector<int> parse_gpu_selection(const std::string& gpus, const BackendOptions& backend, int first = 0);
MeasurerPtr make_measurer(const MeasurerSetup& setup);

}  // namespace rlgemm::search
