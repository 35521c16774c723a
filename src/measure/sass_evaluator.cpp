#include "measure/sass_evaluator.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "compile/sha256.h"
#include "measure/sass_bitwise.h"
#include "rlgemm/error.h"
#include "run/module_cache.h"

namespace rlgemm::measure {
std::string cubin_digest(const std::vector<uint8_t>& bytes) {
  return Sha256().update(bytes.data(), bytes.size()).hex_digest();
}

CandidateModule::~CandidateModule() {
  if (device_hung()) return;  // an unload would wait behind the hung kernel
  try {
    ModuleCache::instance().release(key_);
  } catch (...) {  // a lost context: nothing left to unload
  }
}

std::string save_faulting_cubin(const std::vector<uint8_t>& cubin) {
  const auto path =
      std::filesystem::temp_directory_path() / ("rlgemm-sass-fault-" + cubin_digest(cubin).substr(0, 16) + ".cubin");
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(cubin.data()), std::streamsize(cubin.size()));
  return out ? path.string() : std::string();
}

DeviceInfo open_sass_device() {
  const DeviceInfo device = open_device(0);  // Error(kNoDevice) without a usable GPU
  if (device.cc_major != 9 || device.cc_minor != 0)
    throw Error(ErrorKind::kNoDevice, "the SASS game reads and runs Hopper (sm_90) code only; device 0 is " +
                                          device.name + " (sm_" + std::to_string(device.cc_major) +
                                          std::to_string(device.cc_minor) + ")");
  return device;
}

GpuSassEvaluator::GpuSassEvaluator(const Design& design, const Problem& problem, const DeviceInfo& device,
                                   CompiledKernel original, SassEvaluatorOptions options)
    : design_(design),
      problem_(problem),
      device_(device),
      options_(options),
      original_(GemmKernel::from_compiled(design, problem, device, std::move(original))) {
  if (options_.draws < 1) fail("the GPU evaluator needs at least one input draw per candidate");
  validate(problem.shape);
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  a_.reserve(size_t(problem.a_elems()), stream_);
  b_.reserve(size_t(problem.b_elems()), stream_);
  c_original_.reserve(size_t(problem.c_elems()), stream_);
  c_candidate_.reserve(size_t(problem.c_elems()), stream_);
  c_candidate_.arm_guards(size_t(problem.c_elems()), stream_);
  workspace_bytes_ = original_.workspace_bytes(problem);
  if (workspace_bytes_ > 0) {
    workspace_original_.reserve((workspace_bytes_ + 1) / 2, stream_);
    workspace_candidate_.reserve((workspace_bytes_ + 1) / 2, stream_);
    zero_workspaces();
  }
  load_timing_inputs();
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void GpuSassEvaluator::load_timing_inputs() {
  // Tensor-core power, and so time, depends on the data: every timing runs on the same standard-normal inputs.
  bench::fill_random(a_.data(), size_t(problem_.a_elems()), bench::Fill::kNormal, options_.seed, stream_, problem_.dtype);
  bench::fill_random(b_.data(), size_t(problem_.b_elems()), bench::Fill::kNormal, options_.seed + 1, stream_, problem_.dtype);
}

GpuSassEvaluator::~GpuSassEvaluator() {
  if (stream_ && !device_hung()) cudaStreamDestroy(stream_);
}

void GpuSassEvaluator::zero_workspaces() {
  // Split-K semaphores and stream-K counters start at zero; a kernel leaves them zeroed, but a candidate
  // that failed may not have, and each run must start from the same state.
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(workspace_original_.data(), 0, workspace_bytes_, stream_));
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(workspace_candidate_.data(), 0, workspace_bytes_, stream_));
}

std::string GpuSassEvaluator::sticky_error(const std::string& what) {
  // A hung kernel still runs: a synchronization would wait for it for ever.
  if (device_hung()) {
    if (lost_.empty()) lost_ = what + ": a kernel of this process is hung";
    return lost_;
  }
  // A non-sticky error (a refused launch) is cleared by reading it; a sticky one is returned by every call
  // from then on, a synchronization included.
  (void)cudaGetLastError();
  cudaError_t status = cudaDeviceSynchronize();
  if (status == cudaSuccess) status = cudaGetLastError();
  if (status == cudaSuccess) return "";
  lost_ = what + ": " + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
  return lost_;
}

