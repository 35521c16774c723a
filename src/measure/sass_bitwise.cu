#include "measure/sass_bitwise.h"

#include <algorithm>

#include "core/cuda_util.h"

namespace rlgemm::measure {
namespace {

__global__ void bit_difference_kernel(const uint16_t* a, const uint16_t* b, size_t elems,
                                      unsigned long long* count) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elems; i += size_t(gridDim.x) * blockDim.x)
    local += a[i] != b[i];
  if (local) atomicAdd(count, local);
}

}  // namespace

int64_t count_bit_differences(const void* a, const void* b, size_t elems, cudaStream_t stream) {
  unsigned long long* count = nullptr;
  RLGEMM_CUDA_CHECK(cudaMallocAsync(&count, sizeof *count, stream));
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof *count, stream));
  const unsigned blocks = unsigned(std::clamp<size_t>((elems + 255) / 256, 1, 4096));
  bit_difference_kernel<<<blocks, 256, 0, stream>>>(static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b),
                                                    elems, count);
  RLGEMM_CHECK_LAUNCH();
  unsigned long long host = 0;
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(&host, count, sizeof host, cudaMemcpyDeviceToHost, stream));
  RLGEMM_CUDA_CHECK(cudaFreeAsync(count, stream));
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return int64_t(host);
}

}  // namespace rlgemm::measure
