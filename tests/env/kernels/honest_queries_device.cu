// expect: accepted
// A launch that asks the runtime about the device and its kernel before choosing a grid (a persistent grid-stride
// loop over the tiles of C, one CTA per SM times what fits), and reports its choice once: all within the contract.
#include <cstdio>
#include <cmath>

extern "C" __global__ void persistent(const half* a, const half* b, half* c, int64_t m, int64_t n, int64_t k, int tn) {
  for (int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; e < m * n; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / n, j = e % n;
    float acc = 0.f;
    for (int64_t p = 0; p < k; ++p) acc += __half2float(a[i * k + p]) * __half2float(tn ? b[j * k + p] : b[p * n + j]);
    c[e] = __float2half(acc);
  }
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  static int blocks = 0;
  if (!blocks) {
    int device = 0, per_sm = 0;
    cudaGetDevice(&device);
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, device);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent, 256, 0);
    blocks = prop.multiProcessorCount * (per_sm > 0 ? per_sm : 1);
    std::printf("persistent grid: %d blocks (%.0f per SM)\n", blocks, std::floor(double(blocks) / prop.multiProcessorCount));
  }
  persistent<<<blocks, 256, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0);
  return int(cudaGetLastError());
}
