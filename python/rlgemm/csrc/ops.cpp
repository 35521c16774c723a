// torch.ops.rlgemm.mm and torch.ops.rlgemm.linear, registered in C++ (TORCH_LIBRARY): a call goes from the
// PyTorch dispatcher straight to librlgemm's handle on the current CUDA stream, with no Python frame.
//
//   rlgemm::mm(Tensor a, Tensor b) -> Tensor                       a (M, K) @ b (K, N): rlgemm's nn layout
//   rlgemm::linear(Tensor x, Tensor weight, Tensor? bias=None)     x (..., K) @ weight (N, K).T (+ bias): tn
//
// Kernels: CUDA (the GEMM), Meta (shapes only, for torch.compile and FakeTensor), Autograd (C++ backward:
// the input's gradient through rlgemm, the weight's through torch, which has the transposed layout rlgemm
// lacks), and CompositeExplicitAutograd for every other device, which refuses with the device rule. The
// checks, and their messages, are the ones the Python layer had (python/rlgemm/ops.py).
//
// librlgemm is opened at run time (dlopen of the path the Python package found), through its C API: this
// library does not link it, and its C++ ABI need not match torch's. Handles: one per CUDA device, created on
// first use with the options of rlgemm::_configure.
//
// Workspace: outside a capture, the handle's pool (per stream); while the current stream is being captured
// into a CUDA graph, PyTorch's caching allocator, so the graph's private pool owns it and frees it with the
// graph.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/SymInt.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <cstdio>
#include <string>
#include <vector>

#include "rlgemm/rlgemm_c.h"

