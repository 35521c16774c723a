// rlgemm as a library: tuned fp16 and bf16 GEMM kernels behind one call.
//
//   #include <rlgemm/rlgemm.h>
//   rlgemm::Handle handle;                                  // the tuned table built into the library
//   handle.prepare(M, N, K, rlgemm::Layout::kTN);            // optional: compile and load ahead
//   handle.hgemm(stream, M, N, K, A, B, rlgemm::Layout::kTN, C);                        // fp16
//   handle.gemm(stream, M, N, K, A, B, rlgemm::Layout::kTN, C, rlgemm::DType::kBF16);  // bf16
//
// C[M,N] = A[M,K] * B with fp16 (or, through gemm(), bf16) operands, fp32 accumulation, alpha = 1, beta = 0. A and C are row-major; B is
// K x N row-major (Layout::kNN) or stored N x K row-major (Layout::kTN: a linear layer's weight). The rules
// of include/rlgemm/problem.h apply: M >= 1, N and K multiples of 8, extents <= 2^20. A, B and C must be
// device pointers aligned to 16 bytes (the kernels load and store 16-byte vectors and describe the
// operands to the Tensor Memory Accelerator, which needs 16-byte aligned base addresses).
//
// A shape's element type is part of its route: every route below is chosen among the rows, designs and
// cuBLASLt algorithms of that type (bf16 rows of a table, bf16 designs, cuBLASLt with CUDA_R_16BF). The
// built-in speed predictors learned fp16 kernels: a bf16 shape's predicted route proposes the fp16 twin's
// design in bf16, and keeps it, as any predicted kernel, only where it measured faster than the bf16 floor.
//
// Which kernel runs (the route of a shape, see describe()). A kernel runs only where a measurement on this GPU
// says it beats cuBLASLt; everywhere else the handle calls cuBLASLt, so it is never slower than cuBLASLt's
// best algorithm (the floor). Tables and caches are keyed by the GPU as the CUDA runtime names it.
//
// Routes earn their place, in each way they are called. With prefer_cublaslt, every kernel a route would run
// (a table's, a policy's, the predictor's, autotuning's) is timed at the shape's first use side by side with
// the floor, on scratch operands and on the first call's own (where that call passed them), in interleaved
// paired rounds, twice: with the calls captured in a CUDA graph (the GPU's time alone) and as eager back-to-back
// calls (the host's launch cost too). It serves a way of calling only where the 95% interval of its gain over
// the floor in that way lies above 1% on every operand set. Calls made while
// their stream is being captured (cudaStreamIsCapturing) take the GPU-time winner, eager calls the eager one:
// a kernel that is faster only by its lighter launch never ends up inside a CUDA graph. describe() says what
// serves each way and what was measured ("eager calls: ...; CUDA graphs: ..."); the check costs tens of
// milliseconds at first use (HandleOptions::check_routes turns it off for table rows).
//   tuned     the shape (and layout) is in the tuned table for this GPU, measured against lt_auto and not 3%
//             or more slower: its measured-best design, where it passes the check above; with check_routes and
//             the predicted route on (predicted_kernels or nearest_kernels), the designs the shape would take
//             without its row (the predicted route's) are checked beside it, and the fastest serves, so that a
//             table or database made before a better prediction never shadows it (at the cost of the
//             predictor's choice at the shape's first use, and a compile where its design is not the row's);
//   cublaslt  the table records that cuBLASLt beat every rlgemm kernel for this exact shape by 3% or more
//             offline (speedup_vs_lt_auto < 0.97): the cuBLASLt algorithm lt_auto measured fastest, with the
//             predicted route's designs checked against it as above;
//             "cublaslt floor": any other shape, on any GPU (one without a table too): cuBLASLt with the
//             algorithm lt_auto would choose, timed once per machine on the shape's first use (random
//             scratch operands, every heuristic candidate; a second or so for a large shape) and kept in the
//             cache ($RLGEMM_CACHE_DIR or ~/.cache/rlgemm/cubins, files cublaslt-graph-choices-3.csv and
//             cublaslt-choices-3.csv), so that later
//             handles and processes find it; a cache that cannot be written costs one warning;
//   policy    any other shape, when the handle was given a policy file: the policy's zero-shot design;
//   predicted any shape without a tuned row (unless HandleOptions::predicted_kernels is off): the design the
//             built-in speed predictor (data/predictors/, by GPU name, else one of the same architecture)
//             expects to beat cuBLASLt by the most, where its predicted gain clears one standard deviation of
//             its uncertainty, and only in the ways of calling where that kernel passed the check above (else
//             the floor serves them, and describe() says what was measured); where that design's tile width
//             leaves a wave of tiles part-empty, the same design at the width that fills the GPU's waves is
//             checked beside it (or alone, where only its estimate, the guess's gain times the ratio of their
//             costs in waves of tiles, clears the rule), and the faster serves; choosing costs about half a
//             second at the shape's first use, a kernel's first compile a second or two (then cached on disk),
//             the timing milliseconds; with HandleOptions::autotune, the predictor's few best designs and the
//             designs of the nearest tuned rows are all checked against the floor, whatever their predicted
//             gain, and the fastest of each way of calling is kept (describe() says "autotuned"); with
//             HandleOptions::nearest_kernels (on by default), the design of the tuned row nearest to the shape is
//             checked too, beside the predictor's design or alone where the predictor proposes none;
//   With HandleOptions::prefer_cublaslt = false (kernels only), shapes without a tuned row take instead:
//   nearest   the design of the nearest tuned shape of this GPU and layout, distance measured between
//             (log M, log N, log K), among designs valid for the layout and the GPU;
//   default   nothing is tuned for this GPU: a built-in design for its architecture (sm90 on compute
//             capability 9.0, sm80 elsewhere).
// A rescheduled cubin (HandleOptions::optimized_cubins) serves the exact (shape, layout, design) it was
// measured on; describe() then ends with "sass +G%", the gain that was measured.
// Designs taken from another shape (policy, nearest) run shape-generic: a design tuned as static (shape
// baked in) is compiled without the shape, so every shape that borrows it shares one kernel.
//
// Costs. The first call of a shape and layout chooses its route, may compile the kernel (NVRTC, through the
// on-disk cubin cache: seconds on a miss, milliseconds on a hit), loads it and plans its launch (grid,
// cluster, parameter block with the TMA descriptors encoded). Every later call looks the plan up in a
// per-thread cache, points it at the call's operands and launches: no lock, no allocation, no string, no
// synchronization. Kernels are loaded once per process and shared by all handles.
//
// Workspaces. A split-K or stream-K kernel (or cuBLASLt) needs a workspace, whose first bytes (flags and
// counters) must be zero before a launch; the kernels leave them zero. Where it comes from:
//   - the caller's, with the workspace overload of hgemm (at least workspace_bytes(), 16-byte aligned, any
//     contents: the handle zeroes what must be zero on the stream before the launch). One workspace per
//     stream: calls on one stream may reuse it, calls on different streams must not share it;
//   - while the stream is being captured into a CUDA graph: one of the route's capture slots, workspaces the
//     handle allocates and zeroes with the route (two per shape). A slot belongs for good to the first capture
//     (and capturing stream) that takes it, so no other graph and no direct call ever touches it, and a replay
//     pays the kernel alone. Once a shape's slots are taken (a third graph holding it), graph memory
//     (cudaMallocAsync, the flags zeroed, cudaFreeAsync, captured with the call: each graph owns that
//     workspace, and pays its allocation and zeroing at every replay). A slot is taken even where the caller
//     handed a workspace over (it is then not used). One rule follows: a graph instantiated twice from one
//     capture shares its slots between its two executable graphs, which must then not run at once;
//   - else the handle's pool: one workspace per (stream, shape), allocated and zeroed on the stream's first
//     call of the shape and kept until the handle is destroyed. Streams are told apart by their unique id
//     (cudaStreamGetId), so threads on cudaStreamPerThread get one each.
// So any call may be captured in a CUDA graph with no preparation, provided that its shape was seen before
// (a warm-up call, or prepare()): a shape first seen while its stream is being captured throws, since its
// kernel would have to be compiled and loaded inside the capture.
//
// Concurrency. Stream-K and serial split-K kernels wait on other CTAs of their launch; they take their place
// in the schedule from a ticket drawn when a CTA starts and wait only on CTAs that started earlier, so they
// finish whatever else shares the GPU (other streams, other processes).
//
// Thread safety: one handle may be used by any number of threads at once, on any streams.
//
// Errors throw rlgemm::Error (include/rlgemm/error.h): kInvalidInput for bad shapes, null or misaligned
// pointers, bad files; kNoDevice when no usable GPU exists; kOutOfMemory; kRuntime for CUDA, compiler or
// cuBLASLt failures.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>

