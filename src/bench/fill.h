// Random fp16 or bf16 operands on the device, for the harness's gate and timings and for the library's first-use
// timing of cuBLASLt's candidates (never zeros: they run faster than real data, and hide unwritten outputs).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/cuda_util.h"
#include "rlgemm/problem.h"

namespace rlgemm::bench {

enum class Fill { kNormal, kUniformPositive };

// Fills `elems` values of `dtype` (each rounded to nearest even from the same fp32 draw): standard normal, or
// uniform in [0, 1) (so that sums grow with K and a 16-bit accumulator loses the small terms). Counter-based:
// the same seed gives the same data. `data` holds 16-bit elements of either type.
void fill_random(half* data, size_t elems, Fill fill, uint64_t seed, cudaStream_t stream, DType dtype);

// A problem's operands on the device for choosing among candidates by timing: A and B standard normal of
// the problem's element type (seeds 1 and 2, filled on `stream`), C unwritten. Freed on destruction: the
// caller synchronizes `stream` first.
struct ScratchOperands {
  ScratchOperands(const Problem& problem, cudaStream_t stream);
  DeviceScratch<half> a, b, c;
};

// Up to `wanted` ScratchOperands of one problem, allocated apart (each after a pad of its own size, so that the
// sets start at unrelated places): for a choice that must hold wherever a caller's operands lie. As many as fit
// in `budget_bytes` of operands and in half the free device memory, and always one. Freed on destruction, as
// ScratchOperands.
class OperandSets {
 public:
  OperandSets(const Problem& problem, cudaStream_t stream, int wanted, size_t budget_bytes);
  size_t size() const { return sets_.size(); }
  const ScratchOperands& operator[](size_t i) const { return *sets_.at(i); }

 private:
  std::vector<std::unique_ptr<DeviceScratch<unsigned char>>> pads_;
  std::vector<std::unique_ptr<ScratchOperands>> sets_;
};

// How many operand sets of `set_bytes` each OperandSets allocates: at most `wanted`, within `budget_bytes` and
// half of `free_bytes`, at least one.
int operand_set_count(size_t set_bytes, int wanted, size_t budget_bytes, size_t free_bytes);

}  // namespace rlgemm::bench
