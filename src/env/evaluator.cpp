#include "env/evaluator.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "bench/correctness.h"
#include "bench/device_data.h"
#include "bench/fill.h"
#include "bench/implementation.h"
#include "bench/timing.h"
#include "env/contract.h"
#include "env/reward.h"
#include "measure/design_implementation.h"
#include "measure/gpu_measurer.h"
#include "rlgemm/error.h"
#include "run/recorded.h"
#include "search/worker.h"

namespace rlgemm::env {
namespace {

struct RlgemmProblem {  // contract_prelude()'s rlgemm_problem
  int64_t m, n, k;
  int32_t layout;
};
using LaunchFn = int (*)(const RlgemmProblem*, const void*, const void*, void*, void*, size_t, cudaStream_t);
using WorkspaceFn = size_t (*)(const RlgemmProblem*);

RlgemmProblem contract_problem(const Problem& p) {
  return {p.shape.m, p.shape.n, p.shape.k, p.layout == Layout::kTN ? 0 : 1};
}

// A call on freshly written inputs may take this much longer than a back-to-back call before the kernel counts
// as timing-dependent (env/evaluator.h, step 3).
constexpr double kFreshInputFactor = 2.0;
constexpr double kFreshInputMarginUs = 30.0;

// Thrown where the submission, not the harness, is at fault.
struct Rejected {
  Rejection rejection;
};

// A source submission's shared object as an implementation of the harness.
class SubmissionImplementation : public bench::Implementation {
 public:
  // `name` must be new to the gate: it remembers by name which implementations passed its long-K probe.
  SubmissionImplementation(const std::string& path, std::string name) : name_(std::move(name)) {
    handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle_) throw Rejected{{"launch_error", std::string("the shared object does not load: ") + ::dlerror()}};
    launch_ = reinterpret_cast<LaunchFn>(::dlsym(handle_, kLaunchSymbol));
    workspace_fn_ = reinterpret_cast<WorkspaceFn>(::dlsym(handle_, kWorkspaceSymbol));
    if (!launch_) throw Rejected{{"no_launch_function", "the shared object exports no rlgemm_launch"}};
  }
  ~SubmissionImplementation() override {
    // After a hang (the gate's watchdog fired) nothing may wait for the device: this runs while the hang's error
    // unwinds to the worker's exit, and a synchronization here would wait for the hung kernel until the
    // service's own timeout (seen: 5 minutes for the hang case instead of the watchdog's seconds).
    if (device_hung()) return;
    for (auto& [key, captured] : graphs_) {
      cudaGraphExecDestroy(captured.exec);
      cudaGraphDestroy(captured.graph);
    }
    if (capture_stream_) cudaStreamDestroy(capture_stream_);
    // Unloading ends the submission: its host statics and its __device__ variables are gone, so that the next
    // evaluation (of this same source too) starts from nothing it left.
    if (cudaDeviceSynchronize() == cudaSuccess) ::dlclose(handle_);
  }

  std::string name() const override { return name_; }
  bool runtime_shape() const override { return true; }

  void prepare(const Problem& problem, const bench::Operands&, cudaStream_t stream) override {
    const RlgemmProblem p = contract_problem(problem);
    workspace_bytes_ = workspace_fn_ ? workspace_fn_(&p) : 0;
    if (workspace_bytes_ > (size_t(8) << 30))
      throw Rejected{{"allocation", "rlgemm_workspace_bytes asks for " + std::to_string(workspace_bytes_) + " bytes"}};
    const size_t elems = (workspace_bytes_ + sizeof(half) - 1) / sizeof(half);
    if (elems) {
      workspace_.reserve(elems, stream);
      RLGEMM_CUDA_CHECK(cudaMemsetAsync(workspace_.data(), 0, elems * sizeof(half), stream));
      workspace_.arm_guards(elems, stream);
    }
  }

