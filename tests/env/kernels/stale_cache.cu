// expect: rejected stale_output
// Caches outputs on the device: the first call with a given A computes C and keeps a copy; a later call with the
// same A copies the kept C back, whatever A and B now hold.
constexpr int kSlots = 4;
constexpr int64_t kKept = 1 << 20;
__device__ const void* seen_a[kSlots];
__device__ int copy_slot;  // the slot to copy from, or -(slot + 1) to compute into
__device__ half kept[kSlots][kKept];

extern "C" __global__ void look_up(const void* a) {
  int free_slot = -1;
  for (int s = 0; s < kSlots; ++s) {
    if (seen_a[s] == a) { copy_slot = s; return; }
    if (!seen_a[s] && free_slot < 0) free_slot = s;
  }
  if (free_slot < 0) free_slot = 0;
  seen_a[free_slot] = a;
  copy_slot = -(free_slot + 1);
}

extern "C" __global__ void gemm_or_copy(const half* a, const half* b, half* c, int64_t m, int64_t n, int64_t k, int tn) {
  const int64_t i = int64_t(blockIdx.y) * blockDim.y + threadIdx.y, j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  const bool fits = m * n <= kKept;
  const int slot = copy_slot;
  if (slot >= 0 && fits) {
    c[i * n + j] = kept[slot][i * n + j];
    return;
  }
  float acc = 0.f;
  for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(tn ? b[j * k + p] : b[p * n + j]);
  c[i * n + j] = __float2half(acc);
  if (fits && slot < 0) kept[-slot - 1][i * n + j] = c[i * n + j];
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  look_up<<<1, 1, 0, stream>>>(a);
  const dim3 block(16, 16), grid(unsigned((p->n + 15) / 16), unsigned((p->m + 15) / 16));
  gemm_or_copy<<<grid, block, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0);
  return int(cudaGetLastError());
}
