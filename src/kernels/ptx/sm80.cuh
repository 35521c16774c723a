// Named PTX wrappers for the sm80 family (sm_80 and later). Each is one instruction; see the PTX ISA,
// sections "Warp Level Matrix Multiply-Accumulate Instructions" (mma, ldmatrix) and "Data Movement and
// Conversion Instructions" (cp.async).
#pragma once

#include "common/types.cuh"

namespace rlgemm::ptx {

// Generic pointer to shared memory -> 32-bit shared-window address used by the instructions below.
__device__ __forceinline__ uint32_t smem_addr(const void* pointer) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(pointer));
}

// D = A * B + D with A 16x16 (row), B 16x8 (col), fp16 or bf16 inputs (the translation unit's element
// type, common/types.cuh), fp32 accumulators.
// Per thread (lane = 4 * group + quad): a[0..3] = A rows {group, group+8} x k {2q, 2q+1} and k+8;
// b[0..1] = B k {2q, 2q+1} and k+8, column group; d[0..3] = D rows {group, group+8} x cols {2q, 2q+1}.
__device__ __forceinline__ void mma_m16n8k16_f32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32." RLGEMM_MMA_INPUTS ".f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Four 8x8 fp16 matrices from shared memory; lanes 8i..8i+7 give the row addresses of matrix i, and
// register i receives matrix i (thread t: row t/4, elements 2(t%4), 2(t%4)+1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// As ldmatrix_x4, transposed: thread t receives elements (row 2(t%4), col t/4) and (row 2(t%4)+1, col t/4).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// Asynchronous 16-byte copy global -> shared, bypassing L1. When `valid` is false no byte is read and
// the 16 destination bytes are zero-filled (src-size 0): out-of-range rows and K tails read as zeros.
__device__ __forceinline__ void cp_async_16_zfill(uint32_t smem_address, const void* global, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_address), "l"(global), "r"(src_bytes)
               : "memory");
}

// Closes the group of cp.async issued since the previous commit.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace rlgemm::ptx
