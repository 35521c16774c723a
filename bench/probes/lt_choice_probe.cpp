// How steady is lt_auto's choice among cuBLASLt's candidates? For each shape: every candidate timed side by
// side with the harness's method, offline and in CUDA graphs (the GPU's time), then choose_fastest run a few
// times in each mode, as the harness's lt_auto and the library's floor run it. Before all that, the library
// floor's first-use choice (dispatch::time_candidates) in each mode, on the shape's first touch.
//
//   lt_choice_probe [--repeat R] [--idle-ms T] [--heat-ms H] [--caller] [--workspace-check] [--placements P]
//                   [--offsets C | --alloc-check | --mix-check [--first-in-capture]]
//                   [--dtype fp16|bf16] M,N,K [M,N,K ...]   (tn; prints CSV)
//
// --idle-ms leaves the GPU idle that long before each first-use choice, as a handle does while its host-side
// work for a new shape (the predictor's scan) runs.
//
// --caller times the first-use choices as a call's first use times them: on the operands the candidates are
// then timed on (the caller's) beside the scratch sets, `--repeat` times in each mode; whether the choice
// holds on the very operands it was timed on. The candidates are then timed with their own workspace, as a
// planned route launches them.
//
// --workspace-check times instead, side by side, each candidate three ways: through cublasLtMatmul with the
// whole workspace the choice is timed with (what = "lt-whole-workspace"), through cublasLtMatmul with the
// workspace the heuristic reported for it (what = "lt-own-workspace", what a planned route passes), and launched
// directly as the library's floor launches it (what = "direct"; absent where it cannot be).
//
// --heat-ms H times every round twice, and runs choose_fastest twice: after the GPU rested 300 ms (what =
// "rested-..."), and after H ms of every candidate back to back (what = "heated-..."): whether a candidate's lead
// holds on a GPU under sustained load, where clocks and power settle lower than in a burst after a pause.
//
// --placements P times instead, side by side in CUDA graphs, each candidate (with its own workspace) on P sets
// of operands allocated apart (what = "placement-p"): whether a candidate's time depends on where its operands
// lie, which a choice made on scratch operands cannot see.
//
// --offsets C times instead, side by side in CUDA graphs, the first C candidates (with their own workspace) with
// one operand at a time moved from a base placement by each of a list of offsets, the others where the base
// put them (what = "A+<offset>", "B+...", "C+..."; each operand's address printed on stderr): which operand's
// placement a candidate's time depends on, and on which of its address bits.
//
// --alloc-check times instead the first C candidates of --offsets (two without it) on operands allocated exactly
// and inside larger allocations, in six combinations. --mix-check times candidates 0 and 1 alone and beside the
// other candidates, in blocks one after another (--first-in-capture: each candidate's first launch captured in
// a CUDA graph), and prints the kernel each of the two launches with its function attributes.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench/cublaslt_problem.h"
#include "bench/fill.h"
#include "bench/timing.h"
#include "core/cuda_util.h"
#include "dispatch/cublaslt_gemm.h"
#include "dispatch/lt_direct.h"
#include "rlgemm/error.h"
#include "rlgemm/problem.h"
#include "run/driver.h"
#include "run/recorded.h"
#include "probe_cli.h"

using namespace rlgemm;

