// CUDA runtime helpers shared by every stage: checked calls that throw rlgemm::Error, and the device's
// identity as recorded beside every measurement.
#pragma once

#include <cuda_runtime.h>
#include <library_types.h>

#include <string>

#include "rlgemm/error.h"
#include "rlgemm/problem.h"

namespace rlgemm {

// Throws Error: kOutOfMemory for allocation failures, kRuntime otherwise, naming the call and the place.
void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);

#define RLGEMM_CUDA_CHECK(call)                                                  \
  do {                                                                          \
    cudaError_t rlgemm_status_ = (call);                                        \
    if (rlgemm_status_ != cudaSuccess)                                          \
      ::rlgemm::throw_cuda_error(rlgemm_status_, #call, __FILE__, __LINE__);    \
  } while (0)

// Checks the launch just made (configuration errors) without synchronizing.
#define RLGEMM_CHECK_LAUNCH() RLGEMM_CUDA_CHECK(cudaGetLastError())

// Waits for the work queued on `stream` (or for `event`), like cudaStreamSynchronize, but gives up after
// `seconds`: a kernel that never finishes (a deadlock in a generated kernel) throws Error(kHang) naming
// `what`, instead of blocking forever. The hung work still occupies the GPU: the caller must end.
// The default limit is 60 s ($RLGEMM_WATCHDOG_S overrides it).
double watchdog_seconds();
void wait_for(cudaStream_t stream, const std::string& what, double seconds = watchdog_seconds());
void wait_for(cudaEvent_t event, const std::string& what, double seconds = watchdog_seconds());
// True once wait_for has reported a hang: every later CUDA call that waits for the device (cudaFree
// included) would block behind the hung kernel, so destructors skip their frees and the process ends.
bool device_hung();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_clock_khz = 0;      // peak
  int mem_clock_khz = 0;     // peak
  int l2_bytes = 0;
  size_t global_mem_bytes = 0;
  int smem_per_block_optin = 0;
  int driver_version = 0;    // e.g. 13000
  int runtime_version = 0;
};

// True when at least one CUDA device is usable; never throws.
bool cuda_device_available(std::string* why = nullptr);

// Selects `ordinal` and reads its identity; throws Error(kNoDevice) with a clear message when there is no
// usable device.
DeviceInfo open_device(int ordinal = 0);

// The CUDA library type (cuBLAS, cuBLASLt) of an element type: CUDA_R_16F or CUDA_R_16BF.
inline cudaDataType cuda_data_type(DType dtype) { return dtype == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F; }

// Build identity recorded in every result file.
const char* build_commit();
const char* version();

// A device array that lives for one scope (at least one element). Its memory is not freed once the device
// has hung (device_hung).
template <typename T>
struct DeviceScratch {
  T* ptr = nullptr;
  explicit DeviceScratch(size_t n) { RLGEMM_CUDA_CHECK(cudaMalloc(&ptr, (n > 0 ? n : 1) * sizeof(T))); }
  ~DeviceScratch() {
    if (!device_hung()) cudaFree(ptr);
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
};

}  // namespace rlgemm
