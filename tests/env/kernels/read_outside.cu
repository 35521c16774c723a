// expect: rejected wrong_result
// Reads one element past each row of A (past the end of A on the last row).

extern "C" __global__ void gemm(const half* a, const half* b, half* c, int64_t m, int64_t n, int64_t k, int tn) {
  const int64_t i = int64_t(blockIdx.y) * blockDim.y + threadIdx.y, j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  float acc = 0.f;
  for (int64_t q = 1; q <= k; ++q) acc += __half2float(a[i * k + q]) * __half2float(tn ? b[j * k + q - 1] : b[(q - 1) * n + j]);
  c[i * n + j] = __float2half(acc);
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void* workspace, size_t,
                             cudaStream_t stream) {
  const dim3 block(16, 16), grid(unsigned((p->n + 15) / 16), unsigned((p->m + 15) / 16));

  gemm<<<grid, block, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0);

  return int(cudaGetLastError());
}
