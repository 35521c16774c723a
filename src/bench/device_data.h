// Device-side data for the measurement harness: fp16 buffers with guard bands, random fills, NaN poison,
// and the fp64 reference on sampled rows and columns.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "rlgemm/problem.h"

namespace rlgemm::bench {

// A device array of fp16 with guard bands on both sides. The guards hold a fixed byte pattern; any write
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

enum class Fill { kNormal, kUniformPositive };

// Fills `elems` values: standard normal, or uniform in [0, 1) (so that sums grow with K and an fp16
// accumulator loses the small terms). Counter-based: the same seed gives the same data.
void fill_random(half* data, size_t elems, Fill fill, uint64_t seed, cudaStream_t stream);
void fill_nan(half* data, size_t elems, cudaStream_t stream);
// Number of elements that are NaN or infinite.
int64_t count_nonfinite(const half* data, size_t elems, cudaStream_t stream);

// Rows and columns of C whose every element is compared with the reference.
struct SampleSet {
  std::vector<int32_t> rows;  // full rows: every column j of these rows
  std::vector<int32_t> cols;  // full columns: every row i of these columns
};

// The whole of C for small problems (M*N*K <= 2^27), else `count` rows and `count` columns: the first,
// the last and random ones in between.
SampleSet choose_samples(const Shape& shape, uint64_t seed, int count = 8);

// fp64 reference values and the sum of |a_ik * b_kj| (scale of the rounding errors) for every sampled
// element, in the order: rows (row-major), then columns (column-major).
struct Reference {
  std::vector<double> value;
  std::vector<double> abs_sum;
};
Reference compute_reference(const Problem& problem, const half* a, const half* b, const SampleSet& samples,
                            cudaStream_t stream);

// The values of C at the sampled elements, in Reference order.
std::vector<half> gather_samples(const Problem& problem, const half* c, const SampleSet& samples,
                                 cudaStream_t stream);

}  // namespace rlgemm::bench
