#include "bench/device_data.h"

#include <algorithm>
#include <cstring>
#include <string>

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "core/cuda_util.h"
#include "rlgemm/error.h"

namespace rlgemm::bench {
namespace {

constexpr unsigned char kGuardByte = 0xA5;

// An element's value: fp16, or bf16 (the upper 16 bits of an fp32). Exact either way.
__host__ __device__ inline float element_value(half x, bool bf16) {
  return bf16 ? __bfloat162float(__ushort_as_bfloat16(__half_as_ushort(x))) : __half2float(x);
}

__global__ void nan_kernel(half* data, size_t elems) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elems; i += size_t(gridDim.x) * blockDim.x)
    data[i] = __ushort_as_half(0x7fff);
}

__global__ void nonfinite_kernel(const half* data, size_t elems, unsigned short exponent, unsigned long long* count) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elems; i += size_t(gridDim.x) * blockDim.x) {
    unsigned short bits = __half_as_ushort(data[i]);
    local += (bits & exponent) == exponent;  // exponent all ones: inf or NaN
  }
  if (local) atomicAdd(count, local);
}

__global__ void widen_kernel(const half* in, double* out, size_t elems, int absolute, bool bf16) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elems; i += size_t(gridDim.x) * blockDim.x) {
    const double v = double(element_value(in[i], bf16));  // exact: every fp16 and bf16 value is a double
    out[i] = absolute ? fabs(v) : v;
  }
}

__global__ void absolute_kernel(double* data, size_t elems) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elems; i += size_t(gridDim.x) * blockDim.x)
    data[i] = fabs(data[i]);
}

// Counts the elements over the tolerance and keeps the largest ratio (non-negative doubles order like their
// bit patterns, so an integer atomicMax serves).
__global__ void compare_kernel(const half* c, const double* value, const double* abs_sum, size_t elems, bool bf16,
                               double rel_tol, unsigned long long* over, unsigned long long* worst_bits) {
  unsigned long long local_over = 0;
  double local_worst = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elems; i += size_t(gridDim.x) * blockDim.x) {
    const double r = tolerance_ratio(double(element_value(c[i], bf16)), value[i], abs_sum[i], rel_tol);
    local_over += !(r <= 1.0);
    if (!(r <= local_worst)) local_worst = r;
  }
  if (local_over) atomicAdd(over, local_over);
  if (local_worst > 0) atomicMax(worst_bits, (unsigned long long)__double_as_longlong(local_worst));
}

// The lowest index whose ratio equals `worst` (a second pass, only when something is over the tolerance).
__global__ void find_kernel(const half* c, const double* value, const double* abs_sum, size_t elems, bool bf16,
                            double rel_tol, double worst, unsigned long long* index) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elems; i += size_t(gridDim.x) * blockDim.x)
    if (tolerance_ratio(double(element_value(c[i], bf16)), value[i], abs_sum[i], rel_tol) == worst) atomicMin(index, i);
}

unsigned grid_for(size_t elems) { return unsigned(std::min<size_t>((elems + 255) / 256, 8192)); }

template <typename T>
using Scratch = DeviceScratch<T>;

}  // namespace

GuardedBuffer::~GuardedBuffer() {
  if (base_ && !device_hung()) cudaFree(base_);
}

void GuardedBuffer::release() {
  if (base_) RLGEMM_CUDA_CHECK(cudaFree(base_));
  base_ = nullptr;
  data_ = nullptr;
  capacity_ = live_ = 0;
}

void GuardedBuffer::reserve(size_t elems, cudaStream_t stream) {
  if (elems > capacity_) {
    if (base_) {
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      release();
    }
    RLGEMM_CUDA_CHECK(cudaMalloc(&base_, elems * sizeof(half) + 2 * kGuardBytes));
    data_ = reinterpret_cast<half*>(base_ + kGuardBytes);
    capacity_ = elems;
  }
  arm_guards(elems, stream);
}

void GuardedBuffer::arm_guards(size_t elems, cudaStream_t stream) {
  live_ = elems;
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(base_, kGuardByte, kGuardBytes, stream));
  RLGEMM_CUDA_CHECK(
      cudaMemsetAsync(reinterpret_cast<unsigned char*>(data_ + live_), kGuardByte, kGuardBytes, stream));
}

bool GuardedBuffer::guards_intact(cudaStream_t stream) const {
  std::vector<unsigned char> host(2 * kGuardBytes);
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(host.data(), base_, kGuardBytes, cudaMemcpyDeviceToHost, stream));
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(host.data() + kGuardBytes, reinterpret_cast<unsigned char*>(data_ + live_),
                                    kGuardBytes, cudaMemcpyDeviceToHost, stream));
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return std::all_of(host.begin(), host.end(), [](unsigned char b) { return b == kGuardByte; });
}

