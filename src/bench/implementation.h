// An implementation of C = A * B that the harness can check and time: a cuBLAS call, a cuBLASLt algorithm,
// torch.matmul, or one of rlgemm's generated kernels.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "rlgemm/problem.h"

namespace rlgemm::bench {

struct Operands {
  const half* a = nullptr;
  const half* b = nullptr;
  half* c = nullptr;
};

class Implementation {
 public:
  virtual ~Implementation() = default;
  virtual std::string name() const = 0;
  // Whether this implementation computes this problem at all (cublas_nn only runs the nn layout).
  virtual bool supports(const Problem& problem) const { (void)problem; return true; }
  // Per-problem set-up before the correctness gate and the timings (algorithm selection; lt_auto times its
  // candidates here on `operands`). Never called inside a timed region.
  virtual void prepare(const Problem& problem, const Operands& operands, cudaStream_t stream) {
    (void)problem; (void)operands; (void)stream;
  }
  // One C = A * B on `stream`: no allocation, no synchronization.
  virtual void run(const Problem& problem, const Operands& operands, cudaStream_t stream) = 0;
  // What was chosen for the last prepared problem (algorithm, candidates tried), for the CSV's detail column.
  virtual std::string detail() const { return ""; }
  // After the timed rounds of the last prepared problem: what its CUDA-graph rows' detail should add about how
  // their calls ran ("" when nothing is worth saying; no commas), e.g. the library's captured calls that had to
  // take their workspace from graph memory.
  virtual std::string graph_rounds_note() const { return ""; }
  // What this implementation's prepare() calls spent so far, in seconds, by part (the library's first uses:
  // the floor's choice, kernels built, the route check), for the JSON (first_use_seconds); empty where it does
  // not say.
  virtual std::map<std::string, double> first_use_seconds() const { return {}; }
  // True when one prepared state serves any shape (generated kernels with run-time M, N, K): the gate then
  // also probes a long K, where an fp16 accumulator cannot hide.
  virtual bool runtime_shape() const { return false; }
  // After a run: what strayed outside the implementation's own workspace ("" when nothing did). Workspaces
  // the harness gives an implementation carry guard bands like A, B and C (device_data.h: GuardedBuffer).
  virtual std::string stray_write(cudaStream_t stream) const { (void)stream; return ""; }
};

using ImplementationPtr = std::unique_ptr<Implementation>;

// lt_auto's detail column: which of `count` heuristic candidates it timed fastest ("candidate I of N timed",
// then " (F failed)" when some did not run), and the index read back from such a text (nullopt otherwise).
std::string lt_auto_detail(int index, int count, int failed);
std::optional<int> lt_auto_candidate(const std::string& detail);

// The cuBLAS family: "cublas_nn", "cublas_tn" (cublasGemmEx, CUBLAS_COMPUTE_32F), "lt_heuristic" (cuBLASLt's
// first heuristic choice, 32 MiB workspace), "lt_auto" (up to 100 heuristic candidates, each screened with a
// short offline timing; the three fastest and the heuristic's first choice re-timed side by side, the fastest
// kept).
std::vector<std::string> cublas_implementation_names();
// lt_auto with its candidates timed in CUDA graphs (make_lt_auto(Mode::kGraph)), asked for by name only
// (`bench --impl ...,lt_auto_graph`): in graph mode the strongest vendor call, the cuBLASLt algorithm fastest
// in the GPU's own time, which the offline-chosen lt_auto is not on small shapes.
inline constexpr const char* kLtAutoGraphImplementation = "lt_auto_graph";
// make_cublas_implementation takes every name of cublas_implementation_names() and kLtAutoGraphImplementation.
ImplementationPtr make_cublas_implementation(const std::string& name);
// lt_auto with its candidates timed in `choice_mode`: in graph mode it is the cuBLASLt call the library's floor
// makes for captured calls (dispatch's GPU-time choice), the reference a graph-mode reward must be paired with.
ImplementationPtr make_lt_auto(Mode choice_mode);
// The vendor calls a subject is compared with (the best of them in the same run is the "best vendor"):
// cublas_nn, cublas_tn, lt_heuristic, lt_auto and lt_auto_graph. torch is not one: it calls cuBLAS.
bool is_vendor_implementation(const std::string& name);

// The fairness control "lt_twin": the very algorithm `lt_auto` (an implementation made by
// make_cublas_implementation("lt_auto")) chose for the problem, launched under another name with its own
// cuBLASLt handle and workspace. It must be prepared after lt_auto; its times against lt_auto's measure what
// the harness's conditions alone do to two identical calls.
inline constexpr const char* kTwinImplementation = "lt_twin";
ImplementationPtr make_lt_twin(const Implementation& lt_auto);

}  // namespace rlgemm::bench
