// expect: rejected timing_dependent
// Caches by content: a checksum of A and B decides whether the inputs are those of the last call; if so the
// kept C is copied back (fast), else C is computed and kept. Right on every input, fast only on repeated ones.
constexpr int64_t kKept = 1 << 22;
__device__ unsigned long long checksum, last_checksum;
__device__ int copy_kept;
__device__ half kept[kKept];

extern "C" __global__ void sum_bits(const unsigned short* a, int64_t na, const unsigned short* b, int64_t nb) {
  unsigned long long local = 0;
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < na + nb; e += int64_t(gridDim.x) * blockDim.x)
    local += (e < na ? a[e] : b[e - na]) * (unsigned long long)(e % 977 + 1);
  atomicAdd(&checksum, local);
}

extern "C" __global__ void decide(int64_t mn) {
  copy_kept = checksum == last_checksum && mn <= kKept;
  last_checksum = checksum;
  checksum = 0;
}

extern "C" __global__ void gemm_or_copy(const half* a, const half* b, half* c, int64_t m, int64_t n, int64_t k, int tn) {
  const int64_t i = int64_t(blockIdx.y) * blockDim.y + threadIdx.y, j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  if (copy_kept) {
    c[i * n + j] = kept[i * n + j];
    return;
  }
  float acc = 0.f;
  for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(tn ? b[j * k + p] : b[p * n + j]);
  c[i * n + j] = __float2half(acc);
  if (m * n <= kKept) kept[i * n + j] = c[i * n + j];
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  sum_bits<<<264, 256, 0, stream>>>((const unsigned short*)a, p->m * p->k, (const unsigned short*)b, p->k * p->n);
  decide<<<1, 1, 0, stream>>>(p->m * p->n);
  const dim3 block(16, 16), grid(unsigned((p->n + 15) / 16), unsigned((p->m + 15) / 16));
  gemm_or_copy<<<grid, block, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0);
  return int(cudaGetLastError());
}