namespace {

// `repeat` rounds of the subjects timed side by side in `mode`; one CSV row per subject and round, its `what`
// the label's text and the round, its candidate the label's number.
void time_rounds(const std::string& s, const std::vector<bench::Subject>& subjects,
                 const std::vector<std::pair<std::string, int>>& labels, bench::Mode mode, int repeat, uint64_t seed,
                 cudaStream_t stream) {
  const std::string m(bench::to_string(mode));
  for (int r = 0; r < repeat; ++r) {
    bench::TimingOptions o;
    o.seed = seed + uint64_t(r);
    const auto times = bench::time_side_by_side(mode, subjects, nullptr, stream, o);
    for (size_t j = 0; j < times.size(); ++j)
      std::printf("%s,%s-%d,%s,%d,%.3f,%.3f,%.3f\n", s.c_str(), labels[j].first.c_str(), r, m.c_str(),
                  labels[j].second, times[j].time_us, times[j].min_us, times[j].max_us);
    std::fflush(stdout);
  }
}

void check_workspaces(const Problem& problem, const std::string& s, int repeat, cublasLtHandle_t handle,
                      cudaStream_t stream) {
  const dispatch::CublasLtContext context;
  const bench::LtProblem lt(problem);
  const auto candidates = lt.candidates(handle);
  const bench::ScratchOperands x(problem, stream);
  DeviceScratch<unsigned char> whole(bench::kLtWorkspaceBytes);
  std::vector<std::unique_ptr<dispatch::CublasLtGemm>> plans;
  std::vector<std::unique_ptr<dispatch::LtDirect>> directs;
  std::vector<std::unique_ptr<DeviceScratch<unsigned char>>> own;  // each direct launch's workspace, zeroed
  std::vector<bench::Subject> subjects;
  std::vector<std::pair<std::string, int>> labels;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS) continue;
    const size_t own_bytes = candidates[i].workspaceSize;
    subjects.push_back({[&, i](cudaStream_t st) {
                          lt.launch(handle, candidates[i].algo, x.a.ptr, x.b.ptr, x.c.ptr, whole.ptr,
                                    bench::kLtWorkspaceBytes, st);
                        }, {}, "whole " + std::to_string(i)});
    labels.emplace_back("lt-whole-workspace", int(i));
    subjects.push_back({[&, i, own_bytes](cudaStream_t st) {
                          lt.launch(handle, candidates[i].algo, x.a.ptr, x.b.ptr, x.c.ptr, whole.ptr, own_bytes, st);
                        }, {}, "own " + std::to_string(i)});
    labels.emplace_back("lt-own-workspace", int(i));
    auto plan = std::make_unique<dispatch::CublasLtGemm>(context, problem, int(i));
    std::string why;
    auto direct = dispatch::LtDirect::make(*plan, problem, why);
    if (!direct) {
      std::fprintf(stderr, "%s candidate %zu: not launched directly: %s\n", s.c_str(), i, why.c_str());
    } else {
      const size_t bytes = std::max<size_t>(plan->workspace_bytes(), 16);
      auto& ws = own.emplace_back(std::make_unique<DeviceScratch<unsigned char>>(bytes));
      RLGEMM_CUDA_CHECK(cudaMemsetAsync(ws->ptr, 0, bytes, stream));
      const dispatch::LtDirect* d = direct.get();
      void* w = ws->ptr;
      subjects.push_back({[&x, d, w](cudaStream_t st) { d->launch(st, x.a.ptr, x.b.ptr, x.c.ptr, w); }, {},
                          "direct " + std::to_string(i)});
      labels.emplace_back("direct", int(i));
      directs.push_back(std::move(direct));
    }
    plans.push_back(std::move(plan));
    std::printf("%s,workspace-bytes,,%zu,%zu,,\n", s.c_str(), i, own_bytes);
  }
  for (bench::Mode mode : {bench::Mode::kOffline, bench::Mode::kGraph})
    time_rounds(s, subjects, labels, mode, repeat, 2000, stream);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void check_placements(const Problem& problem, const std::string& s, int repeat, int placements,
                      cublasLtHandle_t handle, cudaStream_t stream) {
  const bench::LtProblem lt(problem);
  const auto candidates = lt.candidates(handle);
  // As the floor's choice allocates them, with no budget but the device's memory.
  const bench::OperandSets sets(problem, stream, placements, SIZE_MAX);
  if (int(sets.size()) < placements)
    throw Error(ErrorKind::kOutOfMemory, s + ": only " + std::to_string(sets.size()) + " of " +
                                             std::to_string(placements) + " operand sets fit in half the free memory");
  DeviceScratch<unsigned char> workspace(bench::kLtWorkspaceBytes);
  std::vector<bench::Subject> subjects;
  std::vector<std::pair<std::string, int>> labels;  // "placement-p", candidate
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS) continue;
    for (int p = 0; p < placements; ++p) {
      const bench::ScratchOperands* x = &sets[size_t(p)];
      const size_t bytes = candidates[i].workspaceSize;
      subjects.push_back({[&, i, x, bytes](cudaStream_t st) {
                            lt.launch(handle, candidates[i].algo, x->a.ptr, x->b.ptr, x->c.ptr, workspace.ptr, bytes,
                                      st);
                          }, {}, "candidate " + std::to_string(i) + " placement " + std::to_string(p)});
      labels.emplace_back("placement-" + std::to_string(p), int(i));
    }
  }
  time_rounds(s, subjects, labels, bench::Mode::kGraph, repeat, 3000, stream);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// --workspace-placements: every candidate timed side by side in CUDA graphs on one operand set with each of
