// expect: accepted
// Split-K with atomics: the fp32 accumulator in the workspace is zeroed on the stream (cudaMemsetAsync is part
// of the contract), slices of K add into it, and a last kernel rounds it into C.
constexpr int S = 2;
extern "C" size_t rlgemm_workspace_bytes(const rlgemm_problem* p) { return size_t(p->m) * p->n * sizeof(float); }

extern "C" __global__ void accumulate(const half* a, const half* b, float* acc_out, int64_t m, int64_t n, int64_t k,
                                      int tn) {
  const int64_t i = int64_t(blockIdx.y) * blockDim.y + threadIdx.y, j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  const int64_t chunk = (k + S - 1) / S, p0 = blockIdx.z * chunk, p1 = p0 + chunk < k ? p0 + chunk : k;
  float acc = 0.f;
  for (int64_t p = p0; p < p1; ++p) acc += __half2float(a[i * k + p]) * __half2float(tn ? b[j * k + p] : b[p * n + j]);
  atomicAdd(&acc_out[i * n + j], acc);
}

extern "C" __global__ void round_out(const float* acc, half* c, int64_t mn) {
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e < mn) c[e] = __float2half(acc[e]);
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void* workspace,
                             size_t, cudaStream_t stream) {
  const int64_t mn = p->m * p->n;
  cudaMemsetAsync(workspace, 0, size_t(mn) * sizeof(float), stream);
  const dim3 block(16, 16), grid(unsigned((p->n + 15) / 16), unsigned((p->m + 15) / 16), S);
  accumulate<<<grid, block, 0, stream>>>((const half*)a, (const half*)b, (float*)workspace, p->m, p->n, p->k,
                                         p->layout == 0);
  round_out<<<unsigned((mn + 255) / 256), 256, 0, stream>>>((const float*)workspace, (half*)c, mn);
  return int(cudaGetLastError());
}