namespace rlgemm_ops {
namespace {

// ---------------------------------------------------------------------------------------------------------
// librlgemm through its C API
// ---------------------------------------------------------------------------------------------------------

struct Api {
  decltype(&rlgemm_default_options) default_options = nullptr;
  decltype(&rlgemm_create_with_options) create_with_options = nullptr;
  decltype(&rlgemm_hgemm_ex) hgemm_ex = nullptr;
  decltype(&rlgemm_gemm_bias_ex) gemm_bias_ex = nullptr;
  decltype(&rlgemm_workspace_size_ex) workspace_size_ex = nullptr;
  decltype(&rlgemm_last_error) last_error = nullptr;
};

struct Config {
  std::string library;  // path of librlgemm.so ("" : the dynamic linker's search)
  std::string database, tuned_table, policy, cache_dir;
  bool prefer_cublaslt = true;
  bool autotune = false;
  int64_t autotune_candidates = 4;
  bool check_routes = true;
};

constexpr int kMaxDevices = 64;

std::mutex state_mutex;  // guards everything below except the atomics' fast reads
Config config;
std::atomic<const Api*> api_loaded{nullptr};
std::array<std::atomic<rlgemm_handle_t>, kMaxDevices> handles{};
// Handles replaced by a reconfiguration: kept, since another thread may be calling one.
std::vector<rlgemm_handle_t> retired;

template <class F>
void resolve(void* lib, const char* symbol, F& out, const std::string& path) {
  out = reinterpret_cast<F>(dlsym(lib, symbol));
  TORCH_CHECK(out, "rlgemm: ", path, " has no ", symbol,
              ": it is older than this operator library; rebuild librlgemm (cmake --build build --target "
              "rlgemm_shared) from the same checkout");
}

const Api& api_locked() {
  if (const Api* api = api_loaded.load(std::memory_order_acquire)) return *api;
  const std::string path = config.library.empty() ? std::string("librlgemm.so.0") : config.library;
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  TORCH_CHECK(lib, "rlgemm: cannot load ", path, " (", dlerror(),
              "). Build it (cmake --build build --target rlgemm_shared) and set RLGEMM_LIBRARY=/path/to/librlgemm.so");
  auto* api = new Api;  // for the life of the process, like the library
  resolve(lib, "rlgemm_default_options", api->default_options, path);
  resolve(lib, "rlgemm_create_with_options", api->create_with_options, path);
  resolve(lib, "rlgemm_hgemm_ex", api->hgemm_ex, path);
  resolve(lib, "rlgemm_gemm_bias_ex", api->gemm_bias_ex, path);
  resolve(lib, "rlgemm_workspace_size_ex", api->workspace_size_ex, path);
  resolve(lib, "rlgemm_last_error", api->last_error, path);
  api_loaded.store(api, std::memory_order_release);
  return *api;
}

const Api& api() {
  if (const Api* loaded = api_loaded.load(std::memory_order_acquire)) return *loaded;
  std::lock_guard lock(state_mutex);
  return api_locked();
}

// A failed C API call as the Python exception of its kind: bad input is a ValueError, no device memory
// torch.OutOfMemoryError, anything else a RuntimeError.
[[noreturn]] void raise(const Api& a, int status) {
  const std::string message = a.last_error();
  TORCH_CHECK_VALUE(status != RLGEMM_ERROR_INVALID_INPUT, "rlgemm: ", message);
  TORCH_CHECK_WITH(OutOfMemoryError, status != RLGEMM_ERROR_OUT_OF_MEMORY, "rlgemm: ", message);
  TORCH_CHECK(false, "rlgemm: ", message);
  __builtin_unreachable();
}

rlgemm_handle_t handle_for(int device) {
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "rlgemm: CUDA device ", std::to_string(device), " is out of range");
  if (rlgemm_handle_t h = handles[device].load(std::memory_order_acquire)) return h;
  std::lock_guard lock(state_mutex);
  if (rlgemm_handle_t h = handles[device].load(std::memory_order_acquire)) return h;
  const Api& a = api_locked();
  auto text = [](const std::string& s) { return s.empty() ? nullptr : s.c_str(); };
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  rlgemm_handle_t h = nullptr;
  rlgemm_options_t options = a.default_options();
  options.database = text(config.database);
  options.tuned_table = text(config.tuned_table);
  options.policy = text(config.policy);
  options.cache_dir = text(config.cache_dir);
  options.prefer_cublaslt = config.prefer_cublaslt ? 1 : 0;
  options.autotune = config.autotune ? 1 : 0;
  options.autotune_candidates = static_cast<int>(config.autotune_candidates);
  options.check_routes = config.check_routes ? 1 : 0;
  const int status = a.create_with_options(&h, &options);
  if (status != RLGEMM_OK) raise(a, status);
  handles[device].store(h, std::memory_order_release);
  return h;
}

// ---------------------------------------------------------------------------------------------------------
// The rules, with the Python layer's messages
// ---------------------------------------------------------------------------------------------------------

// torch's Python spelling of a dtype, as the messages always showed it.
std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kByte: return "torch.uint8";
    case at::kChar: return "torch.int8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kBool: return "torch.bool";
    default: return std::string("torch.") + c10::toString(t);
  }
}

// Messages hold no streamed integers: numbers are formatted with std::to_string or snprintf first. Built
// against the CUDA torch of the GPU machines (2.11, g++ 13), streaming an integer into a failed check's
// message crashed the process, while strings streamed fine.
// A size as text: concrete sizes (every eager call) as plain integers, symbolic ones (torch.compile's
// tracing) as their expression.
std::string text(const c10::SymInt& s) {
  if (const std::optional<int64_t> v = s.maybe_as_int()) return std::to_string(*v);
  return s.toSymNodeImplUnowned()->str();
}

// Python's tuple spelling: (3, 5, 64), (64,), ().
std::string tuple(c10::SymIntArrayRef sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + text(sizes[i]);
  return s + (sizes.size() == 1 ? ",)" : ")");
}

