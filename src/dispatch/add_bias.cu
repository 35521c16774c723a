#include "dispatch/add_bias.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "core/cuda_util.h"

namespace rlgemm::dispatch {
namespace {

__device__ float to_float(half v) { return __half2float(v); }
__device__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T>
__device__ T from_float(float v) {
  if constexpr (std::is_same_v<T, half>)
    return __float2half_rn(v);
  else
    return __float2bfloat16_rn(v);
}

// One thread per 8 elements of C (16 bytes), grid-stride; `vectors_per_row` = N / 8.
template <class T>
__global__ void add_bias_kernel(uint4* c, const uint4* bias, int64_t vectors, int64_t vectors_per_row) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < vectors; i += int64_t(gridDim.x) * blockDim.x) {
    uint4 out = c[i];
    const uint4 add = __ldg(&bias[i % vectors_per_row]);
    T* o = reinterpret_cast<T*>(&out);
    const T* b = reinterpret_cast<const T*>(&add);
#pragma unroll
    for (int e = 0; e < 8; ++e) o[e] = from_float<T>(to_float(o[e]) + to_float(b[e]));
    c[i] = out;
  }
}

}  // namespace

void add_bias(cudaStream_t stream, void* c, const void* bias, int64_t m, int64_t n, DType dtype) {
  const int64_t vectors_per_row = n / 8, vectors = m * vectors_per_row;
  if (vectors == 0) return;
  constexpr int kThreads = 256;
  // Enough blocks to fill the GPU a few times over; the grid-stride loop takes the rest.
  const int64_t blocks = std::min<int64_t>((vectors + kThreads - 1) / kThreads, 4096);
  auto* out = static_cast<uint4*>(c);
  const auto* add = static_cast<const uint4*>(bias);
  if (dtype == DType::kBF16)
    add_bias_kernel<__nv_bfloat16><<<unsigned(blocks), kThreads, 0, stream>>>(out, add, vectors, vectors_per_row);
  else
    add_bias_kernel<half><<<unsigned(blocks), kThreads, 0, stream>>>(out, add, vectors, vectors_per_row);
  RLGEMM_CUDA_CHECK(cudaGetLastError());
}

}  // namespace rlgemm::dispatch
