// rlgemm::Handle: routes (shape -> kernel with its launch planned) built once under a lock; the warm path
// finds its route and workspace in a per-thread cache (else under a shared lock) and only points the planned
// launch at the call's operands. Nothing on the warm path allocates, synchronizes, builds strings or locks.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <unordered_map>

#include "bench/fill.h"
#include "bench/timing.h"
#include "compile/compiler.h"
#include "compile/sha256.h"
#include "core/cuda_util.h"
#include "core/gain_interval.h"
#include "core/seed.h"
#include "dispatch/add_bias.h"
#include "dispatch/autotune_choices.h"
#include "dispatch/cublaslt_gemm.h"
#include "dispatch/dispatcher.h"
#include "dispatch/lt_direct.h"
#include "dispatch/route_check.h"
#include "dispatch/tuned_table.h"
#include "predict/predictor.h"
#include "rlgemm/rlgemm.h"
#include "run/gemm_kernel.h"
#include "search/design_space.h"
#include "search/wave_fit.h"
#include "search/rl_policy.h"
#include "store/store.h"

namespace rlgemm {
namespace {

struct ShapeKey {
  int64_t m = 0, n = 0, k = 0;
  Layout layout = Layout::kTN;
  DType dtype = DType::kF16;
  friend bool operator==(const ShapeKey&, const ShapeKey&) = default;
};
struct ShapeKeyHash {
  size_t operator()(const ShapeKey& key) const noexcept {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t v : {uint64_t(key.m), uint64_t(key.n), uint64_t(key.k), uint64_t(key.layout), uint64_t(key.dtype)})
      h = (h ^ v) * 1099511628211ull;
    return size_t(h);
  }
};

// A shape's way to the GPU: a loaded kernel with its launch planned once (grid, cluster, parameter block
// with the TMA descriptors encoded), or a cuBLASLt plan.
struct Route {
  Problem problem;
  dispatch::Choice choice;
  std::string description;
  const GemmKernel* kernel = nullptr;  // owned by Impl::kernels
  std::optional<GemmKernel::Prepared> prepared;
  std::unique_ptr<dispatch::CublasLtGemm> lt;
  // `lt`'s one kernel launched directly, without cuBLASLt's host path (HandleOptions::direct_cublaslt), where
  // that was proven to be the same launch; calls without a bias take it.
  std::unique_ptr<dispatch::LtDirect> lt_direct;
  // Calls with a bias. A cuBLASLt route: `lt` with cuBLASLt's bias epilogue (lt_bias_plan), planned at the
  // route's first call with a bias. A kernel route: the kernel then add_bias, or cuBLASLt with its bias
  // epilogue and no workspace (lt_bias_plan), whichever measured faster with the bias at the route's first
  // call with one outside a capture (bias_way). Written under Impl::build_mutex; lt_bias and bias_way are
  // published once what they name (and bias_note) is whole.
  std::unique_ptr<dispatch::CublasLtGemm> lt_bias_plan;
  std::atomic<const dispatch::CublasLtGemm*> lt_bias{nullptr};
  // A cuBLASLt route's lt_bias_plan launched directly (HandleOptions::direct_cublaslt), where that was proven
  // the same launch when the plan was made outside a capture; whole before lt_bias is published.
  std::unique_ptr<dispatch::LtDirect> lt_bias_direct;
  std::atomic<int> bias_way{kBiasUndecided};
  std::string bias_note;  // what calls with a bias take (a kernel route: what the choice measured), for describe()
  static constexpr int kBiasUndecided = 0, kBiasAdded = 1, kBiasInCublasLt = 2;
  size_t workspace_bytes = 0;
  size_t zero_bytes = 0;        // of the workspace, the first bytes a launch needs zeroed (it leaves them so)
  bool sass_optimized = false;  // `kernel` is a SASS-rescheduled cubin
  // Where the GPU-time winner differs from the eager one (route_check): the route that serves calls made while
  // their stream is being captured into a CUDA graph. This route then serves eager calls only. Set before the
  // route is published, never changed after.
  std::unique_ptr<Route> captured;
  bool captured_only = false;  // this route is another's `captured`: it serves calls made under capture only
  // A cuBLASLt route for eager calls only (captured calls take another algorithm) whose algorithm was chosen in
  // eager calls where launches are direct (a long floor kernel: dispatch::eager_floor_choice): its plan with a
  // bias is timed in eager calls too.
  bool eager_timed = false;
  // A cuBLASLt route whose candidate was timed now and kept in a final against the heuristic's first: its time
  // over the first's there (bench::LtChoice::kept_over_first) in each way it was timed, which the route check of
  // that way holds it to (dispatch::against_floor_as_chosen); 0 otherwise.
  double eager_kept_over_first = 0, graph_kept_over_first = 0;
  double kept_over_first(bench::Mode mode) const {
    return mode == bench::Mode::kGraph ? graph_kept_over_first : eager_kept_over_first;
  }
  // Workspaces for calls captured into CUDA graphs, allocated and zeroed with the route (outside any capture):
  // a graph replays with its captured workspace address, so a slot belongs to the first (capture, stream) that
  // takes it for as long as a graph of that capture lives -- the calls one capturing stream makes are ordered,
  // the graph's replays are ordered with themselves, and no other graph or direct call touches the slot. A
  // replay then pays the kernel alone, not an allocation, a zeroing and a free per call (0.8 us a call seen on
  // an H200; a 1x256x1536 split-K kernel ran 5.8 us a call where its slot ran 3.7). The capture's graph holds
  // a CUDA user object whose destructor gives the slot back once that graph and every executable made from it
  // are destroyed and their work is done (CUDA runs it on a thread of its own, soon after); the workspace is
  // zero again by then (the kernels leave it so). Captures while every slot is owned take graph memory.
  struct SlotOwner {
    std::atomic<bool> taken{false};
    unsigned long long capture_id = 0, stream_id = 0;  // written under Impl::slot_mutex while not taken
  };
  struct CaptureSlot {
    void* workspace = nullptr;
    std::shared_ptr<SlotOwner> owner = std::make_shared<SlotOwner>();  // shared with the owning graph's user object
  };
  std::vector<CaptureSlot> capture_slots;
};

// The (design, layout, shape) a rescheduled cubin was verified and measured on.
std::string optimized_key(const std::string& design, const Problem& problem) {
  return design + "|" + std::string(to_string(problem.layout)) + "|" + problem.shape.to_string();
}

// A stream's workspace for one route. Keyed by the stream's unique id, not its handle value: the handle
// cudaStreamPerThread (and the default stream under per-thread compilation) names another stream in each
// thread, and those streams must not share a workspace.
struct WorkspaceKey {
  unsigned long long stream_id;
  const Route* route;
  friend bool operator==(const WorkspaceKey&, const WorkspaceKey&) = default;
};
struct WorkspaceKeyHash {
  size_t operator()(const WorkspaceKey& key) const noexcept {
    return std::hash<unsigned long long>()(key.stream_id) * 31 + std::hash<const void*>()(key.route);
  }
};

// Handles are numbered, never reusing a number, so that the per-thread caches below cannot take a new
// handle at a freed one's address for the old one.
std::atomic<uint64_t> next_handle_serial{1};

// Per thread, the routes and workspaces it looked up last: a warm call takes no lock and touches no shared
// cache line. Entries are checked against the full key; a miss falls back to the handle's maps.
struct ThreadCache {
  struct RouteEntry {
    uint64_t serial = 0;
    ShapeKey key;
    Route* route = nullptr;
  };
  struct WorkspaceEntry {
    uint64_t serial = 0;
    WorkspaceKey key{0, nullptr};
    void* workspace = nullptr;
  };
  static constexpr size_t kSlots = 64;
  std::array<RouteEntry, kSlots> routes;
  std::array<WorkspaceEntry, kSlots> workspaces;
};
thread_local ThreadCache thread_cache;

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

void check_operand(const void* p, const char* name) {
  if (!p) fail(std::string("gemm: ") + name + " is a null pointer (A, B, C and a bias must be device pointers)");
  if (!aligned16(p))
    fail(std::string("gemm: ") + name + " is not 16-byte aligned: rlgemm kernels move 16-byte vectors and " +
         "hand the operands to the Tensor Memory Accelerator, which needs 16-byte aligned addresses (allocate " +
         "with cudaMalloc, or offset by multiples of 8 elements)");
}

std::string shape_text(const Problem& problem) {
  return problem.shape.to_string() + " " + std::string(to_string(problem.layout)) +
         (problem.dtype == DType::kF16 ? "" : " " + std::string(to_string(problem.dtype)));
}

// Whether work queued on `stream` now goes into a CUDA graph being captured. A stream that cannot be asked
// (the legacy default stream while another stream captures in global mode) counts as capturing: nothing may
// be allocated or loaded then either.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t error = cudaStreamIsCapturing(stream, &status);
  if (error != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace

struct Handle::Impl {
  HandleOptions options;
  DeviceInfo device;
  std::unique_ptr<search::Policy> policy;
  const predict::Predictor* predictor = nullptr;  // HandleOptions::predicted_kernels: the built-in one
  predict::GpuTraits gpu_traits;
  std::string predicted_note;  // the last predicted route's gain, under build_mutex
  // With it, checked beside it: the predicted design again at the tile width that fills the GPU's waves, and
  // (HandleOptions::nearest_kernels) the nearest tuned row's design; each with what its description adds.
  std::vector<std::pair<Design, std::string>> predicted_also;
  std::optional<search::DesignSpaces> spaces;  // the policy's, built at its first proposal
  std::unique_ptr<dispatch::Dispatcher> dispatcher;
  CompileOptions compile_options;
  std::map<std::string, OptimizedCubin> optimized;  // by optimized_key

  std::mutex build_mutex;  // one route is chosen, compiled and loaded at a time
  std::shared_mutex routes_mutex;
  std::unordered_map<ShapeKey, std::unique_ptr<Route>, ShapeKeyHash> routes;
  std::map<std::string, std::unique_ptr<GemmKernel>> kernels;  // under build_mutex
  std::unique_ptr<dispatch::CublasLtContext> lt_context;      // under build_mutex
  std::unique_ptr<dispatch::CublasLtChoices> lt_choices;      // lt_auto's choices made on this machine
  std::unique_ptr<dispatch::CublasLtChoices> lt_graph_choices;  // ... made in GPU time, for captured calls
  std::unique_ptr<dispatch::CublasLtChoices> lt_bias_choices;   // cuBLASLt routes' plans with a bias (bias_plan)
  std::unique_ptr<dispatch::CublasLtChoices> lt_graph_bias_choices;  // ... of routes that serve captured calls only
  std::unique_ptr<dispatch::AutotuneChoices> autotune_choices;  // HandleOptions::autotune: what it kept here

  std::mutex slot_mutex;  // the owners of the routes' capture slots
  std::shared_mutex workspace_mutex;
  std::unordered_map<WorkspaceKey, void*, WorkspaceKeyHash> workspaces;

  std::array<std::atomic<uint64_t>, kPathCount> calls{};
  std::atomic<uint64_t> sass_calls{0};
  std::atomic<uint64_t> graph_memory_calls{0};  // captured calls whose workspace came from graph memory
  // Stats::first_use_*_s: nanoseconds of the shapes' first uses, by what they did.
  enum FirstUse { kFloorChoice, kBuild, kCheck, kFirstUseParts };
  std::array<std::atomic<uint64_t>, kFirstUseParts> first_use_ns{};
  // Adds the time from its making to its end to one part of first_use_ns.
  class FirstUseTimer {
   public:
    FirstUseTimer(Impl& impl, FirstUse part) : into_(impl.first_use_ns[part]) {}
    ~FirstUseTimer() {
      const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_);
      into_.fetch_add(uint64_t(ns.count()), std::memory_order_relaxed);
    }
    FirstUseTimer(const FirstUseTimer&) = delete;
    FirstUseTimer& operator=(const FirstUseTimer&) = delete;

   private:
    std::atomic<uint64_t>& into_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  };
  const uint64_t serial = next_handle_serial.fetch_add(1);

  explicit Impl(const HandleOptions& opts) : options(opts) {
    if (options.autotune && !options.prefer_cublaslt)
      fail("HandleOptions::autotune measures kernels against cuBLASLt and keeps cuBLASLt where none beats it: it "
           "needs prefer_cublaslt");
    if (options.autotune && (options.autotune_candidates < 1 || options.autotune_candidates > 16))
      fail("HandleOptions::autotune_candidates is " + std::to_string(options.autotune_candidates) +
           ": it must be 1 to 16 (each candidate costs a compile at a shape's first use)");
    if (options.autotune && (options.autotune_neighbors < 0 || options.autotune_neighbors > 8))
      fail("HandleOptions::autotune_neighbors is " + std::to_string(options.autotune_neighbors) +
           ": it must be 0 to 8 (each costs a compile at a shape's first use)");
    std::vector<dispatch::TunedRow> rows;
    if (!options.database.empty())
      rows = dispatch::load_tuning_database(options.database, options.mode);
    else if (!options.tuned_table.empty())
      rows = dispatch::load_tuned_table(options.tuned_table);
    else
      rows = dispatch::embedded_tuned_rows();
    if (!options.policy.empty()) policy = std::make_unique<search::Policy>(search::Policy::load(options.policy));
    if (!options.cache_dir.empty()) compile_options.cache_dir = std::filesystem::path(options.cache_dir);

    std::string why;
    if (!cuda_device_available(&why)) throw Error(ErrorKind::kNoDevice, "rlgemm needs a CUDA GPU: " + why);
    int ordinal = 0;
    RLGEMM_CUDA_CHECK(cudaGetDevice(&ordinal));
    device = open_device(ordinal);
    if (device.cc_major < 8)
      throw Error(ErrorKind::kNoDevice, "rlgemm's kernels need compute capability 8.0 or later; " + device.name +
                                            " is " + std::to_string(device.cc_major) + "." +
                                            std::to_string(device.cc_minor));
    const dispatch::Target target{device.name, device.cc_major, device.cc_minor, device.smem_per_block_optin};
    dispatch::Proposer proposer, predicted;
    if (policy)
      proposer = [this](const Problem& problem) -> std::optional<Design> { return propose(problem); };
    if (options.predicted_kernels || options.autotune) {
      gpu_traits = predict::traits_of(identity_of(device));
      predictor = predict::builtin_predictor(gpu_traits);
    }
    // Autotuning measures the predictor's few best designs and the nearest rows' designs itself: the dispatcher
    // then gives untuned shapes the floor, which autotune() starts from.
    if ((predictor || options.nearest_kernels) && !options.autotune)
      predicted = [this](const Problem& problem) -> std::optional<Design> { return predict_design(problem); };
    dispatcher = std::make_unique<dispatch::Dispatcher>(rows, target, options.prefer_cublaslt, proposer, predicted);
    load_optimized_cubins();
    const auto& dir = compile_options.cache_dir;
    // The files' "-6": choices timed with each candidate's own workspace size, the size a route's launches pass
    // (bench::LtWorkspace::kOwn), on three operand sets allocated apart (bench::OperandSets), a finalist with a
    // slow mode scored by it (bench::LtScoring::kSlowMode), the heuristic's first unseated only by a finalist
    // faster on the caller's set and nowhere far behind (bench::final_winner). Older files hold choices timed
    // with 32 MiB of workspace (none), on one operand set ("-2"), scored by the mean ("-3"), won by the mean over
    // the sets ("-4") or by a finalist faster on every set ("-5"): those records are not taken. The bias files'
    // "-7": the same rule, candidates listed from the heuristic's first for the epilogue (bias_candidates; "-6"
    // and "-5" under the earlier rules), where "-4" listed the route's own algorithm first.
    const auto lt_choices_in = [&](const std::string& name) {
      return std::make_unique<dispatch::CublasLtChoices>(dir ? *dir / name : std::filesystem::path(), device.name,
                                                         cublasLtGetVersion());
    };
    lt_graph_choices = lt_choices_in("cublaslt-graph-choices-6.csv");
    lt_choices = lt_choices_in("cublaslt-choices-6.csv");
    lt_bias_choices = lt_choices_in("cublaslt-bias-choices-7.csv");
    lt_graph_bias_choices = lt_choices_in("cublaslt-graph-bias-choices-7.csv");
    if (options.autotune)
      autotune_choices = std::make_unique<dispatch::AutotuneChoices>(
          dir ? *dir / "autotune-choices.csv" : std::filesystem::path(), device.name,
          std::string(version()) + "-" + build_commit());
  }

  // The cuBLASLt algorithm of a route with no recorded candidate: lt_auto's choice, made once per machine
  // (timed now, on `stream` and on the `caller`'s operands where given, unless that stream is being captured:
  // then the heuristic's first, not kept), in `mode`: offline for eager calls, graph for calls captured into
  // CUDA graphs. The two differ: on small shapes an eager call's time is the host's, so the offline choice says
  // little of the GPU's time (on an H200, lt_auto's offline choice for 8192x64x128 ran 3.16 us in a graph, the
  // heuristic's first 2.74).
  dispatch::CublasLtChoices& lt_choices_of(bench::Mode mode) {
    return mode == bench::Mode::kGraph ? *lt_graph_choices : *lt_choices;
  }
  static std::string in_mode(bench::Mode mode) { return mode == bench::Mode::kGraph ? " in CUDA graphs" : ""; }
  // The operands of the call that first uses a shape, where a choice can be timed on them
  // (dispatch::caller_operands); none for prepare() and for a first use through describe().
  using Caller = std::optional<bench::LtOperands>;
  static std::string on_whose(const Caller& caller) { return caller ? ", on the caller's operands too" : ""; }
  // How a choice timed now reads in describe(); `runoff_with`: the screen's choice it won a runoff against;
  // `note`: the final's closest challenger of the heuristic's first, set by set (bench::final_winner).
  static std::string timed_text(bench::Mode mode, int index, int count, const Caller& caller,
                                std::optional<int> runoff_with = std::nullopt, const std::string& note = "") {
    return " (timed on first use" + in_mode(mode) + on_whose(caller) + ": candidate " + std::to_string(index) + " of " +
           std::to_string(count) +
           (runoff_with ? ", the winner of a runoff with candidate " + std::to_string(*runoff_with) : "") +
           (note.empty() ? "" : "; " + note) + ")";
  }

  // `timed`: where the choice is timed now, what the timing found (its count stays 0 otherwise).
  std::optional<int> cublaslt_candidate(const Problem& problem, cudaStream_t stream, std::string& how,
                                        bench::Mode mode, const Caller& caller, bench::LtChoice* timed = nullptr) {
    if (!lt_context) lt_context = std::make_unique<dispatch::CublasLtContext>();
    dispatch::CublasLtChoices& choices = lt_choices_of(mode);
    const std::string in = in_mode(mode);
    if (const auto known = choices.find(problem, dispatch::candidate_count(*lt_context, problem))) {
      how = " (chosen on this machine before" + in + ")";
      return known;
    }
    if (capturing(stream)) {
      how = " (the heuristic's first: first seen where no timing can run)";
      return std::nullopt;
    }
    const bench::LtChoice choice = dispatch::time_candidates(*lt_context, problem, stream, mode, caller);
    choices.record(problem, choice.index, choice.count);
    how = timed_text(mode, choice.index, choice.count, caller, std::nullopt, choice.note);
    if (timed) *timed = choice;
    return choice.index;
  }

  void load_optimized_cubins() {
    const std::string& source = options.optimized_cubins.empty() ? options.database : options.optimized_cubins;
    if (source.empty() || source == "none") return;
    if (!std::filesystem::is_regular_file(source))
      throw Error(ErrorKind::kInvalidInput, "the database of SASS-rescheduled cubins " + source + " does not exist");
    StoreReadCopy store(source);  // a record that reading must leave as it is
    // Only cubins whose gain held in CUDA graphs, where a captured call runs them (recorded since schedules are
    // re-timed there): an older record's back-to-back gain can be a launch effect a graph never sees.
    for (OptimizedCubin& record : store->optimized_cubins(device.name))
      if (record.graph_gain_low && *record.graph_gain_low > 0)
        optimized.emplace(optimized_key(record.design, record.problem), std::move(record));
  }

  // The rescheduled cubin of this route's (design, problem), loaded once, when one is recorded and still
  // derives from the cubin `compiled` builds today.
  void use_optimized(Route& r, const std::string& kernel_key, const GemmKernel& compiled) {
    const Design& d = r.choice.design;
    const auto it = optimized.find(optimized_key(to_string(d), r.problem));
    if (it == optimized.end()) return;
    const OptimizedCubin& record = it->second;
    if (record.source_key != compiled.compiled().cache_key) {
      r.description += " (its SASS-rescheduled cubin is stale, derived from another build of the kernel: not used)";
      return;
    }
    auto& kernel = kernels[kernel_key + "|sass|" + r.problem.shape.to_string()];
    // The same source key means the same generated kernel, so its name and resources are the compiled one's.
    if (!kernel) {
      const std::string key = "sass:" + Sha256().update(record.cubin.data(), record.cubin.size()).hex_digest();
      kernel = std::make_unique<GemmKernel>(compiled.with_cubin(record.cubin, key));
    }
    r.kernel = kernel.get();
    r.sass_optimized = true;
    char gain[32];
    std::snprintf(gain, sizeof gain, " sass %+.1f%%", 100.0 * record.gain);
    r.description += gain;
  }

  ~Impl() {
    if (device_hung()) return;  // a free would wait behind the hung kernel
    for (auto& [key, ptr] : workspaces) cudaFree(ptr);
    for (auto& [key, r] : routes)
      for (Route* each : {r.get(), r->captured.get()})
        if (each)
          for (const Route::CaptureSlot& slot : each->capture_slots) cudaFree(slot.workspace);
  }

  // Capture slots per route (Route::capture_slots): graphs of one shape that can be replayed at once, each on
  // a stream of its own.
  static constexpr int kCaptureSlots = 2;
  void allocate_capture_slots(Route& r, cudaStream_t stream) {
    if (r.workspace_bytes == 0) return;
    for (int i = 0; i < kCaptureSlots; ++i) {
      Route::CaptureSlot slot;
      RLGEMM_CUDA_CHECK(cudaMalloc(&slot.workspace, r.workspace_bytes));
      r.capture_slots.push_back(slot);
      RLGEMM_CUDA_CHECK(cudaMemsetAsync(slot.workspace, 0, r.workspace_bytes, stream));
    }
    // A graph may be replayed on any stream: the zeroes are in place before the route is published.
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  // The slot of the capture `stream` is in, taking a free one at the capture's first call of the route; null
  // when every slot belongs to another capture.
  void* capture_slot(Route& r, cudaStream_t stream) {
    if (r.capture_slots.empty()) return nullptr;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long capture_id = 0;
    cudaGraph_t graph = nullptr;
    if (cudaStreamGetCaptureInfo(stream, &status, &capture_id, &graph) != cudaSuccess ||
        status != cudaStreamCaptureStatusActive) {
      (void)cudaGetLastError();
      return nullptr;
    }
    // The stream's handle tells the capturing streams of one capture apart: nothing but cudaStreamGetCaptureInfo
    // is asked of a capturing stream here (with cudaStreamGetId asked too, a capture on an H200 ended invalidated).
    const auto stream_id = static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(stream));
    std::lock_guard lock(slot_mutex);
    for (Route::CaptureSlot& slot : r.capture_slots) {
      const Route::SlotOwner& owner = *slot.owner;
      if (owner.taken.load(std::memory_order_acquire) && owner.capture_id == capture_id && owner.stream_id == stream_id)
        return slot.workspace;
    }
    for (Route::CaptureSlot& slot : r.capture_slots)
      if (!slot.owner->taken.load(std::memory_order_acquire)) {
        slot.owner->capture_id = capture_id;
        slot.owner->stream_id = stream_id;
        slot.owner->taken.store(true, std::memory_order_release);
        give_back_with(graph, slot.owner);
        return slot.workspace;
      }
    return nullptr;
  }
  // The destructor of a slot's user object: the last graph of its owning capture is gone. No CUDA call here.
  static void CUDART_CB give_back_slot(void* ref) {
    auto* owner = static_cast<std::shared_ptr<Route::SlotOwner>*>(ref);
    (*owner)->taken.store(false, std::memory_order_release);
    delete owner;
  }
  // The capture's `graph` takes a user object that gives `owner`'s slot back when the graph and its executables
  // are destroyed. Where CUDA refuses one, the slot stays with its capture for good (never given back early).
  static void give_back_with(cudaGraph_t graph, const std::shared_ptr<Route::SlotOwner>& owner) {
    if (!graph) return;
    auto* ref = new std::shared_ptr<Route::SlotOwner>(owner);
    cudaUserObject_t object = nullptr;
    if (cudaUserObjectCreate(&object, ref, give_back_slot, 1, cudaUserObjectNoDestructorSync) != cudaSuccess) {
      (void)cudaGetLastError();
      delete ref;
      return;
    }
    // The one reference moves to the graph; were that refused, it stays here, never released.
    if (cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove) != cudaSuccess) (void)cudaGetLastError();
  }

