// The C interface (include/rlgemm/rlgemm_c.h) over rlgemm::Handle: exceptions become status codes and a
// thread-local message.
#include "rlgemm/rlgemm_c.h"

#include <cstring>
#include <new>
#include <string>

#include "core/cuda_util.h"
#include "rlgemm/rlgemm.h"

struct rlgemm_handle {
  rlgemm::Handle handle;
};

namespace {

thread_local std::string last_error;

int failure(int status, const std::string& message) {
  last_error = message;
  return status;
}

template <class F>
int guarded(F&& body) {
  try {
    body();
    return RLGEMM_OK;
  } catch (const rlgemm::Error& e) {
    return failure(rlgemm::exit_code(e.kind()), e.what());
  } catch (const std::bad_alloc&) {
    return failure(RLGEMM_ERROR_OUT_OF_MEMORY, "rlgemm: out of host memory");
  } catch (const std::exception& e) {
    return failure(RLGEMM_ERROR_RUNTIME, e.what());
  } catch (...) {
    return failure(RLGEMM_ERROR_RUNTIME, "rlgemm: unknown failure");
  }
}

rlgemm::Layout layout_of(int layout) {
  if (layout == RLGEMM_LAYOUT_NN) return rlgemm::Layout::kNN;
  if (layout == RLGEMM_LAYOUT_TN) return rlgemm::Layout::kTN;
  rlgemm::fail("layout must be 0 (nn: B is K x N) or 1 (tn: B is stored N x K), got " + std::to_string(layout));
}

rlgemm::DType dtype_of(int dtype) {
  if (dtype == RLGEMM_DTYPE_FP16) return rlgemm::DType::kF16;
  if (dtype == RLGEMM_DTYPE_BF16) return rlgemm::DType::kBF16;
  rlgemm::fail("dtype must be 0 (RLGEMM_DTYPE_FP16) or 1 (RLGEMM_DTYPE_BF16), got " + std::to_string(dtype) +
               ": supported are " + rlgemm::supported_dtypes());
}

rlgemm::Handle& handle_of(rlgemm_handle_t handle) {
  if (!handle) rlgemm::fail("the rlgemm handle is NULL (create it with rlgemm_create)");
  return handle->handle;
}

std::string text(const char* s) { return s ? s : ""; }

}  // namespace

