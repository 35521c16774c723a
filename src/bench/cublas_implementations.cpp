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
#include "bench/device_data.h"
#include "bench/implementation.h"
#include "bench/timing.h"
#include "core/cuda_util.h"
#include "rlgemm/error.h"

namespace rlgemm::bench {
namespace {

#define CUBLAS_CHECK(call) check_cublas_status((call), #call)

class CublasGemmEx final : public Implementation {
 public:
  explicit CublasGemmEx(Layout layout) : layout_(layout), workspace_(kLtWorkspaceBytes) { CUBLAS_CHECK(cublasCreate(&handle_)); }
  ~CublasGemmEx() override {
    if (!device_hung()) cublasDestroy(handle_);  // it synchronizes the device
  }
  std::string name() const override { return layout_ == Layout::kNN ? "cublas_nn" : "cublas_tn"; }
  bool supports(const Problem& p) const override { return p.layout == layout_; }
  void run(const Problem& p, const Operands& x, cudaStream_t stream) override {
    const float alpha = 1.0f, beta = 0.0f;
    CUBLAS_CHECK(cublasSetStream(handle_, stream));
    // A workspace of its own, as PyTorch gives cuBLAS: setting the stream resets it to cuBLAS's pool, which a
    // call being captured into a CUDA graph (graph mode) must not allocate from.
    CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_.ptr, kLtWorkspaceBytes));
    const auto op_b = p.layout == Layout::kNN ? CUBLAS_OP_N : CUBLAS_OP_T;
    const cudaDataType type = cuda_data_type(p.dtype);  // A, B and C alike, fp32 compute either way
    CUBLAS_CHECK(cublasGemmEx(handle_, op_b, CUBLAS_OP_N, int(p.shape.n), int(p.shape.m), int(p.shape.k), &alpha,
                              x.b, type, int(p.ldb()), x.a, type, int(p.lda()), &beta, x.c, type, int(p.ldc()),
                              CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

 private:
  Layout layout_;
  DeviceScratch<unsigned char> workspace_;
  cublasHandle_t handle_ = nullptr;
};

// One cuBLASLt description per problem (LtProblem), with the heuristic's candidate algorithms.
class LtBase : public Implementation {
 public:
  LtBase() {
    CUBLAS_CHECK(cublasLtCreate(&handle_));
    workspace_.reserve(kLtWorkspaceBytes / sizeof(half), nullptr);
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
  }
  ~LtBase() override {
    problem_.reset();
    if (device_hung()) return;  // a destroy would block behind the hung kernel; the process is ending
    cublasLtDestroy(handle_);
  }

  void prepare(const Problem& p, const Operands& x, cudaStream_t stream) override {
    chosen_ = false;
    problem_ = std::make_unique<LtProblem>(p);
    choose(p, x, stream, problem_->candidates(handle_));
    chosen_ = true;
  }

  void run(const Problem&, const Operands& x, cudaStream_t stream) override {
    problem_->launch(handle_, algo_, x.a, x.b, x.c, workspace_.data(), kLtWorkspaceBytes, stream);
  }
  std::string detail() const override { return detail_; }
  std::string stray_write(cudaStream_t stream) const override {
    return workspace_.guards_intact(stream) ? "" : "a write strayed outside the cuBLASLt workspace";
  }
  // The algorithm chosen for the last prepared problem; nullptr when that preparation failed.
  const cublasLtMatmulAlgo_t* algorithm() const { return chosen_ ? &algo_ : nullptr; }

 protected:
  const LtProblem& lt_problem() const { return *problem_; }
  cublasLtHandle_t lt_handle() const { return handle_; }
  void* lt_workspace() const { return workspace_.data(); }
  virtual void choose(const Problem& p, const Operands& x, cudaStream_t stream,
                      const std::vector<cublasLtMatmulHeuristicResult_t>& candidates) = 0;
  cublasLtMatmulAlgo_t algo_{};
  std::string detail_;

 private:
  cublasLtHandle_t handle_ = nullptr;
  bool chosen_ = false;
  GuardedBuffer workspace_;
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

// lt_auto's choice (choose_fastest): every candidate screened, the fastest and the heuristic's first timed
// side by side, the fastest kept; timed in `choice_mode` (offline by default; graph: the GPU's time, as the
// library's floor chooses for captured calls).
class LtAuto final : public LtBase {
 public:
  explicit LtAuto(Mode choice_mode = Mode::kOffline, std::string name = "lt_auto")
      : choice_mode_(choice_mode), name_(std::move(name)) {}
  std::string name() const override { return name_; }

 protected:
  void choose(const Problem&, const Operands& x, cudaStream_t stream,
              const std::vector<cublasLtMatmulHeuristicResult_t>& candidates) override {
    const LtChoice choice = choose_fastest(lt_problem(), lt_handle(), candidates, x.a, x.b, x.c, lt_workspace(),
                                           kLtWorkspaceBytes, stream, choice_mode_);
    algo_ = candidates[size_t(choice.index)].algo;
    detail_ = lt_auto_detail(choice.index, choice.count, choice.failed);
    if (choice_mode_ != Mode::kOffline) detail_ += " in " + std::string(to_string(choice_mode_)) + " mode";
  }

 private:
  Mode choice_mode_;
  std::string name_;
};

// lt_auto's algorithm under another name (see make_lt_twin).
class LtTwin final : public LtBase {
 public:
  explicit LtTwin(const LtAuto& source) : source_(source) {}
  std::string name() const override { return kTwinImplementation; }

 protected:
  void choose(const Problem&, const Operands&, cudaStream_t, const std::vector<cublasLtMatmulHeuristicResult_t>&) override {
    const cublasLtMatmulAlgo_t* algo = source_.algorithm();
    if (!algo) throw Error(ErrorKind::kRuntime, "lt_auto chose no algorithm for this problem, so its twin has none");
    algo_ = *algo;
    detail_ = "lt_auto's algorithm (" + source_.detail() + ")";
  }

 private:
  const LtAuto& source_;
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
  if (name == kLtAutoGraphImplementation) return std::make_unique<LtAuto>(Mode::kGraph, kLtAutoGraphImplementation);
  return nullptr;
}

ImplementationPtr make_lt_auto(Mode choice_mode) { return std::make_unique<LtAuto>(choice_mode); }

bool is_vendor_implementation(const std::string& name) {
  const auto names = cublas_implementation_names();
  return name == kLtAutoGraphImplementation || std::find(names.begin(), names.end(), name) != names.end();
}

ImplementationPtr make_lt_twin(const Implementation& lt_auto) {
  const auto* source = dynamic_cast<const LtAuto*>(&lt_auto);
  if (!source) fail("the fairness control needs lt_auto's implementation, got " + lt_auto.name());
  return std::make_unique<LtTwin>(*source);
}

}  // namespace rlgemm::bench
