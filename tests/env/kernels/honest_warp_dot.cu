// expect: accepted
// One warp per row of C and 8 of its columns: the lanes split K between them (two consecutive k each, read as a
// half2 where the operand is contiguous along K), keep 8 fp32 partial sums, and add them up with warp shuffles.
// N and K are multiples of 8, so a warp's 8 columns and every pair of k lie inside the matrices.
extern "C" __global__ void __launch_bounds__(256) warp_dot(const half* a, const half* b, half* c, int64_t m,
                                                           int64_t n, int64_t k, int tn) {
  const int lane = threadIdx.x % 32;
  const int64_t w = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32, groups = n / 8;
  const int64_t i = w / groups, j0 = (w % groups) * 8;
  if (i >= m) return;  // the whole warp leaves together
  float acc[8] = {};
  for (int64_t q = 2 * lane; q < k; q += 64) {
    const float2 x = __half22float2(*reinterpret_cast<const half2*>(a + i * k + q));
    for (int col = 0; col < 8; ++col) {
      float2 y;
      if (tn) {
        y = __half22float2(*reinterpret_cast<const half2*>(b + (j0 + col) * k + q));
      } else {
        y.x = __half2float(b[q * n + j0 + col]);
        y.y = __half2float(b[(q + 1) * n + j0 + col]);
      }
      acc[col] += x.x * y.x + x.y * y.y;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2)
    for (int col = 0; col < 8; ++col) acc[col] += __shfl_xor_sync(0xffffffffu, acc[col], offset);
  float mine = 0.f;
  for (int col = 0; col < 8; ++col)
    if (lane == col) mine = acc[col];
  if (lane < 8) c[i * n + j0 + lane] = __float2half(mine);
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  const int64_t warps = p->m * (p->n / 8), per_block = 8;
  warp_dot<<<unsigned((warps + per_block - 1) / per_block), 32 * per_block, 0, stream>>>(
      (const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0);
  return int(cudaGetLastError());
}
