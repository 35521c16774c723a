// Where does the host time of a call on a planned route go? Prints CSV:
//   1. the host cost of the CUDA runtime queries a call may make (cudaGetDevice, cudaStreamIsCapturing,
//      cudaStreamGetId, cudaStreamGetCaptureInfo), in ns per query;
//   2. for each shape, the host time to enqueue a call through rlgemm::Handle on its cuBLASLt floor route
//      (predicted kernels off), launching cuBLASLt's kernel directly (handle) and through cublasLtMatmul
//      (handle_via_cublasLtMatmul), against cublasLtMatmul called directly with the same algorithm on a prebuilt
//      plan, in interleaved rounds of back-to-back calls (few enough that the launch queue never fills): ns per
//      call, median of the rounds and the spread.
//
//   host_cost_probe [--rounds R] [--calls C] M,N,K [M,N,K ...]      (tn, fp16)
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <functional>
#include <string>
#include <vector>

#include "bench/cublaslt_problem.h"
#include "core/cuda_util.h"
#include "rlgemm/error.h"
#include "rlgemm/problem.h"
#include "rlgemm/rlgemm.h"
#include "probe_cli.h"

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
  int rounds = 15, calls = 200;
  CLI::App app("Host time per call: the handle against cublasLtMatmul", "host_cost_probe");
  app.add_option("--rounds", rounds, "interleaved rounds")->check(CLI::PositiveNumber);
  app.add_option("--calls", calls, "calls per sample")->check(CLI::PositiveNumber);
  std::vector<Shape> shapes;
  if (const int status = probes::parse_command_line(app, argc, argv, shapes, false); status >= 0) return status;
  if (shapes.empty()) shapes = {{1, 256, 256}, {16, 4096, 4096}, {128, 3584, 4096}};
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

    // Two handles on the cuBLASLt floor of every shape: one launching cuBLASLt's kernel directly (the default),
    // one calling cublasLtMatmul. The second is made after the first chose each shape's algorithm and reads it
    // from their shared cache directory, so all three subjects run one algorithm.
    const auto dir = std::filesystem::temp_directory_path() / ("rlgemm-host-cost-" + std::to_string(::getpid()));
    HandleOptions options;
    options.predicted_kernels = false;  // the cuBLASLt floor on every shape
    options.cache_dir = dir.string();
    options.direct_cublaslt = false;
    Handle through_lt(options);
    struct Operands {
      Problem problem;
      DeviceScratch<half> a, b, c;
      explicit Operands(const Problem& p)
          : problem(p), a(size_t(p.a_elems())), b(size_t(p.b_elems())), c(size_t(p.c_elems())) {}
    };
    std::vector<std::unique_ptr<Operands>> operands;
    for (const Shape& shape : shapes) {
      auto& x = *operands.emplace_back(std::make_unique<Operands>(Problem{shape, Layout::kTN, DType::kF16}));
      RLGEMM_CUDA_CHECK(cudaMemset(x.a.ptr, 0, size_t(x.problem.a_elems()) * sizeof(half)));
      RLGEMM_CUDA_CHECK(cudaMemset(x.b.ptr, 0, size_t(x.problem.b_elems()) * sizeof(half)));
      through_lt.gemm(stream, shape.m, shape.n, shape.k, x.a.ptr, x.b.ptr, Layout::kTN, x.c.ptr, DType::kF16);
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    options.direct_cublaslt = true;
    Handle handle(options);
    cublasLtHandle_t lt = nullptr;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) throw Error(ErrorKind::kRuntime, "cublasLtCreate failed");
    for (size_t si = 0; si < shapes.size(); ++si) {
      const Shape& shape = shapes[si];
      const Problem& problem = operands[si]->problem;
      auto& a = operands[si]->a;
      auto& b = operands[si]->b;
      auto& c = operands[si]->c;
      handle.gemm(stream, shape.m, shape.n, shape.k, a.ptr, b.ptr, Layout::kTN, c.ptr, DType::kF16);  // first use
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      const std::string route = handle.describe(shape.m, shape.n, shape.k, Layout::kTN);
      const std::string lt_route = through_lt.describe(shape.m, shape.n, shape.k, Layout::kTN);
      int candidate = 0, count = 0;
      const auto at = route.find("candidate ");
      if (at != std::string::npos) std::sscanf(route.c_str() + at, "candidate %d of %d", &candidate, &count);
      const bench::LtProblem direct(problem);
      const auto candidates = direct.candidates(lt);
      if (candidate >= int(candidates.size())) candidate = 0;
      const size_t ws_bytes = candidates[size_t(candidate)].workspaceSize;
      DeviceScratch<unsigned char> workspace(std::max<size_t>(ws_bytes, 16));
      const std::string s = std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" + std::to_string(shape.k);
      const std::vector<std::pair<std::string, std::function<void()>>> subjects = {
          {"handle", [&] { handle.gemm(stream, shape.m, shape.n, shape.k, a.ptr, b.ptr, Layout::kTN, c.ptr, DType::kF16); }},
          {"handle_via_cublasLtMatmul",
           [&] { through_lt.gemm(stream, shape.m, shape.n, shape.k, a.ptr, b.ptr, Layout::kTN, c.ptr, DType::kF16); }},
          {"cublasLtMatmul",
           [&] { direct.launch(lt, candidates[size_t(candidate)].algo, a.ptr, b.ptr, c.ptr, workspace.ptr, ws_bytes, stream); }},
      };
      // Each round: every subject's `calls` back-to-back calls, timed on the host, then the stream drained (few
      // enough calls that the launch queue never fills: the host's time, not the GPU's), in a rotating order.
      auto loop = [&](const std::function<void()>& call) {
        const auto t0 = Clock::now();
        for (int i = 0; i < calls; ++i) call();
        const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / calls;
        RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
        return ns;
      };
      std::vector<std::vector<double>> times(subjects.size());
      for (const auto& subject : subjects) loop(subject.second);  // warm
      for (int r = 0; r < rounds; ++r)
        for (size_t j = 0; j < subjects.size(); ++j) {
          const size_t i = (j + size_t(r)) % subjects.size();
          times[i].push_back(loop(subjects[i].second));
        }
      for (size_t i = 0; i < subjects.size(); ++i) {
        std::string detail = i == 0 ? route : i == 1 ? lt_route : "candidate " + std::to_string(candidate);
        std::replace(detail.begin(), detail.end(), ',', ';');
        const auto& v = times[i];
        std::printf("%s,%s,%.1f,%.1f,%.1f,%s\n", subjects[i].first.c_str(), s.c_str(), median_of(v),
                    *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()), detail.c_str());
      }
      std::fflush(stdout);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    cublasLtDestroy(lt);
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "host_cost_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
