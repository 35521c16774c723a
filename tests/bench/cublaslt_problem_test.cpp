// cuBLASLt's view of a row-major problem: the descriptors must describe C^T = B^T A^T with the stored
// matrices' shapes and leading dimensions, for both layouts and for shapes that are not tile multiples.
// The choice's final: each finalist scored by the mean of every batch on every operand set, the heuristic's first kept
// within the margin.
#include <gtest/gtest.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

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

// The final's score is the mean of every batch on every operand set: a candidate fast in most batches and slow
// in some scores by how often it is slow.
Timing batches(std::vector<double> us) {
  Timing t;
  t.rounds_us = std::move(us);
  t.time_us = t.rounds_us.front();
  return t;
}

TEST(LtFinal, ScoreIsTheMeanOfEveryBatchOnEverySet) {
  EXPECT_DOUBLE_EQ(final_score({batches({10, 10, 13})}), 11.0);
  EXPECT_DOUBLE_EQ(final_score({batches({10, 12}), batches({14, 16})}), 13.0);
  EXPECT_THROW(final_score({}), Error);
  EXPECT_THROW(final_score({Timing{}}), Error);
}

TEST(LtFinal, ASlowModeIsMeasuredAgainstTheOtherFinalistsOfEachRound) {
  const std::vector<double> steady(7, 10.0);
  // Finalist 1 is 10% slower than finalist 0 in two rounds of seven on the first set: its mode, factor 1.1.
  const std::vector<std::vector<Timing>> moded = {{batches(steady)}, {batches({10, 11, 10, 10, 11, 10, 10})}};
  EXPECT_NEAR(slow_mode_factor(moded, 1), 1.1, 1e-12);
  EXPECT_DOUBLE_EQ(slow_mode_factor(moded, 0), 1.0);  // against finalist 1's slow batches, 0 only looks faster
  // A slow spell of the GPU slows every finalist in the same rounds: nobody's mode.
  const std::vector<std::vector<Timing>> spell = {{batches({10, 11, 10, 10, 11.5, 10, 10})},
                                                  {batches({12, 13.2, 12, 12, 13.8, 12, 12})},
                                                  {batches({9, 9.9, 9, 9, 10.35, 9, 9})}};
  for (size_t f = 0; f < 3; ++f) EXPECT_DOUBLE_EQ(slow_mode_factor(spell, f), 1.0) << f;
  // One slow batch is a hiccup, not a mode (kLtSlowModeBatches); two on different sets are one.
  EXPECT_DOUBLE_EQ(slow_mode_factor({{batches(steady)}, {batches({10, 11, 10, 10, 10, 10, 10})}}, 1), 1.0);
  const std::vector<double> four(4, 10.0);
  const std::vector<std::vector<Timing>> two_sets = {{batches(four), batches(four)},
                                                     {batches({10, 10, 10, 11.2}), batches({10.8, 10, 10, 10})}};
  EXPECT_NEAR(slow_mode_factor(two_sets, 1), 1.1, 1e-12);
  // A set on which the finalist is steadily slower (placement) is not a mode: each set's ratios are taken over
  // their own median.
  EXPECT_DOUBLE_EQ(slow_mode_factor({{batches(four), batches(four)}, {batches(four), batches({13, 13, 13, 13})}}, 1), 1.0);
  EXPECT_THROW(slow_mode_factor({{batches(steady)}}, 0), Error);
  EXPECT_THROW(slow_mode_factor({{batches(steady)}, {batches({10, 10})}}, 1), Error);
  EXPECT_THROW(slow_mode_factor({{batches(steady)}, {batches(steady), batches(steady)}}, 1), Error);
}

TEST(LtFinal, ARecurringSlowModeLosesToASteadyFirstOnlyUnderSlowModeScoring) {
  // The 64x32 tile of 32x14336x4096 with a bias: mostly 31.0, two batches in seven 33.3; the heuristic's first
  // (128x32) a steady 32.1. By the mean (31.66) the challenger beats it by more than the margin; scored by its
  // slow mode (7% above its usual ratio to the first) it does not.
  const std::vector<std::vector<Timing>> timed = {
      {batches({32.1, 32.1, 32.1, 32.1, 32.1, 32.1, 32.1})},
      {batches({31.0, 31.0, 31.0, 33.3, 31.0, 33.3, 31.0})}};
  EXPECT_EQ(final_winner({0, 1}, timed, LtScoring::kMean), 1);
  EXPECT_EQ(final_winner({0, 1}, timed, LtScoring::kSlowMode), 0);
  EXPECT_EQ(final_winner({5, 1}, timed, LtScoring::kSlowMode), 5);
  // A steady pair is scored by the mean either way.
  const std::vector<std::vector<Timing>> steady = {{batches({10, 10.1, 10})}, {batches({9.5, 9.6, 9.5})}};
  EXPECT_EQ(final_winner({0, 1}, steady, LtScoring::kSlowMode), 1);
}