extern "C" {

int rlgemm_create(rlgemm_handle_t* handle, const char* database_or_null) {
  return rlgemm_create_ex(handle, database_or_null, nullptr, nullptr, 1, nullptr);
}

int rlgemm_create_ex(rlgemm_handle_t* handle, const char* database_or_null, const char* tuned_table_or_null,
                     const char* policy_or_null, int prefer_cublaslt, const char* cache_dir_or_null) {
  rlgemm_options_t options = rlgemm_default_options();
  options.database = database_or_null;
  options.tuned_table = tuned_table_or_null;
  options.policy = policy_or_null;
  options.prefer_cublaslt = prefer_cublaslt;
  options.cache_dir = cache_dir_or_null;
  return rlgemm_create_with_options(handle, &options);
}

rlgemm_options_t rlgemm_default_options(void) {
  const rlgemm::HandleOptions defaults;
  return rlgemm_options_t{nullptr,
                          nullptr,
                          nullptr,
                          nullptr,
                          defaults.prefer_cublaslt ? 1 : 0,
                          defaults.predicted_kernels ? 1 : 0,
                          defaults.autotune ? 1 : 0,
                          defaults.autotune_candidates,
                          defaults.check_routes ? 1 : 0};
}

int rlgemm_create_with_options(rlgemm_handle_t* handle, const rlgemm_options_t* given) {
  return guarded([&] {
    if (!handle) rlgemm::fail("rlgemm_create: the output pointer is NULL");
    *handle = nullptr;
    if (!given) rlgemm::fail("rlgemm_create_with_options: the options are NULL (start from rlgemm_default_options())");
    rlgemm::HandleOptions options;
    options.database = text(given->database);
    options.tuned_table = text(given->tuned_table);
    options.policy = text(given->policy);
    options.cache_dir = text(given->cache_dir);
    options.prefer_cublaslt = given->prefer_cublaslt != 0;
    options.predicted_kernels = given->predicted_kernels != 0;
    // predicted_kernels = 0 leaves untuned shapes to the floor: no predicted kernel, no nearest row's kernel.
    options.nearest_kernels = options.predicted_kernels;
    options.autotune = given->autotune != 0;
    options.autotune_candidates = given->autotune_candidates;
    options.check_routes = given->check_routes != 0;
    *handle = new rlgemm_handle{rlgemm::Handle(options)};
  });
}

int rlgemm_destroy(rlgemm_handle_t handle) {
  return guarded([&] { delete handle; });
}

int rlgemm_prepare(rlgemm_handle_t handle, int64_t M, int64_t N, int64_t K, int layout, void* stream) {
  return rlgemm_prepare_ex(handle, M, N, K, layout, RLGEMM_DTYPE_FP16, stream);
}

int rlgemm_prepare_ex(rlgemm_handle_t handle, int64_t M, int64_t N, int64_t K, int layout, int dtype, void* stream) {
  return guarded([&] {
    handle_of(handle).prepare(M, N, K, layout_of(layout), static_cast<cudaStream_t>(stream), dtype_of(dtype));
  });
}

int rlgemm_hgemm(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, const void* A,
                 const void* B, int layout, void* C) {
  return guarded([&] {
    handle_of(handle).hgemm(static_cast<cudaStream_t>(stream), M, N, K, static_cast<const half*>(A),
                            static_cast<const half*>(B), layout_of(layout), static_cast<half*>(C));
  });
}

int rlgemm_hgemm_workspace(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, const void* A,
                           const void* B, int layout, void* C, void* workspace, size_t workspace_bytes) {
  return guarded([&] {
    handle_of(handle).hgemm(static_cast<cudaStream_t>(stream), M, N, K, static_cast<const half*>(A),
                            static_cast<const half*>(B), layout_of(layout), static_cast<half*>(C), workspace,
                            workspace_bytes);
  });
}

int rlgemm_hgemm_ex(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, const void* A,
                    const void* B, int layout, void* C, int dtype, void* workspace, size_t workspace_bytes) {
  return guarded([&] {
    rlgemm::Handle& h = handle_of(handle);
    const auto s = static_cast<cudaStream_t>(stream);
    if (!workspace && workspace_bytes == 0)
      h.gemm(s, M, N, K, A, B, layout_of(layout), C, dtype_of(dtype));
    else
      h.gemm(s, M, N, K, A, B, layout_of(layout), C, dtype_of(dtype), workspace, workspace_bytes);
  });
}

int rlgemm_gemm_bias_ex(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, const void* A,
                        const void* B, int layout, void* C, int dtype, const void* bias, void* workspace,
                        size_t workspace_bytes) {
  return guarded([&] {
    rlgemm::Handle& h = handle_of(handle);
    const auto s = static_cast<cudaStream_t>(stream);
    if (!workspace && workspace_bytes == 0)
      h.gemm_bias(s, M, N, K, A, B, layout_of(layout), C, dtype_of(dtype), bias);
    else
      h.gemm_bias(s, M, N, K, A, B, layout_of(layout), C, dtype_of(dtype), bias, workspace, workspace_bytes);
  });
}

int rlgemm_workspace_size(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, int layout,
                          size_t* bytes) {
  return rlgemm_workspace_size_ex(handle, stream, M, N, K, layout, RLGEMM_DTYPE_FP16, bytes);
}

int rlgemm_workspace_size_ex(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, int layout,
                             int dtype, size_t* bytes) {
  return guarded([&] {
    if (!bytes) rlgemm::fail("rlgemm_workspace_size: the output pointer is NULL");
    *bytes = handle_of(handle).workspace_bytes(M, N, K, layout_of(layout), static_cast<cudaStream_t>(stream),
                                               dtype_of(dtype));
  });
}

int rlgemm_stats(rlgemm_handle_t handle, rlgemm_stats_t* stats) {
  return guarded([&] {
    if (!stats) rlgemm::fail("rlgemm_stats: the output pointer is NULL");
    const rlgemm::Stats s = handle_of(handle).stats();
    *stats = rlgemm_stats_t{s.tuned, s.nearest, s.policy, s.default_design, s.cublaslt, s.predicted};
  });
}

int rlgemm_first_use_seconds(rlgemm_handle_t handle, double* floor_s, double* build_s, double* check_s) {
  return guarded([&] {
    const rlgemm::Stats s = handle_of(handle).stats();
    if (floor_s) *floor_s = s.first_use_floor_s;
    if (build_s) *build_s = s.first_use_build_s;
    if (check_s) *check_s = s.first_use_check_s;
  });
}

int rlgemm_describe(rlgemm_handle_t handle, int64_t M, int64_t N, int64_t K, int layout, char* buffer,
                    size_t size) {
  return rlgemm_describe_ex(handle, M, N, K, layout, RLGEMM_DTYPE_FP16, buffer, size);
}

int rlgemm_describe_ex(rlgemm_handle_t handle, int64_t M, int64_t N, int64_t K, int layout, int dtype, char* buffer,
                       size_t size) {
  return guarded([&] {
    if (!buffer || size == 0) rlgemm::fail("rlgemm_describe: the buffer is NULL or empty");
    const std::string route = handle_of(handle).describe(M, N, K, layout_of(layout), dtype_of(dtype));
    const size_t n = std::min(route.size(), size - 1);
    std::memcpy(buffer, route.data(), n);
    buffer[n] = '\0';
  });
}

const char* rlgemm_last_error(void) { return last_error.c_str(); }

const char* rlgemm_version(void) {
  static const std::string version = std::string(rlgemm::version()) + " (commit " + rlgemm::build_commit() + ")";
  return version.c_str();
}

}  // extern "C"
