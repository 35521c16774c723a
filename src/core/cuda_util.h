// CUDA runtime helpers shared by every stage: checked calls that throw rlgemm::Error, and the device's
// identity as recorded beside every measurement.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "rlgemm/error.h"

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

// Build identity recorded in every result file.
const char* build_commit();
const char* version();

}  // namespace rlgemm