  // Called by the dispatcher, under build_mutex: the predicted route's design (the predictor's, predictor_design)
  // and what is checked beside it (predicted_also); with HandleOptions::nearest_kernels, the nearest tuned row's
  // design too, beside the predictor's or alone where the predictor proposes none. Its description's note goes
  // into predicted_note.
  std::optional<Design> predict_design(const Problem& problem) {
    predicted_note.clear();
    predicted_also.clear();
    std::optional<Design> design = predictor ? predictor_design(problem) : std::nullopt;
    if (!options.nearest_kernels) return design;
    // The nearest tuned row's design: checked beside the prediction, or alone where there is none.
    std::vector<Design> taken;
    if (design) taken.push_back(*design);
    for (const auto& [d, label] : predicted_also) taken.push_back(d);
    const std::vector<Design> nearest =
        dispatch::runnable_nearest_designs(dispatcher->rows(), problem, dispatcher->target(), 1, taken);
    if (nearest.empty()) return design;
    const std::string label = " (the nearest tuned row's design)";
    if (design) {
      predicted_also.emplace_back(nearest.front(), label);
      return design;
    }
    predicted_note = label;
    return nearest.front();
  }

  // What the shape would be served without its tuned row, for the row to be checked beside (routes are checked,
  // HandleOptions::check_routes, and the predicted route is on): the predicted route's design (predict_design: the
  // predictor's, with what is checked beside it, or the nearest tuned row's), less the row's own design `tuned`
  // (dispatch::beside_tuned_row). A tune measured its designs against cuBLASLt when it ran; the predictor and the
  // fitted widths may since offer better. On an H200 the held-out shapes' tune databases, made before v19's
  // predictor, shadowed 17 shapes where the untuned handle served a predicted kernel at up to 1.10x the best vendor
  // call: the row's kernel lost its check and the floor served them (bench/results/h200/llm-tuned-fp16-v2). Under
  // build_mutex.
  std::vector<std::pair<Design, std::string>> untuned_route(const Problem& problem, const std::optional<Design>& tuned) {
    if (!options.check_routes || !options.prefer_cublaslt || options.autotune || !(predictor || options.nearest_kernels))
      return {};
    const std::optional<Design> design = predict_design(problem);
    if (!design) return {};
    Design generic = *design;
    generic.static_shape = false;
    std::vector<std::pair<Design, std::string>> untuned = {{generic, predicted_note + " (the untuned route's design)"}};
    untuned.insert(untuned.end(), predicted_also.begin(), predicted_also.end());
    return dispatch::beside_tuned_row(tuned, untuned, problem, dispatcher->target());
  }

