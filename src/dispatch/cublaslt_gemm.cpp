#include "dispatch/cublaslt_gemm.h"

#include <string>
#include <vector>

#include "rlgemm/error.h"

namespace rlgemm::dispatch {

CublasLtContext::CublasLtContext() { bench::check_cublas_status(cublasLtCreate(&handle_), "cublasLtCreate"); }
CublasLtContext::~CublasLtContext() { cublasLtDestroy(handle_); }

CublasLtGemm::CublasLtGemm(const CublasLtContext& context, const Problem& problem, std::optional<int> candidate)
    : context_(context), problem_(problem) {
  const std::vector<cublasLtMatmulHeuristicResult_t> results = problem_.candidates(context_.handle());
  const int found = int(results.size());
  int index = candidate.value_or(0);
  if (index < 0 || index >= found) {
    // A table recorded with another cuBLASLt: its index means nothing here.
    note_ = "candidate " + std::to_string(index) + " not offered (" + std::to_string(found) + " are): the first";
    index = 0;
  }
  if (results[size_t(index)].state != CUBLAS_STATUS_SUCCESS)
    throw Error(ErrorKind::kRuntime, "cuBLASLt candidate " + std::to_string(index) + " for " +
                                         problem.shape.to_string() + " " + std::string(to_string(problem.layout)) +
                                         " is not usable: " + cublasLtGetStatusString(results[size_t(index)].state));
  algo_ = results[size_t(index)].algo;
  workspace_bytes_ = results[size_t(index)].workspaceSize;
}

void CublasLtGemm::launch(cudaStream_t stream, const void* a, const void* b, void* c, void* workspace) const {
  problem_.launch(context_.handle(), algo_, a, b, c, workspace, workspace_bytes_, stream);
}

}  // namespace rlgemm::dispatch