void check_tensor(const at::Tensor& t, const char* name, const char* op, int dims) {
  TORCH_CHECK_VALUE(t.defined(), "rlgemm.", op, ": ", name, " is an undefined tensor");
  TORCH_CHECK_TYPE(t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16, "rlgemm.", op, ": ", name,
                   " must be float16 or bfloat16 (rlgemm computes fp16 and bf16 GEMMs), got ",
                   dtype_name(t.scalar_type()), "; convert with ", name, ".half() or ", name, ".bfloat16()");
  TORCH_CHECK_VALUE(t.is_cuda() || t.is_meta(), "rlgemm.", op, ": ", name, " must be on a CUDA device, got ",
                    t.device().str(), "; move it with ", name, ".cuda()");
  if (dims > 0)
    TORCH_CHECK_VALUE(t.dim() == dims, "rlgemm.", op, ": ", name, " must be ", std::to_string(dims), "-D, got shape ",
                      tuple(t.sym_sizes()));
}

// The problem rules of include/rlgemm/problem.h, checked here too so that a traced graph fails early.
void check_extents(const char* op, const c10::SymInt& n, const c10::SymInt& k) {
  TORCH_CHECK_VALUE(n > 0 && n % 8 == 0, "rlgemm.", op, ": N = ", text(n),
                    " must be a positive multiple of 8 (rows start on 16-byte boundaries)");
  TORCH_CHECK_VALUE(k > 0 && k % 8 == 0, "rlgemm.", op, ": K = ", text(k),
                    " must be a positive multiple of 8 (rows start on 16-byte boundaries)");
}

void check_contiguous(const at::Tensor& t, const char* name, const char* op) {
  TORCH_CHECK_VALUE(t.is_contiguous(), "rlgemm.", op, ": ", name,
                    " must be contiguous (row-major, no gaps between rows), got shape ", tuple(t.sym_sizes()),
                    " with strides ", tuple(t.sym_strides()), "; pass ", name, ".contiguous()");
}

void check_aligned(const at::Tensor& t, const char* name, const char* op) {
  const auto address = reinterpret_cast<uintptr_t>(t.data_ptr());
  if (address % 16 == 0) return;
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%llx", static_cast<unsigned long long>(address));
  TORCH_CHECK_VALUE(false, "rlgemm.", op, ": ", name, " must start on a 16-byte boundary (its data pointer is ",
                    hex, ", a view at an odd offset); pass ", name, ".clone()");
}

// One element type for every operand: a kernel reads and writes one type, and rlgemm converts nothing.
void check_same_dtype(const at::Tensor& t, const char* name, const at::Tensor& first, const char* first_name,
                      const char* op) {
  TORCH_CHECK_TYPE(t.scalar_type() == first.scalar_type(), "rlgemm.", op, ": ", first_name, " is ",
                   dtype_name(first.scalar_type()), " and ", name, " is ", dtype_name(t.scalar_type()),
                   ": the operands must have one dtype (rlgemm computes float16 or bfloat16 GEMMs, not mixed ones); "
                   "convert with ", name, ".to(", first_name, ".dtype)");
}

void check_mm(const at::Tensor& a, const at::Tensor& b) {
  check_tensor(a, "a", "mm", 2);
  check_tensor(b, "b", "mm", 2);
  check_same_dtype(b, "b", a, "a", "mm");
  TORCH_CHECK_VALUE(a.sym_size(1) == b.sym_size(0), "rlgemm.mm: a is ", tuple(a.sym_sizes()), " and b is ",
                    tuple(b.sym_sizes()), ": a's columns must equal b's rows (b is K x N; for a weight stored N x K "
                    "use rlgemm.linear)");
  TORCH_CHECK_VALUE(a.device() == b.device(), "rlgemm.mm: a is on ", a.device().str(), " and b on ",
                    b.device().str(), ": both must be on one device");
  check_extents("mm", b.sym_size(1), a.sym_size(1));
  check_contiguous(a, "a", "mm");
  check_contiguous(b, "b", "mm");
}