// `placements` workspaces allocated apart (a spacer allocation between two), `repeat` rounds. Whether a candidate's
// time moves with where its workspace lies, as some move with their operands' (check_placements): the floor times
// its choice on a scratch workspace and serves it on the handle's. Candidates that take no workspace are the
// control. The label names the workspace and the bytes the candidate uses of it.
void check_workspace_placements(const Problem& problem, const std::string& s, int repeat, int placements,
                                cublasLtHandle_t handle, cudaStream_t stream) {
  const bench::LtProblem lt(problem);
  const auto candidates = lt.candidates(handle);
  const bench::ScratchOperands x(problem, stream);
  std::vector<std::unique_ptr<DeviceScratch<unsigned char>>> spaces, spacers;
  for (int p = 0; p < placements; ++p) {
    spaces.push_back(std::make_unique<DeviceScratch<unsigned char>>(bench::kLtWorkspaceBytes));
    spacers.push_back(std::make_unique<DeviceScratch<unsigned char>>(bench::kLtWorkspaceBytes + (size_t(p) << 20)));
    std::fprintf(stderr, "%s workspace %d at %p\n", s.c_str(), p, static_cast<void*>(spaces.back()->ptr));
  }
  std::vector<bench::Subject> subjects;
  std::vector<std::pair<std::string, int>> labels;  // "workspace-p-<bytes>", candidate
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS) continue;
    const size_t bytes = candidates[i].workspaceSize;
    for (int p = 0; p < placements; ++p) {
      void* workspace = spaces[size_t(p)]->ptr;
      subjects.push_back({[&, i, workspace, bytes](cudaStream_t st) {
                            lt.launch(handle, candidates[i].algo, x.a.ptr, x.b.ptr, x.c.ptr, workspace, bytes, st);
                          }, {}, "candidate " + std::to_string(i) + " workspace " + std::to_string(p)});
      labels.emplace_back("workspace-" + std::to_string(p) + "-" + std::to_string(bytes), int(i));
    }
  }
  time_rounds(s, subjects, labels, bench::Mode::kGraph, repeat, 6000, stream);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// Appends the first `count` runnable candidates, each with its own workspace size, on operands a, b, c, labelled
// `what`.
void add_first_candidates(const bench::LtProblem& lt, cublasLtHandle_t handle,
                          const std::vector<cublasLtMatmulHeuristicResult_t>& candidates, int count, void* a, void* b,
                          void* c, void* workspace, const std::string& what, std::vector<bench::Subject>& subjects,
                          std::vector<std::pair<std::string, int>>& labels) {
  int taken = 0;
  for (size_t i = 0; i < candidates.size() && taken < count; ++i) {
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS) continue;
    ++taken;
    const size_t ws = candidates[i].workspaceSize;
    const cublasLtMatmulAlgo_t algo = candidates[i].algo;
    subjects.push_back({[&lt, handle, algo, ws, a, b, c, workspace](cudaStream_t st) {
                          lt.launch(handle, algo, a, b, c, workspace, ws, st);
                        }, {}, "candidate " + std::to_string(i)});
    labels.emplace_back(what, int(i));
  }
}