  // The predictor's best guess, when its gain over cuBLASLt clears the route rule (predict::take_kernel_route);
  // what it predicted goes into the route's description.
  //
  // The predictor was trained before the fitted tile widths existed, so its guess may leave a wave of tiles
  // part-empty. Then the same design at the width that fills the waves (search::fitted_alternatives) is checked
  // beside it, and the faster serves. Where the guess alone does not clear the rule, the fitted design is taken
  // if its gain does, estimated as the guess's times the ratio of their costs (predict::fitted_guess): in a tune's
  // first evaluations on the H100 such a design measured 0.94-1.03 of that ratio, 9 of 11 faster than the guess
  // (bench/results/h100/wave-fit-ab-pairs.csv).
  std::optional<Design> predictor_design(const Problem& problem) {
    // The built-in predictors learned fp16 kernels against fp16 cuBLASLt. A bf16 problem gets the fp16 twin's
    // guess in bf16 (predict::route_guess). The guess is only a proposal: its kernel is timed against the bf16
    // floor at first use and kept only where it measured faster (verified).
    const auto route = predict::route_guess(
        *predictor, gpu_traits, problem, device.sm_count, smem_limit_or_hopper(device.smem_per_block_optin),
        predict::kCheckedRouteZ,
        [&](const Design& d) { return !dispatch::why_not_runnable(d, problem, dispatcher->target()); });
    if (!route) return std::nullopt;
    const predict::Candidate& taken = route->take_guess ? route->guess : *route->fitted;
    char note[96];
    std::snprintf(note, sizeof note, " (predicted %.2fx cuBLASLt, ln sd %.2f", taken.gain.speedup, taken.gain.log_sd);
    predicted_note = note;
    if (!route->take_guess) predicted_note += ", as " + to_string(route->guess.design) + " fitted to the waves";
    predicted_note += ")";
    if (const auto also = route->beside(problem.dtype))
      predicted_also.emplace_back(*also, " (the prediction's design fitted to the waves)");
    return route->served(problem.dtype);
  }

