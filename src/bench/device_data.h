// Device-side data for the measurement harness: buffers of 16-bit elements (fp16 or bf16, the problem's type)
// with guard bands, random fills, NaN poison,
// and the fp64 reference of all of C.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "bench/fill.h"
#include "rlgemm/problem.h"

namespace rlgemm::bench {

// A device array of 16-bit elements (fp16 or bf16: `half` is only the storage) with guard bands on both sides. The guards hold a fixed byte pattern; any write
// that strays up to kGuardBytes before or after the array changes it and is caught by guards_intact().
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 4096;
  GuardedBuffer() = default;
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer();

  // Grows to at least `elems` elements (never shrinks) and rewrites the guards.
  void reserve(size_t elems, cudaStream_t stream);
  // Frees the memory (the next reserve() allocates again).
  void release();
  half* data() const { return data_; }
  size_t capacity() const { return capacity_; }
  // Guard pattern set around the first `elems` elements (the live extent of the current problem).
  void arm_guards(size_t elems, cudaStream_t stream);
  bool guards_intact(cudaStream_t stream) const;

 private:
  unsigned char* base_ = nullptr;
  half* data_ = nullptr;
  size_t capacity_ = 0;
  size_t live_ = 0;
};

// 0x7fff, a NaN in fp16 and in bf16 alike.
void fill_nan(half* data, size_t elems, cudaStream_t stream);
// Number of elements of `dtype` that are NaN or infinite.
int64_t count_nonfinite(const half* data, size_t elems, DType dtype, cudaStream_t stream);

// The gate's tolerance, one rule on host and device: |c - ref| <= rel |ref| + kSumTol sum_k |a_ik b_kj|.
// The first term covers rounding the fp32 result to the element type with a factor 2 of margin: half an ulp
// is 2^-11 relative for fp16 (11-bit significand), so rel = 2^-10; 2^-8 for bf16 (8-bit significand), so
// rel = 2^-7. The second covers fp32 accumulation order with room to spare (it does not depend on the element
// type: the products of two fp16 or two bf16 values are exact in fp32), and stays far below what a 16-bit
// accumulator loses with positive inputs: fp16 from K of a few hundred; bf16 (8 bits: each rounding of the
// running sum costs up to 2^-9 of it, all leaning one way once the sum dwarfs the products) from K of about
// 512 on 64 outputs rounded per 16-product MMA step, and by 8-10x the tolerance at the long-K probe (K = 8192)
// (tests/bench/correctness_test.cpp works the numbers). Returns |c - ref| / tolerance (<= 1 passes), infinite
// for a non-finite c.
inline constexpr double kRelTol = 1.0 / 1024.0;     // fp16
inline constexpr double kRelTolBf16 = 1.0 / 128.0;  // bf16
inline constexpr double kSumTol = 1.0 / 65536.0;
inline constexpr double relative_tolerance(DType dtype) { return dtype == DType::kBF16 ? kRelTolBf16 : kRelTol; }
__host__ __device__ inline double tolerance_ratio(double c, double ref, double abs_sum, double rel_tol = kRelTol) {
  const double tol = rel_tol * (ref < 0 ? -ref : ref) + kSumTol * abs_sum + 1e-30;
  const double err = c - ref;
  return (c - c == 0) ? (err < 0 ? -err : err) / tol : __builtin_huge_val();  // c - c is NaN for inf and NaN
}

// The fp64 reference of every element of C (cuBLAS DGEMM on the GPU, operands widened exactly from fp16 or
// bf16),
// and sum_k |a_ik b_kj| for each (the scale of the rounding errors), M x N row-major on the device. A reference
// of at most kKeepBytes is computed once and kept; a larger one (a language model's output layer: 8192 x
// 152064) is recomputed in blocks of rows at every comparison, which must then find the operands unchanged.
class FullReference {
 public:
  static constexpr size_t kKeepBytes = size_t(4) << 30;
  static constexpr size_t kBlockBytes = size_t(1) << 30;

  FullReference() = default;
  FullReference(const FullReference&) = delete;
  FullReference& operator=(const FullReference&) = delete;
  ~FullReference();

  // `nonnegative`: every a_ik b_kj >= 0 (uniform-positive inputs), so the magnitude equals the value and is
  // not computed twice.
  void compute(const Problem& problem, const half* a, const half* b, bool nonnegative, cudaStream_t stream);

  struct Mismatch {
    int64_t over = 0;         // elements over the tolerance (non-finite ones included)
    double worst_ratio = 0;   // max of |c - ref| / tolerance
    int64_t worst_index = -1; // row-major index of an element with that ratio (-1 when none is over)
    double worst_c = 0, worst_ref = 0, worst_abs_sum = 0;
  };
  // Every element of `c` (M x N row-major, of the problem's element type) against the reference, with that
  // type's tolerance.
  Mismatch compare(const half* c, cudaStream_t stream) const;

 private:
  class Operands;
  // Runs `visit(row0, rows, value, abs_sum)` over C's rows, on the kept reference or on blocks computed now.
  template <typename Visit>
  void for_each_block(cudaStream_t stream, Visit&& visit) const;
  void release();
  Problem problem_;
  const half* a_ = nullptr;
  const half* b_ = nullptr;
  bool nonnegative_ = false;
  bool kept_ = false;
  double* value_ = nullptr;
  double* abs_sum_ = nullptr;
  size_t capacity_ = 0;  // elements of value_ and abs_sum_
};

}  // namespace rlgemm::bench