// Every candidate of `problem` on one set of scratch operands and one workspace, each with its own workspace size:
// the subjects (`offered`) and their labels ("", candidate).
struct EveryCandidate {
  EveryCandidate(const Problem& problem, cublasLtHandle_t handle, cudaStream_t stream)
      : lt(problem), candidates(lt.candidates(handle)), x(problem, stream), workspace(bench::kLtWorkspaceBytes) {
    add_first_candidates(lt, handle, candidates, int(candidates.size()), x.a.ptr, x.b.ptr, x.c.ptr, workspace.ptr, "",
                         offered, labels);
  }
  const bench::LtProblem lt;
  const std::vector<cublasLtMatmulHeuristicResult_t> candidates;
  const bench::ScratchOperands x;
  DeviceScratch<unsigned char> workspace;
  std::vector<bench::Subject> offered;
  std::vector<std::pair<std::string, int>> labels;
};

// A, B and C of `problem`, each at the start of an allocation `pad` bytes larger than it, filled with random values.
std::vector<std::unique_ptr<DeviceScratch<unsigned char>>> padded_operands(const Problem& problem, size_t pad,
                                                                           cudaStream_t stream) {
  const size_t element = sizeof(half);
  std::vector<std::unique_ptr<DeviceScratch<unsigned char>>> pools;
  for (int64_t elems : {problem.a_elems(), problem.b_elems(), problem.c_elems()}) {
    const size_t bytes = size_t(elems) * element + pad;
    pools.push_back(std::make_unique<DeviceScratch<unsigned char>>(bytes));
    bench::fill_random(reinterpret_cast<half*>(pools.back()->ptr), bytes / element, bench::Fill::kNormal, 5, stream,
                       problem.dtype);
  }
  return pools;
}

