// expect: rejected fault
// Writes through a null pointer: an illegal address that breaks the CUDA context. The pointer reaches the kernel
// as an argument: a store through a pointer the compiler can see is null is undefined behaviour, which it
// deletes, and the kernel would only write a wrong C (wrong_result) without ever faulting.

extern "C" __global__ void gemm(const half* a, const half* b, half* c, half* nowhere, int64_t m, int64_t n, int64_t k,
                                int tn) {
  const int64_t i = int64_t(blockIdx.y) * blockDim.y + threadIdx.y, j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  nowhere[i * n + j] = a[i * k];
  c[i * n + j] = a[i * k];
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void* workspace, size_t,
                             cudaStream_t stream) {
  const dim3 block(16, 16), grid(unsigned((p->n + 15) / 16), unsigned((p->m + 15) / 16));

  gemm<<<grid, block, 0, stream>>>((const half*)a, (const half*)b, (half*)c, nullptr, p->m, p->n, p->k, p->layout == 0);

  return int(cudaGetLastError());
}