  void run(const Problem& problem, const bench::Operands& x, cudaStream_t stream) override {
    const Key key{x.a, x.b, x.c, workspace_.data(), problem.shape.m, problem.shape.n, problem.shape.k, int(problem.layout)};
    auto it = graphs_.find(key);
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    RLGEMM_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
    if (capturing != cudaStreamCaptureStatusNone) {
      // Graph-mode timing captures these calls: the work captured from the launch function, and checked by the
      // gate, goes into that graph as a child graph (a graph launch is no work a capture can hold).
      if (it == graphs_.end())
        throw Error(ErrorKind::kRuntime, "the submission is timed on operands it was not checked on");
      append_to_capture(it->second.graph, stream);
      return;
    }
    if (it == graphs_.end()) {
      it = graphs_.emplace(key, capture(problem, x, stream)).first;
      // Capturing ran nothing on `stream`, but work sent elsewhere may have run: C is poisoned again (the gate
      // poisoned it before this call), so that only the graph's work can fill it.
      bench::fill_nan(x.c, size_t(problem.c_elems()), stream);
    }
    // The captured work as recorded: launched directly where it is a chain of kernels and memsets (no graph
    // launch's host cost, as bench launches a design's kernel), else as the graph.
    if (it->second.direct)
      launch_recorded(*it->second.direct, stream);
    else
      RLGEMM_CUDA_CHECK(cudaGraphLaunch(it->second.exec, stream));
  }

  std::string stray_write(cudaStream_t stream) const override {
    if (workspace_bytes_ && !workspace_.guards_intact(stream)) return "a write strayed outside the workspace";
    return "";
  }

 private:
  // A graph holds the addresses it was captured with: the operands' and the workspace's.
  using Key = std::tuple<const void*, const void*, const void*, const void*, int64_t, int64_t, int64_t, int>;
  // Every call outside a capture makes the captured work again, never the submission's launch function, so that
  // its host code cannot change what a later call does: the graph's kernels and memsets launched directly where
  // they are a chain of them (run/recorded.h), else the graph.
  struct Captured {
    cudaGraph_t graph = nullptr;  // kept for graph-mode timing (append_to_capture)
    cudaGraphExec_t exec = nullptr;
    std::optional<std::vector<RecordedOp>> direct;
  };

