// lt_auto's choice machinery on the GPU (skips without one): the candidate list (the heuristic's list for the
// whole workspace first, then what smaller limits add); choose_fastest picks a candidate that runs, each with the
// whole workspace or its own, with a bias epilogue too; fastest_of keeps one of its finalists and refuses
// finalists that do not exist; on several operand sets (OperandSets, apart and alike) every set is run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <utility>
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
    for (Mode mode : {Mode::kOffline, Mode::kGraph})
      for (LtWorkspace use : {LtWorkspace::kWhole, LtWorkspace::kOwn}) {
        const LtChoice c = choose_fastest(s.lt, s.handle, s.candidates, s.x.a.ptr, s.x.b.ptr, s.x.c.ptr,
                                          s.workspace.ptr, kLtWorkspaceBytes, nullptr, mode, nullptr, use);
        EXPECT_EQ(c.count, int(s.candidates.size()));
        EXPECT_GE(c.index, 0);
        EXPECT_LT(c.index, c.count);
        // Each candidate's own workspace is one the heuristic offered it with: every one launches.
        if (use == LtWorkspace::kOwn) EXPECT_EQ(c.failed, 0);
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

// The heuristic's own answer for one workspace limit, as cuBLASLt gives it.
std::vector<cublasLtMatmulHeuristicResult_t> heuristic_for(const LtProblem& lt, cublasLtHandle_t handle,
                                                           uint64_t limit) {
  cublasLtMatmulPreference_t preference = nullptr;
  EXPECT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit,
                                                 sizeof limit),
            CUBLAS_STATUS_SUCCESS);
  std::vector<cublasLtMatmulHeuristicResult_t> results(kLtMaxCandidates);
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, lt.operation(), lt.b_layout(), lt.a_layout(),
                                                               lt.c_layout(), lt.c_layout(), preference,
                                                               kLtMaxCandidates, results.data(), &found);
  cublasLtMatmulPreferenceDestroy(preference);
  results.resize(status == CUBLAS_STATUS_SUCCESS ? size_t(found) : 0);
  return results;
}

// candidates(): the heuristic's list for the whole workspace, unchanged and first (tables and choice files
// record indices into it), then each algorithm that the 0, 1 and 4 MiB lists add, once, within its limit.
TEST(LtChoiceGpu, CandidatesAreTheWholeWorkspacesListThenWhatSmallerLimitsAdd) {
  RLGEMM_REQUIRE_GPU();
  for (const Shape shape : {Shape{32, 4096, 4096}, Shape{1, 4096, 4096}, Shape{2048, 512, 3584}}) {
    SCOPED_TRACE(shape.to_string());
    LtScratch s({shape, Layout::kTN});
    const auto whole = heuristic_for(s.lt, s.handle, kLtWorkspaceBytes);
    ASSERT_FALSE(whole.empty());
    ASSERT_GE(s.candidates.size(), whole.size());
    for (size_t i = 0; i < whole.size(); ++i) EXPECT_TRUE(same_algo(s.candidates[i].algo, whole[i].algo)) << i;
    std::vector<cublasLtMatmulHeuristicResult_t> smaller;
    for (uint64_t limit : {uint64_t(0), uint64_t(1) << 20, uint64_t(4) << 20})
      for (const auto& r : heuristic_for(s.lt, s.handle, limit)) smaller.push_back(r);
    for (size_t i = whole.size(); i < s.candidates.size(); ++i) {
      EXPECT_LE(s.candidates[i].workspaceSize, size_t(4) << 20) << i;
      for (size_t j = 0; j < i; ++j) EXPECT_FALSE(same_algo(s.candidates[i].algo, s.candidates[j].algo)) << i << " = " << j;
      EXPECT_TRUE(offers(smaller, s.candidates[i].algo)) << i;
    }
    // Everything the smaller limits offer is there.
    for (const auto& r : smaller)
      EXPECT_TRUE(offers(s.candidates, r.algo));
    // A limit of 0 gives algorithms without a workspace only.
    for (const auto& r : s.lt.candidates(s.handle, 0)) EXPECT_EQ(r.workspaceSize, 0u);
  }
}

// With a bias epilogue, choose_fastest runs every candidate with the bias, and its choice adds it.
TEST(LtChoiceGpu, ChooseFastestTimesCandidatesWithTheBias) {
  RLGEMM_REQUIRE_GPU();
  const Problem p{{32, 4096, 4096}, Layout::kTN};
  const LtProblem lt(p, LtEpilogue::kBias);
  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const auto candidates = lt.candidates(handle);
  const ScratchOperands x(p, nullptr);
  DeviceScratch<half> bias(size_t(p.shape.n));
  fill_random(bias.ptr, size_t(p.shape.n), Fill::kNormal, 3, nullptr, p.dtype);
  DeviceScratch<unsigned char> workspace(kLtWorkspaceBytes);
  // Without the bias a candidate cannot launch, so none would run.
  EXPECT_THROW(choose_fastest(lt, handle, candidates, x.a.ptr, x.b.ptr, x.c.ptr, workspace.ptr, kLtWorkspaceBytes,
                              nullptr, Mode::kGraph),
               Error);
  const LtChoice c = choose_fastest(lt, handle, candidates, x.a.ptr, x.b.ptr, x.c.ptr, workspace.ptr,
                                    kLtWorkspaceBytes, nullptr, Mode::kGraph, bias.ptr);
  EXPECT_EQ(c.count, int(candidates.size()));
  EXPECT_EQ(c.failed, 0);
  EXPECT_GE(c.index, 0);
  EXPECT_LT(c.index, c.count);
  cublasLtDestroy(handle);
}

