#include "bench/cublaslt_problem.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iomanip>
#include <sstream>
#include <string>
#include <utility>

#include "bench/timing.h"
#include "core/cuda_util.h"
#include "core/seed.h"

#include "rlgemm/error.h"

namespace rlgemm::bench {

void check_cublas_status(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw Error(status == CUBLAS_STATUS_ALLOC_FAILED ? ErrorKind::kOutOfMemory : ErrorKind::kRuntime,
              std::string(call) + " failed: " + cublasLtGetStatusName(status) + " (" +
                  cublasLtGetStatusString(status) + ")");
}
#define RLGEMM_LT_CHECK(call) check_cublas_status((call), #call)

LtProblem::LtProblem(const Problem& problem, LtEpilogue epilogue) : problem_(problem), epilogue_(epilogue) {
  const uint64_t m = problem.shape.m, n = problem.shape.n, k = problem.shape.k;
  const bool nn = problem.layout == Layout::kNN;
  const cudaDataType type = cuda_data_type(problem.dtype);
  try {
    RLGEMM_LT_CHECK(cublasLtMatmulDescCreate(&operation_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t op_b = nn ? CUBLAS_OP_N : CUBLAS_OP_T, op_a = CUBLAS_OP_N;
    RLGEMM_LT_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof op_b));
    RLGEMM_LT_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof op_a));
    if (epilogue == LtEpilogue::kBias) {
      // The bias has C's element type (cuBLASLt's default for fp16 and bf16 outputs, said here to be plain).
      const cublasLtEpilogue_t bias = CUBLASLT_EPILOGUE_BIAS;
      const int32_t bias_type = type;
      RLGEMM_LT_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_EPILOGUE, &bias, sizeof bias));
      RLGEMM_LT_CHECK(
          cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type));
    }
    if (nn)
      RLGEMM_LT_CHECK(cublasLtMatrixLayoutCreate(&b_, type, n, k, problem.ldb()));
    else
      RLGEMM_LT_CHECK(cublasLtMatrixLayoutCreate(&b_, type, k, n, problem.ldb()));
    RLGEMM_LT_CHECK(cublasLtMatrixLayoutCreate(&a_, type, k, m, problem.lda()));
    RLGEMM_LT_CHECK(cublasLtMatrixLayoutCreate(&c_, type, n, m, problem.ldc()));
  } catch (...) {
    release();
    throw;
  }
}

LtProblem::~LtProblem() { release(); }

void LtProblem::release() {
  if (c_) cublasLtMatrixLayoutDestroy(c_);
  if (a_) cublasLtMatrixLayoutDestroy(a_);
  if (b_) cublasLtMatrixLayoutDestroy(b_);
  if (operation_) cublasLtMatmulDescDestroy(operation_);
  operation_ = nullptr;
  b_ = a_ = c_ = nullptr;
}

namespace {

// The heuristic's answer for one workspace limit, best first; empty where it has none.
std::vector<cublasLtMatmulHeuristicResult_t> heuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t operation,
                                                       cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t a,
                                                       cublasLtMatrixLayout_t c, uint64_t max_workspace) {
  cublasLtMatmulPreference_t preference = nullptr;
  RLGEMM_LT_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  std::vector<cublasLtMatmulHeuristicResult_t> results(kLtMaxCandidates);
  int found = 0;
  cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof max_workspace);
  if (status == CUBLAS_STATUS_SUCCESS)
    status = cublasLtMatmulAlgoGetHeuristic(handle, operation, b, a, c, c, preference, kLtMaxCandidates,
                                            results.data(), &found);
  cublasLtMatmulPreferenceDestroy(preference);
  // No algorithm within a small limit is an answer, not a failure.
  if (status == CUBLAS_STATUS_NOT_SUPPORTED) return {};
  RLGEMM_LT_CHECK(status);
  results.resize(size_t(std::max(found, 0)));
  return results;
}

}  // namespace

bool same_algo(const cublasLtMatmulAlgo_t& x, const cublasLtMatmulAlgo_t& y) {
  return std::memcmp(&x, &y, sizeof x) == 0;
}

bool offers(const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, const cublasLtMatmulAlgo_t& algo) {
  return std::any_of(candidates.begin(), candidates.end(),
                     [&](const cublasLtMatmulHeuristicResult_t& c) { return same_algo(c.algo, algo); });
}

