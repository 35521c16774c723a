#include "bench/device_data.h"

#include <algorithm>
#include <random>
#include <set>

#include "core/cuda_util.h"

namespace rlgemm::bench {
namespace {

constexpr unsigned char kGuardByte = 0xA5;

__host__ __device__ inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

__device__ inline float uniform01(uint64_t bits) { return float(bits >> 40) * (1.0f / 16777216.0f); }

__global__ void fill_kernel(half* data, size_t elems, int positive, uint64_t seed) {
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
    data[i] = __float2half_rn(v);
  }
}

__global__ void nan_kernel(half* data, size_t elems) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elems; i += size_t(gridDim.x) * blockDim.x)
    data[i] = __ushort_as_half(0x7fff);
}

__global__ void nonfinite_kernel(const half* data, size_t elems, unsigned long long* count) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < elems; i += size_t(gridDim.x) * blockDim.x) {
    unsigned short bits = __half_as_ushort(data[i]);
    local += (bits & 0x7c00) == 0x7c00;  // exponent all ones: inf or NaN
  }
  if (local) atomicAdd(count, local);
}

// One thread per column j of a sampled row: A[i, :] is read by every thread alike (a broadcast), each
// thread walks its own B column or row, so the fp64 loop runs at the DFMA rate.
__global__ void reference_rows_kernel(const half* a, const half* b, int64_t n, int64_t k, int nn,
                                      const int32_t* rows, double* value, double* abs_sum) {
  int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  int r = blockIdx.y;
  if (j >= n) return;
  const half* arow = a + int64_t(rows[r]) * k;
  double acc = 0, mag = 0;
  for (int64_t kk = 0; kk < k; ++kk) {
    double p = double(__half2float(arow[kk])) * double(__half2float(nn ? b[kk * n + j] : b[j * k + kk]));
    acc += p;
    mag += fabs(p);
  }
  value[int64_t(r) * n + j] = acc;
  abs_sum[int64_t(r) * n + j] = mag;
}

__global__ void reference_cols_kernel(const half* a, const half* b, int64_t m, int64_t n, int64_t k, int nn,
                                      const int32_t* cols, double* value, double* abs_sum) {
  int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  int c = blockIdx.y;
  if (i >= m) return;
  const int64_t j = cols[c];
  const half* arow = a + i * k;
  double acc = 0, mag = 0;
  for (int64_t kk = 0; kk < k; ++kk) {
    double p = double(__half2float(arow[kk])) * double(__half2float(nn ? b[kk * n + j] : b[j * k + kk]));
    acc += p;
    mag += fabs(p);
  }
  value[int64_t(c) * m + i] = acc;
  abs_sum[int64_t(c) * m + i] = mag;
}

__global__ void gather_kernel(const half* c, int64_t m, int64_t n, const int32_t* rows, int nrows,
                              const int32_t* cols, int ncols, half* out) {
  int64_t total_rows = int64_t(nrows) * n;
  int64_t total = total_rows + int64_t(ncols) * m;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    if (t < total_rows) {
      out[t] = c[int64_t(rows[t / n]) * n + t % n];
    } else {
      int64_t u = t - total_rows;
      out[t] = c[(u % m) * n + cols[u / m]];
    }
  }
}

unsigned grid_for(size_t elems) { return unsigned(std::min<size_t>((elems + 255) / 256, 8192)); }

// A small device array that lives for one call.
template <typename T>
struct Scratch {
  T* ptr = nullptr;
  explicit Scratch(size_t n) { RLGEMM_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T))); }
  ~Scratch() {
    if (!device_hung()) cudaFree(ptr);
  }
};