  // Adds `child` to the graph being captured on `stream`, after the work captured so far, and makes it what the
  // next captured work waits for.
  static void append_to_capture(cudaGraph_t child, cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    const cudaGraphNode_t* after = nullptr;
    size_t count = 0;
    RLGEMM_CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, &after, nullptr, &count));
    if (status != cudaStreamCaptureStatusActive) throw Error(ErrorKind::kRuntime, "the capture of the timed calls was invalidated");
    cudaGraphNode_t node = nullptr;
    RLGEMM_CUDA_CHECK(cudaGraphAddChildGraphNode(&node, graph, after, count, child));
    RLGEMM_CUDA_CHECK(cudaStreamUpdateCaptureDependencies(stream, &node, nullptr, 1, cudaStreamSetCaptureDependencies));
  }

  // The submission's work for these operands, captured from one call of its launch function. That call gets a
  // blocking stream of the submission's own, captured in global mode: work it puts on the legacy stream then
  // breaks the capture (legacy_stream) instead of running uncaptured. The captured work runs on the caller's
  // stream, non-blocking as `rlgemm bench`'s (while the timed calls went on a blocking stream, the reward's
  // offline times of 5 us kernels were 1-4% above bench's).
  Captured capture(const Problem& problem, const bench::Operands& x, cudaStream_t stream) {
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (!capture_stream_) RLGEMM_CUDA_CHECK(cudaStreamCreate(&capture_stream_));
    const RlgemmProblem p = contract_problem(problem);
    RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeGlobal));
    const int status =
        launch_(&p, x.a, x.b, x.c, workspace_bytes_ ? workspace_.data() : nullptr, workspace_bytes_, capture_stream_);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(capture_stream_, &graph);
    const cudaError_t sticky = cudaGetLastError();
    // Whatever the launch sent to other streams must finish before C is poisoned again.
    const cudaError_t sync = cudaDeviceSynchronize();
    if (sync != cudaSuccess && sync != cudaErrorStreamCaptureImplicit && sync != cudaErrorStreamCaptureUnsupported &&
        sync != cudaErrorStreamCaptureInvalidated) {
      std::fprintf(stderr, "rlgemm worker: the submission's launch broke the CUDA context: %s\n", cudaGetErrorString(sync));
      std::fflush(stderr);
      std::_Exit(kContextLostExit);
    }
    auto reject = [&](const std::string& reason, const std::string& detail) {
      if (graph) cudaGraphDestroy(graph);
      throw Rejected{{reason, detail}};
    };
    // The launch's own error (a launch function returns cudaGetLastError(), which clears it), the one left set,
    // and the capture's: the first that names a cause decides.
    const cudaError_t errors[] = {cudaError_t(status), sticky, end};
    auto seen = [&](cudaError_t e) { return std::find(std::begin(errors), std::end(errors), e) != std::end(errors); };
    if (seen(cudaErrorStreamCaptureImplicit))
      reject("legacy_stream", "the launch put work on the legacy (default) stream, not on the stream it was given");
    if (seen(cudaErrorStreamCaptureUnsupported))
      reject("host_sync", "the launch made a call that cannot be part of a stream's work (a synchronization or an "
                          "allocation)");
    if (seen(cudaErrorStreamCaptureInvalidated) || seen(cudaErrorStreamCaptureUnjoined) ||
        seen(cudaErrorStreamCaptureIsolation))
      reject("other_stream", "the launch tied the given stream's work to work outside it (capture: " +
                                 std::string(cudaGetErrorString(end != cudaSuccess ? end : sticky)) + ")");
    if (end != cudaSuccess || sticky != cudaSuccess)
      reject("launch_error", std::string("the launch failed: ") + cudaGetErrorString(end != cudaSuccess ? end : sticky));
    if (status != 0) reject("launch_error", "rlgemm_launch returned " + std::to_string(status));
    size_t nodes = 0;
    RLGEMM_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
    std::vector<cudaGraphNode_t> list(nodes);
    if (nodes) RLGEMM_CUDA_CHECK(cudaGraphGetNodes(graph, list.data(), &nodes));
    int kernels = 0;
    for (auto node : list) {
      cudaGraphNodeType type;
      RLGEMM_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      kernels += type == cudaGraphNodeTypeKernel;
    }
    if (kernels == 0)
      reject("no_work", "the launch put no kernel on the stream it was given (work on another stream is not counted)");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    if (inst != cudaSuccess) reject("launch_error", std::string("the captured work does not instantiate: ") + cudaGetErrorString(inst));
    std::string not_a_chain;
    return {graph, exec, read_chain(graph, false, not_a_chain)};
  }

  std::string name_;
  void* handle_ = nullptr;
  LaunchFn launch_ = nullptr;
  WorkspaceFn workspace_fn_ = nullptr;
  size_t workspace_bytes_ = 0;
  bench::GuardedBuffer workspace_;
  std::map<Key, Captured> graphs_;
  cudaStream_t capture_stream_ = nullptr;
};

// What the gate's message says about how the output was wrong.
std::string gate_reason(const std::string& why) {
  if (why.find("strayed") != std::string::npos) return "stray_write";
  if (why.find("not written or not finite") != std::string::npos) return "partial_output";
  return "wrong_result";
}

