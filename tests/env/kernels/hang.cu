// expect: rejected hang
// Never finishes.

__device__ int hang_flag = 1;

extern "C" __global__ void gemm(const half* a, const half* b, half* c, int64_t m, int64_t n, int64_t k, int tn) {
  const int64_t i = int64_t(blockIdx.y) * blockDim.y + threadIdx.y, j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  // A flag in global memory that nothing clears, read through a volatile pointer: every read is a load the
  // compiler must keep (a volatile local may live in a register, and a loop on it was seen to end).
  while (*static_cast<volatile int*>(&hang_flag)) {
  }
  c[i * n + j] = a[i * k];
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void* workspace, size_t,
                             cudaStream_t stream) {
  const dim3 block(16, 16), grid(unsigned((p->n + 15) / 16), unsigned((p->m + 15) / 16));

  gemm<<<grid, block, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0);

  return int(cudaGetLastError());
}
