// The SASS game's GPU evaluator: a candidate schedule is judged by running its cubin.
//
// Each candidate cubin is loaded as a module of its own (nothing is compiled) and unloaded after it was
// judged, so thousands of steps do not accumulate modules. It is kept only when, on several fresh random
// input draws, its output is bitwise identical to the compiled cubin's output on the same inputs (C
// poisoned with NaN before every run, C's guard bands intact after). Then the two are timed side by side
// with the harness's offline method, and the candidate's time is reported relative to the compiled one's:
//   time_us = reference_us * candidate_us / original_us   (candidate and original from the same rounds)
// so a slow spell of the GPU falls on both and does not look like a worse schedule.
//
// A failure (the cubin does not load, the launch is refused, the output differs) is a failed Measurement:
// the game gives -1 and ends the episode. A sticky CUDA error (illegal address, trap, misaligned access) or
// a hang loses the CUDA context for the whole process: that candidate fails, context_lost() turns true,
// and every later evaluate() throws Error(kRuntime) saying so, which ends the search. After a hang
// (device_hung()) nothing waits for the device any more: not a synchronization, not a module unload.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/device_data.h"
#include "bench/timing.h"
#include "compile/compiler.h"
#include "core/cuda_util.h"
#include "rlgemm/design.h"
#include "rlgemm/problem.h"
#include "run/gemm_kernel.h"
#include "sass/game.h"
#include "sass/optimize.h"

namespace rlgemm::measure {

struct SassEvaluatorOptions {
  int draws = 3;       // fresh input draws per candidate: even draws standard normal, odd uniform positive
  uint64_t seed = 1;   // of the input draws (each draw gets its own)
  // In-search timing: short and side by side with the compiled cubin.
  bench::TimingOptions search_timing = {300.0, 5, 4, 15, 10.0, 1};
  // The reference time of the compiled cubin, measured once.
  bench::TimingOptions reference_timing = {1000.0, 15, 30, 15, 10.0, 1};
  // A run that has not finished after max(hang_seconds, 1000 x the compiled cubin's time) is a hang.
  double hang_seconds = 10.0;
};

// One side-by-side judgement of a cubin against the compiled one.
struct CubinComparison {
  bool ok = false;            // loaded, ran, finished and bitwise identical on every draw; then timed
  std::string failure;        // why not ok
  bool context_lost = false;  // the failure was a sticky CUDA error or a hang
  int draws = 0;              // draws compared bitwise
  double original_us = 0;     // both from the same offline rounds (valid when ok)
  double candidate_us = 0;
  int samples = 0;            // timed batches per cubin
  // Per call, batch by batch, in round order: entry r of both lists comes from round r (gain_interval.h).
  std::vector<double> original_rounds_us;
  std::vector<double> candidate_rounds_us;
};

// Judges a cubin of the kernel (the same kernel, rescheduled) against its compiled schedule: bitwise on `draws`
// fresh draws, then timed side by side with `timing` in `mode` (offline: back-to-back launches; graph: the
// launches captured in CUDA graphs, the GPU's own time, where a kernel of a few microseconds cannot gain by
// launch effects). Never throws for a bad candidate: see failure.
class CubinJudge {
 public:
  virtual ~CubinJudge() = default;
  virtual CubinComparison compare(const std::vector<uint8_t>& cubin, int draws, const bench::TimingOptions& timing,
                                  bench::Mode mode) = 0;
};

// SHA-256 (hex) of a cubin's bytes: the key of its module and the name of its saved copy.
std::string cubin_digest(const std::vector<uint8_t>& bytes);

// A candidate's module, loaded under `key`, unloaded when the judgement is over (kept or not, it is loaded
// afresh when needed), so that thousands of candidates do not accumulate modules.
class CandidateModule {
 public:
  explicit CandidateModule(std::string key) : key_(std::move(key)) {}
  ~CandidateModule();
  CandidateModule(const CandidateModule&) = delete;
  CandidateModule& operator=(const CandidateModule&) = delete;

 private:
  std::string key_;
};

// Saves a schedule that broke a kernel as <temp>/rlgemm-sass-fault-<digest>.cubin, for the reader who looks
// for the rule that let it through; returns the path, or "" when it could not be written.
std::string save_faulting_cubin(const std::vector<uint8_t>& cubin);

class GpuSassEvaluator : public sass::Evaluator, public CubinJudge {
 public:
  // `original` is the compiled kernel of (design, problem): the schedule every candidate is checked and
  // timed against. Its cache_key names its module (a compile-cache key, or any key unique to its bytes).
  // Throws Error(kNoDevice) without a usable GPU, Error(kInvalidInput) when the design cannot run here.
  GpuSassEvaluator(const Design& design, const Problem& problem, const DeviceInfo& device, CompiledKernel original,
                   SassEvaluatorOptions options = {});
  ~GpuSassEvaluator() override;
  GpuSassEvaluator(const GpuSassEvaluator&) = delete;
  GpuSassEvaluator& operator=(const GpuSassEvaluator&) = delete;

  sass::Measurement evaluate(const sass::Candidate& candidate) override;
  std::string name() const override { return "gpu"; }

  // Checks `cubin` (the same kernel, rescheduled) bitwise against the compiled cubin on `draws` fresh draws,
  // then times the two side by side with `timing` in `mode`. Never throws for a bad candidate: see failure.
  CubinComparison compare(const std::vector<uint8_t>& cubin, int draws, const bench::TimingOptions& timing,
                          bench::Mode mode) override;

  // The compiled cubin's offline time (reference_timing), measured on first use.
  double reference_time_us();
  bool context_lost() const { return !lost_.empty(); }
  const std::string& context_lost_reason() const { return lost_; }
  // The compiled cubin's time, once the first evaluation measured it (0 before).
  double measured_reference_us() const { return reference_us_.value_or(0.0); }
  const GemmKernel& original() const { return original_; }
  const DeviceInfo& device() const { return device_; }
  int candidates_loaded() const { return loaded_; }

 private:
  // Why the last failure lost the context, or "" when it did not (then any error state was cleared).
  std::string sticky_error(const std::string& what);
  // Waits for `stream` up to the hang limit; "" when the work finished without error.
  std::string wait(const std::string& what);
  void zero_workspaces();
  void load_timing_inputs();

  Design design_;
  Problem problem_;
  DeviceInfo device_;
  SassEvaluatorOptions options_;
  GemmKernel original_;
  cudaStream_t stream_ = nullptr;
  bench::GuardedBuffer a_, b_, c_original_, c_candidate_, workspace_original_, workspace_candidate_;
  size_t workspace_bytes_ = 0;
  uint64_t next_draw_ = 0;
  std::optional<double> reference_us_;
  std::string lost_;
  int loaded_ = 0;
};

// The factory sass::make_evaluator("gpu", target) uses: parses target.design, opens device 0 (Error kNoDevice
// without one; Error kNoDevice naming the GPU when it is not Hopper, the only architecture the game reads)
// and takes target.cubin's kernel as the compiled schedule.
std::unique_ptr<sass::Evaluator> make_sass_gpu_evaluator(const sass::GpuEvaluationTarget& target);
// Installs make_sass_gpu_evaluator as the SASS stage's GPU evaluator factory (idempotent).
void install_sass_gpu_evaluator();

// Opens the GPU the SASS game runs on: device 0, which must be an sm_90 (Hopper) GPU. Throws
// Error(kNoDevice) with a clear message otherwise.
DeviceInfo open_sass_device();

}  // namespace rlgemm::measure