  // Called by the dispatcher, under build_mutex.
  std::optional<Design> propose(const Problem& problem) {
    if (!spaces)
      spaces.emplace(search::spec_from_signature(policy->space_signature()),
                     smem_limit_or_hopper(device.smem_per_block_optin));
    return search::propose(*policy, spaces->of(problem.layout), problem, device.sm_count);
  }

  void check_device() const {
    int current = 0;
    RLGEMM_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device.ordinal)
      fail("this rlgemm handle serves CUDA device " + std::to_string(device.ordinal) + " (" + device.name +
           "), but device " + std::to_string(current) + " is current: create one handle per device");
  }

  // The route of a problem: from this thread's cache, else the handle's map, else chosen, compiled, loaded
  // and planned now -- which cannot happen while `stream` is being captured into a CUDA graph (loading a
  // module there would break the capture), so a shape first seen there is refused with what to do instead.
  // `operands`: the call's, for a choice timed at the shape's first use (none from prepare()).
  Route& route(const Problem& problem, cudaStream_t stream, bool capture_check = true,
               const bench::LtOperands* operands = nullptr) {
    const ShapeKey key{problem.shape.m, problem.shape.n, problem.shape.k, problem.layout, problem.dtype};
    ThreadCache::RouteEntry& cached = thread_cache.routes[ShapeKeyHash()(key) % ThreadCache::kSlots];
    if (cached.serial == serial && cached.key == key) return *cached.route;
    Route* found = nullptr;
    {
      std::shared_lock lock(routes_mutex);
      const auto it = routes.find(key);
      if (it != routes.end()) found = it->second.get();
    }
    if (!found) found = &build_route(problem, key, stream, capture_check, operands);
    cached = ThreadCache::RouteEntry{serial, key, found};
    return *found;
  }

  // A cuBLASLt route: the table's candidate, else lt_auto's choice made once per machine.
  void plan_cublaslt(Route& r, cudaStream_t stream, const Caller& caller) {
    std::string how;
    const std::optional<int> candidate = r.choice.cublaslt_candidate
                                             ? r.choice.cublaslt_candidate
                                             : cublaslt_candidate(r.problem, stream, how, eager_choice_mode(), caller);
    plan_cublaslt(r, candidate, how, stream);
  }
  void plan_cublaslt(Route& r, std::optional<int> candidate, const std::string& how, cudaStream_t stream) {
    if (!lt_context) lt_context = std::make_unique<dispatch::CublasLtContext>();
    r.lt = std::make_unique<dispatch::CublasLtGemm>(*lt_context, r.problem, candidate);
    r.description += how;
    if (!r.lt->note().empty()) r.description += " (" + r.lt->note() + ")";
    r.workspace_bytes = r.lt->workspace_bytes();
    plan_direct(r, stream);
  }
  // `plan`'s kernel launched directly where that is proven the same launch (dispatch/lt_direct.h), or null. Not
  // while `stream` is being captured (recording needs a capture of its own), and never at the cost of the route:
  // a plan that cannot be launched directly is called through cublasLtMatmul. `said`: how its calls run, for
  // describe().
  std::unique_ptr<dispatch::LtDirect> direct_launch(const dispatch::CublasLtGemm& plan, const Problem& problem,
                                                    cudaStream_t stream, std::string& said) {
    std::string why = "first planned during a capture";
    std::unique_ptr<dispatch::LtDirect> direct;
    if (!capturing(stream)) {
      try {
        direct = dispatch::LtDirect::make(plan, problem, why);
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::kNoDevice || e.kind() == ErrorKind::kHang) throw;
        why = e.what();
      }
    }
    said = direct ? "its kernel launched directly" : "through cublasLtMatmul: " + why;
    return direct;
  }
  void plan_direct(Route& r, cudaStream_t stream) {
    if (!options.direct_cublaslt) return;
    std::string said;
    r.lt_direct = direct_launch(*r.lt, r.problem, stream, said);
    r.description += " (" + said + ")";
  }

  // A kernel route: the design compiled (or found in the cubin cache), loaded once per handle, its launch planned.
  void plan_kernel(Route& r) {
    const FirstUseTimer timer(*this, kBuild);
    const Design& d = r.choice.design;
    std::string kernel_key = to_string(d);
    kernel_key += '|';
    kernel_key += to_string(r.problem.layout);  // the design's text names its element type
    if (d.static_shape) kernel_key += '|' + r.problem.shape.to_string();  // static kernels bake the shape in
    auto& kernel = kernels[kernel_key];
    if (!kernel) kernel = std::make_unique<GemmKernel>(d, r.problem, device, compile_options);
    r.kernel = kernel.get();
    use_optimized(r, kernel_key, *kernel);
    r.prepared.emplace(r.kernel->prepare(r.problem));
    r.workspace_bytes = r.prepared->plan.workspace_bytes;
    const LaunchPlan& plan = r.prepared->plan;
    r.zero_bytes = plan.workspace_zero_bytes > 0 ? plan.workspace_zero_bytes
                   : plan.workspace_must_be_zero ? plan.workspace_bytes
                                                 : 0;
  }

  // Every kernel route must earn its place against the floor on this GPU, in each way it is called. At the
  // shape's first use, the kernel candidates and the floor's cuBLASLt choice are timed side by side on scratch
  // operands of the problem's size, in interleaved paired rounds, twice: in graph mode (calls captured in a CUDA
  // graph, the GPU's time alone: what a captured decode step pays) and offline (back-to-back eager calls, host
  // launch cost included); dispatch/route_check.h decides which serves each way. So a kernel that wins only by
  // its lighter launch serves eager calls and never a CUDA graph (on the H200, 29 of 29 small-shape kernels that
  // won eager calls were 1.07-1.46x slower than cuBLAS in graphs), and neither a prediction nor a table row puts a
  // slower kernel on a shape. It costs tens of milliseconds at first use; a stream being captured cannot time.
  static constexpr int kCheckRounds = 15;
  // Autotuning measures the predictor's guesses and, beside them, up to this many at their fitted width.
  static constexpr int kAutotuneFittedWidths = 2;

  // The gain over the floor of each kernel route, in `mode`, from paired rounds: on scratch operands of the
  // problem's size and, where the `caller`'s operands are given, on those too, the weaker set's interval kept
  // (dispatch::weakest_of_sets): a kernel must win where the caller's operands lie, not only on the scratch. (On
  // an H200 the two sets' gains differed by 3% or more on 3 of 16 held-out shapes: 1x7168x5120 1.04 and 1.09,
  // 128x3072x3072 1.00 and 0.97; bench/results/h200/check-on-callers.) `by_set`, where given, gets each route's
  // gain on each set, for describe().
  //
  // Where the floor's candidate was kept in a final against the heuristic's first (Route::kept_over_first, in this
  // way of calling) and `first_route` (that candidate's route, first_candidate_route) is given, the first runs in the
  // rounds too, and a kernel must also win against the floor as that final found it wherever the floor ran slower
  // against the first here (dispatch::against_floor_as_chosen); `floor_note`, where given, then says so.
  std::vector<GainInterval> gains_over_floor(const std::vector<Route*>& kernel_routes, Route& floor, bench::Mode mode,
                                             cudaStream_t stream, const Caller& caller, Route* first_route,
                                             std::vector<std::string>* by_set = nullptr,
                                             std::string* floor_note = nullptr) {
    const FirstUseTimer timer(*this, kCheck);
    const Problem& p = floor.problem;
    const bench::ScratchOperands x(p, stream);
    std::vector<bench::LtOperands> sets = {{x.a.ptr, x.b.ptr, x.c.ptr}};
    if (caller) sets.push_back(*caller);
    const double kept_over_first = floor.kept_over_first(mode);
    Route* const first = kept_over_first > 0 ? first_route : nullptr;
    // A workspace each: a kernel's must start zeroed (its tickets), and cuBLASLt leaves its own as it likes.
    // Each route is called as the handle calls it: with a workspace of its own, zeroed once (the kernels leave
    // it so), as eager calls take their stream's pooled one and captured calls their capture slot.
    std::vector<Route*> all = kernel_routes;
    const size_t floor_at = all.size();
    all.push_back(&floor);
    if (first) all.push_back(first);
    std::vector<std::unique_ptr<DeviceScratch<unsigned char>>> workspaces;
    std::vector<size_t> workspace_bytes;
    for (Route* r : all) {
      const size_t bytes = workspace_bytes.emplace_back(std::max<size_t>(r->workspace_bytes, 16));
      auto& ws = workspaces.emplace_back(std::make_unique<DeviceScratch<unsigned char>>(bytes));
      RLGEMM_CUDA_CHECK(cudaMemsetAsync(ws->ptr, 0, bytes, stream));
    }
    std::vector<std::vector<GainInterval>> per_route(kernel_routes.size());
    std::string floor_by_set;  // the floor's time over the first's, set by set, where it ran slower than its final
    for (size_t s = 0; s < sets.size(); ++s) {
      std::vector<bench::Subject> subjects;
      for (size_t i = 0; i < all.size(); ++i) {
        subjects.push_back({[&, r = all[i], w = workspaces[i]->ptr, bytes = workspace_bytes[i], o = sets[s]](
                                cudaStream_t st) { launch(st, *r, o.a, o.b, o.c, w, bytes); },
                            {},
                            i < floor_at    ? "kernel " + to_string(all[i]->choice.design)
                            : i == floor_at ? "cuBLASLt"
                                            : "cuBLASLt's first candidate"});
      }
      bench::TimingOptions options;
      options.seed = problem_seed(uint64_t(mode), p) + s;
      options.batches = kCheckRounds;
      const auto times = bench::time_side_by_side(mode, subjects, nullptr, stream, options);
      const std::vector<double>& floor_us = times[floor_at].rounds_us;
      std::optional<GainInterval> floor_over_first;
      if (first) floor_over_first = gain_interval(times[floor_at + 1].rounds_us, floor_us);
      const bool slower = floor_over_first && dispatch::floor_slower_than_its_final(*floor_over_first, kept_over_first);
      if (slower) {
        char text[64];
        std::snprintf(text, sizeof text, "%s%.2fx on set %zu", floor_by_set.empty() ? "" : ", ",
                      1 / (1 + floor_over_first->gain), s + 1);
        floor_by_set += text;
      }
      for (size_t i = 0; i < kernel_routes.size(); ++i) {
        const GainInterval over_floor = gain_interval(floor_us, times[i].rounds_us);
        per_route[i].push_back(
            slower ? dispatch::against_floor_as_chosen(over_floor, gain_interval(times[floor_at + 1].rounds_us,
                                                                                 times[i].rounds_us),
                                                       *floor_over_first, kept_over_first)
                   : over_floor);
      }
    }
    if (floor_note && !floor_by_set.empty()) {
      char text[160];
      std::snprintf(text, sizeof text,
                    "the floor ran slower against cuBLASLt's first candidate than in its final (%.2fx): ",
                    kept_over_first);
      *floor_note = text + floor_by_set + "; the kernels held to the floor as its final found it";
    }
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the scratch is freed on return
    std::vector<GainInterval> gains;
    if (by_set) by_set->clear();
    for (const auto& on_sets : per_route) {
      gains.push_back(dispatch::weakest_of_sets(on_sets));
      if (!by_set) continue;
      std::string text;
      for (const GainInterval& g : on_sets) {
        char v[16];
        std::snprintf(v, sizeof v, "%s%.2f", text.empty() ? "" : "/", 1 + g.gain);
        text += v;
      }
      by_set->push_back(text);
    }
    return gains;
  }

  // cuBLASLt's first candidate for `problem`, planned as a floor is, for the route check to time beside a floor
  // that beat it in its final (gains_over_floor); null where it cannot be planned (the kernels are then held to
  // the floor as measured).
  std::unique_ptr<Route> first_candidate_route(const Problem& problem, cudaStream_t stream) {
    auto first = std::make_unique<Route>();
    first->problem = problem;
    first->choice = dispatch::floor_choice();
    try {
      plan_cublaslt(*first, 0, "", stream);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kNoDevice || e.kind() == ErrorKind::kHang || e.kind() == ErrorKind::kOutOfMemory)
        throw;
      return nullptr;
    }
    return first;
  }

  // The shape's routes after checking `kernels` against `floor`: the eager winner, serving CUDA graphs through its
  // `captured` route where the GPU-time winner is another; describe() says which serves each way and why (`when`
  // says how the candidates came). The loser routes are dropped (their kernels stay loaded). What was decided is
  // returned in `verdict` for the caller to keep.
  std::unique_ptr<Route> check_and_settle(std::vector<std::unique_ptr<Route>> kernels, std::unique_ptr<Route> floor,
                                          const std::string& when, cudaStream_t stream, const Caller& caller,
                                          dispatch::RouteVerdict* verdict = nullptr,
                                          std::vector<GainInterval>* eager_gains = nullptr,
                                          std::vector<GainInterval>* graph_gains = nullptr) {
    std::vector<Route*> routes;
    std::vector<std::string> names;
    for (auto& k : kernels) {
      routes.push_back(k.get());
      names.push_back(to_string(k->choice.design));
    }
    // The floor of captured calls: its own cuBLASLt choice where the GPU's time chose another (floor_route).
    std::unique_ptr<Route> graph_floor = std::move(floor->captured);
    std::vector<std::string> graph_by_set, eager_by_set;
    std::string graph_floor_note, eager_floor_note;
    Route& floor_of_graphs = graph_floor ? *graph_floor : *floor;
    // One route of cuBLASLt's first candidate serves both ways' checks, planned only where a floor beat it.
    const std::unique_ptr<Route> first =
        floor_of_graphs.kept_over_first(bench::Mode::kGraph) > 0 || floor->kept_over_first(bench::Mode::kOffline) > 0
            ? first_candidate_route(floor->problem, stream)
            : nullptr;
    const std::vector<GainInterval> graph = gains_over_floor(routes, floor_of_graphs, bench::Mode::kGraph, stream,
                                                             caller, first.get(), &graph_by_set, &graph_floor_note);
    const std::vector<GainInterval> eager = gains_over_floor(routes, *floor, bench::Mode::kOffline, stream, caller,
                                                             first.get(), &eager_by_set, &eager_floor_note);
    const dispatch::RouteVerdict v = dispatch::decide_routes(eager, graph);
    std::string note = " (" + when + ": eager calls: " + dispatch::route_verdict_text(names, eager, v.eager) +
                       "; CUDA graphs: " + dispatch::route_verdict_text(names, graph, v.graph);
    if (caller) {  // the weaker set decided; both said, kernel by kernel
      auto joined = [](const std::vector<std::string>& texts) {
        std::string all;
        for (const std::string& t : texts) all += (all.empty() ? "" : ", ") + t;
        return all;
      };
      note += "; on the scratch/the caller's operands: eager " + joined(eager_by_set) + ", graphs " + joined(graph_by_set);
    }
    if (!eager_floor_note.empty()) note += "; eager calls: " + eager_floor_note;
    if (!graph_floor_note.empty()) note += "; CUDA graphs: " + graph_floor_note;
    // Where a kernel serves, the cuBLASLt choice it was measured against (and the captured calls' own, where
    // another): the served route's description does not show the floor's otherwise.
    if (v.eager >= 0 || v.graph >= 0) note += "; against " + floor->description;
    note += ")";
    if (verdict) *verdict = v;
    if (eager_gains) *eager_gains = eager;
    if (graph_gains) *graph_gains = graph;
    std::unique_ptr<Route> served = v.eager < 0 ? std::move(floor) : std::move(kernels[size_t(v.eager)]);
    if (v.graph >= 0) {
      if (v.graph != v.eager) serve_captured(*served, std::move(kernels[size_t(v.graph)]));
    } else if (graph_floor) {
      serve_captured(*served, std::move(graph_floor));
    } else if (v.eager >= 0) {
      serve_captured(*served, std::move(floor));  // the floor serves captured calls, a kernel eager ones
    }
    served->description += note;
    if (served->captured) served->captured->description += note;
    return served;
  }

  // How the algorithm of a cuBLASLt route that eager calls take is timed. Launched directly (the default), an
  // eager call costs the host about half of a cublasLtMatmul call, and back-to-back eager calls take the GPU's
  // time wherever that exceeds the launch: the GPU-time choice serves them too. Timed eagerly through
  // cublasLtMatmul instead, a small shape's candidates all measure cuBLASLt's host path, and the choice is
  // noise (on an H200, 16x3584x3584: the eager choice ran 13.4 us a call, the graph choice 7.9).
  bench::Mode eager_choice_mode() const {
    return options.direct_cublaslt ? bench::Mode::kGraph : bench::Mode::kOffline;
  }

  static void serve_captured(Route& eager, std::unique_ptr<Route> captured) {
    captured->captured_only = true;
    eager.captured = std::move(captured);
  }

  // The floor of a problem: cuBLASLt with lt_auto's choice for eager calls, and, as its `captured` route, with
  // the choice timed in CUDA graphs where that is another algorithm. With direct launches, one choice, timed
  // in CUDA graphs, for both (eager_choice_mode), except where the kernel runs long enough for an eager screen
  // to time the GPU (dispatch::eager_floor_choice).
  std::unique_ptr<Route> floor_route(const Problem& problem, cudaStream_t stream, const Caller& caller) {
    const FirstUseTimer timer(*this, kFloorChoice);
    auto make = [&](std::optional<int> candidate, const std::string& how) {
      auto floor = std::make_unique<Route>();
      floor->problem = problem;
      floor->choice = dispatch::floor_choice();
      floor->description = floor->choice.describe();
      plan_cublaslt(*floor, candidate, how, stream);
      return floor;
    };
    std::string how, graph_how;
    bench::LtChoice eager_timing, graph_timing;  // their counts set where the choice was timed now
    std::optional<int> eager, graph;
    bool eager_timed = false;
    if (eager_choice_mode() == bench::Mode::kGraph) {
      graph = cublaslt_candidate(problem, stream, graph_how, bench::Mode::kGraph, caller, &graph_timing);
      const bool eager_known =
          lt_choices_of(bench::Mode::kOffline).find(problem, dispatch::candidate_count(*lt_context, problem)).has_value();
      if (!dispatch::eager_floor_choice(true, graph_timing.fastest_us, eager_known)) {
        std::unique_ptr<Route> floor = make(graph, graph_how);
        floor->graph_kept_over_first = graph_timing.kept_over_first;
        return floor;
      }
      eager = cublaslt_candidate(problem, stream, how, bench::Mode::kOffline, caller, &eager_timing);
      eager_timed = true;
    } else {
      eager = cublaslt_candidate(problem, stream, how, bench::Mode::kOffline, caller, &eager_timing);
      graph = cublaslt_candidate(problem, stream, graph_how, bench::Mode::kGraph, caller, &graph_timing);
    }
    if (eager && graph && *eager != *graph && eager_timing.count && graph_timing.count && !capturing(stream)) {
      // The two screens, made one after the other, disagree: one of them may have run on a GPU still settling
      // from the work before it. The two choices then meet in a runoff in each way of calling, and each way
      // keeps the faster (what is kept is recorded again, the file's last line for a shape wins).
      const std::vector<int> both = {*eager, *graph};
      auto settle = [&](bench::Mode mode, std::optional<int>& chosen, std::string& text, bench::LtChoice& timing) {
        const int won = dispatch::runoff(*lt_context, problem, stream, mode, both, caller);
        if (won == *chosen) return;
        text = timed_text(mode, won, timing.count, caller, *chosen);
        lt_choices_of(mode).record(problem, won, timing.count);
        chosen = won;
        timing.kept_over_first = 0;  // the final's ratio was the other candidate's
      };
      settle(bench::Mode::kOffline, eager, how, eager_timing);
      settle(bench::Mode::kGraph, graph, graph_how, graph_timing);
    }
    std::unique_ptr<Route> floor = make(eager, how);
    floor->eager_timed = eager_timed && graph != eager;  // one algorithm for both ways: its bias plan as before
    floor->eager_kept_over_first = eager_timing.kept_over_first;
    if (graph == eager) floor->graph_kept_over_first = graph_timing.kept_over_first;
    if (graph != eager) {
      serve_captured(*floor, make(graph, graph_how));
      floor->captured->graph_kept_over_first = graph_timing.kept_over_first;
      // describe() tells both ways of calling: captured calls take another algorithm.
      floor->description += "; captured calls: " + floor->captured->description;
    }
    return floor;
  }

  // A kernel route of a design (its path from `choice`, its description `name`, else the choice's), or null
  // with `why` when it does not compile or load: a proposal that fails costs the shape nothing, the floor
  // serves it.
  std::unique_ptr<Route> kernel_route(const Problem& problem, const dispatch::Choice& choice, std::string& why,
                                      const std::string& name = "") {
    auto r = std::make_unique<Route>();
    r->problem = problem;
    r->choice = choice;
    r->description = name.empty() ? choice.describe() : name;
    try {
      plan_kernel(*r);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kNoDevice || e.kind() == ErrorKind::kOutOfMemory) throw;
      const std::string what = e.what();
      why = what.substr(0, what.find('\n'));
      return nullptr;
    }
    return r;
  }

  // A route with one kernel candidate (a tuned row, a policy's or the predictor's design) checked against the
  // floor; with `also` (the predicted design at its fitted width, the nearest tuned row's design, the untuned
  // route's designs beside a tuned row), more, the fastest serving. `also_path`: the path of the `also` designs'
  // routes (the choice's where not given). `floor`: what the kernels are checked against (a cuBLASLt row's route),
  // else the floor (floor_route).
  std::unique_ptr<Route> verified(const Problem& problem, const dispatch::Choice& choice, const std::string& note,
                                  cudaStream_t stream, const Caller& caller,
                                  const std::vector<std::pair<Design, std::string>>& also = {},
                                  std::optional<Path> also_path = std::nullopt,
                                  std::unique_ptr<Route> floor = nullptr) {
    if (!floor) floor = floor_route(problem, stream, caller);
    if (!also.empty() && !capturing(stream)) {
      std::vector<Design> designs = {choice.design};
      for (const auto& [d, label] : also) designs.push_back(d);
      precompile(designs, problem);
    }
    std::vector<std::unique_ptr<Route>> kernels;
    std::string why;
    if (std::unique_ptr<Route> kernel = kernel_route(problem, choice, why)) {
      kernel->description += note;
      kernels.push_back(std::move(kernel));
    } else {
      floor->description += " (" + choice.describe() + " not built: " + why + ")";
    }
    for (const auto& [design, label] : also) {  // checked beside the design, or alone where it did not build
      dispatch::Choice other = choice;
      other.path = also_path.value_or(choice.path);
      other.design = design;
      if (auto k = kernel_route(problem, other, why)) {
        k->description += label;
        kernels.push_back(std::move(k));
      }
    }
    if (kernels.empty()) return floor;
    if (capturing(stream)) {
      floor->description += " (" + choice.describe() + " not checked: first seen where nothing can be timed)";
      return floor;
    }
    return check_and_settle(std::move(kernels), std::move(floor), "measured on first use", stream, caller);
  }

  // Compiles `designs` for `problem` together into the cubin cache (one compiler process per core), so that a
  // shape's first call waits for about one compile, not one per design; a failure surfaces again when the
  // design's route is built. Nothing without a cache to fill.
  void precompile(const std::vector<Design>& designs, const Problem& problem) {
    if (!compile_options.cache_dir || designs.size() < 2) return;
    const FirstUseTimer timer(*this, kBuild);
    std::vector<KernelBuild> builds;
    for (const Design& d : designs) builds.push_back({d, problem, {}, {}});
    build_ahead(builds, device, compile_options);
  }

  // The autotuned route (HandleOptions::autotune): the predictor's few best designs, or what this machine chose
  // among them before, checked against the floor; what each way of calling kept is recorded.
  std::unique_ptr<Route> autotune(const Problem& problem, cudaStream_t stream, const Caller& caller) {
    std::unique_ptr<Route> floor = floor_route(problem, stream, caller);
    if (capturing(stream)) {
      floor->description += " (not autotuned: first seen where nothing can be timed)";
      return floor;
    }
    std::vector<Design> designs;
    std::string when = "autotuned on first use";
    if (const std::optional<dispatch::AutotuneChoice> known = autotune_choices->find(problem)) {
      // Chosen here before: only the kernels that won a way of calling are built and checked again.
      for (const std::optional<Design>& d : {known->eager, known->graph})
        if (d && std::find(designs.begin(), designs.end(), *d) == designs.end()) designs.push_back(*d);
      if (designs.empty()) {
        char text[128];
        std::snprintf(text, sizeof text, " (autotuned on this machine: none of %d kernels beat it)", known->candidates);
        floor->description += text;
        return floor;
      }
      when = "autotuned on this machine before, checked again on first use";
    } else {
      // The fp16 twin's guesses, in the problem's element type (as predict_design does).
      Problem twin = problem;
      twin.dtype = DType::kF16;
      for (const predict::Candidate& guess : predictor->best_guesses(gpu_traits, twin, options.autotune_candidates)) {
        Design design = with_dtype(guess.design, problem.dtype);
        design.static_shape = false;
        if (!dispatch::why_not_runnable(design, problem, dispatcher->target())) designs.push_back(design);
      }
      // And where a guess leaves a wave of tiles part-empty, up to two of them again at the width that fills the
      // waves: the predictor was trained before those widths existed (search/wave_fit.h; in a tune's first
      // evaluations such a design ran faster than its guess in 9 of 11 cases, bench/results/h100/README.md).
      int fitted_count = 0;
      const std::vector<Design> fitted_designs =
          device.sm_count > 0 ? search::fitted_alternatives(designs, problem, device.sm_count,
                                                            smem_limit_or_hopper(device.smem_per_block_optin))
                              : std::vector<Design>{};
      for (const Design& fitted : fitted_designs) {
        if (fitted_count == kAutotuneFittedWidths) break;
        if (dispatch::why_not_runnable(fitted, problem, dispatcher->target())) continue;
        designs.push_back(fitted);
        ++fitted_count;
      }
      // And the designs of the tuned rows nearest to the shape: a design that won on a nearby shape, or on this one
      // in the other element type, is often the winner here (of the H200 table's rows, 45-48% have the design of
      // one of their three nearest other shapes' rows; bench/experiments/README.md).
      for (const Design& d : dispatch::runnable_nearest_designs(dispatcher->rows(), problem, dispatcher->target(),
                                                                options.autotune_neighbors, designs))
        designs.push_back(d);
      precompile(designs, problem);
    }
    std::vector<std::unique_ptr<Route>> kernels;
    for (const Design& design : designs) {
      std::string why;
      if (auto kernel = kernel_route(problem, dispatch::Choice{Path::kPredicted, design, std::nullopt, std::nullopt}, why,
                                     "autotuned " + to_string(design)))
        kernels.push_back(std::move(kernel));
    }
    if (kernels.empty()) {
      floor->description += " (no autotuned kernel could be built)";
      return floor;
    }
    std::vector<Design> candidates;
    for (auto& k : kernels) candidates.push_back(k->choice.design);
    dispatch::RouteVerdict v;
    std::vector<GainInterval> eager, graph;
    std::unique_ptr<Route> served = check_and_settle(std::move(kernels), std::move(floor), when, stream, caller, &v, &eager,
                                                     &graph);
    dispatch::AutotuneChoice choice;
    choice.candidates = int(candidates.size());
    if (v.eager >= 0) {
      choice.eager = candidates[size_t(v.eager)];
      choice.eager_gain = 1 + eager[size_t(v.eager)].gain;
    }
    if (v.graph >= 0) {
      choice.graph = candidates[size_t(v.graph)];
      choice.graph_gain = 1 + graph[size_t(v.graph)].gain;
    }
    autotune_choices->record(problem, choice);
    return served;
  }

  Route& build_route(const Problem& problem, const ShapeKey& key, cudaStream_t stream, bool capture_check,
                     const bench::LtOperands* operands) {
    std::lock_guard build(build_mutex);
    {
      std::shared_lock lock(routes_mutex);
      const auto it = routes.find(key);
      if (it != routes.end()) return *it->second;
    }
    if (capture_check && capturing(stream))
      fail("hgemm " + shape_text(problem) + " is first seen while its stream is being captured into a CUDA graph, "
           "where its kernel can be neither compiled nor loaded: run the call once before the capture (a warm-up), "
           "or call prepare(M, N, K, layout) (rlgemm_prepare; in Python rlgemm.prepare or rlgemm.prepare_model) "
           "for every shape the graph will hold");
    const dispatch::Choice choice = dispatcher->choose(problem);
    const Caller caller =
        operands ? dispatch::caller_operands(problem, operands->a, operands->b, operands->c) : std::nullopt;
    std::unique_ptr<Route> r;
    if (autotune_choices && predictor && choice.floor) {
      // With autotuning the dispatcher proposes no predicted design (see the constructor): untuned shapes come
      // as the floor, which autotune() starts from.
      r = autotune(problem, stream, caller);
    } else if (choice.path == Path::kCublasLt && choice.floor) {
      r = floor_route(problem, stream, caller);
    } else if (choice.path == Path::kCublasLt) {
      r = std::make_unique<Route>();
      r->problem = problem;
      r->choice = choice;
      r->description = choice.describe();
      plan_cublaslt(*r, stream, caller);
      // A row that chose cuBLASLt over its tune's kernels: the untuned route's kernels are checked against it
      // (where anything can be timed: not during a capture).
      const auto untuned = capturing(stream) ? std::vector<std::pair<Design, std::string>>{}
                                             : untuned_route(problem, std::nullopt);
      if (!untuned.empty()) {
        const dispatch::Choice first{Path::kPredicted, untuned.front().first, std::nullopt, std::nullopt};
        r = verified(problem, first, untuned.front().second, stream, caller,
                     {std::next(untuned.begin()), untuned.end()}, Path::kPredicted, std::move(r));
      }
    } else if (options.prefer_cublaslt && (options.check_routes || choice.path == Path::kPredicted)) {
      // A kernel (a tuned row, a policy's or the predictor's design) serves only the ways of calling where it
      // measured faster than the floor; a tuned row's beside the untuned route's designs (untuned_route).
      const bool predicted = choice.path == Path::kPredicted;
      std::vector<std::pair<Design, std::string>> also;
      if (predicted) also = predicted_also;
      if (choice.path == Path::kTuned) also = untuned_route(problem, choice.design);
      r = verified(problem, choice, predicted ? predicted_note : "", stream, caller, also, Path::kPredicted);
    } else {
      // Kernels only: nothing to measure them against.
      std::string why;
      r = kernel_route(problem, choice, why);
      if (!r) fail("hgemm " + shape_text(problem) + ": " + choice.describe() + " cannot be built: " + why);
    }
    // Capture slots for the route that serves captured calls.
    allocate_capture_slots(r->captured ? *r->captured : *r, stream);
    std::unique_lock lock(routes_mutex);
    return *(routes[key] = std::move(r));
  }

  // The workspace of (stream, route) for calls outside a capture: allocated and zeroed on the stream's
  // first call of the route, then reused by every call on that stream, which the stream serializes.
  void* pooled_workspace(cudaStream_t stream, const Route& r) {
    unsigned long long stream_id = 0;
    RLGEMM_CUDA_CHECK(cudaStreamGetId(stream, &stream_id));
    const WorkspaceKey key{stream_id, &r};
    ThreadCache::WorkspaceEntry& cached =
        thread_cache.workspaces[WorkspaceKeyHash()(key) % ThreadCache::kSlots];
    if (cached.serial == serial && cached.key == key) return cached.workspace;
    void* ptr = nullptr;
    {
      std::shared_lock lock(workspace_mutex);
      const auto it = workspaces.find(key);
      if (it != workspaces.end()) ptr = it->second;
    }
    if (!ptr) {
      std::unique_lock lock(workspace_mutex);
      const auto it = workspaces.find(key);
      if (it != workspaces.end()) {
        ptr = it->second;
      } else {
        RLGEMM_CUDA_CHECK(cudaMalloc(&ptr, r.workspace_bytes));
        const cudaError_t status = r.zero_bytes ? cudaMemsetAsync(ptr, 0, r.zero_bytes, stream) : cudaSuccess;
        if (status != cudaSuccess) {
          cudaFree(ptr);
          RLGEMM_CUDA_CHECK(status);
        }
        workspaces.emplace(key, ptr);
      }
    }
    cached = ThreadCache::WorkspaceEntry{serial, key, ptr};
    return ptr;
  }

  // A cuBLASLt route's plan with the bias epilogue, planned on its first use: the fastest of the heuristic's
  // algorithms for the epilogue and the route's own with it (CublasLtGemm::bias_candidates), timed
  // within the route's workspace on the call's `operands` (where dispatch::caller_operands takes them) and
  // scratch sets, in the mode of the calls the route serves (a captured-only route: CUDA
  // graphs; an eager-only route whose algorithm was chosen in eager calls, Route::eager_timed: eager calls; else
  // eager_choice_mode), and kept per machine in that mode's file (cublaslt-bias-choices-7.csv,
  // cublaslt-graph-bias-choices-7.csv: a shape's eager and captured routes can hold different algorithms, and the
  // candidates include the route's own). A first use inside a capture, where nothing can be timed, takes
  // the route's algorithm (host work only). Launched directly where that is proven the same launch (GPU work of
  // its own: only outside a capture).
  const dispatch::CublasLtGemm& bias_plan(Route& r, cudaStream_t stream, const bench::LtOperands& operands) {
    if (const dispatch::CublasLtGemm* plan = r.lt_bias.load(std::memory_order_acquire)) return *plan;
    std::lock_guard build(build_mutex);
    if (!r.lt_bias_plan) {
      std::string how;
      dispatch::CublasLtChoices& choices = r.captured_only ? *lt_graph_bias_choices : *lt_bias_choices;
      if (const auto known = choices.find(r.problem, int(r.lt->bias_candidates().size()))) {
        r.lt_bias_plan = r.lt->with_bias(*known);
        how = "chosen on this machine before";
      } else if (capturing(stream)) {
        r.lt_bias_plan = r.lt->with_bias();
        how = "the algorithm without it: first seen where no timing can run";
      } else {
        const bench::Mode mode =
            r.captured_only ? bench::Mode::kGraph : (r.eager_timed ? bench::Mode::kOffline : eager_choice_mode());
        const Caller caller = dispatch::caller_operands(r.problem, operands.a, operands.b, operands.c);
        const bench::LtChoice choice = r.lt->time_bias_candidates(stream, mode, caller);
        choices.record(r.problem, choice.index, choice.count);
        r.lt_bias_plan = r.lt->with_bias(choice.index);
        how = r.lt_bias_plan->same_algorithm(*r.lt)
                  ? "the algorithm without it, the fastest of " + std::to_string(choice.count) + " timed on first use" +
                        in_mode(mode) + on_whose(caller)
                  : "candidate " + std::to_string(choice.index) + " of " + std::to_string(choice.count) +
                        ", timed on first use" + in_mode(mode) + on_whose(caller);
        if (!choice.note.empty()) how += "; " + choice.note;
      }
      if (!r.lt_bias_plan->note().empty()) how += "; " + r.lt_bias_plan->note();
      if (options.direct_cublaslt) {
        std::string said;
        r.lt_bias_direct = direct_launch(*r.lt_bias_plan, r.problem, stream, said);
        how += "; " + said;
      }
      r.bias_note = " (with a bias: " + how + ")";
      r.lt_bias.store(r.lt_bias_plan.get(), std::memory_order_release);
    }
    return *r.lt_bias_plan;
  }

  // How a kernel route serves calls with a bias: decided at its first such call outside a capture, by timing
  // the kernel followed by add_bias beside cuBLASLt with its bias epilogue (no workspace, so that the
  // kernel's zeroed workspace is never cuBLASLt's scratch), on scratch operands. The extra launch costs a
  // few microseconds, which can undo a kernel's small win over cuBLASLt's fused bias. Inside a capture
  // nothing can be timed: the kernel and add_bias serve the call (correct either way), and the choice waits.
  // Kernels only (prefer_cublaslt off): always the kernel and add_bias.
  int bias_way(Route& r, cudaStream_t stream) {
    if (const int way = r.bias_way.load(std::memory_order_acquire)) return way;
    if (!options.prefer_cublaslt) return Route::kBiasAdded;
    if (capturing(stream)) return Route::kBiasAdded;
    std::lock_guard build(build_mutex);
    if (const int way = r.bias_way.load(std::memory_order_acquire)) return way;
    int way = Route::kBiasAdded;
    try {
      if (!lt_context) lt_context = std::make_unique<dispatch::CublasLtContext>();
      r.lt_bias_plan = dispatch::CublasLtGemm::bias_first(*lt_context, r.problem, 0);
      const Problem& p = r.problem;
      const bench::ScratchOperands x(p, stream);
      DeviceScratch<half> bias(size_t(p.shape.n));
      bench::fill_random(bias.ptr, size_t(p.shape.n), bench::Fill::kNormal, 3, stream, p.dtype);
      const size_t bytes = std::max<size_t>(r.workspace_bytes, 16);
      DeviceScratch<unsigned char> ws(bytes);
      RLGEMM_CUDA_CHECK(cudaMemsetAsync(ws.ptr, 0, bytes, stream));
      const dispatch::CublasLtGemm& lt = *r.lt_bias_plan;
      const std::vector<bench::Subject> subjects = {
          {[&](cudaStream_t s) {
             r.kernel->launch(s, *r.prepared, GemmOperands{x.a.ptr, x.b.ptr, x.c.ptr, ws.ptr, bytes});
             dispatch::add_bias(s, x.c.ptr, bias.ptr, p.shape.m, p.shape.n, p.dtype);
           },
           {}, "kernel and bias"},
          {[&](cudaStream_t s) { lt.launch(s, x.a.ptr, x.b.ptr, x.c.ptr, nullptr, bias.ptr); }, {}, "cuBLASLt with bias"}};
      bench::TimingOptions timing;
      timing.seed = problem_seed(2, p);
      const auto times = bench::time_side_by_side(bench::Mode::kOffline, subjects, nullptr, stream, timing);
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // the scratch is freed on return
      const double ratio = times[1].time_us / times[0].time_us;
      if (ratio < 1) {
        way = Route::kBiasInCublasLt;
        r.lt_bias.store(r.lt_bias_plan.get(), std::memory_order_release);
      }
      char text[128];
      std::snprintf(text, sizeof text, " (with a bias: %s, the kernel and its bias launch at %.2fx cuBLASLt's fused bias)",
                    way == Route::kBiasInCublasLt ? "cuBLASLt" : "the kernel", ratio);
      r.bias_note = text;
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kNoDevice || e.kind() == ErrorKind::kOutOfMemory) throw;
      r.bias_note = " (with a bias: the kernel; cuBLASLt's bias epilogue is not available here)";
    }
    r.bias_way.store(way, std::memory_order_release);
    return way;
  }

  // C = A B, plus the bias when one is given: cuBLASLt adds it in its epilogue; a kernel route in a second
  // launch on the stream, or through cuBLASLt where that measured faster with the bias (bias_way).
  void launch(cudaStream_t stream, Route& r, const void* a, const void* b, void* c, void* ws, size_t ws_bytes,
              const void* bias = nullptr) {
    if (r.lt) {
      if (bias) {
        // lt_bias_direct is whole once this returns
        const dispatch::CublasLtGemm& plan = bias_plan(r, stream, bench::LtOperands{a, b, c});
        if (r.lt_bias_direct)
          r.lt_bias_direct->launch(stream, a, b, c, ws, bias);
        else
          plan.launch(stream, a, b, c, ws, bias);
      } else if (r.lt_direct)
        r.lt_direct->launch(stream, a, b, c, ws);
      else
        r.lt->launch(stream, a, b, c, ws);
      return;
    }
    if (bias && bias_way(r, stream) == Route::kBiasInCublasLt) {
      r.lt_bias.load(std::memory_order_acquire)->launch(stream, a, b, c, nullptr, bias);
      return;
    }
    r.kernel->launch(stream, *r.prepared, GemmOperands{a, b, c, ws, ws_bytes});
    if (bias) dispatch::add_bias(stream, c, bias, r.problem.shape.m, r.problem.shape.n, r.problem.dtype);
  }

  // One call of a route with a workspace while its stream is being captured and no capture slot is free: the
  // workspace from graph memory, its first bytes zeroed, freed after the launch, all inside the graph (so every
  // graph owns its workspace and no direct call shares it) -- which each such call costs a graph at every
  // replay.
  void captured_call(cudaStream_t stream, Route& r, const void* a, const void* b, void* c, const void* bias) {
    graph_memory_calls.fetch_add(1, std::memory_order_relaxed);
    void* ws = nullptr;
    RLGEMM_CUDA_CHECK(cudaMallocAsync(&ws, r.workspace_bytes, stream));
    if (r.zero_bytes) RLGEMM_CUDA_CHECK(cudaMemsetAsync(ws, 0, r.zero_bytes, stream));
    launch(stream, r, a, b, c, ws, r.workspace_bytes, bias);
    RLGEMM_CUDA_CHECK(cudaFreeAsync(ws, stream));
  }

  // One call. The workspace, when the route needs one: the caller's (its first bytes zeroed on the stream);
  // during a capture, graph memory (allocated, zeroed, used and freed inside the graph, so every graph has
  // its own and no direct call shares it); otherwise the stream's pooled one.
  void call(cudaStream_t stream, const Problem& problem, const void* a, const void* b, void* c, const void* bias,
            void* caller_ws, size_t caller_ws_bytes, bool caller_gives_workspace) {
    const bench::LtOperands operands{a, b, c};
    Route& eager = route(problem, stream, true, &operands);
    // Whether this call is captured matters to a shape whose GPU-time winner is another route than its eager
    // one, and to a route with a workspace.
    const bool captured_now = (eager.captured || eager.workspace_bytes > 0) && capturing(stream);
    Route& r = captured_now && eager.captured ? *eager.captured : eager;
    void* slot = nullptr;
    if (r.workspace_bytes == 0) {
      launch(stream, r, a, b, c, nullptr, 0, bias);
    } else if (captured_now && (slot = capture_slot(r, stream))) {
      // The capture's own slot, zeroed when allocated (the kernels leave it so): even where the caller handed
      // a workspace over, which would cost the graph a zeroing at every replay.
      launch(stream, r, a, b, c, slot, r.workspace_bytes, bias);
    } else if (caller_gives_workspace) {
      if (caller_ws_bytes < r.workspace_bytes || !caller_ws || !aligned16(caller_ws))
        fail("hgemm " + shape_text(problem) + " (" + r.description + ") needs a 16-byte aligned workspace of " +
             std::to_string(r.workspace_bytes) + " bytes (workspace_bytes()), got " +
             std::to_string(caller_ws_bytes) + " bytes at " + std::to_string(reinterpret_cast<uintptr_t>(caller_ws)));
      if (r.zero_bytes) RLGEMM_CUDA_CHECK(cudaMemsetAsync(caller_ws, 0, r.zero_bytes, stream));
      launch(stream, r, a, b, c, caller_ws, caller_ws_bytes, bias);
    } else if (captured_now) {
      captured_call(stream, r, a, b, c, bias);
    } else {
      launch(stream, r, a, b, c, pooled_workspace(stream, r), r.workspace_bytes, bias);
    }
    calls[int(r.choice.path)].fetch_add(1, std::memory_order_relaxed);
    if (r.sass_optimized) sass_calls.fetch_add(1, std::memory_order_relaxed);
  }
};

