// A row-major HGEMM problem as cuBLASLt sees it, shared by the harness's lt_heuristic and lt_auto and by the
// library's cuBLASLt route, so that both describe the problem and ask the heuristic the same way: the same
// request gives the same candidate list, and a candidate index lt_auto reports names one algorithm in both.
//
// Row-major C = A B is the column-major product C^T (N x M) = B^T A^T. A row-major M x K A is a column-major
// K x M matrix as stored; an nn B (row-major K x N) is column-major N x K as stored (operation N); a tn B
// (row-major N x K) is column-major K x N, transposed by the operation (T). cuBLASLt's first operand is B.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "rlgemm/problem.h"

namespace rlgemm::bench {

// What is asked of cuBLASLt's heuristic: the workspace its algorithms may use and how many candidates.
inline constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;
inline constexpr int kLtMaxCandidates = 100;

// Throws Error naming `call` for a status other than success (kOutOfMemory when cuBLAS could not allocate).
void check_cublas_status(cublasStatus_t status, const char* call);

class LtProblem {
 public:
  // fp16 operands and result, fp32 compute and scale. Throws Error when cuBLASLt refuses a descriptor.
  explicit LtProblem(const Problem& problem);
  ~LtProblem();
  LtProblem(const LtProblem&) = delete;
  LtProblem& operator=(const LtProblem&) = delete;

  const Problem& problem() const { return problem_; }
  // The heuristic's candidates, best first (at most kLtMaxCandidates, each within kLtWorkspaceBytes).
  // Throws Error(kRuntime) when it offers none.
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(cublasLtHandle_t handle) const;
  // C = A B with `algo` on `stream`: no allocation, no synchronization.
  void launch(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b, void* c,
              void* workspace, size_t workspace_bytes, cudaStream_t stream) const;

  // The descriptors, for inspection: the operation and cuBLASLt's operands B^T, A^T and C^T.
  cublasLtMatmulDesc_t operation() const { return operation_; }
  cublasLtMatrixLayout_t b_layout() const { return b_; }
  cublasLtMatrixLayout_t a_layout() const { return a_; }
  cublasLtMatrixLayout_t c_layout() const { return c_; }

 private:
  void release();

  Problem problem_;
  cublasLtMatmulDesc_t operation_ = nullptr;
  cublasLtMatrixLayout_t b_ = nullptr, a_ = nullptr, c_ = nullptr;
};

}  // namespace rlgemm::bench