std::string GpuSassEvaluator::wait(const std::string& what) {
  const double limit_s =
      std::max(options_.hang_seconds, reference_us_ ? 1000.0 * options_.draws * *reference_us_ * 1e-6 : 0.0);
  try {
    // wait_for marks the device hung (device_hung()), so that nothing later waits behind the kernel: not the
    // timing, not a free in a destructor.
    wait_for(stream_, what, limit_s);
    return "";
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kHang) {
      lost_ = what + ": did not finish within " + std::to_string(int(limit_s)) + " s (a hang)";
      return lost_;
    }
    const std::string sticky = sticky_error(what);
    return sticky.empty() ? what + ": " + e.what() : sticky;
  }
}

double GpuSassEvaluator::reference_time_us() {
  if (!reference_us_) {
    const GemmOperands ops{a_.data(), b_.data(), c_original_.data(), workspace_original_.data(), workspace_bytes_};
    const bench::Subject subject{[&](cudaStream_t s) { original_.launch(s, problem_, ops); }, {}};
    reference_us_ = bench::time_side_by_side(bench::Mode::kOffline, {subject}, nullptr, stream_,
                                             options_.reference_timing)
                        .front()
                        .time_us;
  }
  return *reference_us_;
}

CubinComparison GpuSassEvaluator::compare(const std::vector<uint8_t>& cubin, int draws,
                                          const bench::TimingOptions& timing, bench::Mode mode) {
  CubinComparison result;
  if (context_lost())
    throw Error(ErrorKind::kRuntime, "the CUDA context of this process was lost (" + lost_ +
                                         "): no kernel can run in it any more");
  auto failed = [&](std::string why) {
    result.ok = false;
    result.context_lost = context_lost();
    if (result.context_lost && lost_.find("saved as") == std::string::npos) {
      // The schedule that broke the kernel is what a reader needs to find the rule that let it through.
      if (const std::string path = save_faulting_cubin(cubin); !path.empty())
        lost_ += "; the faulting schedule is saved as " + path;
      why = lost_;
    }
    result.failure = std::move(why);
    return result;
  };

  // Load the candidate as a module of its own, under a key of its bytes.
  const std::string key = "sass-candidate:" + cubin_digest(cubin);
  CandidateModule module(key);
  std::optional<GemmKernel> kernel;
  try {
    kernel.emplace(original_.with_cubin(cubin, key));
    ++loaded_;
  } catch (const Error& e) {
    const std::string sticky = sticky_error("loading the candidate cubin");
    return failed(sticky.empty() ? std::string("the candidate cubin does not load: ") + e.what() : sticky);
  }

  const size_t c_elems = size_t(problem_.c_elems());
  const GemmOperands original_ops{a_.data(), b_.data(), c_original_.data(), workspace_original_.data(),
                                  workspace_bytes_};
  const GemmOperands candidate_ops{a_.data(), b_.data(), c_candidate_.data(), workspace_candidate_.data(),
                                   workspace_bytes_};

  // Bitwise identical output on fresh draws.
  for (int d = 0; d < draws; ++d) {
    const uint64_t draw = next_draw_++;
    const auto fill = d % 2 == 0 ? bench::Fill::kNormal : bench::Fill::kUniformPositive;
    const uint64_t seed = options_.seed * 0x9e3779b97f4a7c15ull + 2 * draw + 1000;
    try {
      bench::fill_random(a_.data(), size_t(problem_.a_elems()), fill, seed, stream_, problem_.dtype);
      bench::fill_random(b_.data(), size_t(problem_.b_elems()), fill, seed + 1, stream_, problem_.dtype);
      bench::fill_nan(c_original_.data(), c_elems, stream_);
      bench::fill_nan(c_candidate_.data(), c_elems, stream_);
      if (workspace_bytes_ > 0) zero_workspaces();
      original_.launch(stream_, problem_, original_ops);
    } catch (const Error& e) {
      const std::string sticky = sticky_error("running the compiled cubin");
      throw Error(ErrorKind::kRuntime, "the compiled cubin failed on the GPU evaluator's inputs: " +
                                           (sticky.empty() ? std::string(e.what()) : sticky));
    }
    try {
      kernel->launch(stream_, problem_, candidate_ops);
    } catch (const Error& e) {
      const std::string sticky = sticky_error("launching the candidate");
      return failed(sticky.empty() ? std::string("the candidate's launch failed: ") + e.what() : sticky);
    }
    if (std::string why = wait("running the candidate (draw " + std::to_string(d) + ")"); !why.empty())
      return failed(why);
    try {
      const int64_t differ = count_bit_differences(c_original_.data(), c_candidate_.data(), c_elems, stream_);
      if (differ != 0)
        return failed("the output differs from the compiled cubin's in " + std::to_string(differ) + " of " +
                      std::to_string(c_elems) + " elements (draw " + std::to_string(d) + ")");
      if (!c_candidate_.guards_intact(stream_)) return failed("the candidate wrote outside C");
    } catch (const Error& e) {
      const std::string sticky = sticky_error("checking the candidate's output");
      return failed(sticky.empty() ? std::string(e.what()) : sticky);
    }
    ++result.draws;
  }

  // Side by side, in `mode`.
  try {
    load_timing_inputs();
    if (workspace_bytes_ > 0) zero_workspaces();
    const std::vector<bench::Subject> subjects{
        {[&](cudaStream_t s) { original_.launch(s, problem_, original_ops); }, {}},
        {[&](cudaStream_t s) { kernel->launch(s, problem_, candidate_ops); }, {}}};
    const auto times = bench::time_side_by_side(mode, subjects, nullptr, stream_, timing);
    result.original_us = times[0].time_us;
    result.candidate_us = times[1].time_us;
    result.samples = times[1].samples;
    result.original_rounds_us = times[0].rounds_us;
    result.candidate_rounds_us = times[1].rounds_us;
  } catch (const Error& e) {
    const std::string sticky = sticky_error("timing the candidate");
    return failed(sticky.empty() ? std::string("timing the candidate failed: ") + e.what() : sticky);
  }
  if (!(result.original_us > 0) || !(result.candidate_us > 0)) return failed("the timing gave no positive time");
  result.ok = true;
  return result;
}