void fill_nan(half* data, size_t elems, cudaStream_t stream) {
  nan_kernel<<<grid_for(elems), 256, 0, stream>>>(data, elems);
  RLGEMM_CHECK_LAUNCH();
}

int64_t count_nonfinite(const half* data, size_t elems, DType dtype, cudaStream_t stream) {
  Scratch<unsigned long long> count(1);
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(count.ptr, 0, sizeof(unsigned long long), stream));
  const unsigned short exponent = dtype == DType::kBF16 ? 0x7f80 : 0x7c00;
  nonfinite_kernel<<<grid_for(elems), 256, 0, stream>>>(data, elems, exponent, count.ptr);
  RLGEMM_CHECK_LAUNCH();
  unsigned long long host = 0;
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(&host, count.ptr, sizeof(host), cudaMemcpyDeviceToHost, stream));
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return int64_t(host);
}

// One cuBLAS handle for the references of the whole process. Never destroyed: cublasDestroy synchronizes
// the device, which would block forever behind a hung kernel at exit.
static cublasHandle_t reference_blas() {
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    const cublasStatus_t status = cublasCreate(&h);
    if (status != CUBLAS_STATUS_SUCCESS)
      throw Error(ErrorKind::kRuntime, std::string("cublasCreate for the fp64 reference failed: ") + cublasGetStatusString(status));
    return h;
  }();
  return handle;
}

FullReference::~FullReference() { release(); }

void FullReference::release() {
  if (value_ && !device_hung()) {
    cudaFree(value_);
    cudaFree(abs_sum_);
  }
  value_ = abs_sum_ = nullptr;
  capacity_ = 0;
}

// The operands widened to fp64 for one pass over C: B and |B| whole, A block by block.
class FullReference::Operands {
 public:
  Operands(const FullReference& ref, int64_t block_rows, cudaStream_t stream)
      : ref_(ref), stream_(stream), bf16_(ref.problem_.dtype == DType::kBF16), k_(ref.problem_.shape.k), n_(ref.problem_.shape.n),
        b_(size_t(k_ * n_)), b_abs_(ref.nonnegative_ ? 1 : size_t(k_ * n_)), a_(size_t(block_rows * k_)),
        a_abs_(ref.nonnegative_ ? 1 : size_t(block_rows * k_)) {
    widen_kernel<<<grid_for(size_t(k_ * n_)), 256, 0, stream>>>(ref.b_, b_.ptr, size_t(k_ * n_), 0, bf16_);
    if (!ref.nonnegative_)
      widen_kernel<<<grid_for(size_t(k_ * n_)), 256, 0, stream>>>(ref.b_, b_abs_.ptr, size_t(k_ * n_), 1, bf16_);
    RLGEMM_CHECK_LAUNCH();
  }
  // value and abs_sum of rows [row0, row0 + rows), rows x N row-major.
  void block(int64_t row0, int64_t rows, double* value, double* abs_sum) {
    const size_t elems = size_t(rows * k_);
    const half* a = ref_.a_ + row0 * k_;
    widen_kernel<<<grid_for(elems), 256, 0, stream_>>>(a, a_.ptr, elems, 0, bf16_);
    dgemm(b_.ptr, a_.ptr, rows, value);
    if (ref_.nonnegative_) {
      // Every product is >= 0: the sum of magnitudes is the value itself (rounding aside, which the
      // tolerance's relative term covers).
      RLGEMM_CUDA_CHECK(cudaMemcpyAsync(abs_sum, value, size_t(rows * n_) * sizeof(double), cudaMemcpyDeviceToDevice, stream_));
      absolute_kernel<<<grid_for(size_t(rows * n_)), 256, 0, stream_>>>(abs_sum, size_t(rows * n_));
    } else {
      widen_kernel<<<grid_for(elems), 256, 0, stream_>>>(a, a_abs_.ptr, elems, 1, bf16_);
      dgemm(b_abs_.ptr, a_abs_.ptr, rows, abs_sum);
    }
    RLGEMM_CHECK_LAUNCH();
  }

 private:
  // Row-major C = A B as the column-major C^T (N x M) = B^T A^T, as the cuBLAS baselines do.
  void dgemm(const double* b, const double* a, int64_t rows, double* out) {
    const Problem& p = ref_.problem_;
    const double one = 1.0, zero = 0.0;
    const auto op_b = p.layout == Layout::kNN ? CUBLAS_OP_N : CUBLAS_OP_T;
    cublasHandle_t blas = reference_blas();
    cublasStatus_t status = cublasSetStream(blas, stream_);
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasDgemm(blas, op_b, CUBLAS_OP_N, int(n_), int(rows), int(k_), &one, b, int(p.ldb()), a,
                           int(p.lda()), &zero, out, int(n_));
    if (status != CUBLAS_STATUS_SUCCESS)
      throw Error(status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorKind::kOutOfMemory : ErrorKind::kRuntime,
                  std::string("cublasDgemm for the fp64 reference failed: ") + cublasGetStatusString(status));
  }
  const FullReference& ref_;
  cudaStream_t stream_;
  bool bf16_;
  int64_t k_, n_;
  Scratch<double> b_, b_abs_, a_, a_abs_;
};