class EnvBackend : public measure::GpuMeasurer {
 public:
  explicit EnvBackend(const search::BackendOptions& options)
      : GpuMeasurer(options), device_(open_device(options.gpu_ordinal)),
        seed_(uint64_t(std::chrono::system_clock::now().time_since_epoch().count()) * 7919) {
    // Non-blocking, as `rlgemm bench`'s stream: a submission's launch is captured on a blocking stream of its own.
    RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~EnvBackend() override {
    vendors_.clear();
    if (stream_) cudaStreamDestroy(stream_);
  }

  nlohmann::json evaluate(const nlohmann::json& request) override {
    const Problem problem = search::problem_from_json(request);
    validate(problem.shape);
    nlohmann::json record = {{"correct", false}, {"max_error", nullptr}, {"time_us", nullptr},
                             {"speedup_vs_best_vendor", nullptr}, {"speedup_vs_best_vendor_offline", nullptr},
                             {"rejection", nullptr}};
    try {
      std::unique_ptr<bench::Implementation> impl;
      if (request.contains("design")) {
        auto design = std::make_unique<measure::DesignImplementation>(parse_design(request.at("design").get<std::string>()), device_);
        if (!design->supports(problem)) throw Rejected{{"invalid_design", design->unsupported_reason(problem)}};
        impl = std::move(design);
      } else {
        impl = std::make_unique<SubmissionImplementation>(request.at("shared_object").get<std::string>(),
                                                          "submission " + std::to_string(++submissions_));
      }
      run_checks(*impl, problem, record);
    } catch (const Rejected& r) {
      record["rejection"] = {{"reason", r.rejection.reason}, {"detail", r.rejection.detail}};
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kHang || cudaDeviceSynchronize() != cudaSuccess) {
        std::fprintf(stderr, "rlgemm worker: %s\n", e.what());
        std::fflush(stderr);
        std::_Exit(e.kind() == ErrorKind::kHang ? exit_code(ErrorKind::kHang) : kContextLostExit);
      }
      (void)cudaGetLastError();
      if (e.kind() == ErrorKind::kNoDevice || e.kind() == ErrorKind::kOutOfMemory) throw;
      record["rejection"] = {{"reason", "launch_error"}, {"detail", e.what()}};
    }
    record["verdict"] = record["rejection"].is_null() ? "accepted" : "rejected";
    return record;
  }

