// cuBLASLt for the shapes where the tuning database says it beats every rlgemm kernel: the heuristic's
// first algorithm for one problem, planned once (descriptors and algorithm) and then launched with no
// allocation. One cuBLASLt handle serves every plan of a Handle; cublasLtMatmul may be called from several
// threads at once with one handle.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "rlgemm/problem.h"

namespace rlgemm::dispatch {

// The workspace offered to cuBLASLt's heuristic, as the benchmark's lt_heuristic gives it.
inline constexpr size_t kCublasLtWorkspaceBytes = size_t(32) << 20;

class CublasLtContext {
 public:
  CublasLtContext();
  ~CublasLtContext();
  CublasLtContext(const CublasLtContext&) = delete;
  CublasLtContext& operator=(const CublasLtContext&) = delete;
  cublasLtHandle_t handle() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

class CublasLtGemm {
 public:
  // Describes the row-major problem to cuBLASLt (as the column-major C^T = B^T A^T) and asks its heuristic
  // for an algorithm; throws Error(kRuntime) when cuBLASLt has none.
  CublasLtGemm(const CublasLtContext& context, const Problem& problem);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  size_t workspace_bytes() const { return workspace_bytes_; }
  void launch(cudaStream_t stream, const void* a, const void* b, void* c, void* workspace) const;

 private:
  const CublasLtContext& context_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;  // cuBLASLt's operands (B^T, A^T, C^T)
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_bytes_ = 0;
};

}  // namespace rlgemm::dispatch
