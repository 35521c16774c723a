// The tuner's GPU backend ("gpu"): a candidate design is compiled (through the cubin cache, concurrently
// for a batch), passed through the benchmark harness's correctness gate and timed with the harness's own
// methods side by side with the reference, cuBLASLt with every heuristic candidate timed (lt_auto: the
// library's floor), in interleaved rounds of one process: the paired gain is the tuner's reward.
//
// A CUDA error that poisons the context (an illegal address, a kernel trap) cannot be survived by this
// process: the backend reports it on stderr and ends the process, so that the worker that hosts it is
// restarted and only this candidate is lost (worker.h).
#pragma once

#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "bench/correctness.h"
#include "bench/timing.h"
#include "core/cuda_util.h"
#include "measure/design_implementation.h"
#include "search/measurer.h"

namespace rlgemm::measure {

class GpuMeasurer : public search::Measurer {
 public:
  explicit GpuMeasurer(const search::BackendOptions& options);
  ~GpuMeasurer() override;

  GpuIdentity gpu() override;
  TimingStats reference(const Problem& problem, TimingMode mode) override;
  Measurement measure(const Design& design, const Problem& problem, TimingMode mode) override;
  double build_ahead(const std::vector<Design>& designs, const Problem& problem) override;
  // Builds them on a thread of its own while this process measures (one prefetch at a time; a second one asked
  // for while the first runs is dropped). A measurement or build of a kernel it holds waits for it.
  void prefetch(const std::vector<Design>& designs, const Problem& problem) override;
  int parallelism() const override;

 private:
  void load_problem(const Problem& problem);
  // lt_auto for the loaded problem, chosen and through the gate once per problem.
  bench::Implementation& reference_for(const Problem& problem, TimingMode mode);
  // Times `subjects` (implementations of the loaded problem) side by side in `mode`.
  std::vector<bench::Timing> time(const std::vector<bench::Implementation*>& subjects, const Problem& problem,
                                  TimingMode mode);
  [[noreturn]] void context_lost(const std::string& what);
  // The kernels of `designs` for `problem` that this process has not built or reported yet, each once.
  std::vector<KernelBuild> builds_for(const std::vector<Design>& designs, const Problem& problem);
  // Takes what the prefetch built into compiled_ahead_: once it is done, or, with `wait`, after waiting for it.
  void collect_prefetch(bool wait);

  DeviceInfo device_;
  CompileOptions compile_options_;
  cudaStream_t stream_ = nullptr;
  bench::Gate gate_;
  std::optional<Problem> loaded_;
  bench::ImplementationPtr reference_;      // lt_auto, prepared for reference_problem_
  std::optional<Problem> reference_problem_;
  bench::Mode reference_choice_ = bench::Mode::kOffline;  // the mode lt_auto timed its candidates in
  uint64_t seed_;
  std::map<std::string, std::unique_ptr<DesignImplementation>> designs_;
  std::map<std::string, double> compiled_ahead_;  // kernel -> compile seconds, for batches compiled ahead
  std::set<std::string> reported_;                 // kernels whose compile time was recorded already
  std::future<std::vector<KernelBuild>> prefetching_;  // the prefetch's build, running on its own thread
  std::set<std::string> prefetching_keys_;            // the kernels it builds
};

// Ends a worker process whose CUDA context a kernel broke (an illegal address, a trap), saying `what` on stderr:
// nothing can run in the process any more, so it exits (code 70) and the worker is restarted; only the kernel
// that broke it is lost (worker.h).
[[noreturn]] void end_worker_after_context_loss(const std::string& what);

// Registers "gpu" with the search's backend registry, and the SASS game's GPU evaluator. Called once at
// start-up by the programs that measure on the GPU.
void install_gpu_backends();
// The CUDA devices this process sees (0 without a driver): the device counter of the GPU backends.
int gpu_count();

}  // namespace rlgemm::measure
