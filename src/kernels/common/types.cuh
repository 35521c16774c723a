// Basic types and element conversions for NVRTC-compiled kernels. The kernels include no CUDA or C++ library
// header (NVRTC ships none of them built in, and parsing them costs compile time): fp16 and bf16 values are
// carried as their 16-bit patterns and converted with the PTX cvt instructions.
#pragma once

namespace rlgemm {

typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;

typedef uint16_t element_bits;  // one fp16 or bf16 value, as its bits

// The element type of A, B and C, one per translation unit: a generated bf16 kernel defines RLGEMM_BF16
// before it includes the kernel headers (fp16 otherwise). Values of either type travel as their 16 bits; the
// MMA instructions name the type (RLGEMM_MMA_INPUTS, spliced into their PTX text) and the epilogue's
// conversions below round fp32 to it, to nearest even. Bits 15..0 of a bf16 are bits 31..16 of the fp32.
#if defined(RLGEMM_BF16)
#define RLGEMM_MMA_INPUTS "bf16.bf16"
#define RLGEMM_CVT_PAIR "cvt.rn.bf16x2.f32"
#define RLGEMM_CVT_ONE "cvt.rn.bf16.f32"
#else
#define RLGEMM_MMA_INPUTS "f16.f16"
#define RLGEMM_CVT_PAIR "cvt.rn.f16x2.f32"
#define RLGEMM_CVT_ONE "cvt.rn.f16.f32"
#endif

// Two fp32 values -> one register of two packed elements (lo in bits 0-15, the lower address in memory),
// each rounded to nearest even.
__device__ __forceinline__ uint32_t pack_elements(float lo, float hi) {
  uint32_t packed;
  asm(RLGEMM_CVT_PAIR " %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

// One fp32 value -> one element, rounded to nearest even.
__device__ __forceinline__ uint16_t to_element(float value) {
  uint16_t bits;
  asm(RLGEMM_CVT_ONE " %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
}

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int min_of(int a, int b) { return a < b ? a : b; }

}  // namespace rlgemm
