// The correctness gate every implementation passes before it is timed.
//
// Two checks on fresh inputs for each problem: standard-normal A and B, and uniform-positive A and B (sums
// grow with K, so an fp16 accumulator drops the small terms and fails). Before each run C is poisoned with
// NaN and every buffer is wrapped in guard bands; after it, every element of C must be finite, the guards
// intact, and the sampled elements within the tolerance of fp32 accumulation against an fp64 reference.
#pragma once

#include <cuda_fp16.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "bench/device_data.h"
#include "bench/implementation.h"

namespace rlgemm::bench {

// |c - ref| <= kRelTol * |ref| + kSumTol * sum_k |a_ik b_kj|: the first term covers rounding the fp32
// result to fp16 (half an ulp is 2^-11 relative) with a factor 2 of margin; the second covers fp32
// accumulation order with room to spare, and stays far below what fp16 accumulation loses once K reaches a
// few hundred with positive inputs.
inline constexpr double kRelTol = 1.0 / 1024.0;
inline constexpr double kSumTol = 1.0 / 65536.0;

struct CheckResult {
  bool ok = true;
  std::string why;          // first failure, human-readable
  double worst_ratio = 0;   // max over samples of |c - ref| / tolerance (< 1 passes)
};

// Compares sampled outputs with the reference; `what` names the check in the message.
CheckResult compare_samples(const std::vector<half>& got, const Reference& ref, const std::string& what);

// The inputs of one problem and their references: set 0 (standard normal; also the operands the timings
// use) and set 1 (uniform positive), drawn afresh by load().
class Gate {
 public:
  // The shape of the long-K probe (see check()).
  static constexpr Shape kLongK{128, 128, 8192};

  void load(const Problem& problem, uint64_t seed, cudaStream_t stream);
  // Both checks on `impl`, which must already be prepared for the loaded problem. An implementation with
  // run-time shapes is also checked once per layout on kLongK with positive inputs, when the loaded K is
  // shorter (it is left prepared for the loaded problem again).
  CheckResult check(Implementation& impl, cudaStream_t stream);
  // Rewrites set 0 with the same values (CUDA-L2's "inputs freshly written").
  void rewrite_inputs(cudaStream_t stream);
  const Problem& problem() const { return problem_; }
  Operands operands() const { return {a_[0].data(), b_[0].data(), c_.data()}; }

 private:
  CheckResult check_set(Implementation& impl, int set, cudaStream_t stream);
  Problem problem_;
  uint64_t seed_ = 0;
  GuardedBuffer a_[2], b_[2], c_;
  SampleSet samples_;
  Reference ref_[2];
  std::unique_ptr<Gate> long_k_[2];                       // per layout, loaded on first use
  std::set<std::pair<std::string, Layout>> long_k_passed_;  // implementations that passed the probe
};

}  // namespace rlgemm::bench
