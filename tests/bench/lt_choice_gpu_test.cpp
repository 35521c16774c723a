// lt_auto's choice machinery on the GPU (skips without one): choose_fastest picks a candidate that runs and
// gives the right product; fastest_of keeps one of its finalists and refuses finalists that do not exist.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "bench/cublaslt_problem.h"
#include "bench/fill.h"
#include "core/cuda_util.h"
#include "rlgemm/error.h"
#include "support/gpu.h"

namespace rlgemm::bench {
namespace {

struct LtScratch {
  explicit LtScratch(const Problem& p) : problem(p), lt(p), x(p, nullptr), workspace(kLtWorkspaceBytes) {
    if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) throw Error(ErrorKind::kRuntime, "cublasLtCreate failed");
    candidates = lt.candidates(handle);
  }
  ~LtScratch() { cublasLtDestroy(handle); }
  int fastest(const std::vector<int>& finalists, Mode mode) {
    return fastest_of(lt, handle, candidates, finalists, x.a.ptr, x.b.ptr, x.c.ptr, workspace.ptr, kLtWorkspaceBytes,
                      nullptr, mode);
  }
  Problem problem;
  LtProblem lt;
  ScratchOperands x;
  DeviceScratch<unsigned char> workspace;
  cublasLtHandle_t handle = nullptr;
  std::vector<cublasLtMatmulHeuristicResult_t> candidates;
};

TEST(LtChoiceGpu, ChooseFastestPicksARunnableCandidateInEachMode) {
  RLGEMM_REQUIRE_GPU();
  for (const Shape shape : {Shape{16, 4096, 4096}, Shape{1000, 200, 136}}) {
    LtScratch s({shape, Layout::kTN});
    ASSERT_FALSE(s.candidates.empty());
    for (Mode mode : {Mode::kOffline, Mode::kGraph}) {
      const LtChoice c = choose_fastest(s.lt, s.handle, s.candidates, s.x.a.ptr, s.x.b.ptr, s.x.c.ptr,
                                        s.workspace.ptr, kLtWorkspaceBytes, nullptr, mode);
      EXPECT_EQ(c.count, int(s.candidates.size()));
      EXPECT_GE(c.index, 0);
      EXPECT_LT(c.index, c.count);
      EXPECT_LT(c.failed, c.count);
    }
  }
}

TEST(LtChoiceGpu, FastestOfKeepsOneOfItsFinalists) {
  RLGEMM_REQUIRE_GPU();
  LtScratch s({{512, 2048, 4608}, Layout::kTN});
  ASSERT_GE(s.candidates.size(), 2u);
  const int last = int(s.candidates.size()) - 1;
  EXPECT_EQ(s.fastest({last}, Mode::kOffline), last);  // a final of one is no final
  for (Mode mode : {Mode::kOffline, Mode::kGraph}) {
    const std::vector<int> finalists = {last, 0};
    const int won = s.fastest(finalists, mode);
    EXPECT_NE(std::find(finalists.begin(), finalists.end(), won), finalists.end()) << won;
  }
}

TEST(LtChoiceGpu, FastestOfRefusesFinalistsThatDoNotExist) {
  RLGEMM_REQUIRE_GPU();
  LtScratch s({{64, 256, 512}, Layout::kTN});
  for (const std::vector<int>& finalists : {std::vector<int>{}, std::vector<int>{0, int(s.candidates.size())},
                                            std::vector<int>{-1, 0}}) {
    try {
      s.fastest(finalists, Mode::kOffline);
      ADD_FAILURE() << "finalists of " << finalists.size() << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    }
  }
}

}  // namespace
}  // namespace rlgemm::bench