std::vector<cublasLtMatmulHeuristicResult_t> LtProblem::candidates(cublasLtHandle_t handle,
                                                                     size_t max_workspace_bytes) const {
  // The heuristic's list for the whole limit first (its indices are what tables and choice files record), then
  // what it offers for smaller limits and not for the whole one. Its list depends on the limit: on an H200,
  // 32x4096x4096 tn with a bias got eight split-K algorithms for 32 MiB (the fastest 9.8 us), while a caller
  // with a small workspace (PyTorch's F.linear) got an unsplit kernel that ran 7.8 us.
  std::vector<cublasLtMatmulHeuristicResult_t> results =
      heuristic(handle, operation_, b_, a_, c_, uint64_t(max_workspace_bytes));
  for (const size_t limit : {size_t(0), size_t(1) << 20, size_t(4) << 20}) {
    if (limit >= max_workspace_bytes) continue;
    for (const cublasLtMatmulHeuristicResult_t& r : heuristic(handle, operation_, b_, a_, c_, uint64_t(limit)))
      if (!offers(results, r.algo) && int(results.size()) < kLtMaxCandidates) results.push_back(r);
  }
  if (results.empty())
    throw Error(ErrorKind::kRuntime, "cuBLASLt's heuristic offers no algorithm for " + problem_.shape.to_string() +
                                         " " + std::string(to_string(problem_.layout)));
  return results;
}

std::optional<size_t> LtProblem::check(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo) const {
  cublasLtMatmulHeuristicResult_t result{};
  if (cublasLtMatmulAlgoCheck(handle, operation_, b_, a_, c_, c_, &algo, &result) != CUBLAS_STATUS_SUCCESS ||
      result.state != CUBLAS_STATUS_SUCCESS)
    return std::nullopt;
  return result.workspaceSize;
}

