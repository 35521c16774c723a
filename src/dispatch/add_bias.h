// The bias of a kernel route: rlgemm's generated kernels write C = A B, so a call with a bias adds it with a
// second launch on the same stream (a cuBLASLt route adds it in its own epilogue instead).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "rlgemm/problem.h"

namespace rlgemm::dispatch {

// C[m][n] += bias[n] for the M x N row-major C of `dtype` (fp16 or bf16), each sum formed in fp32 and rounded
// to nearest even. N a multiple of 8 and C and bias 16-byte aligned (the handle's rules): each thread moves 16
// bytes. Launches only; no allocation or synchronization, so it may be captured in a CUDA graph.
void add_bias(cudaStream_t stream, void* c, const void* bias, int64_t m, int64_t n, DType dtype);

}  // namespace rlgemm::dispatch
