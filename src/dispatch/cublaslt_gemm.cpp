#include "dispatch/cublaslt_gemm.h"

#include <string>
#include <vector>

#include "rlgemm/error.h"

namespace rlgemm::dispatch {
namespace {

void check(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  if (status == CUBLAS_STATUS_ALLOC_FAILED)
    throw Error(ErrorKind::kOutOfMemory, std::string(call) + " failed: cuBLASLt could not allocate memory");
  throw Error(ErrorKind::kRuntime, std::string(call) + " failed: " + cublasLtGetStatusString(status));
}
#define RLGEMM_LT_CHECK(call) check((call), #call)

}  // namespace

CublasLtContext::CublasLtContext() { RLGEMM_LT_CHECK(cublasLtCreate(&handle_)); }
CublasLtContext::~CublasLtContext() { cublasLtDestroy(handle_); }

CublasLtGemm::CublasLtGemm(const CublasLtContext& context, const Problem& problem, std::optional<int> candidate)
    : context_(context) {
  const uint64_t M = problem.shape.m, N = problem.shape.n, K = problem.shape.k;
  // Row-major C = A B is column-major C^T (N x M) = B^T (N x K) * A^T (K x M). A row-major M x K A is a
  // column-major K x M matrix as stored; an nn B (K x N row-major) is column-major N x K as stored; a tn B
  // (N x K row-major) is column-major K x N, transposed by the operation.
  const bool tn = problem.layout == Layout::kTN;
  try {
    RLGEMM_LT_CHECK(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_b = tn ? CUBLAS_OP_T : CUBLAS_OP_N, op_a = CUBLAS_OP_N;
    RLGEMM_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
    RLGEMM_LT_CHECK(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)));
    if (tn)
      RLGEMM_LT_CHECK(cublasLtMatrixLayoutCreate(&a_, CUDA_R_16F, K, N, K));
    else
      RLGEMM_LT_CHECK(cublasLtMatrixLayoutCreate(&a_, CUDA_R_16F, N, K, N));
    RLGEMM_LT_CHECK(cublasLtMatrixLayoutCreate(&b_, CUDA_R_16F, K, M, K));
    RLGEMM_LT_CHECK(cublasLtMatrixLayoutCreate(&c_, CUDA_R_16F, N, M, N));

    cublasLtMatmulPreference_t preference = nullptr;
    RLGEMM_LT_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    const size_t max_workspace = kCublasLtWorkspaceBytes;
    std::vector<cublasLtMatmulHeuristicResult_t> results(kCublasLtCandidates);
    int found = 0;
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof(max_workspace));
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulAlgoGetHeuristic(context_.handle(), desc_, a_, b_, c_, c_, preference,
                                              kCublasLtCandidates, results.data(), &found);
    cublasLtMatmulPreferenceDestroy(preference);
    RLGEMM_LT_CHECK(status);
    const std::string problem_text = problem.shape.to_string() + " " + std::string(to_string(problem.layout));
    if (found < 1) throw Error(ErrorKind::kRuntime, "cuBLASLt has no algorithm for " + problem_text);
    int index = candidate.value_or(0);
    if (index < 0 || index >= found) {
      // A table recorded with another cuBLASLt: its index means nothing here.
      note_ = "candidate " + std::to_string(index) + " not offered (" + std::to_string(found) + " are): the first";
      index = 0;
    }
    if (results[index].state != CUBLAS_STATUS_SUCCESS)
      throw Error(ErrorKind::kRuntime, "cuBLASLt candidate " + std::to_string(index) + " for " + problem_text +
                                           " is not usable: " + cublasLtGetStatusString(results[index].state));
    algo_ = results[index].algo;
    workspace_bytes_ = results[index].workspaceSize;
  } catch (...) {
    this->~CublasLtGemm();
    throw;
  }
}

CublasLtGemm::~CublasLtGemm() {
  if (c_) cublasLtMatrixLayoutDestroy(c_), c_ = nullptr;
  if (b_) cublasLtMatrixLayoutDestroy(b_), b_ = nullptr;
  if (a_) cublasLtMatrixLayoutDestroy(a_), a_ = nullptr;
  if (desc_) cublasLtMatmulDescDestroy(desc_), desc_ = nullptr;
}

void CublasLtGemm::launch(cudaStream_t stream, const void* a, const void* b, void* c, void* workspace) const {
  const float alpha = 1.0f, beta = 0.0f;
  RLGEMM_LT_CHECK(cublasLtMatmul(context_.handle(), desc_, &alpha, /*A=*/b, a_, /*B=*/a, b_, &beta, c, c_, c, c_,
                                 &algo_, workspace, workspace_bytes_, stream));
}

}  // namespace rlgemm::dispatch
