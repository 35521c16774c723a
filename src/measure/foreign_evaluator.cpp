#include "measure/foreign_evaluator.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <iterator>
#include <optional>

#include "bench/device_data.h"
#include "core/cuda_util.h"
#include "measure/gpu_measurer.h"
#include "measure/launch_spec.h"
#include "measure/sass_bitwise.h"
#include "rlgemm/error.h"
#include "run/driver.h"
#include "run/module_cache.h"
#include "sass/cubin.h"
#include "search/worker.h"
#include "store/measurement.h"

namespace rlgemm::measure {

using nlohmann::json;

namespace {

// A timing as requests carry it; "mode" (offline or graph) is absent from the requests of older callers, which
// time offline.
json timing_json(const bench::TimingOptions& t, bench::Mode mode) {
  return {{"batch_target_us", t.batch_target_us}, {"batches", t.batches},
          {"max_warmup_batches", t.max_warmup_batches}, {"seed", t.seed}, {"mode", std::string(bench::to_string(mode))}};
}

bench::Mode timing_mode_from_json(const json& j) {
  const bench::Mode mode = bench::parse_mode(j.value("mode", std::string("offline")));
  if (mode != bench::Mode::kOffline && mode != bench::Mode::kGraph)
    fail("a foreign-kernel timing runs offline or in graph mode, not " + std::string(bench::to_string(mode)));
  return mode;
}

bench::TimingOptions timing_from_json(const json& j) {
  bench::TimingOptions t;
  t.batch_target_us = j.at("batch_target_us").get<double>();
  t.batches = j.at("batches").get<int>();
  t.max_warmup_batches = j.at("max_warmup_batches").get<int>();
  t.seed = j.at("seed").get<uint64_t>();
  if (!(t.batch_target_us > 0) || t.batches < 1 || t.max_warmup_batches < 1)
    fail("a foreign-kernel timing needs a positive batch length, batches and warm-up batches");
  return t;
}

std::vector<char> read_bytes(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(std::string("cannot read the ") + what + " cubin '" + path + "'");
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string digest(const std::vector<char>& bytes) {
  return cubin_digest(std::vector<uint8_t>(bytes.begin(), bytes.end()));
}

// ---- the worker side ---------------------------------------------------------------------------------

// A hang ends the worker like a fault does: the hung kernel still occupies the GPU and nothing else can run.
[[noreturn]] void end_worker_after_hang(const std::string& what) {
  std::fprintf(stderr, "rlgemm worker: %s; the worker ends so that it can restart\n", what.c_str());
  std::fflush(stderr);
  std::_Exit(exit_code(ErrorKind::kHang));
}

// Ends the worker when the last failure broke the context (a sticky error) or hung; returns otherwise,
// with any non-sticky error state cleared.
void end_worker_if_lost(const Error& e, const std::string& what) {
  if (e.kind() == ErrorKind::kHang || device_hung()) end_worker_after_hang(what + ": " + e.what());
  (void)cudaGetLastError();
  cudaError_t status = cudaDeviceSynchronize();
  if (status == cudaSuccess) status = cudaGetLastError();
  if (status != cudaSuccess)
    end_worker_after_context_loss(what + ": " + e.what() + " (" + cudaGetErrorName(status) + ")");
}

// One foreign kernel on the worker's GPU: its buffers, its draws and the original's outputs on them.
class ForeignKernelRunner {
 public:
  ForeignKernelRunner(const DeviceInfo& device, ForeignTarget target, cudaStream_t stream)
      : target_(std::move(target)), stream_(stream) {
    if (target_.draws < 1) fail("a foreign-kernel session needs at least one input draw");
    // The parent checked all of this before starting the worker; a worker may be started by hand.
    const sass::Cubin cubin = sass::Cubin::load(target_.cubin_path);
    spec_ = load_launch_spec(target_.launch_path);
    check_launch_spec(spec_, cubin.kernel_params(target_.kernel), target_.kernel);
    if (spec_.shared_bytes > smem_limit_or_hopper(device.smem_per_block_optin))
      fail("launch SPEC " + spec_.origin + " asks for " + std::to_string(spec_.shared_bytes) +
           " bytes of dynamic shared memory; " + device.name + " allows " +
           std::to_string(device.smem_per_block_optin));
    const std::vector<char> bytes = read_bytes(target_.cubin_path, "original");
    original_ = ModuleCache::instance().function("sass-foreign-original:" + digest(bytes), bytes, target_.kernel,
                                                 spec_.shared_bytes);
    allocate();
    record_original();
  }

  const ForeignTarget& target() const { return target_; }
  bool tainted() const { return tainted_; }

  json judge(const std::string& candidate_path, int draws, const bench::TimingOptions& timing, bench::Mode mode) {
    if (draws < 1 || draws > target_.draws)
      fail("a judgement asks for " + std::to_string(draws) + " draws; the session prepared " +
           std::to_string(target_.draws));
    auto failed = [](const std::string& why) { return json{{"ok", false}, {"failure", why}}; };
    CUfunction candidate = original_;
    std::optional<CandidateModule> module;
    if (!candidate_path.empty()) {
      const std::vector<char> bytes = read_bytes(candidate_path, "candidate");
      const std::string key = "sass-foreign-candidate:" + digest(bytes);
      module.emplace(key);
      try {
        candidate = ModuleCache::instance().function(key, bytes, target_.kernel, spec_.shared_bytes);
      } catch (const Error& e) {
        end_worker_if_lost(e, "loading the candidate cubin");
        return failed(std::string("the candidate cubin does not load: ") + e.what());
      }
    }
    for (int d = 0; d < draws; ++d) {
      load_draw(d);
      try {
        launch(candidate, stream_);
      } catch (const Error& e) {
        end_worker_if_lost(e, "launching the candidate");
        return failed(std::string("the candidate's launch failed: ") + e.what());
      }
      try {
        wait_for(stream_, "the candidate on draw " + std::to_string(d), hang_limit_s_);
      } catch (const Error& e) {
        end_worker_if_lost(e, "running the candidate on draw " + std::to_string(d));
        return failed(std::string("the candidate failed on draw ") + std::to_string(d) + ": " + e.what());
      }
      for (size_t p = 0; p < spec_.params.size(); ++p) {
        const LaunchParam& param = spec_.params[p];
        if (param.kind != ParamKind::kBuffer) continue;
        if (!work_[p].guards_intact(stream_)) {
          // A stray write may have reached the draws and outputs kept on the device too: the next request
          // rebuilds them.
          tainted_ = true;
          return failed("the candidate wrote outside buffer '" + param.name + "'");
        }
        if (!param.compared()) continue;
        const int64_t differ = count_bit_differences(work_[p].data(), expected_[p][size_t(d)].data(), words(p), stream_);
        if (differ != 0)
          return failed("buffer '" + param.name + "' differs from the original's output in " + std::to_string(differ) +
                        " of " + std::to_string(words(p)) + " 16-bit words (draw " + std::to_string(d) + ")");
      }
    }
    std::vector<bench::Timing> times;
    try {
      times = time({original_, candidate}, timing, mode);
    } catch (const Error& e) {
      end_worker_if_lost(e, "timing the candidate");
      return failed(std::string("timing the candidate failed: ") + e.what());
    }
    return {{"ok", true},
            {"draws", draws},
            {"original_us", times[0].time_us},
            {"candidate_us", times[1].time_us},
            {"samples", times[1].samples},
            {"original_rounds_us", times[0].rounds_us},
            {"candidate_rounds_us", times[1].rounds_us}};
  }

  json time_original(const bench::TimingOptions& timing) {
    try {
      return {{"ok", true}, {"time_us", time({original_}, timing, bench::Mode::kOffline).front().time_us}};
    } catch (const Error& e) {
      end_worker_if_lost(e, "timing the original");
      throw;
    }
  }

 private:
  size_t words(size_t p) const { return size_t((spec_.params[p].bytes + 1) / 2); }
  bool varies(const LaunchParam& p) const { return p.fill.rule == FillRule::kRandom; }

  void allocate() {
    const size_t n = spec_.params.size();
    work_ = std::vector<bench::GuardedBuffer>(n);
    filled_ = std::vector<std::vector<bench::GuardedBuffer>>(n);
    expected_ = std::vector<std::vector<bench::GuardedBuffer>>(n);
    pointers_.assign(n, 0);
    // The fills are made on the host (a function of seed, draw and parameter alone), concurrently.
    std::vector<std::vector<std::future<std::vector<uint8_t>>>> made(n);
    for (size_t p = 0; p < n; ++p) {
      const LaunchParam& param = spec_.params[p];
      if (param.kind != ParamKind::kBuffer) continue;
      work_[p].reserve(words(p), stream_);
      work_[p].arm_guards(words(p), stream_);
      pointers_[p] = reinterpret_cast<CUdeviceptr>(work_[p].data());
      if (param.role == BufferRole::kScratch) continue;
      const int copies = varies(param) ? target_.draws : 1;
      for (int d = 0; d < copies; ++d)
        made[p].push_back(std::async(std::launch::async, fill_bytes, param.fill, param.bytes, target_.seed, uint64_t(d),
                                     uint64_t(p)));
    }
    for (size_t p = 0; p < n; ++p) {
      filled_[p] = std::vector<bench::GuardedBuffer>(made[p].size());
      for (size_t d = 0; d < made[p].size(); ++d) {
        std::vector<uint8_t> bytes = made[p][d].get();
        bytes.resize(words(p) * 2, 0);
        filled_[p][d].reserve(words(p), stream_);
        RLGEMM_CUDA_CHECK(cudaMemcpyAsync(filled_[p][d].data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream_));
        RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream_));  // `bytes` is freed at the end of this iteration
      }
      if (spec_.params[p].compared()) {
        expected_[p] = std::vector<bench::GuardedBuffer>(size_t(target_.draws));
        for (auto& e : expected_[p]) e.reserve(words(p), stream_);
      }
    }
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // Every buffer as draw `d` starts it: inputs and outputs refilled, scratch zeroed, the padding byte of an
  // odd-sized buffer included.
  void load_draw(int d) {
    for (size_t p = 0; p < spec_.params.size(); ++p) {
      const LaunchParam& param = spec_.params[p];
      if (param.kind != ParamKind::kBuffer) continue;
      if (param.role == BufferRole::kScratch) {
        RLGEMM_CUDA_CHECK(cudaMemsetAsync(work_[p].data(), 0, words(p) * 2, stream_));
      } else {
        const auto& source = filled_[p][varies(param) ? size_t(d) : 0];
        RLGEMM_CUDA_CHECK(
            cudaMemcpyAsync(work_[p].data(), source.data(), words(p) * 2, cudaMemcpyDeviceToDevice, stream_));
      }
    }
  }

  // On `stream`: the session's, or the one a timing captures its calls on.
  void launch(CUfunction function, cudaStream_t stream) {
    std::vector<void*> args(spec_.params.size());
    for (size_t p = 0; p < args.size(); ++p)
      args[p] = spec_.params[p].kind == ParamKind::kScalar ? static_cast<void*>(spec_.params[p].value.data())
                                                           : static_cast<void*>(&pointers_[p]);
    launch_function(function, spec_.grid.data(), spec_.block.data(), spec_.cluster.data(), unsigned(spec_.shared_bytes),
                    reinterpret_cast<CUstream>(stream), args.data());
  }

  // The original's output on every draw, and the proof that it is reproducible: a second run on the first
  // draw must give the same bits.
  void record_original() {
    for (int d = 0; d < target_.draws; ++d) {
      load_draw(d);
      const auto start = std::chrono::steady_clock::now();
      launch(original_, stream_);
      wait_for(stream_, "the original kernel on draw " + std::to_string(d));
      if (d == 0) {
        // A run that takes a thousand times as long as the original's (at least 10 s) is a hang.
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        hang_limit_s_ = std::max(10.0, 1000.0 * seconds);
      }
      for (size_t p = 0; p < spec_.params.size(); ++p) {
        const LaunchParam& param = spec_.params[p];
        if (param.kind != ParamKind::kBuffer) continue;
        if (!work_[p].guards_intact(stream_))
          fail("the original kernel '" + target_.kernel + "' writes outside buffer '" + param.name +
               "': is its size in launch SPEC " + spec_.origin + " right?");
        if (param.compared())
          RLGEMM_CUDA_CHECK(cudaMemcpyAsync(expected_[p][size_t(d)].data(), work_[p].data(), words(p) * 2,
                                            cudaMemcpyDeviceToDevice, stream_));
      }
    }
    load_draw(0);
    launch(original_, stream_);
    wait_for(stream_, "the original kernel, run again");
    for (size_t p = 0; p < spec_.params.size(); ++p) {
      if (!spec_.params[p].compared()) continue;
      const int64_t differ = count_bit_differences(work_[p].data(), expected_[p][0].data(), words(p), stream_);
      if (differ != 0)
        fail("the original kernel '" + target_.kernel + "' is not reproducible: two runs on the same inputs differ in " +
             std::to_string(differ) + " of " + std::to_string(words(p)) + " 16-bit words of buffer '" +
             spec_.params[p].name + "'. Schedules are compared bit for bit, so this kernel cannot be judged");
    }
  }

  // Side by side, in `mode`, on the first draw's inputs.
  std::vector<bench::Timing> time(const std::vector<CUfunction>& functions, const bench::TimingOptions& timing,
                                  bench::Mode mode) {
    load_draw(0);
    std::vector<bench::Subject> subjects;
    for (size_t i = 0; i < functions.size(); ++i)
      subjects.push_back({[this, f = functions[i]](cudaStream_t s) { launch(f, s); }, {},
                          i == 0 ? "the original" : "the candidate"});
    return bench::time_side_by_side(mode, subjects, nullptr, stream_, timing);
  }

  ForeignTarget target_;
  cudaStream_t stream_;
  LaunchSpec spec_;
  CUfunction original_ = nullptr;
  std::vector<bench::GuardedBuffer> work_;                   // per parameter: what the kernels run on
  std::vector<std::vector<bench::GuardedBuffer>> filled_;    // per parameter, per draw (or one): its fill
  std::vector<std::vector<bench::GuardedBuffer>> expected_;  // per compared parameter, per draw: the original's output
  std::vector<CUdeviceptr> pointers_;                        // per parameter: the address passed (0 for null)
  double hang_limit_s_ = 10.0;
  bool tainted_ = false;  // a candidate wrote outside its buffers: what is kept on the device may be changed
};

// The "sass-foreign" backend: judges rescheduled cubins of one foreign kernel at a time.
class ForeignKernelBackend : public search::Measurer {
 public:
  explicit ForeignKernelBackend(const search::BackendOptions& options) : device_(open_device(options.gpu_ordinal)) {
    if (device_.cc_major != 9 || device_.cc_minor != 0)
      throw Error(ErrorKind::kNoDevice, "the SASS game reads and runs Hopper (sm_90) code only; device " +
                                            std::to_string(options.gpu_ordinal) + " is " + device_.name + " (sm_" +
                                            std::to_string(device_.cc_major) + std::to_string(device_.cc_minor) + ")");
    RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~ForeignKernelBackend() override {
    runner_.reset();
    if (stream_ && !device_hung()) cudaStreamDestroy(stream_);
  }

  GpuIdentity gpu() override { return identity_of(device_); }
  TimingStats reference(const Problem&, TimingMode) override { refuse(); }
  Measurement measure(const Design&, const Problem&, TimingMode) override { refuse(); }

  json evaluate(const json& request) override {
    const ForeignTarget target = ForeignTarget::from_json(request.at("foreign"));
    if (!runner_ || !(runner_->target() == target) || runner_->tainted()) {
      runner_.reset();
      try {
        runner_ = std::make_unique<ForeignKernelRunner>(device_, target, stream_);
      } catch (const Error& e) {
        end_worker_if_lost(e, "preparing the original kernel");
        throw;
      }
    }
    const std::string task = request.at("task").get<std::string>();
    const bench::TimingOptions timing = timing_from_json(request.at("timing"));
    const bench::Mode mode = timing_mode_from_json(request.at("timing"));
    if (task == "judge")
      return runner_->judge(request.value("candidate", std::string()), request.at("draws").get<int>(), timing, mode);
    if (task == "time") return runner_->time_original(timing);
    fail("unknown foreign-kernel task '" + task + "': expected judge or time");
  }

 private:
  [[noreturn]] static void refuse() {
    fail("the sass-foreign backend judges rescheduled cubins of a foreign kernel; it does not tune designs");
  }

  DeviceInfo device_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<ForeignKernelRunner> runner_;
};

}  // namespace

// ---- the two sides' common forms ---------------------------------------------------------------------

json ForeignTarget::to_json() const {
  return {{"cubin", cubin_path}, {"kernel", kernel}, {"launch", launch_path}, {"seed", seed}, {"draws", draws}};
}

ForeignTarget ForeignTarget::from_json(const json& j) {
  ForeignTarget t;
  t.cubin_path = j.at("cubin").get<std::string>();
  t.kernel = j.at("kernel").get<std::string>();
  t.launch_path = j.at("launch").get<std::string>();
  t.seed = j.at("seed").get<uint64_t>();
  t.draws = j.at("draws").get<int>();
  return t;
}

// ---- sass-opt's side ---------------------------------------------------------------------------------

ForeignSassEvaluator::ForeignSassEvaluator(search::MeasurerPtr worker, ForeignTarget target,
                                           ForeignEvaluatorOptions options)
    : worker_(std::move(worker)), target_(std::move(target)), options_(options) {
  if (!worker_) fail("the foreign-kernel evaluator needs a worker");
  if (options_.search_draws < 1 || options_.search_draws > target_.draws)
    fail("the foreign-kernel evaluator's search draws must be between 1 and the session's " +
         std::to_string(target_.draws));
  std::string dir = (std::filesystem::temp_directory_path() / "rlgemm-sass-foreign-XXXXXX").string();
  if (!::mkdtemp(dir.data())) throw Error(ErrorKind::kRuntime, "cannot create a scratch folder in " + dir);
  scratch_ = dir;
  (void)worker_->gpu();  // starts the worker: a machine without a usable Hopper GPU fails here
}

ForeignSassEvaluator::~ForeignSassEvaluator() {
  std::error_code ec;
  std::filesystem::remove_all(scratch_, ec);
}

json ForeignSassEvaluator::request(const std::string& task, const std::string& candidate, int draws, bench::Mode mode,
                                   const bench::TimingOptions& timing) {
  json message = {{"foreign", target_.to_json()}, {"task", task}, {"timing", timing_json(timing, mode)}};
  if (!candidate.empty()) message["candidate"] = candidate;
  if (task == "judge") message["draws"] = draws;
  return worker_->evaluate(message);
}

double ForeignSassEvaluator::reference_time_us() {
  if (!reference_us_) {
    const json record = request("time", "", 0, bench::Mode::kOffline, options_.reference_timing);
    if (record.contains("worker_failed"))
      throw Error(ErrorKind::kRuntime, "the original kernel '" + target_.kernel + "' did not run with launch SPEC " +
                                           target_.launch_path + ": its worker " +
                                           (record["worker_failed"] == "timeout" ? "hung: " : "died: ") +
                                           record.value("why", std::string()));
    reference_us_ = record.at("time_us").get<double>();
  }
  return *reference_us_;
}

CubinComparison ForeignSassEvaluator::compare(const std::vector<uint8_t>& cubin, int draws,
                                              const bench::TimingOptions& timing, bench::Mode mode) {
  CubinComparison result;
  const std::filesystem::path file = scratch_ / "candidate.cubin";
  sass::write_file_atomically(file.string(), cubin);
  const json record = request("judge", file.string(), draws, mode, timing);
  if (record.contains("worker_failed")) {
    // The candidate crashed or hung its worker, which restarts for the next one: this schedule alone failed.
    ++faults_;
    result.failure = std::string("the candidate ") +
                     (record["worker_failed"] == "timeout" ? "hung its worker" : "crashed its worker") + " (" +
                     record.value("why", std::string()) + ")";
    if (const std::string saved = save_faulting_cubin(cubin); !saved.empty())
      result.failure += "; the schedule is saved as " + saved;
    return result;
  }
  if (!record.value("ok", false)) {
    result.failure = record.value("failure", std::string("the worker gave no reason"));
    return result;
  }
  result.ok = true;
  result.draws = record.at("draws").get<int>();
  result.original_us = record.at("original_us").get<double>();
  result.candidate_us = record.at("candidate_us").get<double>();
  result.samples = record.at("samples").get<int>();
  result.original_rounds_us = record.at("original_rounds_us").get<std::vector<double>>();
  result.candidate_rounds_us = record.at("candidate_rounds_us").get<std::vector<double>>();
  if (!(result.original_us > 0) || !(result.candidate_us > 0)) {
    result.ok = false;
    result.failure = "the timing gave no positive time";
  }
  return result;
}

sass::Measurement ForeignSassEvaluator::evaluate(const sass::Candidate& candidate) {
  const double reference = reference_time_us();
  const CubinComparison c = compare(candidate.cubin(), options_.search_draws, options_.search_timing, bench::Mode::kOffline);
  sass::Measurement m;
  if (!c.ok) {
    m.failure = c.failure;  // never fatal: the fault stayed in the worker
    return m;
  }
  m.ok = true;
  m.time_us = reference * c.candidate_us / c.original_us;
  return m;
}

search::MeasurerPtr start_foreign_worker(const std::string& exe, double request_timeout_s) {
  search::WorkerLaunch launch;
  launch.argv = {exe, "worker", "--backend", "sass-foreign", "--gpu", "0"};
  search::WorkerLimits limits;
  limits.request_timeout_s = request_timeout_s;
  return std::make_unique<search::WorkerMeasurer>(launch, limits);
}

void install_foreign_sass_backend() {
  search::register_backend("sass-foreign", [](const search::BackendOptions& o) -> search::MeasurerPtr {
    return std::make_unique<ForeignKernelBackend>(o);
  });
  search::register_backend_device_counter("sass-foreign", gpu_count);
}

}  // namespace rlgemm::measure
