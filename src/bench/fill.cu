#include "bench/fill.h"

#include <algorithm>

#include <cuda_bf16.h>

#include "core/cuda_util.h"

namespace rlgemm::bench {
namespace {

__host__ __device__ inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

__device__ inline float uniform01(uint64_t bits) { return float(bits >> 40) * (1.0f / 16777216.0f); }

__global__ void fill_kernel(half* data, size_t elems, int positive, int bf16, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elems; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t r = mix64(seed ^ mix64(i + 0x9e3779b97f4a7c15ull));
    float v;
    if (positive) {
      v = uniform01(r);
    } else {  // Box-Muller on two 24-bit uniforms
      float u1 = (float((r >> 40) & 0xffffff) + 1.0f) * (1.0f / 16777217.0f);
      float u2 = float((r >> 8) & 0xffffff) * (1.0f / 16777216.0f);
      v = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    }
    data[i] = bf16 ? __ushort_as_half(__bfloat16_as_ushort(__float2bfloat16_rn(v))) : __float2half_rn(v);
  }
}

}  // namespace

void fill_random(half* data, size_t elems, Fill fill, uint64_t seed, cudaStream_t stream, DType dtype) {
  const unsigned grid = unsigned(std::min<size_t>((elems + 255) / 256, 8192));
  fill_kernel<<<grid, 256, 0, stream>>>(data, elems, fill == Fill::kUniformPositive, dtype == DType::kBF16,
                                        mix64(seed));
  RLGEMM_CHECK_LAUNCH();
}

ScratchOperands::ScratchOperands(const Problem& p, cudaStream_t stream)
    : a(size_t(p.a_elems())), b(size_t(p.b_elems())), c(size_t(p.c_elems())) {
  fill_random(a.ptr, size_t(p.a_elems()), Fill::kNormal, 1, stream, p.dtype);
  fill_random(b.ptr, size_t(p.b_elems()), Fill::kNormal, 2, stream, p.dtype);
}

int operand_set_count(size_t set_bytes, int wanted, size_t budget_bytes, size_t free_bytes) {
  const size_t bytes = std::max<size_t>(set_bytes, 1);
  const size_t fit = std::min(budget_bytes, free_bytes / 2) / bytes;
  return int(std::max<size_t>(1, std::min<size_t>(fit, size_t(std::max(wanted, 1)))));
}

OperandSets::OperandSets(const Problem& problem, cudaStream_t stream, int wanted, size_t budget_bytes) {
  size_t free_bytes = 0, total_bytes = 0;
  RLGEMM_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const size_t set_bytes = size_t(problem.a_elems() + problem.b_elems() + problem.c_elems()) * sizeof(half);
  const int count = operand_set_count(set_bytes, wanted, budget_bytes, free_bytes);
  for (int i = 0; i < count; ++i) {
    pads_.push_back(std::make_unique<DeviceScratch<unsigned char>>((size_t(i) * 37 + 5) << 20));
    sets_.push_back(std::make_unique<ScratchOperands>(problem, stream));
  }
}

}  // namespace rlgemm::bench