Handle::Handle() : Handle(HandleOptions{}) {}
Handle::Handle(const HandleOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Handle Handle::from_database(const std::string& database) {
  HandleOptions options;
  options.database = database;
  return Handle(options);
}
Handle::~Handle() = default;
Handle::Handle(Handle&&) noexcept = default;
Handle& Handle::operator=(Handle&&) noexcept = default;

namespace {
Problem make_problem(int64_t M, int64_t N, int64_t K, Layout layout, DType dtype = DType::kF16) {
  const Problem problem{Shape{M, N, K}, layout, dtype};
  validate(problem.shape);
  return problem;
}
void require(const void* impl) {
  if (!impl) fail("this rlgemm handle was moved from");
}
}  // namespace

void Handle::prepare(int64_t M, int64_t N, int64_t K, Layout layout, cudaStream_t stream, DType dtype) {
  require(impl_.get());
  const Problem problem = make_problem(M, N, K, layout, dtype);
  impl_->check_device();
  Route& r = impl_->route(problem, stream);
  if (r.workspace_bytes > 0 && !capturing(stream)) impl_->pooled_workspace(stream, r);
}

namespace {
// Every hgemm and gemm overload: the rules checked, then the call (with the caller's workspace when `given`).
template <class Impl>
void checked_call(Impl* impl, cudaStream_t stream, int64_t M, int64_t N, int64_t K, const void* A, const void* B,
                  Layout layout, void* C, DType dtype, void* workspace, size_t workspace_bytes, bool given,
                  const void* bias = nullptr, bool with_bias = false) {
  require(impl);
  const Problem problem = make_problem(M, N, K, layout, dtype);
  check_operand(A, "A");
  check_operand(B, "B");
  check_operand(C, "C");
  if (with_bias) check_operand(bias, "bias");
  impl->check_device();
  impl->call(stream, problem, A, B, C, bias, workspace, workspace_bytes, given);
}
}  // namespace

void Handle::hgemm(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const half* A, const half* B, Layout layout,
                   half* C) {
  checked_call(impl_.get(), stream, M, N, K, A, B, layout, C, DType::kF16, nullptr, 0, false);
}

void Handle::hgemm(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const half* A, const half* B, Layout layout,
                   half* C, void* workspace, size_t workspace_bytes) {
  checked_call(impl_.get(), stream, M, N, K, A, B, layout, C, DType::kF16, workspace, workspace_bytes, true);
}

void Handle::gemm(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const void* A, const void* B, Layout layout,
                  void* C, DType dtype) {
  checked_call(impl_.get(), stream, M, N, K, A, B, layout, C, dtype, nullptr, 0, false);
}

void Handle::gemm(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const void* A, const void* B, Layout layout,
                  void* C, DType dtype, void* workspace, size_t workspace_bytes) {
  checked_call(impl_.get(), stream, M, N, K, A, B, layout, C, dtype, workspace, workspace_bytes, true);
}

void Handle::gemm_bias(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const void* A, const void* B,
                       Layout layout, void* C, DType dtype, const void* bias) {
  checked_call(impl_.get(), stream, M, N, K, A, B, layout, C, dtype, nullptr, 0, false, bias, true);
}

void Handle::gemm_bias(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const void* A, const void* B,
                       Layout layout, void* C, DType dtype, const void* bias, void* workspace, size_t workspace_bytes) {
  checked_call(impl_.get(), stream, M, N, K, A, B, layout, C, dtype, workspace, workspace_bytes, true, bias, true);
}

size_t Handle::workspace_bytes(int64_t M, int64_t N, int64_t K, Layout layout, cudaStream_t stream, DType dtype) {
  require(impl_.get());
  impl_->check_device();
  // Enough for the call whichever way it is made: eager, or captured into a CUDA graph.
  const Route& r = impl_->route(make_problem(M, N, K, layout, dtype), stream);
  return std::max(r.workspace_bytes, r.captured ? r.captured->workspace_bytes : 0);
}

Stats Handle::stats() const {
  require(impl_.get());
  auto get = [&](Path p) { return impl_->calls[int(p)].load(std::memory_order_relaxed); };
  Stats s;
  s.tuned = get(Path::kTuned);
  s.nearest = get(Path::kNearest);
  s.policy = get(Path::kPolicy);
  s.default_design = get(Path::kDefault);
  s.cublaslt = get(Path::kCublasLt);
  s.predicted = get(Path::kPredicted);
  s.sass_optimized = impl_->sass_calls.load(std::memory_order_relaxed);
  s.graph_memory_workspaces = impl_->graph_memory_calls.load(std::memory_order_relaxed);
  auto seconds = [&](Impl::FirstUse part) { return double(impl_->first_use_ns[part].load(std::memory_order_relaxed)) * 1e-9; };
  s.first_use_floor_s = seconds(Impl::kFloorChoice);
  s.first_use_build_s = seconds(Impl::kBuild);
  s.first_use_check_s = seconds(Impl::kCheck);
  return s;
}

std::string Handle::describe(int64_t M, int64_t N, int64_t K, Layout layout, DType dtype) {
  require(impl_.get());
  impl_->check_device();
  const Route& r = impl_->route(make_problem(M, N, K, layout, dtype), nullptr, false);
  // What calls with a bias take, once a kernel route has decided it or a cuBLASLt route has planned its bias
  // plan (bias_note is whole before bias_way or lt_bias is set).
  const bool bias_known = r.bias_way.load(std::memory_order_acquire) ||
                          (r.lt && r.lt_bias.load(std::memory_order_acquire) != nullptr);
  return bias_known ? r.description + r.bias_note : r.description;
}

const std::string& Handle::device_name() const {
  require(impl_.get());
  return impl_->device.name;
}

size_t Handle::tuned_shapes() const {
  require(impl_.get());
  return impl_->dispatcher->tuned_rows();
}

}  // namespace rlgemm