 private:
  void run_checks(bench::Implementation& impl, const Problem& problem, nlohmann::json& record) {
    gate_.load(problem, seed_ += 16, stream_);
    try {
      impl.prepare(problem, gate_.operands(), stream_);
    } catch (const Error& e) {
      // The workspace it asks for does not fit beside the problem: the submission's failure, not the service's.
      if (e.kind() != ErrorKind::kOutOfMemory) throw;
      (void)cudaGetLastError();
      throw Rejected{{"allocation", std::string("its workspace does not fit in device memory: ") + e.what()}};
    }
    const bench::CheckResult check = gate_.check(impl, stream_);
    sync_or_exit("checked");
    record["max_error"] = check.worst_ratio;
    if (!check.ok) throw Rejected{{gate_reason(check.why), "correctness gate: " + check.why}};

    auto& vendors = vendors_for(problem);
    const bench::Operands x = gate_.operands();
    std::vector<bench::Subject> subjects{{[&impl, problem, x](cudaStream_t s) { impl.run(problem, x, s); }, {}, impl.name()}};
    for (auto& v : vendors)
      subjects.push_back({[v = v.get(), problem, x](cudaStream_t s) { v->run(problem, x, s); }, {}, v->name()});
    std::vector<std::string> names;
    for (const auto& subject : subjects) names.push_back(subject.name);
    // Both modes in the same interleaved rounds of shuffled order, kRewardRounds (env/reward.h), as `rlgemm bench`
    // times them: graph mode, the GPU's time alone, is the reward; offline mode is bench's default time. Neither
    // is timed first (the first ran on a cooler GPU). The offline calls are prepared first: the first call
    // captures the launch for these operands where the gate's long-K probe moved the workspace, and graph mode
    // then takes that capture in as a child graph.
    bench::TimingOptions options;
    options.seed = seed_;
    options.batches = kRewardRounds;
    const auto both = bench::time_modes_side_by_side({bench::Mode::kOffline, bench::Mode::kGraph}, subjects, {},
                                                     stream_, options);
    const std::vector<bench::Timing>& times = both[0];
    const std::vector<bench::Timing>& graph = both[1];
    sync_or_exit("timed");

    // The same calls with A and B rewritten with new values before each (untimed; one call between device
    // synchronizations, host clock): a kernel that serves a kept result for inputs it has already seen pays the
    // whole product here, far more than in the back-to-back timing above. The fastest of these calls is
    // compared, so that one slow call of an honest kernel does not count; the margin covers the host clock's
    // launch and synchronization overhead.
    bench::TimingOptions fresh_options;
    fresh_options.samples = 7;
    fresh_options.seed = seed_;
    uint64_t fresh_seed = seed_ * 0x9e3779b97f4a7c15ull;
    const auto refresh = [&](cudaStream_t s) {
      bench::fill_random(const_cast<half*>(x.a), size_t(problem.a_elems()), bench::Fill::kNormal, ++fresh_seed, s,
                         problem.dtype);
      bench::fill_random(const_cast<half*>(x.b), size_t(problem.b_elems()), bench::Fill::kNormal, ++fresh_seed, s,
                         problem.dtype);
    };
    const bench::Timing fresh =
        bench::time_side_by_side(bench::Mode::kCudal2, {subjects[0]}, refresh, stream_, fresh_options)[0];
    sync_or_exit("timed on fresh inputs");
    record["fresh_input_us"] = fresh.min_us;
    if (fresh.min_us > kFreshInputFactor * times[0].time_us + kFreshInputMarginUs)
      throw Rejected{{"timing_dependent", "the fastest call on freshly written inputs took " + std::to_string(fresh.min_us) +
                                              " us, the back-to-back calls " + std::to_string(times[0].time_us) +
                                              " us each: the kernel is fast only on inputs it has seen"}};

    // New values in the same buffers: an output kept from an earlier call no longer matches.
    gate_.load(problem, seed_ += 16, stream_);
    const bench::CheckResult again = gate_.recheck(impl, stream_);
    sync_or_exit("checked again");
    record["max_error"] = std::max(check.worst_ratio, again.worst_ratio);
    if (!again.ok)
      throw Rejected{{again.why.find("strayed") != std::string::npos ? "stray_write" : "stale_output",
                      "on new inputs after the timed calls: " + again.why}};

    record["correct"] = true;
    write_reward(record, mode_reward(names, graph), "");
    write_reward(record, mode_reward(names, times), "_offline");
  }

  // The vendor calls of a problem, prepared once per worker (lt_auto times its candidates then).
  std::vector<bench::ImplementationPtr>& vendors_for(const Problem& problem) {
    const std::string key = problem.shape.to_string() + std::string(to_string(problem.layout));
    auto& list = vendors_[key];
    if (list.empty()) {
      for (const auto& name : bench::cublas_implementation_names()) {
        if (!bench::is_vendor_implementation(name)) continue;
        auto impl = bench::make_cublas_implementation(name);
        if (!impl->supports(problem)) continue;
        impl->prepare(problem, gate_.operands(), stream_);
        list.push_back(std::move(impl));
      }
    }
    return list;
  }

  void sync_or_exit(const char* what) {
    const cudaError_t status = cudaStreamSynchronize(stream_);
    if (status == cudaSuccess) return;
    std::fprintf(stderr, "rlgemm worker: the submission broke the CUDA context while being %s: %s\n", what,
                 cudaGetErrorString(status));
    std::fflush(stderr);
    std::_Exit(kContextLostExit);
  }

  DeviceInfo device_;
  cudaStream_t stream_ = nullptr;
  bench::Gate gate_;
  uint64_t seed_;
  uint64_t submissions_ = 0;
  std::map<std::string, std::vector<bench::ImplementationPtr>> vendors_;
};

}  // namespace

void install_env_backend() {
  search::register_backend("env", [](const search::BackendOptions& o) -> search::MeasurerPtr {
    return std::make_unique<EnvBackend>(o);
  });
  search::register_backend_device_counter("env", measure::gpu_count);
}

}  // namespace rlgemm::env
