#include "measure/gpu_measurer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "compile/compiler.h"
#include "compile/isolated_nvrtc.h"
#include "core/gain_interval.h"
#include "generate/generate.h"
#include "measure/foreign_evaluator.h"
#include "measure/sass_evaluator.h"
#include "rlgemm/error.h"

namespace rlgemm::measure {
namespace {

bench::Mode bench_mode(TimingMode mode) {
  switch (mode) {
    case TimingMode::kServer: return bench::Mode::kServer;
    case TimingMode::kGraph: return bench::Mode::kGraph;
    case TimingMode::kOffline: break;
  }
  return bench::Mode::kOffline;
}

// Interleaved rounds of a paired measurement: each gives one log ratio of the candidate against the reference,
// and the 95% interval of their mean narrows with their number (t(0.975, 14) = 2.145).
constexpr int kPairedRounds = 15;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

GpuMeasurer::GpuMeasurer(const search::BackendOptions& options)
    : device_(open_device(options.gpu_ordinal)),
      seed_(uint64_t(std::chrono::system_clock::now().time_since_epoch().count())) {
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

GpuMeasurer::~GpuMeasurer() {
  if (prefetching_.valid()) prefetching_.wait();  // it reads device_ and compile_options_
  designs_.clear();
  if (stream_) cudaStreamDestroy(stream_);
}

GpuIdentity GpuMeasurer::gpu() { return identity_of(device_); }

int GpuMeasurer::parallelism() const { return int(std::max(2u, std::thread::hardware_concurrency())); }

void end_worker_after_context_loss(const std::string& what) {
  std::fprintf(stderr, "rlgemm worker: %s; the CUDA context is lost, the worker ends so that it can restart\n",
               what.c_str());
  std::fflush(stderr);
  std::_Exit(70);
}

void GpuMeasurer::context_lost(const std::string& what) { end_worker_after_context_loss(what); }

void GpuMeasurer::load_problem(const Problem& problem) {
  if (loaded_ && *loaded_ == problem) return;
  gate_.load(problem, seed_ += 16, stream_);
  loaded_ = problem;
}

std::vector<bench::Timing> GpuMeasurer::time(const std::vector<bench::Implementation*>& impls, const Problem& problem,
                                              TimingMode mode) {
  const bench::Operands x = gate_.operands();
  std::vector<bench::Subject> subjects;
  for (bench::Implementation* impl : impls)
    subjects.push_back({[impl, problem, x](cudaStream_t s) { impl->run(problem, x, s); }, {}, impl->name()});
  bench::TimingOptions options;
  options.seed = ++seed_;
  options.batches = kPairedRounds;
  options.samples = kPairedRounds;
  return bench::time_side_by_side(bench_mode(mode), subjects, [](cudaStream_t) {}, stream_, options);
}

bench::Implementation& GpuMeasurer::reference_for(const Problem& problem, TimingMode mode) {
  load_problem(problem);
  // Graph mode pairs with the algorithm chosen in GPU time, which is what the library's floor launches for
  // captured calls; an offline choice can be slower in a graph, and a gain over it would not hold there.
  const bench::Mode choice = mode == TimingMode::kGraph ? bench::Mode::kGraph : bench::Mode::kOffline;
  if (reference_ && reference_problem_ == problem && reference_choice_ == choice) return *reference_;
  reference_.reset();
  reference_problem_.reset();
  auto lt = bench::make_lt_auto(choice);
  lt->prepare(problem, gate_.operands(), stream_);
  const bench::CheckResult check = gate_.check(*lt, stream_);
  if (!check.ok) throw Error(ErrorKind::kRuntime, "lt_auto failed the correctness gate on " + problem.shape.to_string() + ": " + check.why);
  reference_ = std::move(lt);
  reference_problem_ = problem;
  reference_choice_ = choice;
  return *reference_;
}

TimingStats GpuMeasurer::reference(const Problem& problem, TimingMode mode) {
  validate(problem.shape);
  const bench::Timing t = time({&reference_for(problem, mode)}, problem, mode)[0];
  return {t.time_us, t.min_us, t.max_us, t.samples};
}

Measurement GpuMeasurer::measure(const Design& design, const Problem& problem, TimingMode mode) {
  Measurement out;
  const std::string text = to_string(design);
  auto& impl = designs_[text];
  if (!impl) impl = std::make_unique<DesignImplementation>(design, device_, compile_options_);
  if (const std::string why = impl->unsupported_reason(problem); !why.empty()) {
    out.status = MeasureStatus::kFailed;
    out.error = "invalid design " + text + ": " + why;
    return out;
  }
  try {
    validate(problem.shape);
    auto phase = std::chrono::steady_clock::now();
    load_problem(problem);
    out.seconds.operands = seconds_since(phase);
    phase = std::chrono::steady_clock::now();
    if (prefetching_keys_.count(search::compile_key(design, problem))) collect_prefetch(true);
    const GemmKernel& kernel = impl->kernel_for(problem);
    out.seconds.load = seconds_since(phase);
    out.source_hash = kernel.compiled().cache_key;
    // Compile time is paid once per kernel and recorded with its first measurement; a batch compiled it
    // ahead (measure_batch), the kernel object then found it in the cache.
    const std::string key = search::compile_key(design, problem);
    if (reported_.insert(key).second) {
      auto ahead = compiled_ahead_.find(key);
      out.compile_seconds = ahead != compiled_ahead_.end() ? ahead->second : kernel.compiled().compile_seconds;
    }
    // A kernel whose registers spill is not one to keep, however it times: the tuner never learns it as a gain.
    if (const auto why = spill_reason(kernel.compiled().resources)) {
      out.status = MeasureStatus::kFailed;
      out.error = "design " + text;
      out.error.append(" ").append(*why);
      return out;
    }
    phase = std::chrono::steady_clock::now();
    try {
      impl->prepare(problem, gate_.operands(), stream_);
    } catch (const Error& e) {
      // The candidate's own workspace does not fit next to the problem: its failure, not the backend's.
      if (e.kind() != ErrorKind::kOutOfMemory) throw;
      (void)cudaGetLastError();
      impl->release_workspace();
      out.status = MeasureStatus::kFailed;
      out.error = std::string("its workspace does not fit in device memory: ") + e.what();
      return out;
    }
    struct Release {  // the workspace is the candidate's for this measurement only
      DesignImplementation& impl;
      ~Release() {
        if (!device_hung()) try { impl.release_workspace(); } catch (const Error&) {}
      }
    } release{*impl};
    const bench::CheckResult check = gate_.check(*impl, stream_);
    out.seconds.check = seconds_since(phase);
    if (!check.ok) {
      out.status = MeasureStatus::kWrong;
      out.error = "correctness gate: " + check.why;
      // A wrong kernel may have written anywhere: make sure the context survived before going on.
      if (cudaDeviceSynchronize() != cudaSuccess) context_lost(text + " broke the context while being checked");
      return out;
    }
    // Side by side with the reference, in the same rounds: the reward is their paired log ratio.
    phase = std::chrono::steady_clock::now();
    bench::Implementation& reference = reference_for(problem, mode);
    out.seconds.reference = seconds_since(phase);
    phase = std::chrono::steady_clock::now();
    const std::vector<bench::Timing> t = time({impl.get(), &reference}, problem, mode);
    out.seconds.rounds = seconds_since(phase);
    const GainInterval g = gain_interval(t[1].rounds_us, t[0].rounds_us);
    out.timing = {t[0].time_us, t[0].min_us, t[0].max_us, t[0].samples};
    out.paired = PairedGain{t[1].time_us, std::log1p(g.gain), g.low, g.high, g.rounds};
    out.status = MeasureStatus::kOk;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kHang) context_lost(text + " on " + problem.shape.to_string() + ": " + e.what());
    if (cudaDeviceSynchronize() != cudaSuccess || cudaGetLastError() != cudaSuccess)
      context_lost(text + " on " + problem.shape.to_string() + ": " + e.what());
    if (e.kind() == ErrorKind::kOutOfMemory) throw;
    out.status = MeasureStatus::kFailed;
    out.error = e.what();
  }
  return out;
}

std::vector<KernelBuild> GpuMeasurer::builds_for(const std::vector<Design>& designs, const Problem& problem) {
  std::vector<KernelBuild> builds;
  std::set<std::string> keys;
  for (const Design& d : designs) {
    const std::string key = search::compile_key(d, problem);
    if (reported_.count(key) || compiled_ahead_.count(key) || !keys.insert(key).second) continue;
    if (!DesignImplementation(d, device_, compile_options_).supports(problem)) continue;
    builds.push_back({d, d.static_shape ? problem : layout_problem(problem.layout, problem.dtype), {}, {}});
  }
  return builds;
}

void GpuMeasurer::collect_prefetch(bool wait) {
  if (!prefetching_.valid()) return;
  if (!wait && prefetching_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  try {
    for (const KernelBuild& b : prefetching_.get())
      if (b.seconds) compiled_ahead_[search::compile_key(b.design, b.problem)] = *b.seconds;
  } catch (const std::exception&) {
    // Nothing was built ahead: each measure() compiles its own kernel and reports what fails.
  }
  prefetching_keys_.clear();
}

void GpuMeasurer::prefetch(const std::vector<Design>& designs, const Problem& problem) {
  collect_prefetch(false);
  if (prefetching_.valid()) return;
  std::vector<KernelBuild> builds = builds_for(designs, problem);
  if (builds.empty()) return;
  for (const KernelBuild& b : builds) prefetching_keys_.insert(search::compile_key(b.design, b.problem));
  start_compile_service();  // from this thread, as compile_all would
  prefetching_ = std::async(std::launch::async, [this, builds = std::move(builds)]() mutable {
    rlgemm::build_ahead(builds, device_, compile_options_);
    return std::move(builds);
  });
}

double GpuMeasurer::build_ahead(const std::vector<Design>& designs, const Problem& problem) {
  // Compile the whole batch concurrently into the cubin cache; each measure() then only loads. Kernels the
  // prefetch is building are waited for, not built twice.
  const auto start = std::chrono::steady_clock::now();
  collect_prefetch(false);
  for (const Design& d : designs)
    if (prefetching_keys_.count(search::compile_key(d, problem))) {
      collect_prefetch(true);
      break;
    }
  std::vector<KernelBuild> builds = builds_for(designs, problem);
  if (builds.size() > 1) {
    rlgemm::build_ahead(builds, device_, compile_options_);  // failures: measure() reports them per candidate
    for (const KernelBuild& b : builds)
      if (b.seconds) compiled_ahead_[search::compile_key(b.design, problem)] = *b.seconds;
  }
  return seconds_since(start);
}

int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) n = 0;
  return n;
}

void install_gpu_backends() {
  search::register_backend("gpu", [](const search::BackendOptions& o) -> search::MeasurerPtr {
    return std::make_unique<GpuMeasurer>(o);
  });
  search::register_backend_device_counter("gpu", gpu_count);
  install_sass_gpu_evaluator();
  install_foreign_sass_backend();
}

}  // namespace rlgemm::measure