// --alloc-check: the first `count` candidates on operands taken from two sets: "exact" (each operand a
// cudaMalloc of its own size, as ScratchOperands allocates) and "pool" (each inside an allocation 8 MiB larger),
// in six combinations (what = the combination, e.g. "A-exact/B-pool/C-exact").
void check_allocations(const Problem& problem, const std::string& s, int repeat, int count, cublasLtHandle_t handle,
                       cudaStream_t stream) {
  const bench::LtProblem lt(problem);
  const auto candidates = lt.candidates(handle);
  const bench::ScratchOperands exact(problem, stream);
  const auto pools = padded_operands(problem, size_t(8) << 20, stream);
  void* e[3] = {exact.a.ptr, exact.b.ptr, exact.c.ptr};
  void* q[3] = {pools[0]->ptr, pools[1]->ptr, pools[2]->ptr};
  DeviceScratch<unsigned char> workspace(bench::kLtWorkspaceBytes);
  std::vector<bench::Subject> subjects;
  std::vector<std::pair<std::string, int>> labels;
  const int combos[6][3] = {{0, 0, 0}, {1, 1, 1}, {0, 1, 0}, {1, 0, 1}, {0, 0, 1}, {1, 0, 0}};  // 1: pool
  for (const auto& combo : combos) {
    void* at[3];
    std::string what;
    for (int op = 0; op < 3; ++op) {
      at[op] = combo[op] ? q[op] : e[op];
      what += std::string(op ? "/" : "") + "ABC"[op] + (combo[op] ? "-pool" : "-exact");
    }
    std::fprintf(stderr, "%s %s: A %p B %p C %p\n", s.c_str(), what.c_str(), at[0], at[1], at[2]);
    add_first_candidates(lt, handle, candidates, count, at[0], at[1], at[2], workspace.ptr, what, subjects, labels);
  }
  time_rounds(s, subjects, labels, bench::Mode::kGraph, repeat, 5000, stream);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// The kernels a captured call of `call` launches, in one line: each one's name, configuration and function
// attributes (read back as run/recorded.h reads cuBLASLt's calls).
std::string captured_kernel(const bench::Call& call, cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  call(stream);
  RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  std::string why;
  const auto ops = read_chain(graph, false, why);
  cudaGraphDestroy(graph);
  if (!ops) return " [not read: " + why + "]";
  const DriverApi& api = driver();
  std::string out;
  for (const RecordedOp& op : *ops) {
    if (!op.kernel) {
      out += " [memset]";
      continue;
    }
    const RecordedLaunch& l = op.launch;
    const char* name = "?";
    api.cuFuncGetName(&name, l.function);
    out += std::string(" [") + name + " grid " + std::to_string(l.grid[0]) + "x" + std::to_string(l.grid[1]) + "x" +
           std::to_string(l.grid[2]) + " block " + std::to_string(l.block[0]) + " smem " +
           std::to_string(l.smem_bytes);
    const std::pair<const char*, CUfunction_attribute> attrs[] = {
        {"maxdyn", CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES},
        {"carveout", CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT},
        {"clmust", CU_FUNC_ATTRIBUTE_CLUSTER_SIZE_MUST_BE_SET},
        {"clw", CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH},
        {"nonportable", CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED},
        {"clsched", CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE},
        {"regs", CU_FUNC_ATTRIBUTE_NUM_REGS},
        {"cache", CU_FUNC_ATTRIBUTE_CACHE_MODE_CA}};
    for (const auto& [label, id] : attrs) {
      int v = -1;
      api.cuFuncGetAttribute(&v, id, l.function);
      out += std::string(" ") + label + "=" + std::to_string(v);
    }
    // The launch's own attributes, and how many of its clusters the GPU holds at once (cuOccupancyMaxActiveClusters
    // with this launch's configuration) against how many it launches: a grid of exactly as many clusters as fit
    // needs every cluster slot free when it starts.
    unsigned cluster = 1;
    for (const CUlaunchAttribute& a : l.attributes) {
      if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
        const auto& d = a.value.clusterDim;
        cluster = d.x * d.y * d.z;
        out += " cluster " + std::to_string(d.x) + "x" + std::to_string(d.y) + "x" + std::to_string(d.z);
      } else if (a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) {
        out += " programmatic";
      } else {
        out += " attribute" + std::to_string(int(a.id));
      }
    }
    CUlaunchConfig config{};
    config.gridDimX = l.grid[0];
    config.gridDimY = l.grid[1];
    config.gridDimZ = l.grid[2];
    config.blockDimX = l.block[0];
    config.blockDimY = l.block[1];
    config.blockDimZ = l.block[2];
    config.sharedMemBytes = l.smem_bytes;
    std::vector<CUlaunchAttribute> attributes;  // the cluster's shape and scheduling: what the occupancy query reads
    for (const CUlaunchAttribute& a : l.attributes)
      if (a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION || a.id == CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE)
        attributes.push_back(a);
    config.attrs = attributes.data();
    config.numAttrs = unsigned(attributes.size());
    int fit = -1;
    const bool known = api.cuOccupancyMaxActiveClusters &&
                       api.cuOccupancyMaxActiveClusters(&fit, l.function, &config) == CUDA_SUCCESS;
    const unsigned long long launched =
        (unsigned long long)l.grid[0] * l.grid[1] * l.grid[2] / std::max(cluster, 1u);
    out += " clusters " + std::to_string(launched) + " of " + (known ? std::to_string(fit) : std::string("?")) +
           " resident";
    out += "]";
  }
  return out;
}