// OperandSets: as many sets as asked where they fit, apart (no two overlap) and holding the same operands.
TEST(LtChoiceGpu, OperandSetsAreApartAndHoldTheSameOperands) {
  RLGEMM_REQUIRE_GPU();
  const Problem p{{96, 640, 200}, Layout::kTN};
  const OperandSets sets(p, nullptr, 3, kLtOperandSetsBudget);
  ASSERT_EQ(sets.size(), 3u);
  EXPECT_EQ(OperandSets(p, nullptr, 3, 1).size(), 1u);  // a budget below one set still gives one
  const size_t a_bytes = size_t(p.a_elems()) * 2, b_bytes = size_t(p.b_elems()) * 2;
  std::vector<std::pair<const char*, size_t>> spans;
  std::vector<std::vector<unsigned char>> a(sets.size(), std::vector<unsigned char>(a_bytes)),
      b(sets.size(), std::vector<unsigned char>(b_bytes));
  for (size_t i = 0; i < sets.size(); ++i) {
    spans.push_back({reinterpret_cast<const char*>(sets[i].a.ptr), a_bytes});
    spans.push_back({reinterpret_cast<const char*>(sets[i].b.ptr), b_bytes});
    spans.push_back({reinterpret_cast<const char*>(sets[i].c.ptr), size_t(p.c_elems()) * 2});
    ASSERT_EQ(cudaMemcpy(a[i].data(), sets[i].a.ptr, a_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(b[i].data(), sets[i].b.ptr, b_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  }
  for (size_t i = 0; i < spans.size(); ++i)
    for (size_t j = i + 1; j < spans.size(); ++j)
      EXPECT_TRUE(spans[i].first + spans[i].second <= spans[j].first ||
                  spans[j].first + spans[j].second <= spans[i].first)
          << "spans " << i << " and " << j << " overlap";
  for (size_t i = 1; i < sets.size(); ++i) {
    EXPECT_EQ(a[i], a[0]) << "set " << i;
    EXPECT_EQ(b[i], b[0]) << "set " << i;
  }
}

// On several operand sets the final runs every finalist on every set: each set's C, poisoned first, is written
// (with a product: finite values), and the choice is a candidate that runs.
TEST(LtChoiceGpu, ChooseFastestOnSeveralSetsTimesEverySet) {
  RLGEMM_REQUIRE_GPU();
  const Problem p{{64, 2048, 1024}, Layout::kTN};
  const LtProblem lt(p);
  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  const auto candidates = lt.candidates(handle);
  ASSERT_GE(candidates.size(), 2u);
  const OperandSets sets(p, nullptr, 3, kLtOperandSetsBudget);
  ASSERT_EQ(sets.size(), 3u);
  const size_t c_bytes = size_t(p.c_elems()) * 2;
  for (size_t i = 0; i < sets.size(); ++i)
    ASSERT_EQ(cudaMemset(sets[i].c.ptr, 0xff, c_bytes), cudaSuccess);  // fp16 NaN
  DeviceScratch<unsigned char> workspace(kLtWorkspaceBytes);
  for (Mode mode : {Mode::kOffline, Mode::kGraph}) {
    const LtChoice c = choose_fastest(lt, handle, candidates, lt_operands(sets), workspace.ptr, kLtWorkspaceBytes,
                                      nullptr, mode, nullptr, LtWorkspace::kOwn);
    EXPECT_EQ(c.count, int(candidates.size()));
    EXPECT_EQ(c.failed, 0);
    EXPECT_GE(c.index, 0);
    EXPECT_LT(c.index, c.count);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (size_t i = 0; i < sets.size(); ++i) {
    std::vector<uint16_t> out(size_t(p.c_elems()));
    ASSERT_EQ(cudaMemcpy(out.data(), sets[i].c.ptr, c_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    const size_t not_finite = size_t(std::count_if(out.begin(), out.end(), [](uint16_t h) {
      return (h & 0x7c00) == 0x7c00;  // fp16 exponent all ones: inf or NaN
    }));
    EXPECT_EQ(not_finite, 0u) << "set " << i << " was not run";
  }
  // No sets, or a set without an operand, is refused.
  for (const std::vector<LtOperands>& bad : {std::vector<LtOperands>{}, std::vector<LtOperands>{{}}}) {
    try {
      fastest_of(lt, handle, candidates, {0, 1}, bad, workspace.ptr, kLtWorkspaceBytes, nullptr, Mode::kOffline);
      ADD_FAILURE() << bad.size() << " sets accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    }
  }
  cublasLtDestroy(handle);
}

}  // namespace
}  // namespace rlgemm::bench