void FullReference::compute(const Problem& p, const half* a, const half* b, bool nonnegative, cudaStream_t stream) {
  problem_ = p;
  a_ = a;
  b_ = b;
  nonnegative_ = nonnegative;
  const size_t elems = size_t(p.c_elems());
  kept_ = elems * 2 * sizeof(double) <= kKeepBytes;
  if (!kept_) return;  // recomputed block by block at every comparison
  if (elems > capacity_) {
    if (value_) RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    release();
    RLGEMM_CUDA_CHECK(cudaMalloc(&value_, elems * sizeof(double)));
    RLGEMM_CUDA_CHECK(cudaMalloc(&abs_sum_, elems * sizeof(double)));
    capacity_ = elems;
  }
  Operands operands(*this, p.shape.m, stream);
  operands.block(0, p.shape.m, value_, abs_sum_);
  // The widened operands are freed on return: wait for the reference to be done with them.
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

template <typename Visit>
void FullReference::for_each_block(cudaStream_t stream, Visit&& visit) const {
  const int64_t m = problem_.shape.m, n = problem_.shape.n;
  if (kept_) {
    visit(int64_t(0), m, value_, abs_sum_);
    return;
  }
  const int64_t rows = std::clamp<int64_t>(int64_t(kBlockBytes / (2 * sizeof(double) * size_t(n))), 1, m);
  Operands operands(*this, rows, stream);
  Scratch<double> value(size_t(rows * n)), abs_sum(size_t(rows * n));
  for (int64_t row0 = 0; row0 < m; row0 += rows) {
    const int64_t count = std::min(rows, m - row0);
    operands.block(row0, count, value.ptr, abs_sum.ptr);
    visit(row0, count, value.ptr, abs_sum.ptr);
  }
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the blocks are freed on return
}

FullReference::Mismatch FullReference::compare(const half* c, cudaStream_t stream) const {
  Mismatch result;
  const int64_t n = problem_.shape.n;
  const bool bf16 = problem_.dtype == DType::kBF16;
  const double rel_tol = relative_tolerance(problem_.dtype);
  Scratch<unsigned long long> counters(3);
  const unsigned long long init[3] = {0, 0, ~0ull};
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(counters.ptr, init, sizeof init, cudaMemcpyHostToDevice, stream));
  for_each_block(stream, [&](int64_t row0, int64_t rows, const double* value, const double* abs_sum) {
    const size_t elems = size_t(rows * n);
    compare_kernel<<<grid_for(elems), 256, 0, stream>>>(c + row0 * n, value, abs_sum, elems, bf16, rel_tol,
                                                        counters.ptr, counters.ptr + 1);
    RLGEMM_CHECK_LAUNCH();
  });
  unsigned long long host[3];
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(host, counters.ptr, 2 * sizeof(unsigned long long), cudaMemcpyDeviceToHost, stream));
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  result.over = int64_t(host[0]);
  std::memcpy(&result.worst_ratio, &host[1], sizeof(double));
  if (result.over == 0) return result;
  // Where the worst element is: a second pass, only for a failing check.
  int64_t found = -1;
  for_each_block(stream, [&](int64_t row0, int64_t rows, const double* value, const double* abs_sum) {
    if (found >= 0) return;
    const size_t elems = size_t(rows * n);
    find_kernel<<<grid_for(elems), 256, 0, stream>>>(c + row0 * n, value, abs_sum, elems, bf16, rel_tol,
                                                     result.worst_ratio, counters.ptr + 2);
    RLGEMM_CHECK_LAUNCH();
    unsigned long long index = ~0ull;
    RLGEMM_CUDA_CHECK(cudaMemcpyAsync(&index, counters.ptr + 2, sizeof index, cudaMemcpyDeviceToHost, stream));
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (index == ~0ull) return;  // not in this block (or a NaN ratio, which never equals itself)
    found = row0 * n + int64_t(index);
    half c_at;
    RLGEMM_CUDA_CHECK(cudaMemcpy(&c_at, c + found, sizeof c_at, cudaMemcpyDeviceToHost));
    RLGEMM_CUDA_CHECK(cudaMemcpy(&result.worst_ref, value + index, sizeof(double), cudaMemcpyDeviceToHost));
    RLGEMM_CUDA_CHECK(cudaMemcpy(&result.worst_abs_sum, abs_sum + index, sizeof(double), cudaMemcpyDeviceToHost));
    result.worst_c = double(element_value(c_at, bf16));
  });
  result.worst_index = found;
  return result;
}

}  // namespace rlgemm::bench