#include "rlgemm/error.h"
#include "rlgemm/problem.h"

namespace rlgemm {

// How a shape is served; see the header comment.
enum class Path { kTuned, kNearest, kPolicy, kDefault, kCublasLt, kPredicted };
inline constexpr int kPathCount = 6;
const char* to_string(Path path);

struct HandleOptions {
  // A tuning database (SQLite, written by `rlgemm tune`): its best design per shape for this GPU in
  // `mode`. Empty: the tuned table (`tuned_table`, else the one built into the library).
  std::string database;
  // A tuned-table CSV (data/tuned/ format) to use instead of the built-in one; ignored with `database`.
  std::string tuned_table;
  // The database's timing mode to take the best designs of: graph (tune's default), offline or server.
  std::string mode = "graph";
  // A policy file (`rlgemm tune --strategy rl --policy FILE`): zero-shot designs for untuned shapes.
  std::string policy;
  // Call cuBLASLt for the exact shapes where the table records that it is faster, and for every shape where
  // nothing measured says a kernel beats it (the floor). false: rlgemm kernels everywhere.
  bool prefer_cublaslt = true;
  // With prefer_cublaslt: check a table's (or database's, or policy's) kernel against the floor at the shape's
  // first use, in GPU time (CUDA-graph replay) and in eager calls, and serve it only in the ways of calling where
  // it measured faster (see "Routes earn their place" above). false: trust the table as it is (a table verified
  // on this very GPU and driver). Predicted and autotuned kernels are always checked.
  bool check_routes = true;
  // Let the speed predictor put kernels on shapes without a tuned row, where it expects them to beat
  // cuBLASLt beyond its uncertainty (the "predicted" route); off: every such shape takes the cuBLASLt floor.
  // On by default: a kernel takes a shape only where it measured faster than the floor at first use.
  bool predicted_kernels = true;
  // With prefer_cublaslt: a shape without a tuned row also checks, at its first use, the design of the tuned row
  // of this GPU nearest to it (dispatch::nearest_designs: its own shape in the other element type first, then by
  // distance between (log M, log N, log K)), beside the predicted design or alone where the predictor proposes
  // none (also with predicted_kernels off: turn both off for the floor alone); it serves only the ways of calling
  // where it measured faster than the floor. On by default: on the 124 held-out decode shapes of the H200 (1-16
  // tokens, never tuned) it took the library from 1.006 to 1.036 of the best vendor call in CUDA graphs and from
  // 1.054 to 1.075 offline, none below 0.97 in graphs; on all 372 held-out shapes, before the table had decode
  // rows, +0.2% in graphs and +0.4% offline (bench/results/h200/README.md, twenty-third and twenty-fourth sets).
  // Costs each shape a check at its first use and each design a compile (then cached). Autotuning measures the
  // nearest rows' designs itself (autotune_neighbors).
  bool nearest_kernels = true;
  // Autotuning: a shape without a tuned row measures, at its first use, the built-in predictor's
  // `autotune_candidates` best designs, up to two of them again with the tile width that fills the GPU's
  // waves where theirs leaves a wave part-empty, and the designs of the `autotune_neighbors` tuned rows nearest to
  // the shape (what the table found fast on nearby shapes; dispatch::nearest_designs), all compiled, then checked
  // side by side with the floor's cuBLASLt choice, in CUDA graphs and eager calls, and keeps for each way of
  // calling the fastest that passed, else the floor.
  // The choices persist in the cache directory (autotune-choices.csv, per GPU and library build), so that a
  // shape costs its compiles (a second or two each, cached) once per machine; a later handle builds and checks
  // only the kernels kept. Needs prefer_cublaslt. Off: the predicted route (one design, checked).
  bool autotune = false;
  int autotune_candidates = 4;  // 1..16
  int autotune_neighbors = 2;   // 0..8
  // Where compiled kernels are cached: empty for the default ($RLGEMM_CACHE_DIR, else ~/.cache/rlgemm/cubins).
  std::string cache_dir;
  // A tuning database whose SASS-rescheduled cubins (`rlgemm sass-opt --db`) this handle loads in place of
  // the compiled ones, for the (shape, layout, design) each was verified and measured faster on. Empty: the
  // `database` above, when one is given; "none": never. A rescheduled cubin derived from another build of the
  // kernel (the generator or NVRTC changed since) is stale and not used; describe() says so.
  std::string optimized_cubins;
  // Launch the kernel of a cuBLASLt route directly, with the call's addresses written into the parameters
  // cuBLASLt gave it, where that was proven at the route's first use to be the same launch (the same kernel,
  // configuration and bits; dispatch/lt_direct.h): the GPU does the same work and the host skips cuBLASLt's
  // several microseconds per call. Back-to-back eager calls then take the GPU's time wherever it exceeds the
  // launch, so the floor's algorithm is one choice for both ways of calling: the one timed in CUDA graphs.
  // false: every such call goes through cublasLtMatmul, eager calls with the algorithm timed eagerly.
  bool direct_cublaslt = true;
};

// Calls served per path since the handle was created.
struct Stats {
  uint64_t tuned = 0;
  uint64_t nearest = 0;
  uint64_t policy = 0;
  uint64_t default_design = 0;
  uint64_t cublaslt = 0;
  uint64_t predicted = 0;  // a kernel the predictor proposed and the handle measured faster (also autotuned)
  // Of the calls above, those served by a SASS-rescheduled cubin (HandleOptions::optimized_cubins).
  uint64_t sass_optimized = 0;
  // Of the calls above, those captured into a CUDA graph while every capture slot of their route belonged to a
  // graph still alive: their workspace is allocated and freed inside the graph, at every replay (a slot is given
  // back when the graphs of the capture that took it are destroyed).
  uint64_t graph_memory_workspaces = 0;
  // What the shapes' first uses took, in seconds (summed over the threads that made them): choosing the cuBLASLt
  // floor's algorithm (its screens, finals and runoffs), building kernels (generated, compiled or read from the
  // cubin cache, loaded, their launches planned), and checking kernel routes against the floor (the paired
  // rounds). Later calls of a shape add nothing.
  double first_use_floor_s = 0;
  double first_use_build_s = 0;
  double first_use_check_s = 0;
  uint64_t total() const { return tuned + nearest + policy + default_design + cublaslt + predicted; }
};

class Handle {
 public:
  // The tuned table built into the library, on the current CUDA device.
  Handle();
  explicit Handle(const HandleOptions& options);
  // Shorthand: Handle(HandleOptions{.database = database}).
  static Handle from_database(const std::string& database);

