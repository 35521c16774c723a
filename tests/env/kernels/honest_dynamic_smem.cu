// expect: accepted
// 128x128 tiles of C, 8x8 outputs per thread, K in steps of 64 held as fp32 in 66 KiB of dynamic shared memory:
// over the 48 KiB a launch gets by default, so the launch raises the kernel's limit with cudaFuncSetAttribute
// (part of the contract) before its first launch.
constexpr int BM = 128, BN = 128, BK = 64, STRIDE = BM + 4;
constexpr size_t SMEM_BYTES = size_t(2) * BK * STRIDE * sizeof(float);

extern "C" __global__ void __launch_bounds__(256) big_tiles(const half* a, const half* b, half* c, int64_t m,
                                                            int64_t n, int64_t k, int tn) {
  extern __shared__ float smem[];
  float* as = smem;                // [BK][STRIDE]: A's tile, transposed (k major)
  float* bs = smem + BK * STRIDE;  // [BK][STRIDE]: B's tile, k major
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = int64_t(blockIdx.y) * BM, n0 = int64_t(blockIdx.x) * BN;
  float acc[8][8] = {};
  for (int64_t k0 = 0; k0 < k; k0 += BK) {
    for (int e = tid; e < BM * BK; e += 256) {
      {  // consecutive threads read consecutive k of a row of A
        const int r = e / BK, q = e % BK;
        const int64_t gm = m0 + r, gk = k0 + q;
        as[q * STRIDE + r] = gm < m && gk < k ? __half2float(a[gm * k + gk]) : 0.f;
      }
      // B: along K where it is contiguous (tn), along N otherwise (nn).
      const int r = tn ? e / BK : e % BN, q = tn ? e % BK : e / BN;
      const int64_t gn = n0 + r, gk = k0 + q;
      bs[q * STRIDE + r] = gn < n && gk < k ? __half2float(tn ? b[gn * k + gk] : b[gk * n + gn]) : 0.f;
    }
    __syncthreads();
    for (int q = 0; q < BK; ++q) {
      float av[8], bv[8];
      for (int i = 0; i < 8; ++i) av[i] = as[q * STRIDE + ty * 8 + i];
      for (int j = 0; j < 8; ++j) bv[j] = bs[q * STRIDE + tx * 8 + j];
      for (int i = 0; i < 8; ++i)
        for (int j = 0; j < 8; ++j) acc[i][j] += av[i] * bv[j];
    }
    __syncthreads();
  }
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      const int64_t row = m0 + ty * 8 + i, col = n0 + tx * 8 + j;
      if (row < m && col < n) c[row * n + col] = __float2half(acc[i][j]);
    }
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  static bool raised = false;
  if (!raised) {
    const cudaError_t e = cudaFuncSetAttribute(big_tiles, cudaFuncAttributeMaxDynamicSharedMemorySize, int(SMEM_BYTES));
    if (e != cudaSuccess) return int(e);
    raised = true;
  }
  const dim3 grid(unsigned((p->n + BN - 1) / BN), unsigned((p->m + BM - 1) / BM));
  big_tiles<<<grid, 256, SMEM_BYTES, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k,
                                               p->layout == 0);
  return int(cudaGetLastError());
}