TEST(LtFinal, ABimodalChallengerDoesNotUnseatTheFirst) {
  // Candidate 1's median (30.9) is below candidate 0's steady 31.3; its slow batches bring its mean to 31.5.
  const std::vector<std::vector<Timing>> timed = {
      {batches({31.3, 31.3, 31.3, 31.3, 31.3, 31.3, 31.3})},
      {batches({30.9, 30.9, 30.9, 30.9, 33.0, 30.9, 33.0})}};
  EXPECT_EQ(final_winner({0, 1}, timed), 0);
  // Without the first among the finalists, the lower mean wins.
  EXPECT_EQ(final_winner({5, 1}, timed), 5);
}

TEST(LtFinal, TheFirstStaysUnlessBeatenByTheMargin) {
  const auto steady = [](double us) { return std::vector<Timing>{batches({us, us, us}), batches({us, us, us})}; };
  EXPECT_EQ(final_winner({3, 0}, {steady(99.5), steady(100)}), 0);  // 0.5% faster: within the margin
  EXPECT_EQ(final_winner({3, 0}, {steady(98.5), steady(100)}), 3);  // 1.5% faster
  EXPECT_EQ(final_winner({4, 3, 0}, {steady(97), steady(98.5), steady(100)}), 4);
}

TEST(LtFinal, SaysTheKeptCandidatesTimeOverTheFirsts) {
  const auto steady = [](double us) { return std::vector<Timing>{batches({us, us, us}), batches({us, us, us})}; };
  double kept_over_first = -1;
  EXPECT_EQ(final_winner({4, 3, 0}, {steady(95), steady(98.5), steady(100)}, LtScoring::kMean, nullptr, std::nullopt,
                         &kept_over_first),
            4);
  EXPECT_DOUBLE_EQ(kept_over_first, 0.95);
  // The first kept, or not in the final: no ratio.
  EXPECT_EQ(final_winner({3, 0}, {steady(99.5), steady(100)}, LtScoring::kMean, nullptr, std::nullopt,
                         &kept_over_first),
            0);
  EXPECT_DOUBLE_EQ(kept_over_first, 0);
  kept_over_first = -1;
  EXPECT_EQ(final_winner({5, 3}, {steady(95), steady(100)}, LtScoring::kMean, nullptr, std::nullopt,
                         &kept_over_first),
            5);
  EXPECT_DOUBLE_EQ(kept_over_first, 0);
  // The ratio is of the plain means, whatever the scoring chose by.
  const std::vector<std::vector<Timing>> steady_pair = {{batches({10, 10, 10})}, {batches({9.5, 9.5, 9.5})}};
  EXPECT_EQ(final_winner({0, 1}, steady_pair, LtScoring::kSlowMode, nullptr, std::nullopt, &kept_over_first), 1);
  EXPECT_DOUBLE_EQ(kept_over_first, 0.95);
}

TEST(LtFinal, ScoresAreTakenOverEverySet) {
  // Candidate 2 is the fastest on the first set and the slowest over both.
  const std::vector<std::vector<Timing>> timed = {{batches({30}), batches({36})}, {batches({31}), batches({31})}};
  EXPECT_EQ(final_winner({2, 7}, timed), 7);
}