void check_linear(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  check_tensor(x, "x", "linear", 0);
  check_tensor(weight, "weight", "linear", 2);
  check_same_dtype(weight, "weight", x, "x", "linear");
  TORCH_CHECK_VALUE(x.dim() >= 1, "rlgemm.linear: x must have at least one dimension (..., K)");
  TORCH_CHECK_VALUE(x.sym_size(-1) == weight.sym_size(1), "rlgemm.linear: x is ", tuple(x.sym_sizes()),
                    " and weight is ", tuple(weight.sym_sizes()), ": x's last dimension must equal weight's columns "
                    "(weight is N x K, as in nn.Linear)");
  TORCH_CHECK_VALUE(x.device() == weight.device(), "rlgemm.linear: x is on ", x.device().str(), " and weight on ",
                    weight.device().str(), ": both must be on one device");
  check_extents("linear", weight.sym_size(0), weight.sym_size(1));
  if (bias.has_value() && bias->defined()) {
    check_tensor(*bias, "bias", "linear", 1);
    check_same_dtype(*bias, "bias", x, "x", "linear");
    TORCH_CHECK_VALUE(bias->sym_size(0) == weight.sym_size(0), "rlgemm.linear: bias is ", tuple(bias->sym_sizes()),
                      " and weight is ", tuple(weight.sym_sizes()), ": bias must hold one value per output feature (N)");
    TORCH_CHECK_VALUE(bias->device() == weight.device(), "rlgemm.linear: bias is on ", bias->device().str(),
                      " and weight on ", weight.device().str(), ": both must be on one device");
  }
  // x is checked before it is flattened, which would copy a strided x silently.
  check_contiguous(x, "x", "linear");
  check_contiguous(weight, "weight", "linear");
  if (bias.has_value() && bias->defined()) check_contiguous(*bias, "bias", "linear");
}

// ---------------------------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------------------------

// out (M x N) = a (M x K) * b (+ bias, N elements, when given), with b K x N (nn) or stored N x K (tn).
void gemm(const at::Tensor& a, const at::Tensor& b, at::Tensor& out, int layout, const char* op, const char* a_name,
          const char* b_name, const at::Tensor* bias = nullptr) {
  const int64_t m = a.size(0), k = a.size(1), n = out.size(1);
  if (m == 0) return;
  check_aligned(a, a_name, op);
  check_aligned(b, b_name, op);
  if (bias) check_aligned(*bias, "bias", op);
  const c10::cuda::CUDAGuard guard(a.device());
  const Api& lib = api();
  const rlgemm_handle_t h = handle_for(a.get_device());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(a.get_device()).stream();
  const int dtype = a.scalar_type() == at::kBFloat16 ? RLGEMM_DTYPE_BF16 : RLGEMM_DTYPE_FP16;
  // The bias goes to the handle, which adds it in cuBLASLt's epilogue (on a kernel route, right after it).
  auto call = [&](void* workspace, size_t bytes) {
    return bias ? lib.gemm_bias_ex(h, stream, m, n, k, a.data_ptr(), b.data_ptr(), layout, out.data_ptr(), dtype,
                                   bias->data_ptr(), workspace, bytes)
                : lib.hgemm_ex(h, stream, m, n, k, a.data_ptr(), b.data_ptr(), layout, out.data_ptr(), dtype,
                               workspace, bytes);
  };
  int status;
  if (c10::cuda::currentStreamCaptureStatusMayInitCtx() == c10::cuda::CaptureStatus::None) {
    status = call(nullptr, 0);
  } else {
    // Inside a capture: the workspace from the caching allocator, which gives the graph its own.
    size_t bytes = 0;
    status = lib.workspace_size_ex(h, stream, m, n, k, layout, dtype, &bytes);
    if (status != RLGEMM_OK) raise(lib, status);
    at::Tensor workspace;
    if (bytes > 0) workspace = at::empty({static_cast<int64_t>(bytes)}, a.options().dtype(at::kByte));
    // A route without a workspace gets the pooled path (none is allocated): only a real one is handed over.
    status = call(bytes > 0 ? workspace.data_ptr() : nullptr, bytes);
  }
  if (status != RLGEMM_OK) raise(lib, status);
}

