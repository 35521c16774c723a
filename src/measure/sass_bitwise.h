// Bitwise comparison of two device arrays, for the SASS game's rule that a rescheduled kernel's output is
// identical to the compiled kernel's, bit for bit (NaN payloads and signed zeros included).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace rlgemm::measure {

// Number of 16-bit elements of `a` and `b` (device memory, `elems` each) whose bit patterns differ.
// Synchronizes `stream`; throws Error on a CUDA failure.
int64_t count_bit_differences(const void* a, const void* b, size_t elems, cudaStream_t stream);

}  // namespace rlgemm::measure
