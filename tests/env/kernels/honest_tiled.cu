// expect: accepted
// 32x32 tiles of A and B staged through shared memory, fp32 accumulation.
constexpr int T = 32;
extern "C" __global__ void tiled(const half* a, const half* b, half* c, int64_t m, int64_t n, int64_t k, int tn) {
  __shared__ float as[T][T + 1], bs[T][T + 1];
  const int64_t row = int64_t(blockIdx.y) * T + threadIdx.y, col = int64_t(blockIdx.x) * T + threadIdx.x;
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < k; k0 += T) {
    const int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = row < m && ka < k ? __half2float(a[row * k + ka]) : 0.f;
    bs[threadIdx.y][threadIdx.x] = col < n && kb < k ? __half2float(tn ? b[col * k + kb] : b[kb * n + col]) : 0.f;
    __syncthreads();
    for (int p = 0; p < T; ++p) acc += as[threadIdx.y][p] * bs[p][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[row * n + col] = __float2half(acc);
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  const dim3 block(T, T), grid(unsigned((p->n + T - 1) / T), unsigned((p->m + T - 1) / T));
  tiled<<<grid, block, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0);
  return int(cudaGetLastError());
}
