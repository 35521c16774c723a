// cuBLASLt's view of a row-major problem: the descriptors must describe C^T = B^T A^T with the stored
// matrices' shapes and leading dimensions, for both layouts and for shapes that are not tile multiples.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>

#include "bench/cublaslt_problem.h"
#include "rlgemm/error.h"

namespace rlgemm::bench {
namespace {

struct LayoutView {
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
  cudaDataType type{};
  bool operator==(const LayoutView&) const = default;
};

void PrintTo(const LayoutView& v, std::ostream* os) {
  *os << v.rows << " x " << v.cols << " ld " << v.ld << " type " << int(v.type);
}

template <typename T>
T attribute(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t which) {
  T value{};
  size_t written = 0;
  check_cublas_status(cublasLtMatrixLayoutGetAttribute(layout, which, &value, sizeof value, &written),
                      "cublasLtMatrixLayoutGetAttribute");
  return value;
}

LayoutView view(cublasLtMatrixLayout_t layout) {
  return {attribute<uint64_t>(layout, CUBLASLT_MATRIX_LAYOUT_ROWS),
          attribute<uint64_t>(layout, CUBLASLT_MATRIX_LAYOUT_COLS), attribute<int64_t>(layout, CUBLASLT_MATRIX_LAYOUT_LD),
          cudaDataType(attribute<uint32_t>(layout, CUBLASLT_MATRIX_LAYOUT_TYPE))};
}

int32_t operation(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t which) {
  int32_t op = -1;
  size_t written = 0;
  check_cublas_status(cublasLtMatmulDescGetAttribute(desc, which, &op, sizeof op, &written),
                      "cublasLtMatmulDescGetAttribute");
  return op;
}

TEST(LtProblem, TnReadsBStoredNByKTransposed) {
  const LtProblem lt(Problem{Shape{7, 200, 136}, Layout::kTN});
  EXPECT_EQ(operation(lt.operation(), CUBLASLT_MATMUL_DESC_TRANSA), CUBLAS_OP_T);
  EXPECT_EQ(operation(lt.operation(), CUBLASLT_MATMUL_DESC_TRANSB), CUBLAS_OP_N);
  EXPECT_EQ(view(lt.b_layout()), (LayoutView{136, 200, 136, CUDA_R_16F}));  // column-major K x N, ld K
  EXPECT_EQ(view(lt.a_layout()), (LayoutView{136, 7, 136, CUDA_R_16F}));    // A^T: column-major K x M
  EXPECT_EQ(view(lt.c_layout()), (LayoutView{200, 7, 200, CUDA_R_16F}));    // C^T: column-major N x M
}

TEST(LtProblem, NnReadsBStoredKByNAsIs) {
  const LtProblem lt(Problem{Shape{1000, 72, 24}, Layout::kNN});
  EXPECT_EQ(operation(lt.operation(), CUBLASLT_MATMUL_DESC_TRANSA), CUBLAS_OP_N);
  EXPECT_EQ(operation(lt.operation(), CUBLASLT_MATMUL_DESC_TRANSB), CUBLAS_OP_N);
  EXPECT_EQ(view(lt.b_layout()), (LayoutView{72, 24, 72, CUDA_R_16F}));  // column-major N x K, ld N
  EXPECT_EQ(view(lt.a_layout()), (LayoutView{24, 1000, 24, CUDA_R_16F}));
  EXPECT_EQ(view(lt.c_layout()), (LayoutView{72, 1000, 72, CUDA_R_16F}));
  EXPECT_EQ(lt.problem().shape, (Shape{1000, 72, 24}));
}

// The bias epilogue: C^T's rows are the N output features, so cuBLASLt's bias (one value per row of D) is
// the row-major bias of N elements, of C's element type; a launch without its bias is refused before cuBLASLt.
TEST(LtProblem, TheBiasEpilogueAddsOneValuePerOutputFeature) {
  for (DType dtype : {DType::kF16, DType::kBF16}) {
    const LtProblem lt(Problem{Shape{7, 200, 136}, Layout::kTN, dtype}, LtEpilogue::kBias);
    EXPECT_EQ(lt.epilogue(), LtEpilogue::kBias);
    EXPECT_EQ(operation(lt.operation(), CUBLASLT_MATMUL_DESC_EPILOGUE), CUBLASLT_EPILOGUE_BIAS);
    EXPECT_EQ(operation(lt.operation(), CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE),
              dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F);
    EXPECT_EQ(view(lt.c_layout()).rows, 200u);  // N: the bias's length
    const cublasLtMatmulAlgo_t algo{};
    try {
      lt.launch(nullptr, algo, nullptr, nullptr, nullptr, nullptr, 0, nullptr);
      FAIL() << "launched without its bias";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find("without its bias"), std::string::npos) << e.what();
    }
  }
  const LtProblem plain(Problem{Shape{7, 200, 136}, Layout::kTN});
  EXPECT_EQ(plain.epilogue(), LtEpilogue::kNone);
  EXPECT_EQ(operation(plain.operation(), CUBLASLT_MATMUL_DESC_EPILOGUE), CUBLASLT_EPILOGUE_DEFAULT);
}

// kWhole launches every candidate with the workspace given; kOwn with the heuristic's size for it, never more
// than the workspace given.
TEST(LtProblem, ACandidatesLaunchWorkspaceIsTheWholeOrItsOwn) {
  cublasLtMatmulHeuristicResult_t none{}, some{}, more{};
  some.workspaceSize = 4;
  more.workspaceSize = size_t(64) << 20;
  for (const auto* r : {&none, &some, &more})
    EXPECT_EQ(launch_workspace_bytes(*r, kLtWorkspaceBytes, LtWorkspace::kWhole), kLtWorkspaceBytes);
  EXPECT_EQ(launch_workspace_bytes(none, kLtWorkspaceBytes, LtWorkspace::kOwn), 0u);
  EXPECT_EQ(launch_workspace_bytes(some, kLtWorkspaceBytes, LtWorkspace::kOwn), 4u);
  EXPECT_EQ(launch_workspace_bytes(more, kLtWorkspaceBytes, LtWorkspace::kOwn), kLtWorkspaceBytes);
}

TEST(LtProblem, AFailedCallNamesItself) {
  try {
    check_cublas_status(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmul(...)");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
    EXPECT_NE(std::string(e.what()).find("cublasLtMatmul(...) failed: CUBLAS_STATUS_INVALID_VALUE"), std::string::npos)
        << e.what();
  }
  try {
    check_cublas_status(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtCreate");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kOutOfMemory);
  }
  EXPECT_NO_THROW(check_cublas_status(CUBLAS_STATUS_SUCCESS, "nothing"));
}

}  // namespace
}  // namespace rlgemm::bench
