// Where does the host time of a call on a planned route go? Prints CSV:
//   1. the host cost of the CUDA runtime queries a call may make (cudaGetDevice, cudaStreamIsCapturing,
//      cudaStreamGetId, cudaStreamGetCaptureInfo), in ns per query;
//   2. for each shape, the host time to enqueue a call through rlgemm::Handle on its cuBLASLt floor route
//      (predicted kernels off) against cublasLtMatmul called directly with the same algorithm on a prebuilt
//      plan, in interleaved rounds of back-to-back calls: ns per call, median of the rounds and the spread.
//
//   host_cost_probe [--rounds R] [--calls C] M,N,K [M,N,K ...]      (tn, fp16)
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench/cublaslt_problem.h"
#include "core/cuda_util.h"
#include "rlgemm/error.h"
#include "rlgemm/problem.h"
#include "rlgemm/rlgemm.h"

using namespace rlgemm;
using Clock = std::chrono::steady_clock;

namespace {

double ns_per(const std::function<void()>& f, int n) {
  const auto t0 = Clock::now();
  for (int i = 0; i < n; ++i) f();
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / n;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 15, calls = 2000;
  std::vector<Shape> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--rounds" || arg == "--calls") && i + 1 < argc) {
      (arg == "--rounds" ? rounds : calls) = std::atoi(argv[++i]);
      continue;
    }
    try {
      shapes.push_back(parse_shape(arg));
    } catch (const Error& e) {
      std::fprintf(stderr, "host_cost_probe: %s\n", e.what());
      return 2;
    }
  }
  if (shapes.empty()) shapes = {{1, 256, 256}, {16, 4096, 4096}, {128, 3584, 4096}};
  if (rounds < 1 || calls < 1) {
    std::fprintf(stderr, "host_cost_probe: --rounds and --calls must be positive\n");
    return 2;
  }
  try {
    cudaStream_t stream = nullptr;
    RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::printf("what,shape,ns_per_call,min_ns,max_ns,detail\n");
    constexpr int kQueries = 200000;
    int device = 0;
    unsigned long long id = 0;
    cudaStreamCaptureStatus status{};
    const std::vector<std::pair<const char*, std::function<void()>>> queries = {
        {"cudaGetDevice", [&] { (void)cudaGetDevice(&device); }},
        {"cudaStreamIsCapturing", [&] { (void)cudaStreamIsCapturing(stream, &status); }},
        {"cudaStreamGetId", [&] { (void)cudaStreamGetId(stream, &id); }},
        {"cudaStreamGetCaptureInfo", [&] { (void)cudaStreamGetCaptureInfo(stream, &status, &id); }},
    };
    for (const auto& [name, query] : queries) {
      ns_per(query, kQueries / 10);  // warm
      const double ns = ns_per(query, kQueries);
      std::printf("%s,,%.1f,,,\n", name, ns);
    }

    HandleOptions options;
    options.predicted_kernels = false;  // the cuBLASLt floor on every shape
    Handle handle(options);
    cublasLtHandle_t lt = nullptr;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) throw Error(ErrorKind::kRuntime, "cublasLtCreate failed");
    for (const Shape& shape : shapes) {
      const Problem problem{shape, Layout::kTN, DType::kF16};
      DeviceScratch<half> a(size_t(problem.a_elems())), b(size_t(problem.b_elems())), c(size_t(problem.c_elems()));
      RLGEMM_CUDA_CHECK(cudaMemset(a.ptr, 0, size_t(problem.a_elems()) * sizeof(half)));
      RLGEMM_CUDA_CHECK(cudaMemset(b.ptr, 0, size_t(problem.b_elems()) * sizeof(half)));
      handle.gemm(stream, shape.m, shape.n, shape.k, a.ptr, b.ptr, Layout::kTN, c.ptr, DType::kF16);  // first use
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      const std::string route = handle.describe(shape.m, shape.n, shape.k, Layout::kTN);
      int candidate = 0, count = 0;
      const auto at = route.find("candidate ");
      if (at != std::string::npos) std::sscanf(route.c_str() + at, "candidate %d of %d", &candidate, &count);
      const bench::LtProblem direct(problem);
      const auto candidates = direct.candidates(lt);
      if (candidate >= int(candidates.size())) candidate = 0;
      const size_t ws_bytes = candidates[size_t(candidate)].workspaceSize;
      DeviceScratch<unsigned char> workspace(std::max<size_t>(ws_bytes, 16));
      const std::string s = std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" + std::to_string(shape.k);
      std::vector<double> via_handle, via_lt;
      auto loop = [&](bool through_handle) {
        const auto t0 = Clock::now();
        for (int i = 0; i < calls; ++i) {
          if (through_handle)
            handle.gemm(stream, shape.m, shape.n, shape.k, a.ptr, b.ptr, Layout::kTN, c.ptr, DType::kF16);
          else
            direct.launch(lt, candidates[size_t(candidate)].algo, a.ptr, b.ptr, c.ptr, workspace.ptr, ws_bytes, stream);
        }
        const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / calls;
        RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
        return ns;
      };
      loop(true), loop(false);  // warm
      for (int r = 0; r < rounds; ++r) {
        const bool handle_first = r % 2 == 0;
        const double first = loop(handle_first), second = loop(!handle_first);
        via_handle.push_back(handle_first ? first : second);
        via_lt.push_back(handle_first ? second : first);
      }
      for (const auto& [name, v] : {std::pair{"handle", via_handle}, std::pair{"cublasLtMatmul", via_lt}}) {
        std::string detail = name == std::string("handle") ? route : "candidate " + std::to_string(candidate);
        std::replace(detail.begin(), detail.end(), ',', ';');
        std::printf("%s,%s,%.1f,%.1f,%.1f,%s\n", name, s.c_str(), median_of(v), *std::min_element(v.begin(), v.end()),
                    *std::max_element(v.begin(), v.end()), detail.c_str());
      }
      std::fflush(stdout);
    }
    cublasLtDestroy(lt);
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "host_cost_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
