// expect: accepted
// 64x64 block tiles, 16x16 threads each computing 4x4 outputs from shared memory, fp32 accumulation.
constexpr int BM = 64, BN = 64, BK = 16;
extern "C" __global__ void __launch_bounds__(256) regblock(const half* a, const half* b, half* c, int64_t m, int64_t n,
                                                           int64_t k, int tn) {
  __shared__ float as[BK][BM + 4], bs[BK][BN + 4];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int64_t m0 = int64_t(blockIdx.y) * BM, n0 = int64_t(blockIdx.x) * BN;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += BK) {
    for (int e = threadIdx.x; e < BM * BK; e += 256) {
      const int r = e / BK, q = e % BK;
      const int64_t gr = m0 + r, gk = k0 + q;
      as[q][r] = gr < m && gk < k ? __half2float(a[gr * k + gk]) : 0.f;
      const int64_t gc = n0 + r;
      bs[q][r] = gc < n && gk < k ? __half2float(tn ? b[gc * k + gk] : b[gk * n + gc]) : 0.f;
    }
    __syncthreads();
    for (int q = 0; q < BK; ++q)
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += as[q][ty * 4 + i] * bs[q][tx * 4 + j];
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      const int64_t r = m0 + ty * 4 + i, col = n0 + tx * 4 + j;
      if (r < m && col < n) c[r * n + col] = __float2half(acc[i][j]);
    }
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  const dim3 grid(unsigned((p->n + BN - 1) / BN), unsigned((p->m + BM - 1) / BM));
  regblock<<<grid, 256, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0);
  return int(cudaGetLastError());
}
