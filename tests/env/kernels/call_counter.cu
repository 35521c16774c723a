// expect: rejected stale_output
// Timing-dependent: does the work for the first calls (the correctness gate's), then returns at once and leaves
// C as the last real call wrote it.
__device__ unsigned long long calls;

extern "C" __global__ void counted(const half* a, const half* b, half* c, int64_t m, int64_t n, int64_t k, int tn) {
  __shared__ bool skip;
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    const unsigned long long blocks = (unsigned long long)gridDim.x * gridDim.y;
    skip = atomicAdd(&calls, 1ull) >= 50 * blocks;
  }
  __syncthreads();
  if (skip) return;
  const int64_t i = int64_t(blockIdx.y) * blockDim.y + threadIdx.y, j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  float acc = 0.f;
  for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(tn ? b[j * k + p] : b[p * n + j]);
  c[i * n + j] = __float2half(acc);
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  const dim3 block(16, 16), grid(unsigned((p->n + 15) / 16), unsigned((p->m + 15) / 16));
  counted<<<grid, block, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0);
  return int(cudaGetLastError());
}