sass::Measurement GpuSassEvaluator::evaluate(const sass::Candidate& candidate) {
  if (context_lost())
    throw Error(ErrorKind::kRuntime, "a candidate schedule lost the CUDA context (" + lost_ +
                                         "); the search cannot go on in this process and nothing was written");
  const double reference = reference_time_us();
  const CubinComparison c = compare(candidate.cubin(), options_.draws, options_.search_timing, bench::Mode::kOffline);
  sass::Measurement m;
  if (!c.ok) {
    m.failure = c.failure;
    m.fatal = c.context_lost;
    return m;
  }
  m.ok = true;
  m.time_us = reference * c.candidate_us / c.original_us;
  return m;
}

std::unique_ptr<sass::Evaluator> make_sass_gpu_evaluator(const sass::GpuEvaluationTarget& target) {
  const Design design = parse_design(target.design);
  validate(target.problem.shape);
  const DeviceInfo device = open_sass_device();
  (void)target.cubin.kernel(target.kernel);  // throws naming the kernels present
  CompiledKernel original;
  original.name = target.kernel;
  original.arch = "sm_" + std::to_string(target.cubin.sm_version());
  original.cubin.assign(target.cubin.bytes().begin(), target.cubin.bytes().end());
  original.cache_key = "sass-original:" + cubin_digest(target.cubin.bytes());
  return std::make_unique<GpuSassEvaluator>(design, target.problem, device, std::move(original));
}

void install_sass_gpu_evaluator() { sass::set_gpu_evaluator_factory(make_sass_gpu_evaluator); }

}  // namespace rlgemm::measure
