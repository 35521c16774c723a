// Random fp16 or bf16 operands on the device, for the harness's gate and timings and for the library's first-use
// timing of cuBLASLt's candidates (never zeros: they run faster than real data, and hide unwritten outputs).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

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

}  // namespace rlgemm::bench