void LtProblem::launch(cublasLtHandle_t handle, const cublasLtMatmulAlgo_t& algo, const void* a, const void* b,
                       void* c, void* workspace, size_t workspace_bytes, cudaStream_t stream, const void* bias) const {
  if (epilogue_ == LtEpilogue::kBias) {
    if (!bias) throw Error(ErrorKind::kInvalidInput, "a cuBLASLt problem with a bias epilogue was launched without its bias");
    RLGEMM_LT_CHECK(cublasLtMatmulDescSetAttribute(operation_, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  }
  // At fixed addresses: cuBLASLt's split-K reduction kernel takes the addresses of alpha and beta among its
  // parameters (besides their values), so that a call's parameters depend on its operands only
  // (dispatch/lt_direct replays them).
  static constexpr float kAlpha = 1.0f, kBeta = 0.0f;
  RLGEMM_LT_CHECK(cublasLtMatmul(handle, operation_, &kAlpha, b, b_, a, a_, &kBeta, c, c_, c, c_, &algo, workspace,
                                 workspace_bytes, stream));
}

std::vector<LtOperands> lt_operands(const OperandSets& sets) {
  std::vector<LtOperands> out;
  for (size_t i = 0; i < sets.size(); ++i) out.push_back({sets[i].a.ptr, sets[i].b.ptr, sets[i].c.ptr});
  return out;
}

size_t launch_workspace_bytes(const cublasLtMatmulHeuristicResult_t& candidate, size_t workspace_bytes,
                              LtWorkspace use) {
  return use == LtWorkspace::kOwn ? std::min(candidate.workspaceSize, workspace_bytes) : workspace_bytes;
}

LtChoice choose_fastest(const LtProblem& problem, cublasLtHandle_t handle,
                        const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, const void* a, const void* b,
                        void* c, void* workspace, size_t workspace_bytes, cudaStream_t stream, Mode mode,
                        const void* bias, LtWorkspace use, LtScoring scoring) {
  return choose_fastest(problem, handle, candidates, {LtOperands{a, b, c}}, workspace, workspace_bytes, stream, mode,
                        bias, use, scoring);
}

namespace {

void check_sets(const std::vector<LtOperands>& sets, const char* who) {
  if (sets.empty()) throw Error(ErrorKind::kInvalidInput, std::string(who) + ": no operand sets");
  for (const LtOperands& x : sets)
    if (!x.a || !x.b || !x.c) throw Error(ErrorKind::kInvalidInput, std::string(who) + ": an operand set lacks one");
}

}  // namespace

LtChoice choose_fastest(const LtProblem& problem, cublasLtHandle_t handle,
                        const std::vector<cublasLtMatmulHeuristicResult_t>& candidates,
                        const std::vector<LtOperands>& sets, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream, Mode mode, const void* bias, LtWorkspace use, LtScoring scoring) {
  check_sets(sets, "choose_fastest");
  LtChoice choice;
  choice.count = int(candidates.size());
  const LtOperands& x = sets.front();
  auto call = [&](size_t i) {
    return [&, i](cudaStream_t s) {
      problem.launch(handle, candidates[i].algo, x.a, x.b, x.c, workspace,
                     launch_workspace_bytes(candidates[i], workspace_bytes, use), s, bias);
    };
  };
  // A candidate that does not launch (an algorithm this GPU or this problem refuses) is skipped and counted.
  std::vector<int> runnable;
  for (size_t i = 0; i < candidates.size(); ++i) {
    try {
      call(i)(stream);
      runnable.push_back(int(i));
    } catch (const Error&) {
      ++choice.failed;
    }
  }
  if (runnable.empty())
    throw Error(ErrorKind::kRuntime, "no cuBLASLt candidate ran for " + problem.problem().shape.to_string());
  // The GPU is kept busy with the candidates for kLtWarmUpMs before anything is timed: a choice is often made
  // after the GPU sat idle (a library's first use of a shape comes after its host-side work, such as the
  // predictor's scan of the design space), and its first rounds then ran on clocks still rising.
  const auto warm_start = std::chrono::steady_clock::now();
  do {
    for (int i : runnable) call(size_t(i))(stream);
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  } while (std::chrono::steady_clock::now() - warm_start < std::chrono::duration<double, std::milli>(kLtWarmUpMs));
  // The screen times every runnable candidate side by side, in shuffled rounds. Screened one after another,
  // the later candidates of a large problem ran on a GPU the earlier ones had heated, slower clocks making
  // them look slower: they missed the final, and a first candidate 4-5% slower than the sixth stayed (on the
  // held-out LLM shapes of the H100, in some runs and not others).
  std::vector<Subject> screen;
  for (int i : runnable) screen.push_back({call(size_t(i)), {}, "cuBLASLt candidate " + std::to_string(i)});
  TimingOptions screen_round = screen_options();
  screen_round.seed = problem_seed(1, problem.problem());
  const auto quick = time_side_by_side(mode, screen, nullptr, stream, screen_round);
  std::vector<std::pair<double, int>> screened;  // (time, index)
  for (size_t j = 0; j < runnable.size(); ++j) screened.emplace_back(quick[j].time_us, runnable[j]);
  std::sort(screened.begin(), screened.end());
  if (!screened.empty()) choice.fastest_us = screened.front().first;
  std::vector<int> finalists;
  for (size_t i = 0; i < screened.size() && int(finalists.size()) < kLtFinalists; ++i)
    finalists.push_back(screened[i].second);
  const bool first_ran = std::any_of(screened.begin(), screened.end(), [](auto& s) { return s.second == 0; });
  if (first_ran && std::find(finalists.begin(), finalists.end(), 0) == finalists.end()) finalists.push_back(0);
  choice.index = fastest_of(problem, handle, candidates, finalists, sets, workspace, workspace_bytes, stream, mode,
                            bias, use, scoring, &choice.note, &choice.kept_over_first);
  return choice;
}

int fastest_of(const LtProblem& problem, cublasLtHandle_t handle,
               const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, const std::vector<int>& finalists,
               const void* a, const void* b, void* c, void* workspace, size_t workspace_bytes, cudaStream_t stream,
               Mode mode, const void* bias, LtWorkspace use, LtScoring scoring) {
  return fastest_of(problem, handle, candidates, finalists, {LtOperands{a, b, c}}, workspace, workspace_bytes, stream,
                    mode, bias, use, scoring);
}

int fastest_of(const LtProblem& problem, cublasLtHandle_t handle,
               const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, const std::vector<int>& finalists,
               const std::vector<LtOperands>& sets, void* workspace, size_t workspace_bytes, cudaStream_t stream,
               Mode mode, const void* bias, LtWorkspace use, LtScoring scoring, std::string* note,
               double* kept_over_first) {
  check_sets(sets, "fastest_of");
  if (finalists.empty()) throw Error(ErrorKind::kInvalidInput, "fastest_of: no finalists");
  for (int f : finalists)
    if (f < 0 || size_t(f) >= candidates.size())
      throw Error(ErrorKind::kInvalidInput, "fastest_of: candidate " + std::to_string(f) + " of " +
                                                std::to_string(candidates.size()) + " does not exist");
  if (note) note->clear();
  if (kept_over_first) *kept_over_first = 0;
  if (finalists.size() == 1) return finalists.front();
  // One set after another, every finalist on that set in the same shuffled rounds, as the harness times its
  // subjects on shared operands. Sets interleaved within a round would evict each other's operands from the L2
  // and the TLBs between replays, which the caller's calls on their own operands do not see: on an H200,
  // 1x8960x1536 tn (B 27.5 MB, within the L2) then took candidate 0 where candidate 2 ran 7.5% faster in the
  // harness's CUDA graphs on the very operands the choice was timed on (bench/results/h200/llm-zero-shot-v8).
  std::vector<std::vector<Timing>> per_finalist(finalists.size());
  for (size_t s = 0; s < sets.size(); ++s) {
    const LtOperands x = sets[s];
    std::vector<Subject> subjects;
    for (int f : finalists)
      subjects.push_back({[&, f, x](cudaStream_t st) {
                            problem.launch(handle, candidates[size_t(f)].algo, x.a, x.b, x.c, workspace,
                                           launch_workspace_bytes(candidates[size_t(f)], workspace_bytes, use), st,
                                           bias);
                          },
                          {},
                          "cuBLASLt candidate " + std::to_string(f) + " on operand set " + std::to_string(s)});
    TimingOptions final_round;  // the harness's method
    final_round.seed = problem_seed(0, problem.problem()) + s;
    const auto times = time_side_by_side(mode, subjects, nullptr, stream, final_round);
    for (size_t f = 0; f < finalists.size(); ++f) per_finalist[f].push_back(times[f]);
  }
  return final_winner(finalists, per_finalist, scoring, note, callers_set(sets), kept_over_first);
}

std::optional<size_t> callers_set(const std::vector<LtOperands>& sets) {
  std::optional<size_t> found;
  for (size_t s = 0; s < sets.size(); ++s) {
    if (!sets[s].callers) continue;
    if (found)
      throw Error(ErrorKind::kInvalidInput, "operand sets " + std::to_string(*found) + " and " + std::to_string(s) +
                                                " are both marked as the caller's");
    found = s;
  }
  return found;
}

double final_score(const std::vector<Timing>& on_sets) {
  if (on_sets.empty()) throw Error(ErrorKind::kInvalidInput, "final_score: no timings");
  double sum = 0;
  for (const Timing& t : on_sets) {
    if (t.rounds_us.empty()) throw Error(ErrorKind::kInvalidInput, "final_score: a timing without its batches");
    double set_sum = 0;
    for (double v : t.rounds_us) set_sum += v;
    sum += set_sum / double(t.rounds_us.size());
  }
  return sum / double(on_sets.size());
}

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

double slow_mode_factor(const std::vector<std::vector<Timing>>& per_finalist, size_t f) {
  if (f >= per_finalist.size() || per_finalist.size() < 2)
    throw Error(ErrorKind::kInvalidInput, "slow_mode_factor: finalist " + std::to_string(f) + " of " +
                                              std::to_string(per_finalist.size()) + " (at least two are compared)");
  const size_t sets = per_finalist[f].size();
  for (const auto& t : per_finalist)
    if (t.size() != sets || sets == 0)
      throw Error(ErrorKind::kInvalidInput, "slow_mode_factor: the finalists were not timed on the same sets");
  std::vector<double> slow;
  for (size_t s = 0; s < sets; ++s) {
    const size_t rounds = per_finalist[f][s].rounds_us.size();
    for (const auto& t : per_finalist)
      if (t[s].rounds_us.size() != rounds || rounds == 0)
        throw Error(ErrorKind::kInvalidInput, "slow_mode_factor: the finalists were not timed in the same rounds");
    std::vector<double> ratio(rounds);
    for (size_t r = 0; r < rounds; ++r) {
      std::vector<double> others;
      for (size_t g = 0; g < per_finalist.size(); ++g)
        if (g != f) others.push_back(per_finalist[g][s].rounds_us[r]);
      ratio[r] = per_finalist[f][s].rounds_us[r] / median_of(others);
    }
    const double typical = median_of(ratio);
    for (double x : ratio)
      if (x / typical > 1 + kLtSlowMode) slow.push_back(x / typical);
  }
  if (int(slow.size()) < kLtSlowModeBatches) return 1;
  double sum = 0;
  for (double x : slow) sum += x;
  return sum / double(slow.size());
}

int final_winner(const std::vector<int>& finalists, const std::vector<std::vector<Timing>>& per_finalist,
                 LtScoring scoring, std::string* note, std::optional<size_t> callers_set,
                 double* kept_over_first) {
  if (finalists.empty() || finalists.size() != per_finalist.size())
    throw Error(ErrorKind::kInvalidInput, "final_winner: " + std::to_string(finalists.size()) + " finalists, " +
                                              std::to_string(per_finalist.size()) + " timings");
  std::vector<double> score;
  for (size_t f = 0; f < per_finalist.size(); ++f)
    score.push_back(final_score(per_finalist[f]) *
                    (scoring == LtScoring::kSlowMode && per_finalist.size() > 1 ? slow_mode_factor(per_finalist, f) : 1));
  if (note) note->clear();
  if (kept_over_first) *kept_over_first = 0;
  const auto first = std::find(finalists.begin(), finalists.end(), 0);
  if (first == finalists.end()) {
    size_t best = 0;
    for (size_t f = 1; f < score.size(); ++f)
      if (score[f] < score[best]) best = f;
    return finalists[best];
  }
  const size_t f0 = size_t(first - finalists.begin());
  const size_t sets = per_finalist[f0].size();
  for (const auto& t : per_finalist)
    if (t.size() != sets)
      throw Error(ErrorKind::kInvalidInput, "final_winner: the finalists were not timed on the same sets");
  if (callers_set && *callers_set >= sets)
    throw Error(ErrorKind::kInvalidInput, "final_winner: the caller's set " + std::to_string(*callers_set) +
                                              " of " + std::to_string(sets));
  // Finalist f's time over the first's on each set (each set's mean batch).
  const auto by_set = [&](size_t f) {
    std::vector<double> ratio;
    for (size_t s = 0; s < sets; ++s) ratio.push_back(final_score({per_finalist[f][s]}) / final_score({per_finalist[f0][s]}));
    return ratio;
  };
  size_t best = f0, challenger = f0;  // the winner; the lowest score other than the first's
  for (size_t f = 0; f < score.size(); ++f) {
    if (f == f0) continue;
    if (challenger == f0 || score[f] < score[challenger]) challenger = f;
    if (score[f] > (1 - kLtMargin) * score[f0]) continue;
    const std::vector<double> r = by_set(f);
    if (callers_set && r[*callers_set] >= 1) continue;
    if (std::any_of(r.begin(), r.end(), [](double x) { return x > 1 + kLtSetTolerance; })) continue;
    if (best == f0 || score[f] < score[best]) best = f;
  }
  if (note && challenger != f0) {
    std::ostringstream text;
    text << std::fixed << std::setprecision(3) << "final: candidate " << finalists[challenger] << " at";
    const std::vector<double> r = by_set(challenger);
    for (size_t s = 0; s < r.size(); ++s) text << (s ? "/" : " ") << r[s];
    text << " of candidate 0's time by operand set; candidate " << finalists[best] << " kept; every finalist's mean over "
            "candidate 0's:";
    for (size_t f = 0, listed = 0; f < score.size(); ++f)
      if (f != f0)
        text << (listed++ ? ", " : " ") << finalists[f] << " "
             << final_score(per_finalist[f]) / final_score(per_finalist[f0]);
    if (callers_set) {
      text << "; on the caller's set:";
      for (size_t f = 0, listed = 0; f < score.size(); ++f)
        if (f != f0) text << (listed++ ? ", " : " ") << finalists[f] << " " << by_set(f)[*callers_set];
    }
    *note = text.str();
  }
  if (kept_over_first && best != f0) *kept_over_first = final_score(per_finalist[best]) / final_score(per_finalist[f0]);
  return finalists[best];
}

}  // namespace rlgemm::bench