at::Tensor mm_cuda(const at::Tensor& a, const at::Tensor& b) {
  check_mm(a, b);
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  gemm(a, b, out, RLGEMM_LAYOUT_NN, "mm", "a", "b");
  return out;
}

std::vector<int64_t> linear_shape(at::IntArrayRef x, int64_t n) {
  std::vector<int64_t> shape(x.begin(), x.end());
  shape.back() = n;
  return shape;
}

at::Tensor linear_cuda(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  check_linear(x, weight, bias);
  const int64_t n = weight.size(0), k = weight.size(1);
  at::Tensor out = at::empty(linear_shape(x.sizes(), n), x.options());
  if (x.numel() == 0) return out;
  at::Tensor out2 = out.view({-1, n});
  const bool has_bias = bias.has_value() && bias->defined();
  gemm(x.view({-1, k}), weight, out2, RLGEMM_LAYOUT_TN, "linear", "x", "weight", has_bias ? &*bias : nullptr);
  return out;
}

at::Tensor mm_meta(const at::Tensor& a, const at::Tensor& b) {
  check_mm(a, b);
  return at::empty_symint({a.sym_size(0), b.sym_size(1)}, a.options());
}

at::Tensor linear_meta(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  check_linear(x, weight, bias);
  std::vector<c10::SymInt> shape(x.sym_sizes().begin(), x.sym_sizes().end());
  shape.back() = weight.sym_size(0);
  return at::empty_symint(shape, x.options());
}

// Any other device: the same checks, so a CPU tensor hears the dtype rule, then the device rule.
at::Tensor mm_elsewhere(const at::Tensor& a, const at::Tensor& b) {
  check_mm(a, b);
  TORCH_CHECK_VALUE(false, "rlgemm.mm: a must be on a CUDA device, got ", a.device().str(), "; move it with a.cuda()");
  return at::Tensor();
}

at::Tensor linear_elsewhere(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  check_linear(x, weight, bias);
  TORCH_CHECK_VALUE(false, "rlgemm.linear: x must be on a CUDA device, got ", x.device().str(),
                    "; move it with x.cuda()");
  return at::Tensor();
}

// ---------------------------------------------------------------------------------------------------------
// Autograd
// ---------------------------------------------------------------------------------------------------------

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor call_mm(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("rlgemm::mm", "").typed<decltype(mm_cuda)>();
  return op.call(a, b);
}

at::Tensor call_linear(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("rlgemm::linear", "").typed<decltype(linear_cuda)>();
  return op.call(x, weight, bias);
}

// y = x W^T (+ b). dx = dy W: rlgemm's nn layout with W as the K x N operand (W is N x K = the gradient's
// "K x N"). dW = dy^T x: the transposed operand rlgemm has no layout for, so torch. db = the sum of dy.
class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const std::optional<at::Tensor>& bias) {
    at::AutoDispatchBelowADInplaceOrView below;
    ctx->save_for_backward({x, weight});
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return call_linear(x, weight, bias);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const int64_t n = weight.size(0), k = weight.size(1);
    const at::Tensor dy = grads[0].reshape({-1, n}).contiguous();
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) dx = call_mm(dy, weight.contiguous()).view(x.sizes());
    if (ctx->needs_input_grad(1)) dw = at::mm(dy.t(), x.reshape({-1, k}));
    if (ctx->saved_data["has_bias"].toBool() && ctx->needs_input_grad(2)) db = dy.sum(0);
    return {dx, dw, db};
  }
};

// c = a b. da = dc b^T: rlgemm's tn layout with b (K x N) as the weight (stored "N x K" of the gradient).
// db = a^T dc through torch.
class MmFunction : public torch::autograd::Function<MmFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    at::AutoDispatchBelowADInplaceOrView below;
    ctx->save_for_backward({a, b});
    return call_mm(a, b);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor()};
    const auto saved = ctx->get_saved_variables();
    const at::Tensor dc = grads[0].contiguous();
    at::Tensor da, db;
    if (ctx->needs_input_grad(0)) da = call_linear(dc, saved[1].contiguous(), std::nullopt);
    if (ctx->needs_input_grad(1)) db = at::mm(saved[0].t(), dc);
    return {da, db};
  }
};

