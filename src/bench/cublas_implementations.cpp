// cuBLAS and cuBLASLt as baselines. Row-major C[M,N] = A[M,K] B is computed as the column-major product
// C^T[N,M] = B^T A^T: the first cuBLAS operand is B (op N for the nn layout, where row-major K x N is
// column-major N x K; op T for tn, where row-major N x K is column-major K x N), the second is A (op N).
#include <cstdio>
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "bench/cublaslt_problem.h"
#include "bench/implementation.h"
#include "bench/timing.h"
#include "core/cuda_util.h"
#include "rlgemm/error.h"

namespace rlgemm::bench {
namespace {

#define CUBLAS_CHECK(call) check_cublas_status((call), #call)

class CublasGemmEx final : public Implementation {
 public:
  explicit CublasGemmEx(Layout layout) : layout_(layout) { CUBLAS_CHECK(cublasCreate(&handle_)); }
  ~CublasGemmEx() override {
    if (!device_hung()) cublasDestroy(handle_);  // it synchronizes the device
  }
  std::string name() const override { return layout_ == Layout::kNN ? "cublas_nn" : "cublas_tn"; }
  bool supports(const Problem& p) const override { return p.layout == layout_; }
  void run(const Problem& p, const Operands& x, cudaStream_t stream) override {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasSetStream(handle_, stream));
    const auto op_b = p.layout == Layout::kNN ? CUBLAS_OP_N : CUBLAS_OP_T;
    CUBLAS_CHECK(cublasGemmEx(handle_, op_b, CUBLAS_OP_N, int(p.shape.n), int(p.shape.m), int(p.shape.k), &alpha,
                              x.b, CUDA_R_16F, int(p.ldb()), x.a, CUDA_R_16F, int(p.lda()), &beta, x.c, CUDA_R_16F,
                              int(p.ldc()), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

 private:
  Layout layout_;
  cublasHandle_t handle_ = nullptr;
};

// One cuBLASLt description per problem (LtProblem), with the heuristic's candidate algorithms.
class LtBase : public Implementation {
 public:
  LtBase() {
    CUBLAS_CHECK(cublasLtCreate(&handle_));
    RLGEMM_CUDA_CHECK(cudaMalloc(&workspace_, kLtWorkspaceBytes));
  }
  ~LtBase() override {
    problem_.reset();
    if (device_hung()) return;  // frees would block behind the hung kernel; the process is ending
    cudaFree(workspace_);
    cublasLtDestroy(handle_);
  }

  void prepare(const Problem& p, const Operands& x, cudaStream_t stream) override {
    problem_ = std::make_unique<LtProblem>(p);
    choose(p, x, stream, problem_->candidates(handle_));
  }

  void run(const Problem&, const Operands& x, cudaStream_t stream) override {
    problem_->launch(handle_, algo_, x.a, x.b, x.c, workspace_, kLtWorkspaceBytes, stream);
  }
  std::string detail() const override { return detail_; }

 protected:
  virtual void choose(const Problem& p, const Operands& x, cudaStream_t stream,
                      const std::vector<cublasLtMatmulHeuristicResult_t>& candidates) = 0;
  cublasLtMatmulAlgo_t algo_{};
  std::string detail_;

 private:
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::unique_ptr<LtProblem> problem_;
};

class LtHeuristic final : public LtBase {
 public:
  std::string name() const override { return "lt_heuristic"; }

 protected:
  void choose(const Problem&, const Operands&, cudaStream_t,
              const std::vector<cublasLtMatmulHeuristicResult_t>& candidates) override {
    algo_ = candidates.front().algo;
    detail_ = "first of " + std::to_string(candidates.size()) + " heuristic candidates";
  }
};

// Times every candidate the heuristic offers (up to 100) with a short offline measurement and keeps the
// fastest. A candidate that fails to launch is skipped and counted.
class LtAuto final : public LtBase {
 public:
  std::string name() const override { return "lt_auto"; }

 protected:
  void choose(const Problem& p, const Operands& x, cudaStream_t stream,
              const std::vector<cublasLtMatmulHeuristicResult_t>& candidates) override {
    double best = INFINITY;
    int best_index = -1, failed = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      algo_ = candidates[i].algo;
      try {
        const double t = screen_time_us([&](cudaStream_t s) { run(p, x, s); }, stream);
        if (t < best) {
          best = t;
          best_index = int(i);
        }
      } catch (const Error&) {
        ++failed;
      }
    }
    if (best_index < 0) throw Error(ErrorKind::kRuntime, "no cuBLASLt candidate ran for " + p.shape.to_string());
    algo_ = candidates[best_index].algo;
    detail_ = lt_auto_detail(best_index, int(candidates.size()), failed);
  }
};

}  // namespace

std::string lt_auto_detail(int index, int count, int failed) {
  std::string text = "candidate " + std::to_string(index) + " of " + std::to_string(count) + " timed";
  if (failed) text += " (" + std::to_string(failed) + " failed)";
  return text;
}

std::optional<int> lt_auto_candidate(const std::string& detail) {
  int index = -1, count = 0;
  if (std::sscanf(detail.c_str(), "candidate %d of %d timed", &index, &count) != 2 || index < 0 || index >= count)
    return std::nullopt;
  return index;
}

std::vector<std::string> cublas_implementation_names() { return {"cublas_nn", "cublas_tn", "lt_heuristic", "lt_auto"}; }

ImplementationPtr make_cublas_implementation(const std::string& name) {
  if (name == "cublas_nn") return std::make_unique<CublasGemmEx>(Layout::kNN);
  if (name == "cublas_tn") return std::make_unique<CublasGemmEx>(Layout::kTN);
  if (name == "lt_heuristic") return std::make_unique<LtHeuristic>();
  if (name == "lt_auto") return std::make_unique<LtAuto>();
  return nullptr;
}

}  // namespace rlgemm::bench
