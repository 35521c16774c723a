// expect: rejected wrong_result
// Timing-dependent: the first call (slow) computes C and keeps it; every later call (fast) only copies the kept C.
__device__ int computed;
__device__ half kept[1 << 22];

extern "C" __global__ void first_or_copy(const half* a, const half* b, half* c, int64_t m, int64_t n, int64_t k, int tn,
                                         int first) {
  const int64_t i = int64_t(blockIdx.y) * blockDim.y + threadIdx.y, j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m || j >= n || m * n > (1 << 22)) return;
  if (!first) {
    c[i * n + j] = kept[i * n + j];
    return;
  }
  float acc = 0.f;
  for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(tn ? b[j * k + p] : b[p * n + j]);
  c[i * n + j] = kept[i * n + j] = __float2half(acc);
}

static bool done;
extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  const dim3 block(16, 16), grid(unsigned((p->n + 15) / 16), unsigned((p->m + 15) / 16));
  first_or_copy<<<grid, block, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0,
                                            !done);
  done = true;
  return int(cudaGetLastError());
}