  ~Handle();
  Handle(Handle&&) noexcept;
  Handle& operator=(Handle&&) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  // Chooses the route of (M, N, K, layout), compiles and loads its kernel and plans its launch, and (outside
  // a capture) allocates its pooled workspace for `stream`: later calls of the shape compile nothing, and
  // calls on that stream allocate nothing.
  void prepare(int64_t M, int64_t N, int64_t K, Layout layout, cudaStream_t stream = nullptr,
               DType dtype = DType::kF16);

  // C = A * B on `stream` (asynchronous: errors of the kernel itself surface at the next synchronization).
  void hgemm(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const half* A, const half* B, Layout layout,
             half* C);
  // The same with the caller's workspace (see "Workspaces" above): `workspace` may be null when
  // workspace_bytes(M, N, K, layout) is 0.
  void hgemm(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const half* A, const half* B, Layout layout,
             half* C, void* workspace, size_t workspace_bytes);

  // C = A * B with A, B and C of element type `dtype` (fp16: as hgemm; bf16: __nv_bfloat16 arrays), fp32
  // accumulation. The same rules, routes and workspaces as hgemm.
  void gemm(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const void* A, const void* B, Layout layout, void* C,
            DType dtype);
  void gemm(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const void* A, const void* B, Layout layout, void* C,
            DType dtype, void* workspace, size_t workspace_bytes);

