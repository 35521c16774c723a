// A small Ampere-style HGEMM compiled for sm_90a: cp.async global->shared double buffering, ldmatrix,
// mma.sync m16n8k16 with fp32 accumulation. One 64x64 tile per 128-thread block, K step 32.
// It exists to give the SASS tests a representative schedule (LDGSTS, LDSM, HMMA, BAR, DEPBAR).
#include <cuda_fp16.h>
#include <cstdint>

constexpr int kTileM = 64, kTileN = 64, kTileK = 32, kPad = 8;

__device__ inline void cp_async_16(void* smem, const void* gmem) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
__device__ inline void cp_async_wait_1() { asm volatile("cp.async.wait_group 1;\n"); }
__device__ inline void cp_async_wait_0() { asm volatile("cp.async.wait_group 0;\n"); }

__device__ inline void ldmatrix_x4(uint32_t (&r)[4], const void* smem) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
__device__ inline void ldmatrix_x2_trans(uint32_t (&r)[2], const void* smem) {
  unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(s));
}
__device__ inline void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// A: M x K row-major, B: K x N row-major, C: M x N row-major; M, N multiples of 64, K multiple of 32.
extern "C" __global__ void __launch_bounds__(128) mma_sync_gemm(const half* a, const half* b, half* c, int m, int n,
                                                                int k) {
  __shared__ alignas(16) half sa[2][kTileM][kTileK + kPad];  // (BM, BK, stage)
  __shared__ alignas(16) half sb[2][kTileK][kTileN + kPad];  // (BK, BN, stage)
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int row0 = blockIdx.y * kTileM, col0 = blockIdx.x * kTileN;
  const int warp_m = (warp / 2) * 32, warp_n = (warp % 2) * 32;
  float acc[2][4][4] = {};

  auto load_stage = [&](int stage, int k0) {
    for (int i = tid; i < kTileM * kTileK / 8; i += 128) {
      int r = i / (kTileK / 8), cc = (i % (kTileK / 8)) * 8;
      cp_async_16(&sa[stage][r][cc], a + size_t(row0 + r) * k + k0 + cc);
    }
    for (int i = tid; i < kTileK * kTileN / 8; i += 128) {
      int r = i / (kTileN / 8), cc = (i % (kTileN / 8)) * 8;
      cp_async_16(&sb[stage][r][cc], b + size_t(k0 + r) * n + col0 + cc);
    }
    cp_async_commit();
  };

  const int steps = k / kTileK;
  load_stage(0, 0);
  for (int s = 0; s < steps; ++s) {
    if (s + 1 < steps) {
      load_stage((s + 1) & 1, (s + 1) * kTileK);
      cp_async_wait_1();
    } else {
      cp_async_wait_0();
    }
    __syncthreads();
    const int st = s & 1;
#pragma unroll
    for (int kk = 0; kk < kTileK; kk += 16) {
      uint32_t fa[2][4], fb[4][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) ldmatrix_x4(fa[i], &sa[st][warp_m + i * 16 + lane % 16][kk + (lane / 16) * 8]);
#pragma unroll
      for (int j = 0; j < 4; ++j) ldmatrix_x2_trans(fb[j], &sb[st][kk + lane % 16][warp_n + j * 8]);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) mma_16816(acc[i][j], fa[i], fb[j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      int r = row0 + warp_m + i * 16 + lane / 4, cc = col0 + warp_n + j * 8 + (lane % 4) * 2;
      *reinterpret_cast<half2*>(c + size_t(r) * n + cc) = __floats2half2_rn(acc[i][j][0], acc[i][j][1]);
      *reinterpret_cast<half2*>(c + size_t(r + 8) * n + cc) = __floats2half2_rn(acc[i][j][2], acc[i][j][3]);
    }
}
