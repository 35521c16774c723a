// rlgemm::Handle: routes (shape -> kernel) built once under a lock, then looked up under a shared lock; the
// per-(stream, route) workspaces likewise. Nothing on the warm path allocates, synchronizes or creates.
#include <array>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "compile/sha256.h"
#include "core/cuda_util.h"
#include "dispatch/cublaslt_gemm.h"
#include "dispatch/dispatcher.h"
#include "dispatch/tuned_table.h"
#include "rlgemm/rlgemm.h"
#include "run/gemm_kernel.h"
#include "search/design_space.h"
#include "search/rl_policy.h"
#include "store/store.h"

namespace rlgemm {
namespace {

struct ShapeKey {
  int64_t m, n, k;
  Layout layout;
  friend bool operator==(const ShapeKey&, const ShapeKey&) = default;
};
struct ShapeKeyHash {
  size_t operator()(const ShapeKey& key) const noexcept {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t v : {uint64_t(key.m), uint64_t(key.n), uint64_t(key.k), uint64_t(key.layout)})
      h = (h ^ v) * 1099511628211ull;
    return size_t(h);
  }
};

// A shape's way to the GPU: a loaded kernel, or a cuBLASLt plan.
struct Route {
  Problem problem;
  dispatch::Choice choice;
  std::string description;
  const GemmKernel* kernel = nullptr;       // owned by Impl::kernels
  std::unique_ptr<dispatch::CublasLtGemm> lt;
  size_t workspace_bytes = 0;
  bool zero_workspace = false;  // split-K flags: zeroed once, left zeroed by every launch
  bool sass_optimized = false;  // `kernel` is a SASS-rescheduled cubin
};

// The (design, layout, shape) a rescheduled cubin was verified and measured on.
std::string optimized_key(const std::string& design, const Problem& problem) {
  return design + "|" + std::string(to_string(problem.layout)) + "|" + problem.shape.to_string();
}

struct WorkspaceKey {
  cudaStream_t stream;
  const Route* route;
  friend bool operator==(const WorkspaceKey&, const WorkspaceKey&) = default;
};
struct WorkspaceKeyHash {
  size_t operator()(const WorkspaceKey& key) const noexcept {
    return std::hash<const void*>()(key.stream) * 31 + std::hash<const void*>()(key.route);
  }
};

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

void check_operand(const void* p, const char* name) {
  if (!p) fail(std::string("hgemm: ") + name + " is a null pointer (A, B and C must be device pointers)");
  if (!aligned16(p))
    fail(std::string("hgemm: ") + name + " is not 16-byte aligned: rlgemm kernels move 16-byte vectors and " +
         "hand the operands to the Tensor Memory Accelerator, which needs 16-byte aligned addresses (allocate " +
         "with cudaMalloc, or offset by multiples of 8 elements)");
}

}  // namespace

struct Handle::Impl {
  HandleOptions options;
  DeviceInfo device;
  std::unique_ptr<search::Policy> policy;
  std::map<Layout, std::unique_ptr<search::DesignSpace>> spaces;  // the policy's space per layout, built lazily
  std::unique_ptr<dispatch::Dispatcher> dispatcher;
  CompileOptions compile_options;
  std::map<std::string, OptimizedCubin> optimized;  // by optimized_key

  std::mutex build_mutex;  // one route is chosen, compiled and loaded at a time
  std::shared_mutex routes_mutex;
  std::unordered_map<ShapeKey, std::unique_ptr<Route>, ShapeKeyHash> routes;
  std::map<std::string, std::unique_ptr<GemmKernel>> kernels;  // under build_mutex
  std::unique_ptr<dispatch::CublasLtContext> lt_context;      // under build_mutex

  std::shared_mutex workspace_mutex;
  std::unordered_map<WorkspaceKey, void*, WorkspaceKeyHash> workspaces;

  std::array<std::atomic<uint64_t>, kPathCount> calls{};
  std::atomic<uint64_t> sass_calls{0};

  explicit Impl(const HandleOptions& opts) : options(opts) {
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
    dispatch::Proposer proposer;
    if (policy)
      proposer = [this](const Problem& problem) -> std::optional<Design> { return propose(problem); };
    dispatcher = std::make_unique<dispatch::Dispatcher>(rows, target, options.prefer_cublaslt, proposer);
    load_optimized_cubins();
  }

  void load_optimized_cubins() {
    const std::string& source = options.optimized_cubins.empty() ? options.database : options.optimized_cubins;
    if (source.empty() || source == "none") return;
    if (!std::filesystem::is_regular_file(source))
      throw Error(ErrorKind::kInvalidInput, "the database of SASS-rescheduled cubins " + source + " does not exist");
    Store store(source);
    for (OptimizedCubin& record : store.optimized_cubins(device.name))
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
    for (auto& [key, ptr] : workspaces) cudaFree(ptr);
  }

  // Called by the dispatcher, under build_mutex.
  std::optional<Design> propose(const Problem& problem) {
    auto& space = spaces[problem.layout];
    if (!space) {
      space = std::make_unique<search::DesignSpace>(search::spec_from_signature(policy->space_signature()),
                                                    problem.layout, smem_limit_or_hopper(device.smem_per_block_optin));
    }
    return search::propose(*policy, *space, problem, device.sm_count);
  }

  void check_device() const {
    int current = 0;
    RLGEMM_CUDA_CHECK(cudaGetDevice(&current));
    if (current != device.ordinal)
      fail("this rlgemm handle serves CUDA device " + std::to_string(device.ordinal) + " (" + device.name +
           "), but device " + std::to_string(current) + " is current: create one handle per device");
  }

