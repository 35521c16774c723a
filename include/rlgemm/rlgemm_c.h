/* rlgemm's C interface: the same handle as include/rlgemm/rlgemm.h, for C programs and foreign-function
 * callers (the Python package uses it through ctypes).
 *
 * Every function returns RLGEMM_OK (0) or an error status equal to the process exit code of the error's
 * kind (2 invalid input, 3 no usable GPU, 4 out of device memory, 1 other failures); rlgemm_last_error()
 * then returns the message, kept per thread until that thread's next failing call.
 *
 * layout: 0 = nn (B is K x N row-major), 1 = tn (B is stored N x K row-major, a linear layer's weight).
 * stream: a cudaStream_t (or CUstream), NULL for the legacy default stream.
 * The costs, the routes and the thread-safety rules are those of rlgemm::Handle. */
#ifndef RLGEMM_RLGEMM_C_H_
#define RLGEMM_RLGEMM_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  RLGEMM_OK = 0,
  RLGEMM_ERROR_RUNTIME = 1,
  RLGEMM_ERROR_INVALID_INPUT = 2,
  RLGEMM_ERROR_NO_DEVICE = 3,
  RLGEMM_ERROR_OUT_OF_MEMORY = 4,
};

enum { RLGEMM_LAYOUT_NN = 0, RLGEMM_LAYOUT_TN = 1 };

/* The element type of A, B and C (fp32 accumulation either way); the functions without _ex take fp16. */
enum { RLGEMM_DTYPE_FP16 = 0, RLGEMM_DTYPE_BF16 = 1 };

typedef struct rlgemm_handle* rlgemm_handle_t;

typedef struct {
  uint64_t tuned;
  uint64_t nearest;
  uint64_t policy;
  uint64_t default_design;
  uint64_t cublaslt;
  uint64_t predicted;
} rlgemm_stats_t;

/* A handle on the current CUDA device, from a tuning database (SQLite) or, with NULL or "", the tuned table
 * built into the library. */
int rlgemm_create(rlgemm_handle_t* handle, const char* database_or_null);

/* The same with every option: tuned_table_or_null (a tuned-table CSV, used when database_or_null is NULL),
 * policy_or_null (an RL policy file for zero-shot designs), prefer_cublaslt (0 or 1), cache_dir_or_null. */
int rlgemm_create_ex(rlgemm_handle_t* handle, const char* database_or_null, const char* tuned_table_or_null,
                     const char* policy_or_null, int prefer_cublaslt, const char* cache_dir_or_null);

/* Every option of rlgemm::HandleOptions (include/rlgemm/rlgemm.h): start from rlgemm_default_options(), set
 * what differs. NULL strings mean "" (the default). */
typedef struct rlgemm_options_t {
  const char* database;
  const char* tuned_table;
  const char* policy;
  const char* cache_dir;
  int prefer_cublaslt;     /* 0 or 1 */
  int predicted_kernels;   /* 0 or 1: shapes without a tuned row check the predicted design and the nearest tuned
                              row's (HandleOptions::predicted_kernels and nearest_kernels); 0: the floor serves them */
  int autotune;            /* 0 or 1: measure the predictor's best designs (and the two nearest tuned rows'
                              designs, HandleOptions::autotune_neighbors) at a shape's first use, keep the fastest */
  int autotune_candidates; /* 1..16 */
  int check_routes;        /* 0 or 1: a kernel route serves a way of calling only where it measured faster than the
                              cuBLASLt floor at first use (1, the default); 0 serves the table's or database's kernel
                              as it is */
} rlgemm_options_t;

rlgemm_options_t rlgemm_default_options(void);
int rlgemm_create_with_options(rlgemm_handle_t* handle, const rlgemm_options_t* options);

int rlgemm_destroy(rlgemm_handle_t handle);

