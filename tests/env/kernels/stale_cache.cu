// expect: rejected stale_output
// Computes C the first time it sees an A and keeps a copy; later calls with the same A copy the kept C back,
// whatever A and B now hold.
__device__ const void* seen_a[4];
__device__ half kept[4][1 << 20];

extern "C" __global__ void gemm_or_copy(const half* a, const half* b, half* c, int64_t m, int64_t n, int64_t k, int tn,
                                        int slot, int copy) {
  const int64_t i = int64_t(blockIdx.y) * blockDim.y + threadIdx.y, j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  const bool cache = m * n <= (1 << 20);
  if (copy && cache) {
    c[i * n + j] = kept[slot][i * n + j];
    return;
  }
  float acc = 0.f;
  for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(tn ? b[j * k + p] : b[p * n + j]);
  c[i * n + j] = __float2half(acc);
  if (cache) kept[slot][i * n + j] = c[i * n + j];
}

// The launch function itself remembers which A it has computed (host memory), picking the copy path after that.
static const void* computed[4];
extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  int slot = 0, copy = 0;
  for (; slot < 4; ++slot) {
    if (computed[slot] == a) { copy = 1; break; }
    if (!computed[slot]) { computed[slot] = a; break; }
  }
  if (slot == 4) slot = 0;
  const dim3 block(16, 16), grid(unsigned((p->n + 15) / 16), unsigned((p->m + 15) / 16));
  gemm_or_copy<<<grid, block, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0,
                                           slot, copy);
  return int(cudaGetLastError());
}