  Route& route(const Problem& problem) {
    const ShapeKey key{problem.shape.m, problem.shape.n, problem.shape.k, problem.layout};
    {
      std::shared_lock lock(routes_mutex);
      const auto it = routes.find(key);
      if (it != routes.end()) return *it->second;
    }
    std::lock_guard build(build_mutex);
    {
      std::shared_lock lock(routes_mutex);
      const auto it = routes.find(key);
      if (it != routes.end()) return *it->second;
    }
    auto r = std::make_unique<Route>();
    r->problem = problem;
    r->choice = dispatcher->choose(problem);
    r->description = r->choice.describe();
    if (r->choice.path == Path::kCublasLt) {
      if (!lt_context) lt_context = std::make_unique<dispatch::CublasLtContext>();
      r->lt = std::make_unique<dispatch::CublasLtGemm>(*lt_context, problem, r->choice.cublaslt_candidate);
      if (!r->lt->note().empty()) r->description += " (" + r->lt->note() + ")";
      r->workspace_bytes = r->lt->workspace_bytes();
    } else {
      const Design& d = r->choice.design;
      std::string kernel_key = to_string(d);
      kernel_key += '|';
      kernel_key += to_string(problem.layout);
      if (d.static_shape) kernel_key += '|' + problem.shape.to_string();  // static kernels bake the shape in
      auto& kernel = kernels[kernel_key];
      if (!kernel) kernel = std::make_unique<GemmKernel>(d, problem, device, compile_options);
      r->kernel = kernel.get();
      use_optimized(*r, kernel_key, *kernel);
      const LaunchPlan plan = kernel->plan(problem);
      r->workspace_bytes = plan.workspace_bytes;
      r->zero_workspace = plan.workspace_must_be_zero;
    }
    std::unique_lock lock(routes_mutex);
    return *(routes[key] = std::move(r));
  }

  void* workspace(cudaStream_t stream, const Route& r) {
    if (r.workspace_bytes == 0) return nullptr;
    const WorkspaceKey key{stream, &r};
    {
      std::shared_lock lock(workspace_mutex);
      const auto it = workspaces.find(key);
      if (it != workspaces.end()) return it->second;
    }
    std::unique_lock lock(workspace_mutex);
    const auto it = workspaces.find(key);
    if (it != workspaces.end()) return it->second;
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    const cudaError_t status = cudaStreamIsCapturing(stream, &capture);
    if (status != cudaSuccess || capture != cudaStreamCaptureStatusNone) {
      if (status != cudaSuccess) (void)cudaGetLastError();
      fail("hgemm " + r.problem.shape.to_string() + " " + std::string(to_string(r.problem.layout)) + " (" +
           r.description + ") needs a " + std::to_string(r.workspace_bytes) +
           "-byte workspace on this stream, which cannot be allocated while a CUDA graph is being captured: call "
           "prepare(M, N, K, layout, stream) (rlgemm_prepare) with the capturing stream before the capture");
    }
    void* ptr = nullptr;
    RLGEMM_CUDA_CHECK(cudaMalloc(&ptr, r.workspace_bytes));
    try {
      if (r.zero_workspace) {
        RLGEMM_CUDA_CHECK(cudaMemsetAsync(ptr, 0, r.workspace_bytes, stream));
        // Graphs may replay on other streams: the zeros must be in place before anything uses them.
        RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      }
    } catch (...) {
      cudaFree(ptr);
      throw;
    }
    workspaces.emplace(key, ptr);
    return ptr;
  }

  void launch(cudaStream_t stream, const Route& r, const void* a, const void* b, void* c, void* ws) {
    if (r.lt)
      r.lt->launch(stream, a, b, c, ws);
    else
      r.kernel->launch(stream, r.problem, GemmOperands{a, b, c, ws, r.workspace_bytes});
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
Problem make_problem(int64_t M, int64_t N, int64_t K, Layout layout) {
  const Problem problem{Shape{M, N, K}, layout};
  validate(problem.shape);
  return problem;
}
void require(const void* impl) {
  if (!impl) fail("this rlgemm handle was moved from");
}
}  // namespace

void Handle::prepare(int64_t M, int64_t N, int64_t K, Layout layout, cudaStream_t stream) {
  require(impl_.get());
  const Problem problem = make_problem(M, N, K, layout);
  impl_->check_device();
  impl_->workspace(stream, impl_->route(problem));
}

void Handle::hgemm(cudaStream_t stream, int64_t M, int64_t N, int64_t K, const half* A, const half* B, Layout layout,
                   half* C) {
  require(impl_.get());
  const Problem problem = make_problem(M, N, K, layout);
  check_operand(A, "A");
  check_operand(B, "B");
  check_operand(C, "C");
  impl_->check_device();
  Route& r = impl_->route(problem);
  void* ws = impl_->workspace(stream, r);
  impl_->launch(stream, r, A, B, C, ws);
  impl_->calls[int(r.choice.path)].fetch_add(1, std::memory_order_relaxed);
  if (r.sass_optimized) impl_->sass_calls.fetch_add(1, std::memory_order_relaxed);
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
  s.sass_optimized = impl_->sass_calls.load(std::memory_order_relaxed);
  return s;
}

std::string Handle::describe(int64_t M, int64_t N, int64_t K, Layout layout) {
  require(impl_.get());
  impl_->check_device();
  return impl_->route(make_problem(M, N, K, layout)).description;
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