  // C = A * B + bias: `bias` holds N elements of `dtype` (a device pointer, 16-byte aligned), added to every
  // row of C. A cuBLASLt route adds it in cuBLASLt's epilogue, in fp32 before C is rounded (one rounding). A
  // kernel route adds it with a second launch on the stream (C rounded, then C + bias rounded: as a separate
  // torch add), unless cuBLASLt with its fused bias measured faster than the kernel and that launch at the
  // route's first call with a bias (with prefer_cublaslt; describe() then says which serves). Otherwise
  // gemm's rules, routes and workspaces.
  void gemm_bias(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const void* A, const void* B, Layout layout,
                 void* C, DType dtype, const void* bias);
  void gemm_bias(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const void* A, const void* B, Layout layout,
                 void* C, DType dtype, const void* bias, void* workspace, size_t workspace_bytes);

  // Bytes of workspace a call of the shape needs (0 for most routes); chooses (and compiles) the route when
  // the shape is new -- which, as for hgemm, is refused while `stream` is being captured into a CUDA graph.
  size_t workspace_bytes(int64_t M, int64_t N, int64_t K, Layout layout, cudaStream_t stream = nullptr,
                         DType dtype = DType::kF16);

  Stats stats() const;

  // The route of a shape, e.g. "tuned sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma" or
  // "nearest sm80/... (from 4096,4096,4096)"; chooses (and compiles) it when the shape is new.
  std::string describe(int64_t M, int64_t N, int64_t K, Layout layout, DType dtype = DType::kF16);

  // The GPU the handle serves, as the CUDA runtime names it (the tuned table's `gpu` column).
  const std::string& device_name() const;
  // Rows of the tuned table (or database) that apply to this GPU.
  size_t tuned_shapes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace rlgemm