// Without a gradient to record (inference, torch.no_grad), straight to the kernel: no autograd node is made.
bool recording(std::initializer_list<const at::Tensor*> inputs) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor* t : inputs)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

at::Tensor linear_autograd(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  const at::Tensor none;
  if (recording({&x, &weight, bias.has_value() ? &*bias : &none})) return LinearFunction::apply(x, weight, bias);
  at::AutoDispatchBelowADInplaceOrView below;
  return call_linear(x, weight, bias);
}

at::Tensor mm_autograd(const at::Tensor& a, const at::Tensor& b) {
  if (recording({&a, &b})) return MmFunction::apply(a, b);
  at::AutoDispatchBelowADInplaceOrView below;
  return call_mm(a, b);
}

// ---------------------------------------------------------------------------------------------------------
// Administration, from the Python package
// ---------------------------------------------------------------------------------------------------------

// Where librlgemm is and the options of the handles created from now on; handles created before are retired.
void configure(std::string library, std::string database, std::string tuned_table, std::string policy,
               bool prefer_cublaslt, std::string cache_dir, bool autotune, int64_t autotune_candidates,
               bool check_routes) {
  std::lock_guard lock(state_mutex);
  if (api_loaded.load() && library != config.library && !library.empty()) {
    TORCH_WARN("rlgemm: librlgemm is already loaded from ", config.library.empty() ? "the default path" : config.library,
               "; ", library, " is not loaded in its place (a process loads one librlgemm)");
  } else {
    config.library = std::move(library);
  }
  config.database = std::move(database);
  config.tuned_table = std::move(tuned_table);
  config.policy = std::move(policy);
  config.prefer_cublaslt = prefer_cublaslt;
  config.cache_dir = std::move(cache_dir);
  config.autotune = autotune;
  config.autotune_candidates = autotune_candidates;
  config.check_routes = check_routes;
  for (auto& h : handles)
    if (rlgemm_handle_t old = h.exchange(nullptr)) retired.push_back(old);
}

// The device's handle (created on first use), as an address the package's ctypes layer calls the rest of
// the C API with (stats, describe, prepare).
int64_t handle_address(int64_t device) { return static_cast<int64_t>(reinterpret_cast<intptr_t>(handle_for(int(device)))); }

}  // namespace
}  // namespace rlgemm_ops

TORCH_LIBRARY(rlgemm, m) {
  m.def("mm(Tensor a, Tensor b) -> Tensor");
  m.def("linear(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor");
  m.def("_configure(str library, str database, str tuned_table, str policy, bool prefer_cublaslt, str cache_dir, "
        "bool autotune, int autotune_candidates, bool check_routes=True) -> ()",
        &rlgemm_ops::configure);
  m.def("_handle(int device) -> int", &rlgemm_ops::handle_address);
}

TORCH_LIBRARY_IMPL(rlgemm, CUDA, m) {
  m.impl("mm", &rlgemm_ops::mm_cuda);
  m.impl("linear", &rlgemm_ops::linear_cuda);
}

TORCH_LIBRARY_IMPL(rlgemm, Meta, m) {
  m.impl("mm", &rlgemm_ops::mm_meta);
  m.impl("linear", &rlgemm_ops::linear_meta);
}

TORCH_LIBRARY_IMPL(rlgemm, CompositeExplicitAutograd, m) {
  m.impl("mm", &rlgemm_ops::mm_elsewhere);
  m.impl("linear", &rlgemm_ops::linear_elsewhere);
}

TORCH_LIBRARY_IMPL(rlgemm, Autograd, m) {
  m.impl("mm", &rlgemm_ops::mm_autograd);
  m.impl("linear", &rlgemm_ops::linear_autograd);
}