template <typename T>
void upload(Scratch<T>& dst, const std::vector<T>& src, cudaStream_t stream) {
  if (!src.empty())
    RLGEMM_CUDA_CHECK(cudaMemcpyAsync(dst.ptr, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
}

}  // namespace

GuardedBuffer::~GuardedBuffer() {
  if (base_ && !device_hung()) cudaFree(base_);
}

void GuardedBuffer::reserve(size_t elems, cudaStream_t stream) {
  if (elems > capacity_) {
    if (base_) {
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      RLGEMM_CUDA_CHECK(cudaFree(base_));
      base_ = nullptr;
      data_ = nullptr;
      capacity_ = 0;
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

void fill_random(half* data, size_t elems, Fill fill, uint64_t seed, cudaStream_t stream) {
  fill_kernel<<<grid_for(elems), 256, 0, stream>>>(data, elems, fill == Fill::kUniformPositive, mix64(seed));
  RLGEMM_CHECK_LAUNCH();
}

void fill_nan(half* data, size_t elems, cudaStream_t stream) {
  nan_kernel<<<grid_for(elems), 256, 0, stream>>>(data, elems);
  RLGEMM_CHECK_LAUNCH();
}

int64_t count_nonfinite(const half* data, size_t elems, cudaStream_t stream) {
  Scratch<unsigned long long> count(1);
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(count.ptr, 0, sizeof(unsigned long long), stream));
  nonfinite_kernel<<<grid_for(elems), 256, 0, stream>>>(data, elems, count.ptr);
  RLGEMM_CHECK_LAUNCH();
  unsigned long long host = 0;
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(&host, count.ptr, sizeof(host), cudaMemcpyDeviceToHost, stream));
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return int64_t(host);
}

SampleSet choose_samples(const Shape& shape, uint64_t seed, int count) {
  SampleSet s;
  if (shape.mnk() <= double(int64_t(1) << 27)) {
    for (int64_t i = 0; i < shape.m; ++i) s.rows.push_back(int32_t(i));
    return s;
  }
  std::mt19937_64 rng(seed);
  auto pick = [&](int64_t extent) {
    std::set<int32_t> chosen{0, int32_t(extent - 1)};
    while (int64_t(chosen.size()) < std::min<int64_t>(count, extent))
      chosen.insert(int32_t(std::uniform_int_distribution<int64_t>(0, extent - 1)(rng)));
    return std::vector<int32_t>(chosen.begin(), chosen.end());
  };
  s.rows = pick(shape.m);
  s.cols = pick(shape.n);
  return s;
}

Reference compute_reference(const Problem& p, const half* a, const half* b, const SampleSet& samples,
                            cudaStream_t stream) {
  const int64_t m = p.shape.m, n = p.shape.n, k = p.shape.k;
  const size_t nr = samples.rows.size() * size_t(n), nc = samples.cols.size() * size_t(m);
  Scratch<int32_t> rows(samples.rows.size()), cols(samples.cols.size());
  Scratch<double> value(nr + nc), mag(nr + nc);
  upload(rows, samples.rows, stream);
  upload(cols, samples.cols, stream);
  const int nn = p.layout == Layout::kNN;
  if (!samples.rows.empty()) {
    dim3 grid(unsigned((n + 127) / 128), unsigned(samples.rows.size()));
    reference_rows_kernel<<<grid, 128, 0, stream>>>(a, b, n, k, nn, rows.ptr, value.ptr, mag.ptr);
    RLGEMM_CHECK_LAUNCH();
  }
  if (!samples.cols.empty()) {
    dim3 grid(unsigned((m + 127) / 128), unsigned(samples.cols.size()));
    reference_cols_kernel<<<grid, 128, 0, stream>>>(a, b, m, n, k, nn, cols.ptr, value.ptr + nr, mag.ptr + nr);
    RLGEMM_CHECK_LAUNCH();
  }
  Reference ref;
  ref.value.resize(nr + nc);
  ref.abs_sum.resize(nr + nc);
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(ref.value.data(), value.ptr, (nr + nc) * sizeof(double), cudaMemcpyDeviceToHost, stream));
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(ref.abs_sum.data(), mag.ptr, (nr + nc) * sizeof(double), cudaMemcpyDeviceToHost, stream));
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ref;
}

std::vector<half> gather_samples(const Problem& p, const half* c, const SampleSet& samples, cudaStream_t stream) {
  const int64_t m = p.shape.m, n = p.shape.n;
  const size_t total = samples.rows.size() * size_t(n) + samples.cols.size() * size_t(m);
  Scratch<int32_t> rows(samples.rows.size()), cols(samples.cols.size());
  Scratch<half> out(total);
  upload(rows, samples.rows, stream);
  upload(cols, samples.cols, stream);
  gather_kernel<<<grid_for(total), 256, 0, stream>>>(c, m, n, rows.ptr, int(samples.rows.size()), cols.ptr,
                                                      int(samples.cols.size()), out.ptr);
  RLGEMM_CHECK_LAUNCH();
  std::vector<half> host(total);
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(host.data(), out.ptr, total * sizeof(half), cudaMemcpyDeviceToHost, stream));
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

}  // namespace rlgemm::bench
