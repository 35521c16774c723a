// The measuring backend the tuner talks to: compile a design, check it, time it, on one problem.
//
// Backends: the synthetic cost model (CPU, deterministic, for tests and strategy comparisons) and the GPU
// harness. Either runs in-process or, wrapped by WorkerMeasurer (worker.h), in a separate worker process
// that a crash or a hang cannot take down with the tuner. Backends are created by name through the
// registry below, so the CLI and the worker process build the same backend from the same options.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rlgemm/design.h"
#include "rlgemm/problem.h"
#include "store/measurement.h"

namespace rlgemm::search {

// The compiled kernel that measuring `design` on `problem` needs: one per design and B layout, and one per shape for
// a design that bakes the shape in. Backends compile each once and report its compile time with its first
// measurement.
inline std::string compile_key(const Design& design, const Problem& problem) {
  std::string key = to_string(design) + "|" + std::string(to_string(problem.layout));
  if (design.static_shape) key += "|" + problem.shape.to_string();
  return key;
}

class Measurer {
 public:
  virtual ~Measurer() = default;

  // The GPU this backend measures on (recorded with every measurement).
  virtual GpuIdentity gpu() = 0;

  // The vendor reference time (cuBLASLt with every heuristic candidate timed, "lt_auto") for a problem, timed
  // alone: for reports only. No reward divides by it: a time taken at another moment is not comparable.
  // Throws Error when the reference cannot be measured.
  virtual TimingStats reference(const Problem& problem, TimingMode mode) = 0;

  // Compiles (or reuses the compiled) design, runs the correctness gate, and times it side by side with the
  // reference (lt_auto's choice, the library's cuBLASLt floor) in interleaved rounds in `mode`: a kOk result
  // carries its PairedGain, the reward. Never throws for a bad candidate: a compile error, a wrong result, a
  // launch failure is reported in the Measurement's status. Throws Error only when the backend itself is
  // unusable (no device, lost worker that cannot restart).
  virtual Measurement measure(const Design& design, const Problem& problem, TimingMode mode) = 0;

  // Builds the kernels of `designs` for `problem` ahead, at once (their compiles run concurrently), so that
  // measuring them afterwards only loads them. Returns the wall seconds it took; 0 where the backend compiles
  // nothing ahead (the default). A design that does not build is measure()'s to report; nothing throws here
  // for a bad candidate.
  virtual double build_ahead(const std::vector<Design>& designs, const Problem& problem) {
    (void)designs, (void)problem;
    return 0;
  }

  // Starts building the kernels of `designs` for `problem` in the background and returns at once, so that a later
  // build_ahead() or measure() of them finds them built: the next problem's first round is built while this one
  // is measured. Default: nothing.
  virtual void prefetch(const std::vector<Design>& designs, const Problem& problem) { (void)designs, (void)problem; }

  // Several candidates of one problem, results in the order of `designs`: by default, the batch's kernels built
  // ahead at once (their wall time in the first measurement's PhaseSeconds::build), then each measured in turn.
  // Backends that spread a batch over several GPUs override this.
  virtual std::vector<Measurement> measure_batch(const std::vector<Design>& designs, const Problem& problem,
                                                 TimingMode mode) {
    const double build = designs.size() > 1 ? build_ahead(designs, problem) : 0.0;
    std::vector<Measurement> out;
    out.reserve(designs.size());
    for (const auto& d : designs) out.push_back(measure(d, problem, mode));
    if (!out.empty()) out.front().seconds.build += build;
    return out;
  }

  // How many candidates measure_batch works on at once (the tuner sizes its batches with it).
  virtual int parallelism() const { return 1; }
  // A request of the evaluation service (env/): a submission checked and timed, answered with its record.
  // Backends that do not serve the service refuse with Error(kInvalidInput).
  virtual nlohmann::json evaluate(const nlohmann::json& request);
};

using MeasurerPtr = std::unique_ptr<Measurer>;

// What a backend is built from (the same options reach an in-process backend and a worker's).
struct BackendOptions {
  std::string backend = "synthetic";  // "synthetic" | "gpu" | any registered name
  int gpu_ordinal = 0;                // which GPU of the machine
  double delay_ms = 0;                // synthetic: sleep per measurement, to simulate a slow GPU
  // synthetic: the simulated GPU gets faster by this fraction with every measurement (clocks and power state
  // that move between moments, as a real GPU's do by up to 10%): what a reward that divides times taken at
  // different moments takes for a gain. The paired reward is blind to it.
  double drift = 0;
  // synthetic: the reference kernel's own state, drawn for each measurement and held through its rounds: slow by
  // this fraction in a third of the measurements (on an H200 the floor's choice at 16x36864x4608 ran 79.5-88.4 us
  // from one batch of a tune to the next, steady within each). A design paired with the reference in its slow
  // state measures a gain it does not have; the paired reward is blind to it, a second measurement is not.
  double reference_states = 0;
  bool simulate_faults = false;       // synthetic: act out test.* designs (segfault, hang), only in a worker
};

using BackendFactory = std::function<MeasurerPtr(const BackendOptions&)>;

// Registers a backend under a name (the GPU harness registers "gpu"). Later registrations replace earlier.
void register_backend(const std::string& name, BackendFactory factory);
// Builds the named backend in this process. Throws Error(kInvalidInput) naming the known backends when
// `options.backend` is not registered; "gpu" reports that this build has no GPU backend until one is.
MeasurerPtr make_backend(const BackendOptions& options);
// How many GPUs the named backend sees ("--gpus all"); 1 for the synthetic backend.
int backend_device_count(const BackendOptions& options);
void register_backend_device_counter(const std::string& name, std::function<int()> counter);

}  // namespace rlgemm::search
