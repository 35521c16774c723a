// Basic types and fp16 conversions for NVRTC-compiled kernels. The kernels include no CUDA or C++ library
// header (NVRTC ships none of them built in, and parsing them costs compile time): fp16 values are carried
// as their 16-bit patterns and converted with the PTX cvt instructions.
#pragma once

namespace rlgemm {

typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned long long uint64_t;

typedef uint16_t f16;  // an IEEE binary16 value, as its bits

// Two fp32 values -> one register of packed fp16 (lo in bits 0-15), round to nearest even.
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  uint32_t packed;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
}

__device__ __forceinline__ f16 to_f16(float value) {
  f16 bits;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(value));
  return bits;
}

__device__ __forceinline__ float from_f16(f16 bits) {
  float value;
  asm("cvt.f32.f16 %0, %1;" : "=f"(value) : "h"(bits));
  return value;
}

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
__host__ __device__ constexpr int min_of(int a, int b) { return a < b ? a : b; }

}  // namespace rlgemm
