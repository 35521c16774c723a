// Inter-block synchronization through global memory: the flags and counters that order split-K slices.
#pragma once

#include "common/types.cuh"

namespace rlgemm {

__device__ __forceinline__ int load_acquire_gpu(const int* flag) {
  int value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
  return value;
}

__device__ __forceinline__ void store_release_gpu(int* flag, int value) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

// Returns the old value; acquire and release at once, so the last arrival sees every earlier one's writes.
__device__ __forceinline__ int atom_add_acq_rel_gpu(int* counter, int value) {
  int old;
  asm volatile("atom.add.acq_rel.gpu.global.s32 %0, [%1], %2;" : "=r"(old) : "l"(counter), "r"(value) : "memory");
  return old;
}

// Blocks until *flag == expected. One thread of the block waits; the barrier then releases the others,
// and the acquire makes the writes published before the flag visible to them.
__device__ __forceinline__ void block_wait_flag(const int* flag, int expected) {
  if (threadIdx.x == 0) {
    while (load_acquire_gpu(flag) != expected) __nanosleep(64);
  }
  __syncthreads();
}

// Publishes every write the block made so far, then sets *flag = value.
__device__ __forceinline__ void block_set_flag(int* flag, int value) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) store_release_gpu(flag, value);
}

// Loads that bypass L1 (which is not coherent between SMs): for data another block just published.
__device__ __forceinline__ uint32_t load_cg_u32(const void* address) {
  uint32_t value;
  asm volatile("ld.global.cg.b32 %0, [%1];" : "=r"(value) : "l"(address) : "memory");
  return value;
}

__device__ __forceinline__ uint16_t load_cg_u16(const void* address) {
  uint16_t value;
  asm volatile("ld.global.cg.b16 %0, [%1];" : "=h"(value) : "l"(address) : "memory");
  return value;
}

__device__ __forceinline__ void load_cg_f32x2(const float* address, float& x, float& y) {
  asm volatile("ld.global.cg.v2.f32 {%0, %1}, [%2];" : "=f"(x), "=f"(y) : "l"(address) : "memory");
}

}  // namespace rlgemm