TEST(LtFinal, AChallengerMustWinOnTheCallersSetAndTrailNowhereByMoreThanTheTolerance) {
  const auto sets = [](std::vector<double> us) {
    std::vector<Timing> t;
    for (double x : us) t.push_back(batches({x, x, x}));
    return t;
  };
  const auto first = sets({100, 100, 100});
  std::string note;
  // llm-zero-shot-v11 on an H200, as times over candidate 0's, the caller's operands first: 1x8960x1536 tn,
  // candidate 2 at 0.941/0.966/1.004, and 512x2048x4608 tn, candidate 8 at 0.876/0.976/1.024. Faster on the
  // caller's set and within the tolerance elsewhere, each wins (the first then ran 6% behind them).
  const auto two = sets({94.1, 96.6, 100.4});
  EXPECT_EQ(final_winner({2, 0}, {two, first}, LtScoring::kMean, &note, 0), 2);
  EXPECT_EQ(note, "final: candidate 2 at 0.941/0.966/1.004 of candidate 0's time by operand set; candidate 2 kept; "
                  "every finalist's mean over candidate 0's: 2 0.970; on the caller's set: 2 0.941");
  EXPECT_EQ(final_winner({8, 0}, {sets({87.6, 97.6, 102.4}), first}, LtScoring::kMean, &note, 0), 8);
  // Behind on the caller's set, it loses, whatever its mean.
  EXPECT_EQ(final_winner({2, 0}, {two, first}, LtScoring::kMean, &note, 2), 0);
  EXPECT_EQ(note, "final: candidate 2 at 0.941/0.966/1.004 of candidate 0's time by operand set; candidate 0 kept; "
                  "every finalist's mean over candidate 0's: 2 0.970; on the caller's set: 2 1.004");
  // Every finalist's time on the caller's set, in the screen's order: what a choice by that set alone would take
  // (here 2, where the mean takes 8).
  EXPECT_EQ(final_winner({8, 2, 0}, {sets({91.7, 85.1, 83.4}), sets({89.0, 92.0, 93.0}), first}, LtScoring::kMean,
                         &note, 0),
            8);
  EXPECT_EQ(note, "final: candidate 8 at 0.917/0.851/0.834 of candidate 0's time by operand set; candidate 8 kept; "
                  "every finalist's mean over candidate 0's: 8 0.867, 2 0.913; on the caller's set: 8 0.917, 2 0.890");
  EXPECT_EQ(final_winner({3, 0}, {sets({100, 90, 90}), first}, LtScoring::kMean, &note, 0), 0);  // a tie is no win
  // More than kLtSetTolerance behind on any set, it loses too: a candidate that loses well where some operands lie.
  const auto far = sets({90, 90, 103.5});
  EXPECT_EQ(final_winner({8, 0}, {far, first}, LtScoring::kMean, &note, 0), 0);
  EXPECT_EQ(final_winner({8, 0}, {far, first}), 0);
  // Without the caller's set (a choice made before any call), the tolerance alone: 1x37888x3584 tn
  // (lt-placement-check-2.csv), candidate 8 at 0.980/0.981/1.014/0.952 of the first's on four sets.
  const auto four_first = sets({100, 100, 100, 100});
  EXPECT_EQ(final_winner({8, 0}, {sets({98.0, 98.1, 101.4, 95.2}), four_first}), 8);
  // Of the challengers that pass, the lowest score: 7, though 8's score is lower still.
  const auto seven = sets({96.5, 97.0, 96.9, 95.8});
  const auto eight_far = sets({90.0, 90.0, 104.0, 90.0});
  EXPECT_EQ(final_winner({8, 7, 0}, {eight_far, seven, four_first}, LtScoring::kMean, &note), 7);
  // Every finalist but the first in the order given (the screen's), each with its mean over the first's.
  EXPECT_EQ(note, "final: candidate 8 at 0.900/0.900/1.040/0.900 of candidate 0's time by operand set; candidate 7 kept; "
                  "every finalist's mean over candidate 0's: 8 0.935, 7 0.966");
  EXPECT_EQ(final_winner({7, 0}, {seven, four_first}, LtScoring::kSlowMode, &note), 7);
  // Without the first among the finalists the lowest score wins, and with it alone too; there is nothing to say.
  EXPECT_EQ(final_winner({8, 7}, {eight_far, seven}, LtScoring::kMean, &note), 8);
  EXPECT_EQ(note, "");
  EXPECT_EQ(final_winner({0}, {four_first}, LtScoring::kMean, &note), 0);
  EXPECT_EQ(note, "");
  // Finalists timed on different sets cannot be compared set by set; the caller's set must be one of them.
  EXPECT_THROW(final_winner({7, 0}, {seven, sets({100, 100})}), Error);
  EXPECT_THROW(final_winner({2, 0}, {two, first}, LtScoring::kMean, nullptr, 3), Error);
}

TEST(LtFinal, TheCallersSetIsTheOneMarked) {
  int x = 0;
  const LtOperands scratch{&x, &x, &x}, callers{&x, &x, &x, true};
  EXPECT_EQ(callers_set({scratch, scratch}), std::nullopt);
  EXPECT_EQ(callers_set({}), std::nullopt);
  EXPECT_EQ(callers_set({callers, scratch, scratch}), 0u);
  EXPECT_EQ(callers_set({scratch, callers}), 1u);
  EXPECT_THROW(callers_set({callers, callers}), Error);
}

TEST(LtFinal, RefusesTimingsThatDoNotMatchTheFinalists) {
  EXPECT_THROW(final_winner({}, {}), Error);
  EXPECT_THROW(final_winner({0, 1}, {{batches({1})}}), Error);
}

}  // namespace
}  // namespace rlgemm::bench
