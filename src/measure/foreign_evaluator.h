// The SASS game's GPU evaluator for kernels rlgemm did not write (a cubin, a kernel name and a launch SPEC,
// measure/launch_spec.h), with every kernel run in an isolated worker process.
//
// A foreign kernel may fault on any schedule, and a fault poisons the CUDA context of the process that ran it.
// So nothing of it runs in sass-opt's own process: the measuring worker of the tuner (search/worker.h,
// `rlgemm worker --backend sass-foreign`) runs the original and every candidate, and a candidate that faults
// or hangs ends that worker only. The candidate is reported as failed (the game gives -1, the schedule is
// saved for inspection), the worker is started again for the next candidate, and the search goes on.
//
// In the worker (ForeignKernelBackend): the original cubin's kernel is loaded, every buffer of the SPEC is
// allocated with guard bands, and the fills of `draws` input draws are made from the seed and kept on the
// device, with the original's output on each draw. The original is run twice on the first draw: a kernel
// whose output is not reproducible bit for bit cannot be judged and is refused. A candidate is loaded as a
// module of its own, run on each draw (every buffer refilled before each run) and its outputs compared bit for
// bit with the original's; buffer guards must stay intact. Then both are timed side by side, offline, on the
// first draw's inputs, in rounds of shuffled order (bench::time_side_by_side).
//
// Request (op "evaluate", fields besides op):
//   {"foreign": {"cubin": PATH, "kernel": NAME, "launch": SPEC, "seed": S, "draws": D},
//    "task": "judge", "candidate": PATH (absent: the original against itself), "draws": d (<= D),
//    "timing": {"batch_target_us": .., "batches": .., "max_warmup_batches": .., "seed": ..}}
//   {"foreign": {...}, "task": "time", "timing": {...}}          the original alone
// Record: {"ok": true, "draws": d, "original_us": .., "candidate_us": .., "samples": n,
//          "original_rounds_us": [..], "candidate_rounds_us": [..]} | {"ok": false, "failure": why}
//         {"ok": true, "time_us": ..} for "time".
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/timing.h"
#include "measure/sass_evaluator.h"
#include "sass/game.h"
#include "search/measurer.h"

namespace rlgemm::measure {

// The kernel a worker session runs: what every request names, so that a restarted worker rebuilds it.
struct ForeignTarget {
  std::string cubin_path;
  std::string kernel;
  std::string launch_path;
  uint64_t seed = 1;
  int draws = 8;  // input draws prepared (the most any request asks for)
  nlohmann::json to_json() const;
  static ForeignTarget from_json(const nlohmann::json& j);
  friend bool operator==(const ForeignTarget&, const ForeignTarget&) = default;
};

struct ForeignEvaluatorOptions {
  int search_draws = 3;  // input draws per candidate during the search
  // In-search timing: short and side by side with the original.
  bench::TimingOptions search_timing = {300.0, 5, 4, 15, 10.0, 1};
  // The original's reference time, measured once.
  bench::TimingOptions reference_timing = {1000.0, 15, 30, 15, 10.0, 1};
};

class ForeignSassEvaluator : public sass::Evaluator, public CubinJudge {
 public:
  // `worker` serves the "sass-foreign" backend (a WorkerMeasurer). Starts it now: Error(kNoDevice) without a
  // usable Hopper GPU there.
  ForeignSassEvaluator(search::MeasurerPtr worker, ForeignTarget target, ForeignEvaluatorOptions options = {});
  ~ForeignSassEvaluator() override;
  ForeignSassEvaluator(const ForeignSassEvaluator&) = delete;
  ForeignSassEvaluator& operator=(const ForeignSassEvaluator&) = delete;

  sass::Measurement evaluate(const sass::Candidate& candidate) override;
  std::string name() const override { return "gpu"; }
  // A candidate that crashes or hangs its worker is a failed comparison (context_lost stays false: the
  // context was the worker's); the schedule is saved and named in failure. Throws Error when the worker
  // cannot serve at all (it does not start, or fails every request).
  CubinComparison compare(const std::vector<uint8_t>& cubin, int draws, const bench::TimingOptions& timing,
                          bench::Mode mode) override;

  // The original's offline time (reference_timing), measured on first use. Throws Error(kRuntime) when the
  // original itself does not run with the SPEC.
  double reference_time_us();
  int faults() const { return faults_; }  // candidates that crashed or hung their worker

 private:
  nlohmann::json request(const std::string& task, const std::string& candidate, int draws, bench::Mode mode,
                         const bench::TimingOptions& timing);

  search::MeasurerPtr worker_;
  ForeignTarget target_;
  ForeignEvaluatorOptions options_;
  std::filesystem::path scratch_;  // where candidates are written for the worker to read
  std::optional<double> reference_us_;
  int faults_ = 0;
};

// The worker's launch of the backend: `rlgemm worker --backend sass-foreign --gpu 0` from `exe`.
search::MeasurerPtr start_foreign_worker(const std::string& exe, double request_timeout_s = 300);

// Registers the "sass-foreign" backend of the worker process (called by install_gpu_backends()).
void install_foreign_sass_backend();

}  // namespace rlgemm::measure
