// A row-major fp16 or bf16 GEMM problem as cuBLASLt sees it, shared by the harness's lt_heuristic and lt_auto and by the
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
#include <optional>
#include <vector>

#include "bench/fill.h"
#include "bench/timing.h"
#include "rlgemm/problem.h"

namespace rlgemm::bench {

// What is asked of cuBLASLt's heuristic: the workspace its algorithms may use and how many candidates.
inline constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;
inline constexpr int kLtMaxCandidates = 100;

// Throws Error naming `call` for a status other than success (kOutOfMemory when cuBLAS could not allocate).
void check_cublas_status(cublasStatus_t status, const char* call);

// What cuBLASLt does after the product. kBias: C = A B + bias, bias a vector of N elements of the problem's
// element type added to every row of C (cuBLASLt's D^T rows), in fp32 before C is rounded.
enum class LtEpilogue { kNone, kBias };

class LtProblem {
 public:
  // Operands and result of the problem's element type (CUDA_R_16F or CUDA_R_16BF), fp32 compute and scale. Throws Error when cuBLASLt refuses a descriptor.
  explicit LtProblem(const Problem& problem, LtEpilogue epilogue = LtEpilogue::kNone);
  ~LtProblem();
  LtProblem(const LtProblem&) = delete;
  LtProblem& operator=(const LtProblem&) = delete;

  const Problem& problem() const { return problem_; }
  // The heuristic's candidates within max_workspace (at most kLtMaxCandidates): its list for that limit, best
  // first, then what it offers for smaller limits (0, 1 and 4 MiB) and not for that one.
  // Throws Error(kRuntime) when it offers none.
  std::vector<cublasLtMatmulHeuristicResult_t> candidates(cublasLtHandle_t handle,
                                                          size_t max_workspace = kLtWorkspaceBytes) const;
  // Whether `algo` (found for this problem with another epilogue, say) runs this problem; its workspace then.
  std::optional<size_t> check(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo) const;
  // C = A B (+ bias with LtEpilogue::kBias, where `bias` must then be given) with `algo` on `stream`: no
  // allocation, no synchronization. With a bias the call points the operation at it, so calls on one
  // LtProblem with a bias must not overlap (the caller serializes them; cuBLASLt reads the operation only
  // while cublasLtMatmul runs on the host).
  void launch(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b, void* c,
              void* workspace, size_t workspace_bytes, cudaStream_t stream, const void* bias = nullptr) const;
  LtEpilogue epilogue() const { return epilogue_; }

  // The descriptors, for inspection: the operation and cuBLASLt's operands B^T, A^T and C^T.
  cublasLtMatmulDesc_t operation() const { return operation_; }
  cublasLtMatrixLayout_t b_layout() const { return b_; }
  cublasLtMatrixLayout_t a_layout() const { return a_; }
  cublasLtMatrixLayout_t c_layout() const { return c_; }

 private:
  void release();

