// hgemm_app: one linear layer's product through rlgemm, checked against a double-precision host reference.
//
//   hgemm_app [M N K [nn|tn]]        (default: 300 1024 512 tn)
//
// Exit codes: 0 correct, 1 wrong or failed, 2 bad arguments, 3 no usable GPU.
#include <rlgemm/rlgemm.h>
#include <rlgemm/rlgemm_c.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    if (cudaMalloc(&ptr, bytes) != cudaSuccess) throw rlgemm::Error(rlgemm::ErrorKind::kOutOfMemory, "cudaMalloc failed");
  }
  ~DeviceBuffer() { cudaFree(ptr); }
};

int run(int64_t M, int64_t N, int64_t K, rlgemm::Layout layout) {
  rlgemm::Handle handle;  // the tuned table built into librlgemm
  std::printf("rlgemm %s on %s, %zu tuned shapes\n", rlgemm_version(), handle.device_name().c_str(),
              handle.tuned_shapes());

  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<half> a(M * K), b(K * N), c(M * N);
  for (auto& x : a) x = __float2half(normal(rng));
  for (auto& x : b) x = __float2half(normal(rng));

  DeviceBuffer da(a.size() * 2), db(b.size() * 2), dc(c.size() * 2);
  cudaMemcpy(da.ptr, a.data(), a.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db.ptr, b.data(), b.size() * 2, cudaMemcpyHostToDevice);
  cudaStream_t stream = nullptr;
  cudaStreamCreate(&stream);

  handle.hgemm(stream, M, N, K, static_cast<const half*>(da.ptr), static_cast<const half*>(db.ptr), layout,
               static_cast<half*>(dc.ptr));
  const cudaError_t status = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  if (status != cudaSuccess) {
    std::fprintf(stderr, "hgemm_app: the kernel failed: %s\n", cudaGetErrorString(status));
    return 1;
  }
  cudaMemcpy(c.data(), dc.ptr, c.size() * 2, cudaMemcpyDeviceToHost);

  // B(k, n) as stored: K x N row-major (nn) or N x K row-major (tn).
  auto b_at = [&](int64_t k, int64_t n) {
    return double(__half2float(layout == rlgemm::Layout::kNN ? b[k * N + n] : b[n * K + k]));
  };
  double worst = 0;
  int64_t wrong = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k) ref += double(__half2float(a[m * K + k])) * b_at(k, n);
      const double got = __half2float(c[m * N + n]);
      const double err = std::abs(got - ref);
      worst = std::max(worst, err);
      // fp16 output rounding plus fp32 accumulation over K terms of unit variance.
      if (!std::isfinite(got) || err > std::ldexp(1.0, -9) * (std::abs(ref) + std::sqrt(double(K)))) ++wrong;
    }
  const rlgemm::Stats stats = handle.stats();
  std::printf("C[%lld x %lld] = A[%lld x %lld] * B (%s): %s\n", (long long)M, (long long)N, (long long)M,
              (long long)K, layout == rlgemm::Layout::kNN ? "nn" : "tn",
              handle.describe(M, N, K, layout).c_str());
  std::printf("max |error| %.3g, %lld of %lld elements out of tolerance\n", worst, (long long)wrong,
              (long long)(M * N));
  std::printf("calls: tuned %llu, nearest %llu, policy %llu, default %llu, cublaslt %llu\n",
              (unsigned long long)stats.tuned, (unsigned long long)stats.nearest, (unsigned long long)stats.policy,
              (unsigned long long)stats.default_design, (unsigned long long)stats.cublaslt);
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t M = 300, N = 1024, K = 512;
  rlgemm::Layout layout = rlgemm::Layout::kTN;
  try {
    if (argc != 1 && argc != 4 && argc != 5) {
      std::fprintf(stderr, "usage: hgemm_app [M N K [nn|tn]]\n");
      return 2;
    }
    if (argc >= 4) M = std::atoll(argv[1]), N = std::atoll(argv[2]), K = std::atoll(argv[3]);
    if (argc == 5) layout = rlgemm::parse_layout(argv[4]);
    return run(M, N, K, layout);
  } catch (const rlgemm::Error& e) {
    if (e.kind() == rlgemm::ErrorKind::kNoDevice)
      std::fprintf(stderr, "hgemm_app: no GPU: %s\n", e.what());
    else
      std::fprintf(stderr, "hgemm_app: %s\n", e.what());
    return rlgemm::exit_code(e.kind());
  }
}
