// cuBLASLt for the shapes where the tuning database says it beats every rlgemm kernel: the algorithm lt_auto
// measured fastest for the problem (its index among the heuristic's candidates, from the tuned table), or the
// heuristic's first, planned once (descriptors and algorithm) and then launched with no allocation. The problem
// is described and the heuristic asked exactly as the harness does (bench::LtProblem), so the recorded index
// names the algorithm lt_auto timed. One cuBLASLt handle serves every plan of a Handle; cublasLtMatmul may be
// called from several threads at once with one handle.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "bench/cublaslt_problem.h"
#include "dispatch/choices_file.h"
#include "rlgemm/problem.h"

namespace rlgemm::dispatch {

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
  // Describes the problem to cuBLASLt and asks its heuristic for its candidates: takes `candidate` (the
  // heuristic's first when not given, or when it offers fewer than candidate + 1: a table recorded with
  // another cuBLASLt; note() says so); throws Error(kRuntime) when cuBLASLt has none.
  CublasLtGemm(const CublasLtContext& context, const Problem& problem, std::optional<int> candidate = std::nullopt);
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // The same problem with a bias epilogue (C = A B + bias, bias of N elements): this plan's algorithm where
  // cuBLASLt runs it with the epilogue, else the heuristic's first for the epilogue; never more workspace
  // than this plan's (a caller sized its workspace by the shape's route), so note() may say it changed.
  std::unique_ptr<CublasLtGemm> with_bias() const;
  // The algorithms that may serve this plan's problem with a bias epilogue, within this plan's workspace: the
  // heuristic's first for the epilogue (what cublasLtMatmul with a bias, and F.linear, run), then this plan's
  // algorithm where cuBLASLt runs it with the epilogue, then the heuristic's others, each once. (The heuristic's
  // choice with a bias can be another kernel, and a faster one: on an H200, 32x4096x4096 tn with a bias ran
  // 8.1 us through the heuristic's first, 11.0 through the algorithm chosen without it. And the algorithm
  // chosen without a bias, first and so kept unless beaten by the margin, ran 4-7% behind F.linear's with
  // one at 16x14336x4096 and 256x4096x4096: bench/results/h200/torch-op-bias-check.csv.)
  std::vector<cublasLtMatmulHeuristicResult_t> bias_candidates() const;
  // with_bias() with bias_candidates()[candidate]; one not offered (a choice recorded with another cuBLASLt or
  // another algorithm without the bias) gives with_bias(), and note() says so.
  std::unique_ptr<CublasLtGemm> with_bias(int candidate) const;
  // bias_candidates() timed side by side in `mode` (bench::choose_fastest: the first, the heuristic's first for
  // the epilogue, stays unless another beat it by more than the margin), on operand sets as time_candidates'
  // (the caller's first where given) and a bias of the problem's size on `stream` (never one being captured);
  // allocates them for the duration of the call.
  bench::LtChoice time_bias_candidates(cudaStream_t stream, bench::Mode mode,
                                       const std::optional<bench::LtOperands>& caller = std::nullopt) const;
  // The problem with a bias epilogue on its own: the heuristic's first algorithm within `max_workspace`
  // bytes. Throws Error(kRuntime) when cuBLASLt offers none.
  static std::unique_ptr<CublasLtGemm> bias_first(const CublasLtContext& context, const Problem& problem,
                                                  size_t max_workspace);

  size_t workspace_bytes() const { return workspace_bytes_; }
  // Whether `other` runs the same cuBLASLt algorithm (with or without an epilogue).
  bool same_algorithm(const CublasLtGemm& other) const;
  // Whether its calls add a bias in cuBLASLt's epilogue (and so take one).
  bool takes_bias() const { return problem_.epilogue() == bench::LtEpilogue::kBias; }
  // Empty, or why the algorithm is not the candidate asked for.
  const std::string& note() const { return note_; }
  // `bias` only, and then always, for a with_bias() plan; its calls are serialized on a lock (the bias
  // pointer is an attribute of the one operation).
  void launch(cudaStream_t stream, const void* a, const void* b, void* c, void* workspace,
              const void* bias = nullptr) const;

 private:
  CublasLtGemm(const CublasLtContext& context, const Problem& problem, bench::LtEpilogue epilogue);
  const CublasLtContext& context_;
  bench::LtProblem problem_;
  mutable std::mutex bias_mutex_;
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_bytes_ = 0;
  std::string note_;
};