  Problem problem_;
  LtEpilogue epilogue_;
  cublasLtMatmulDesc_t operation_ = nullptr;
  cublasLtMatrixLayout_t b_ = nullptr, a_ = nullptr, c_ = nullptr;
};

// Whether two cuBLASLt algorithms are the same one (their opaque descriptions are equal byte for byte).
bool same_algo(const cublasLtMatmulAlgo_t& x, const cublasLtMatmulAlgo_t& y);
// Whether `candidates` holds `algo`.
bool offers(const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, const cublasLtMatmulAlgo_t& algo);

// lt_auto's choice among a problem's candidates: the candidates that launch run for kLtWarmUpMs, then every one
// is screened with a short timing
// in `mode` (offline by default: the harness's lt_auto; graph for the GPU's own time), side by side in shuffled
// rounds (screen_options), then the
// kFinalists fastest and the heuristic's first timed side by side with the harness's method of that mode, in
// shuffled rounds (scored by final_score: the mean of their batches, so that a slow mode counts); the
// heuristic's first stays unless a finalist beat it by more than kMargin there (a final
// decided by less than its own noise keeps a slower algorithm as often as a faster one). A candidate that
// fails to launch is skipped and counted. Runs `problem` on the given operands and workspace (and `bias`, which
// a problem with LtEpilogue::kBias needs); throws Error(kRuntime) when no candidate runs.
//
// `use` says which workspace size each candidate is launched with: kWhole, `workspace_bytes` for every one (the
// harness's lt_auto, which launches its choice so); kOwn, each one's own workspaceSize from the heuristic (at
// most `workspace_bytes`), as a planned route (dispatch::CublasLtGemm) launches it. The two differ: on an H200,
// a candidate reported to need no workspace ran 4.4% slower when given none than when given 32 MiB
// (bench/results/h200/lt-workspace-check.csv), so a choice must be timed with the size its launches will pass.
enum class LtWorkspace { kWhole, kOwn };
// The workspace size a candidate is launched with under `use`.
size_t launch_workspace_bytes(const cublasLtMatmulHeuristicResult_t& candidate, size_t workspace_bytes,
                              LtWorkspace use);
// One set of a problem's operands (A, B and C, of the problem's element type), for timing candidates on.
struct LtOperands {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  bool callers = false;  // the caller's own operands, the ones the choice is for (final_winner weighs them)
};
// The operand sets a planned route's choice is timed on (OperandSets): three where they fit in 1 GiB.
inline constexpr int kLtOperandSets = 3;
inline constexpr size_t kLtOperandSetsBudget = size_t(1) << 30;
std::vector<LtOperands> lt_operands(const OperandSets& sets);
// Which of `sets` holds the caller's operands (marked `callers`), if any; throws Error(kInvalidInput) where
// several are marked.
std::optional<size_t> callers_set(const std::vector<LtOperands>& sets);
struct LtChoice {
  int index = 0;   // among the candidates
  int count = 0;   // candidates offered
  int failed = 0;  // candidates that did not run
  std::string note;  // the final's closest challenger of the heuristic's first, by operand set (final_winner)
  double fastest_us = 0;  // the screen's fastest time (us per call, in the mode timed)
  // The kept candidate's final time over the heuristic's first's (final_score, the mean of every batch on every
  // set), where the first ran in the final and another was kept; 0 otherwise.
  double kept_over_first = 0;
};
// How the final scores a finalist whose batches fall in two modes (slow_mode_factor): kMean, the mean of its
// batches (lt_auto: the harness's yardstick, cuBLASLt with every candidate timed); kSlowMode, that mean raised
// by its slow mode where it has one (the library's own choices, which serve a caller's process that may run the
// kernel in its slow mode for good).
enum class LtScoring { kMean, kSlowMode };
inline constexpr double kLtSlowMode = 0.04;
inline constexpr int kLtSlowModeBatches = 2;
inline constexpr int kLtFinalists = 4;
inline constexpr double kLtMargin = 0.01;
// How much slower than the heuristic's first a challenger may be on one operand set other than the caller's and
// still win the final by its mean (final_winner).
inline constexpr double kLtSetTolerance = 0.03;
inline constexpr double kLtWarmUpMs = 50;  // the candidates run this long before the screen times them
LtChoice choose_fastest(const LtProblem& problem, cublasLtHandle_t handle,
                        const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, const void* a, const void* b,
                        void* c, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                        Mode mode = Mode::kOffline, const void* bias = nullptr, LtWorkspace use = LtWorkspace::kWhole,
                        LtScoring scoring = LtScoring::kMean);
// The same on several operand sets (`sets`, at least one; allocated apart: OperandSets): the screen runs on the
// first, the final times the finalists on each set in turn (all of them in the same shuffled rounds on one set,
// as the harness times its subjects on shared operands) and takes each finalist's mean over the sets. Some
// candidates' times move 7-10% with where their operands lie, others' do not
// (bench/results/h200/lt-placement-check.csv): a choice made on one set holds for that set only, and a caller's
// operands lie elsewhere.
LtChoice choose_fastest(const LtProblem& problem, cublasLtHandle_t handle,
                        const std::vector<cublasLtMatmulHeuristicResult_t>& candidates,
                        const std::vector<LtOperands>& sets, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream, Mode mode, const void* bias = nullptr,
                        LtWorkspace use = LtWorkspace::kWhole, LtScoring scoring = LtScoring::kMean);

// The final of choose_fastest on its own: the `finalists` (indices into `candidates`, each known to launch) timed
// side by side with the harness's method of `mode`, in shuffled rounds; the fastest, except that the
// heuristic's first, when a finalist, stays unless another beat it by more than kLtMargin. Also settles a
// runoff between two choices made apart (the library's floor, when its eager and its CUDA-graph screens disagree).
int fastest_of(const LtProblem& problem, cublasLtHandle_t handle,
               const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, const std::vector<int>& finalists,
               const void* a, const void* b, void* c, void* workspace, size_t workspace_bytes, cudaStream_t stream,
               Mode mode, const void* bias = nullptr, LtWorkspace use = LtWorkspace::kWhole,
               LtScoring scoring = LtScoring::kMean);
// The same on several operand sets, each finalist scored as choose_fastest's (final_score), a set marked
// `callers` taken as the caller's by final_winner; `note` and `kept_over_first` (where given) receive
// final_winner's.
int fastest_of(const LtProblem& problem, cublasLtHandle_t handle,
               const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, const std::vector<int>& finalists,
               const std::vector<LtOperands>& sets, void* workspace, size_t workspace_bytes, cudaStream_t stream,
               Mode mode, const void* bias = nullptr, LtWorkspace use = LtWorkspace::kWhole,
               LtScoring scoring = LtScoring::kMean, std::string* note = nullptr, double* kept_over_first = nullptr);

// A finalist's score in the final: the mean per-call time of every timed batch on every operand set (`on_sets`:
// one Timing per set, with its batches' rounds_us), not the median. Some candidates run in two modes from
// batch to batch (32x14336x4096 tn on an H200: candidate 1 mostly 30.9 us, some batches 33.0, while the
// heuristic's first ran a steady 31.3): a median below the other's chose the first kind, which then ran 33.0 in
// the caller's process, 6% behind the steady one (bench/results/h200/torch-op-7.csv, l2-check.csv). The mean
// counts a slow mode as often as it comes. Throws Error(kInvalidInput) for no timings or a timing without
// batches.
double final_score(const std::vector<Timing>& on_sets);
// The mean was not enough: with a few slow batches among many, candidate 1 of the bias plan at 32x14336x4096
// (a 64x32 tile; slowest batch 33.3 us, median 31.4) beat the heuristic's first (128x32, a steady 32.1) in the
// library's choice, and then ran 33.0-33.4 in the caller's process in three runs out of three, 6% behind
// F.linear's heuristic first (bench/results/h200: torch-op-9, torch-op-10, torch-kernels-bias,
// lt-bias-probe-direct). Finalist f's slow mode, measured against the others in the same rounds, so that a
// slow spell of the GPU (on large problems batches of every candidate move 5-13% with the power state) is
// nobody's mode: each batch's time over the median time of the other finalists' batches of that round, each
// set's ratios over their median on that set; where at least kLtSlowModeBatches of them are more than
// kLtSlowMode above 1, the mean of those, else 1. (An earlier rule, each set's slowest batch against its own
// median, took such slow spells for modes: in llm-zero-shot-v9 it kept slower algorithms at 2048x512x3584,
// 2048x3072x8192 and 8192x35840x5120.) Needs every finalist timed on the same sets in the same rounds (as
// fastest_of times them); throws Error(kInvalidInput) otherwise.
double slow_mode_factor(const std::vector<std::vector<Timing>>& per_finalist, size_t f);
// The final's winner (an entry of `finalists`; per_finalist[i] holds finalist i's timings on the operand sets):
// the lowest final_score (times slow_mode_factor under kSlowMode). Where the heuristic's first (candidate 0) is
// a finalist, another wins only if its score is lower than the first's by more than kLtMargin, it is faster than
// the first on the caller's own set (`callers_set`, where the caller's operands are among the sets), and on no
// set slower than the first by more than kLtSetTolerance (each set's mean batch); of those the lowest score, else
// the first. Some candidates' times move with where the operands lie (1x37888x3584 tn, candidate 8: 0.980/0.981/
// 1.014/0.952 of the first's on four sets, bench/results/h200/lt-placement-check-2.csv): a challenger far behind
// on some set may be behind on a caller's operands too, while within a few percent it is set-to-set noise. The
// caller's set decides where the sets disagree: an earlier rule, faster on every set, kept the first at
// 1x8960x1536 (candidate 2 at 0.941 on the caller's set, 1.004 on another) and 512x2048x4608 (candidate 8 at
// 0.876, 1.024), and the first then ran 6% behind candidate 2 and 8 on those very operands
// (llm-zero-shot-v11). `note` (where given) receives the lowest-scoring challenger's time over the first's on
// each set, what was kept, every other finalist's mean time over the first's in the order of `finalists` (the
// screen's: whether a candidate another screen of the same process found faster reached the final, and how it
// ran there) and, where the caller's set is given, each one's time over the first's on that set (at 1x4544x4544
// the mean's winner, candidate 8 at 0.869, was at 0.917 on the caller's set, and lt_auto_graph's candidate 1 then
// ran 6% faster on those operands: bench/results/h200/llm-tuned-fp16-v2), or nothing where the first is not a
// finalist or is the only one. `kept_over_first`
// (where given) receives the kept finalist's final_score over the first's where the first is a finalist and
// another is kept, else 0.
int final_winner(const std::vector<int>& finalists, const std::vector<std::vector<Timing>>& per_finalist,
                 LtScoring scoring = LtScoring::kMean, std::string* note = nullptr,
                 std::optional<size_t> callers_set = std::nullopt, double* kept_over_first = nullptr);

}  // namespace rlgemm::bench