/* Chooses, compiles and loads the kernel of the shape and plans its launch, and allocates its pooled workspace
 * for `stream`: afterwards rlgemm_hgemm of the shape compiles nothing, and on that stream allocates nothing.
 * (Any call of a shape seen before may be captured in a CUDA graph, prepared or not.) */
int rlgemm_prepare(rlgemm_handle_t handle, int64_t M, int64_t N, int64_t K, int layout, void* stream);

/* C = A * B on `stream`; A (M x K), C (M x N) row-major fp16 device pointers aligned to 16 bytes. */
int rlgemm_hgemm(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, const void* A,
                 const void* B, int layout, void* C);

/* rlgemm_hgemm with the caller's workspace: at least rlgemm_workspace_size bytes, 16-byte aligned, any
 * contents (the handle zeroes on `stream` what the kernel needs zeroed); NULL when the size is 0. One
 * workspace per stream. */
int rlgemm_hgemm_workspace(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, const void* A,
                           const void* B, int layout, void* C, void* workspace, size_t workspace_bytes);

/* C = A * B with A, B and C of element type `dtype` (RLGEMM_DTYPE_FP16 or RLGEMM_DTYPE_BF16), otherwise as
 * rlgemm_hgemm (workspace NULL and workspace_bytes 0) or rlgemm_hgemm_workspace (the caller's workspace). */
int rlgemm_hgemm_ex(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, const void* A,
                    const void* B, int layout, void* C, int dtype, void* workspace, size_t workspace_bytes);

/* C = A * B + bias, with bias a device vector of N elements of `dtype` (16-byte aligned) added to every row of
 * C (rlgemm::Handle::gemm_bias); otherwise as rlgemm_hgemm_ex. */
int rlgemm_gemm_bias_ex(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, const void* A,
                        const void* B, int layout, void* C, int dtype, const void* bias, void* workspace,
                        size_t workspace_bytes);

/* rlgemm_prepare, rlgemm_workspace_size and rlgemm_describe of a shape of element type `dtype`. */
int rlgemm_prepare_ex(rlgemm_handle_t handle, int64_t M, int64_t N, int64_t K, int layout, int dtype, void* stream);
int rlgemm_workspace_size_ex(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, int layout,
                             int dtype, size_t* bytes);
int rlgemm_describe_ex(rlgemm_handle_t handle, int64_t M, int64_t N, int64_t K, int layout, int dtype, char* buffer,
                       size_t size);

/* Bytes of workspace a call of the shape needs on `stream` (0 for most); chooses (and compiles) its route when
 * new, which is refused, as by rlgemm_hgemm, while `stream` is being captured into a CUDA graph. */
int rlgemm_workspace_size(rlgemm_handle_t handle, void* stream, int64_t M, int64_t N, int64_t K, int layout,
                          size_t* bytes);

int rlgemm_stats(rlgemm_handle_t handle, rlgemm_stats_t* stats);

/* What the handle's shapes' first uses took, in seconds summed over the threads that made them: choosing the
 * cuBLASLt floor's algorithm, building kernels, and checking kernel routes against the floor (rlgemm::Stats,
 * first_use_floor_s, first_use_build_s and first_use_check_s). Later calls of a shape add nothing. A NULL pointer
 * skips its value. */
int rlgemm_first_use_seconds(rlgemm_handle_t handle, double* floor_s, double* build_s, double* check_s);

/* The route of a shape ("tuned <design>", "nearest <design> (from M,N,K)", "cublaslt", ...), written
 * NUL-terminated into buffer (truncated to size - 1 characters). */
int rlgemm_describe(rlgemm_handle_t handle, int64_t M, int64_t N, int64_t K, int layout, char* buffer,
                    size_t size);

/* The message of this thread's last failing call ("" when none failed). */
const char* rlgemm_last_error(void);

/* The library's version, e.g. "0.1.0 (commit abc123)". */
const char* rlgemm_version(void);

#ifdef __cplusplus
}
#endif

#endif /* RLGEMM_RLGEMM_C_H_ */
