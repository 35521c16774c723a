// One problem's inputs on the device with its fp64 reference, run through a Handle and checked: the GPU tests of
// the library (tests/dispatch) share it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/cuda_util.h"
#include "rlgemm/rlgemm.h"

namespace rlgemm::test {

struct DeviceMemory {
  void* ptr = nullptr;
  explicit DeviceMemory(size_t bytes) { RLGEMM_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(bytes, 16))); }
  ~DeviceMemory() { cudaFree(ptr); }
  DeviceMemory(const DeviceMemory&) = delete;
  half* h() const { return static_cast<half*>(ptr); }
};

// One problem's inputs on the device, with its fp64 reference.
struct Case {
  Problem problem;
  std::vector<half> a, b;
  std::vector<double> ref;
  std::unique_ptr<DeviceMemory> da, db, dc;

  Case(Shape shape, Layout layout, uint64_t seed) : problem{shape, layout} {
    const int64_t M = shape.m, N = shape.n, K = shape.k;
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    a.resize(M * K);
    b.resize(K * N);
    for (auto& x : a) x = __float2half(normal(rng));
    for (auto& x : b) x = __float2half(normal(rng));
    // The reference in double, from B as K x N floats (so the inner loop runs along a row), rows spread over
    // the machine's cores: shapes up to 4096^3 take seconds, not minutes.
    std::vector<float> af(a.size()), bkn(size_t(K * N));
    for (size_t i = 0; i < a.size(); ++i) af[i] = __half2float(a[i]);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n)
        bkn[k * N + n] = __half2float(layout == Layout::kNN ? b[k * N + n] : b[n * K + k]);
    ref.assign(M * N, 0.0);
    const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(M, std::thread::hardware_concurrency()));
    std::vector<std::thread> threads;
    for (int64_t w = 0; w < workers; ++w)
      threads.emplace_back([&, w] {
        for (int64_t m = w; m < M; m += workers)
          for (int64_t k = 0; k < K; ++k) {
            const double x = af[m * K + k];
            const float* row = &bkn[k * N];
            double* out = &ref[m * N];
            for (int64_t n = 0; n < N; ++n) out[n] += x * row[n];
          }
      });
    for (auto& t : threads) t.join();
    da = std::make_unique<DeviceMemory>(a.size() * 2);
    db = std::make_unique<DeviceMemory>(b.size() * 2);
    dc = std::make_unique<DeviceMemory>(M * N * 2);
    RLGEMM_CUDA_CHECK(cudaMemcpy(da->ptr, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
    RLGEMM_CUDA_CHECK(cudaMemcpy(db->ptr, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  }

  void poison() const { RLGEMM_CUDA_CHECK(cudaMemset(dc->ptr, 0xff, problem.c_elems() * 2)); }  // NaN

  // From now on C = A B + bias: a random bias of N elements on the device, added to the reference.
  std::unique_ptr<DeviceMemory> dbias;
  void add_bias(uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 4.0f);
    std::vector<half> bias(size_t(problem.shape.n));
    for (auto& x : bias) x = __float2half(normal(rng));
    for (size_t i = 0; i < ref.size(); ++i) ref[i] += __half2float(bias[i % bias.size()]);
    dbias = std::make_unique<DeviceMemory>(bias.size() * 2);
    RLGEMM_CUDA_CHECK(cudaMemcpy(dbias->ptr, bias.data(), bias.size() * 2, cudaMemcpyHostToDevice));
  }
  void run_bias(Handle& handle, cudaStream_t stream = nullptr) const {
    handle.gemm_bias(stream, problem.shape.m, problem.shape.n, problem.shape.k, da->ptr, db->ptr, problem.layout,
                     dc->ptr, DType::kF16, dbias->ptr);
  }

  void run(Handle& handle, cudaStream_t stream = nullptr) const {
    handle.hgemm(stream, problem.shape.m, problem.shape.n, problem.shape.k, da->h(), db->h(), problem.layout, dc->h());
  }

  // "" or what is wrong with C.
  std::string check() const {
    RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<half> c(problem.c_elems());
    RLGEMM_CUDA_CHECK(cudaMemcpy(c.data(), dc->ptr, c.size() * 2, cudaMemcpyDeviceToHost));
    const double atol = std::ldexp(1.0, -9) * std::sqrt(double(problem.shape.k)) * 4;
    int64_t bad = 0;
    std::string first;
    for (size_t i = 0; i < c.size(); ++i) {
      const double got = __half2float(c[i]);
      if (std::isfinite(got) && std::abs(got - ref[i]) <= atol + std::ldexp(1.0, -9) * std::abs(ref[i])) continue;
      if (bad++ == 0)
        first = "C[" + std::to_string(i / problem.shape.n) + "][" + std::to_string(i % problem.shape.n) +
                "] = " + std::to_string(got) + ", want " + std::to_string(ref[i]);
    }
    if (!bad) return "";
    return problem.shape.to_string() + " " + std::string(to_string(problem.layout)) + ": " + std::to_string(bad) +
           " wrong, first " + first;
  }
};

}  // namespace rlgemm::test
