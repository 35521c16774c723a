// Kernels that misbehave on purpose, one way each, so that the tuner's isolation of bad candidates
// (a crashed context, a kernel that never ends, a wrong answer) can be tested on real hardware.
#pragma once

#include "common/types.cuh"
#include "test/params.h"

namespace rlgemm::test {

// Writes through a pointer no allocation contains: the launch fails with an illegal-address error.
__device__ __forceinline__ void fault(const Params& p) {
  volatile uint32_t* wild = reinterpret_cast<volatile uint32_t*>(0x10ull + uint64_t(threadIdx.x) * 4);
  *wild = p.m;
}

// Spins until the process is killed (or the context torn down).
__device__ __forceinline__ void hang(const Params& p) {
  volatile int* never = reinterpret_cast<volatile int*>(p.d);
  (void)never;
  for (;;) asm volatile("nanosleep.u32 1000;" ::: "memory");
}

// Writes 1.0 to every element of D: finishes normally, with a result that is wrong for random inputs.
__device__ __forceinline__ void wrong(const Params& p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(p.m) * p.n) return;
  const int row = int(i / p.n), col = int(i % p.n);
  p.d[int64_t(row) * p.ldd + col] = element_bits(0x3c00);
}

}  // namespace rlgemm::test