// --mix-check: candidates 0 and 1 timed side by side in CUDA graphs in blocks of different company, one after
// another in one process: "pair" (the two alone), "all" (beside every other candidate), "no-first" (candidate 1
// beside every other candidate but 0), "pair-again"; `repeat` rounds each. Whether a candidate's time depends on
// which other kernels run between its replays.
void check_mix(const Problem& problem, const std::string& s, int repeat, bool first_in_capture, cublasLtHandle_t handle,
               cudaStream_t stream) {
  const EveryCandidate candidates(problem, handle, stream);
  const std::vector<bench::Subject>& offered = candidates.offered;
  const std::vector<std::pair<std::string, int>>& offered_labels = candidates.labels;
  std::vector<bench::Subject> all;  // those that run, with their candidate numbers
  std::vector<int> index;
  for (size_t j = 0; j < offered.size(); ++j) {
    const bench::Subject& subject = offered[j];
    try {
      if (first_in_capture) {  // the first launch inside a stream capture, then that graph launched
        bench::launch_captured_once(subject.call, stream);
      } else {
        subject.call(stream);
        RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      }
    } catch (const Error&) {
      continue;
    }
    all.push_back(subject);
    index.push_back(offered_labels[j].second);
  }
  if (all.size() < 2 || index[0] != 0 || index[1] != 1)
    throw Error(ErrorKind::kRuntime, s + ": --mix-check needs candidates 0 and 1 to run");
  for (size_t p = 0; p < 2; ++p)
    std::fprintf(stderr, "%s candidate %d:%s\n", s.c_str(), index[p], captured_kernel(all[p].call, stream).c_str());
  const auto block = [&](const std::string& name, const std::vector<size_t>& picks) {
    std::vector<bench::Subject> subjects;
    std::vector<std::pair<std::string, int>> labels;
    for (size_t p : picks) {
      subjects.push_back(all[p]);
      labels.emplace_back(name, index[p]);
    }
    time_rounds(s, subjects, labels, bench::Mode::kGraph, repeat, 6000, stream);
  };
  std::vector<size_t> every(all.size()), no_first;
  for (size_t p = 0; p < all.size(); ++p) {
    every[p] = p;
    if (index[p] != 0) no_first.push_back(p);
  }
  block("pair", {0, 1});
  block("all", every);
  block("no-first", no_first);
  block("pair-again", {0, 1});
  block("all-again", every);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void check_offsets(const Problem& problem, const std::string& s, int repeat, int count, cublasLtHandle_t handle,
                   cudaStream_t stream) {
  const bench::LtProblem lt(problem);
  const auto candidates = lt.candidates(handle);
  const size_t offsets[] = {0, 256, 4096, size_t(64) << 10, size_t(256) << 10, size_t(512) << 10, size_t(1) << 20,
                            (size_t(3) << 19), size_t(2) << 20, size_t(3) << 20, size_t(4) << 20, size_t(6) << 20};
  const auto pools = padded_operands(problem, size_t(8) << 20, stream);
  DeviceScratch<unsigned char> workspace(bench::kLtWorkspaceBytes);
  std::vector<bench::Subject> subjects;
  std::vector<std::pair<std::string, int>> labels;
  const char* names[3] = {"A", "B", "C"};
  for (int op = 0; op < 3; ++op)
    for (size_t off : offsets) {
      if (op > 0 && off == 0) continue;  // the base, once
      unsigned char* at[3] = {pools[0]->ptr, pools[1]->ptr, pools[2]->ptr};
      at[op] += off;
      std::fprintf(stderr, "%s %s+%zu: A %p B %p C %p\n", s.c_str(), names[op], off, static_cast<void*>(at[0]),
                   static_cast<void*>(at[1]), static_cast<void*>(at[2]));
      add_first_candidates(lt, handle, candidates, count, at[0], at[1], at[2], workspace.ptr,
                           std::string(names[op]) + "+" + std::to_string(off), subjects, labels);
    }
  time_rounds(s, subjects, labels, bench::Mode::kGraph, repeat, 4000, stream);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// --kernels: each candidate's kernels, one line a candidate on stdout ("M,N,K candidate i: [...]"); a candidate
// that does not launch says why.
void list_kernels(const Problem& problem, const std::string& s, cublasLtHandle_t handle, cudaStream_t stream) {
  const EveryCandidate every(problem, handle, stream);
  const std::vector<bench::Subject>& offered = every.offered;
  const std::vector<std::pair<std::string, int>>& labels = every.labels;
  for (size_t j = 0; j < offered.size(); ++j) {
    std::string line;
    try {
      offered[j].call(stream);  // a first launch outside the capture, as every other probe mode makes it
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      line = captured_kernel(offered[j].call, stream);
    } catch (const Error& e) {
      line = std::string(" [does not run: ") + e.what() + "]";
    }
    std::printf("%s candidate %d:%s\n", s.c_str(), labels[j].second, line.c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 3;
  double idle_ms = 0;
  CLI::App app("How steady is lt_auto's choice among cuBLASLt's candidates (tn; prints CSV)", "lt_choice_probe");
  std::string dtype_text = "fp16";
  app.add_option("--dtype", dtype_text, "element type of A, B and C: fp16 or bf16 (fp32 accumulation)");
  app.add_option("--repeat", repeat, "rounds of the side-by-side timing and choose_fastest")->check(CLI::PositiveNumber);
  app.add_option("--idle-ms", idle_ms, "idle time before each first-use choice")->check(CLI::NonNegativeNumber);
  int placements = 0;
  app.add_option("--placements", placements, "time each candidate on this many operand sets allocated apart")
      ->check(CLI::PositiveNumber);
  int offsets = 0;
  CLI::Option* offsets_option =
      app.add_option("--offsets", offsets, "time the first this many candidates with each operand moved by offsets")
          ->check(CLI::PositiveNumber);
  bool alloc_check = false;
  CLI::Option* alloc = app.add_flag("--alloc-check", alloc_check,
                                    "time the first --offsets candidates (two without it) on operands allocated two ways");
  bool mix_check = false;
  CLI::Option* mix = app.add_flag("--mix-check", mix_check, "time candidates 0 and 1 alone and beside the other candidates");
  bool first_in_capture = false;
  app.add_flag("--first-in-capture", first_in_capture, "with --mix-check: each candidate's first launch is captured")
      ->needs(mix);
  mix->excludes(alloc)->excludes(offsets_option);  // --mix-check times candidates 0 and 1 on one operand set
  bool caller = false;
  app.add_flag("--caller", caller, "time the first-use choices on the operands the candidates are then timed on");
  double heat_ms = 0;
  app.add_option("--heat-ms", heat_ms,
                 "time each round twice: after the GPU rested, and after this long under the candidates' load")
      ->check(CLI::NonNegativeNumber);
  bool workspace_check = false;
  app.add_flag("--workspace-check", workspace_check,
               "time each candidate with the whole workspace, with its own, and launched directly");
  int workspace_placements = 0;
  app.add_option("--workspace-placements", workspace_placements,
                 "time each candidate with this many workspaces allocated apart, on one operand set")
      ->check(CLI::PositiveNumber);
  bool kernels = false;
  app.add_flag("--kernels", kernels,
               "list each candidate's kernels (configuration, attributes, clusters launched and resident); no timing");
  std::vector<Shape> shapes;
  if (const int status = probes::parse_command_line(app, argc, argv, shapes); status >= 0) return status;
  DType dtype = DType::kF16;
  try {
    dtype = parse_dtype(dtype_text);
  } catch (const Error& e) {
    std::fprintf(stderr, "lt_choice_probe: %s\n", e.what());
    return 2;
  }
  try {
    cudaStream_t stream = nullptr;
    RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cublasLtHandle_t handle = nullptr;
    if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) throw Error(ErrorKind::kRuntime, "cublasLtCreate failed");
    if (!kernels) std::printf("M,N,K,what,mode,candidate,time_us,min_us,max_us\n");
    for (const Shape& shape : shapes) {
      const Problem problem{shape, Layout::kTN, dtype};
      const std::string s = std::to_string(shape.m) + "," + std::to_string(shape.n) + "," + std::to_string(shape.k);
      if (kernels) {  // a listing of many shapes goes on past one that fails, which says why
        try {
          list_kernels(problem, s, handle, stream);
        } catch (const Error& e) {
          if (e.kind() == ErrorKind::kNoDevice || e.kind() == ErrorKind::kHang) throw;
          std::printf("%s not listed: %s\n", s.c_str(), e.what());
          RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
        }
        continue;
      }
      if (mix_check) {
        check_mix(problem, s, repeat, first_in_capture, handle, stream);
        continue;
      }
      if (alloc_check) {
        check_allocations(problem, s, repeat, offsets > 0 ? offsets : 2, handle, stream);
        continue;
      }
      if (offsets > 0) {
        check_offsets(problem, s, repeat, offsets, handle, stream);
        continue;
      }
      if (placements > 0) {
        check_placements(problem, s, repeat, placements, handle, stream);
        continue;
      }
      if (workspace_placements > 0) {
        check_workspace_placements(problem, s, repeat, workspace_placements, handle, stream);
        continue;
      }
      if (workspace_check) {
        check_workspaces(problem, s, repeat, handle, stream);
        continue;
      }
      const bench::ScratchOperands x(problem, stream);
      // First, before anything else touches this shape: the library floor's own first-use choice (fresh scratch
      // operands and workspace, a fresh cuBLASLt handle), in each mode, as a handle makes it (with --caller, on
      // x too, as a call's first use on x would, `repeat` times).
      const std::optional<bench::LtOperands> on_x =
          caller ? std::optional<bench::LtOperands>(bench::LtOperands{x.a.ptr, x.b.ptr, x.c.ptr}) : std::nullopt;
      for (bench::Mode mode : {bench::Mode::kOffline, bench::Mode::kGraph})
        for (int r = 0; r < (caller ? repeat : 1); ++r) {
          const dispatch::CublasLtContext context;
          RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
          if (idle_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(idle_ms));
          const bench::LtChoice c = dispatch::time_candidates(context, problem, stream, mode, on_x);
          std::printf("%s,%s,%s,%d,,,\n", s.c_str(), caller ? ("first-use-caller-" + std::to_string(r)).c_str() : "first-use",
                      std::string(bench::to_string(mode)).c_str(), c.index);
        }
      const bench::LtProblem lt(problem);
      const auto candidates = lt.candidates(handle);
      DeviceScratch<unsigned char> workspace(bench::kLtWorkspaceBytes);
      std::vector<bench::Subject> subjects;
      std::vector<int> runnable;
      for (size_t i = 0; i < candidates.size(); ++i) {
        const size_t bytes = caller ? bench::launch_workspace_bytes(candidates[i], bench::kLtWorkspaceBytes,
                                                                    bench::LtWorkspace::kOwn)
                                    : bench::kLtWorkspaceBytes;
        auto call = [&, i, bytes](cudaStream_t s) {
          lt.launch(handle, candidates[i].algo, x.a.ptr, x.b.ptr, x.c.ptr, workspace.ptr, bytes, s);
        };
        try {
          call(stream);
          RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
        } catch (const Error&) {
          continue;
        }
        runnable.push_back(int(i));
        subjects.push_back({call, {}, "candidate " + std::to_string(i)});
      }
      // With --heat-ms, each round twice: after the GPU rested (idle kRestMs), and after heat_ms of every
      // candidate back to back (a GPU under sustained load, as a server's or a long benchmark's).
      constexpr double kRestMs = 300;
      const auto heat = [&](double ms) {
        const auto start = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - start < std::chrono::duration<double, std::milli>(ms)) {
          for (const bench::Subject& subject : subjects) subject.call(stream);
          RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
        }
      };
      const std::vector<std::string> states = heat_ms > 0 ? std::vector<std::string>{"rested-", "heated-"}
                                                          : std::vector<std::string>{""};
      const auto settle = [&](const std::string& state) {  // before each timing and each choice
        if (state == "rested-") std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kRestMs));
        if (state == "heated-") heat(heat_ms);
      };
      for (bench::Mode mode : {bench::Mode::kOffline, bench::Mode::kGraph}) {
        const std::string m(bench::to_string(mode));
        for (int r = 0; r < repeat; ++r)
          for (const std::string& state : states) {
            RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
            settle(state);
            bench::TimingOptions o;
            o.seed = 1000 + uint64_t(r);
            const auto times = bench::time_side_by_side(mode, subjects, nullptr, stream, o);
            for (size_t j = 0; j < times.size(); ++j)
              std::printf("%s,%sall-candidates-%d,%s,%d,%.3f,%.3f,%.3f\n", s.c_str(), state.c_str(), r, m.c_str(),
                          runnable[j], times[j].time_us, times[j].min_us, times[j].max_us);
            settle(state);
            const bench::LtChoice c = bench::choose_fastest(lt, handle, candidates, x.a.ptr, x.b.ptr, x.c.ptr,
                                                            workspace.ptr, bench::kLtWorkspaceBytes, stream, mode);
            std::printf("%s,%schoose_fastest-%d,%s,%d,,,\n", s.c_str(), state.c_str(), r, m.c_str(), c.index);
            std::fflush(stdout);
          }
      }
    }
    cublasLtDestroy(handle);
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lt_choice_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