// lt_auto's choice for a problem on this GPU (bench::choose_fastest): every heuristic candidate timed on
// ChoiceSets (the caller's operands where given, then scratch operands of the problem's size allocated apart
// and filled with random values; the screen on the first, the final on all, each finalist by its mean over
// them), on `stream` (never one being captured), in `mode` (offline: eager calls; graph: the GPU's time, for
// calls captured into CUDA graphs), each launched with the workspace size its plan launches with
// (bench::LtWorkspace::kOwn). Allocates the scratch for the duration of the call. A caller's operands are read,
// and its C written with the product many times over (its call then writes it once more).
bench::LtChoice time_candidates(const CublasLtContext& context, const Problem& problem, cudaStream_t stream,
                                bench::Mode mode = bench::Mode::kOffline,
                                const std::optional<bench::LtOperands>& caller = std::nullopt);

// The kLtOperandSets operand sets a choice is timed on: `caller`'s first where given (marked as the caller's:
// bench::final_winner lets them decide where the sets disagree), then scratch sets
// allocated apart (bench::OperandSets, as many as make kLtOperandSets with the caller's), held for the object's
// life. Some candidates' times move by 5-20% with where their operands lie
// (bench/results/h200/lt-placement-check*.csv): a choice timed on the caller's own operands holds where its
// calls run (a model's weights stay where they are), and the scratch sets keep it from resting on that one
// placement alone.
class ChoiceSets {
 public:
  ChoiceSets(const Problem& problem, cudaStream_t stream, const std::optional<bench::LtOperands>& caller);
  const std::vector<bench::LtOperands>& sets() const { return sets_; }

 private:
  bench::OperandSets scratch_;
  std::vector<bench::LtOperands> sets_;
};
// How many scratch sets ChoiceSets allocates beside `caller`.
int scratch_set_count(const std::optional<bench::LtOperands>& caller);

// The caller's operands of a call, fit to time a choice on: null pointers, or a C whose bytes overlap A's or
// B's (writing C would change the inputs the call then reads), give nothing.
std::optional<bench::LtOperands> caller_operands(const Problem& problem, const void* a, const void* b, void* c);

// How many candidates cuBLASLt offers for a problem (bench::LtProblem::candidates): host work only.
int candidate_count(const CublasLtContext& context, const Problem& problem);

// A runoff between cuBLASLt candidates chosen apart (indices among the heuristic's candidates): timed side by
// side in `mode` with the harness's method, on operand sets as time_candidates' (bench::fastest_of).
int runoff(const CublasLtContext& context, const Problem& problem, cudaStream_t stream, bench::Mode mode,
           const std::vector<int>& finalists, const std::optional<bench::LtOperands>& caller = std::nullopt);

// The cuBLASLt choices made on this machine, so that each costs its timing once per machine: a ChoicesFile
// (gpu,cublaslt_version,M,N,K,layout,candidate,candidates, and a ninth field with the element type of a problem
// other than fp16). Rows of other GPUs or another cuBLASLt are kept in the file and ignored (another cuBLASLt
// numbers its candidates otherwise). A shape not found is looked for again in the file, where another handle or
// process may have recorded it since this one read it (two handles of one process, a tuning database's and the
// default, then serve a shape on the same choice). Thread-safe.
class CublasLtChoices {
 public:
  static constexpr const char* kHeader = "gpu,cublaslt_version,M,N,K,layout,candidate,candidates";

  // `file` empty: kept in memory only.
  CublasLtChoices(std::filesystem::path file, std::string gpu, size_t cublaslt_version);
  // The candidate recorded for `problem`, when it was chosen among `candidates` candidates, as many as cuBLASLt
  // offers it now: a record made among another count indexes another list (another rlgemm's candidate list,
  // or a heuristic that answers otherwise), and is not found.
  std::optional<int> find(const Problem& problem, int candidates) const;
  void record(const Problem& problem, int candidate, int candidates);
  const std::filesystem::path& file() const { return file_.file(); }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int>;  // M, N, K, layout, dtype
  static Key key_of(const Problem& problem);
  // The file's records of this GPU and cuBLASLt (of a shape, its last) into chosen_, where it holds none of theirs.
  void load() const;
  mutable ChoicesFile file_;
  std::string gpu_;
  size_t version_;
  mutable std::mutex mutex_;
  mutable std::map<Key, std::pair<int, int>> chosen_;  // candidate, among how many
};

}  // namespace rlgemm::dispatch
