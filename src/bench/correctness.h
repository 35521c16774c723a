// The correctness gate every implementation passes before it is timed, and again after its timed calls.
//
// Two checks on fresh inputs for each problem: standard-normal A and B, and uniform-positive A and B (sums
// grow with K, so a 16-bit accumulator, fp16 or bf16, drops the small terms and fails). Before each run C is poisoned with
// NaN and every buffer (and the implementation's workspace) is wrapped in guard bands; after it, every
// element of C must be finite, the guards intact, and every element of C within the tolerance of fp32
// accumulation for the problem's element type (device_data.h: tolerance_ratio) against an fp64 reference of
// all of C.
#pragma once

#include <cuda_fp16.h>

#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/device_data.h"
#include "bench/implementation.h"

namespace rlgemm::bench {

struct CheckResult {
  bool ok = true;
  std::string why;          // first failure, human-readable
  double worst_ratio = 0;   // max over the elements of |c - ref| / tolerance (< 1 passes)
};

// The inputs of one problem and their references: set 0 (standard normal; also the operands the timings
// use) and set 1 (uniform positive), drawn afresh by load().
class Gate {
 public:
  // The shape of the long-K probe (see check()).
  static constexpr Shape kLongK{128, 128, 8192};
  // Calls back to back before the check that follows the timings (recheck()).
  static constexpr int kRecheckRepeats = 8;

  // Fresh inputs drawn from `seed` (the same seed draws the same inputs), and their fp64 references.
  void load(const Problem& problem, uint64_t seed, cudaStream_t stream);
  // Both checks on `impl`, which must already be prepared for the loaded problem. An implementation with
  // run-time shapes is also checked once per layout on kLongK with positive inputs, when the loaded K is
  // shorter (it is left prepared for the loaded problem again).
  CheckResult check(Implementation& impl, cudaStream_t stream);
  // After the timings: C poisoned, kRecheckRepeats calls back to back on the timing operands (set 0), then
  // all of C checked again, so that a race that shows only under repetition (a flag left set, a workspace
  // not cleaned) fails. The timings' operands are set 0 rewritten with the same values, so its reference
  // still holds.
  CheckResult recheck(Implementation& impl, cudaStream_t stream);
  // Rewrites set 0 with the same values (CUDA-L2's "inputs freshly written").
  void rewrite_inputs(cudaStream_t stream);
  const Problem& problem() const { return problem_; }
  uint64_t seed() const { return seed_; }
  Operands operands() const { return {a_[0].data(), b_[0].data(), c_.data()}; }

 private:
  CheckResult check_set(Implementation& impl, int set, int repeats, cudaStream_t stream);
  Problem problem_;
  uint64_t seed_ = 0;
  GuardedBuffer a_[2], b_[2], c_;
  FullReference ref_[2];
  std::unique_ptr<Gate> long_k_[2][2];  // per layout and element type, loaded on first use
  std::set<std::tuple<std::string, Layout, DType>> long_k_passed_;  // implementations that passed the probe
};

}  // namespace rlgemm::bench
