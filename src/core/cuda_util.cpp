#include "core/cuda_util.h"

#include <string>

namespace rlgemm {

extern const char kBuildCommit[];
extern const char kVersion[];
const char* build_commit() { return kBuildCommit; }
const char* version() { return kVersion; }

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  std::string msg = std::string("CUDA error ") + cudaGetErrorName(status) + " (" + cudaGetErrorString(status) +
                    ") in " + call + " at " + file + ":" + std::to_string(line);
  (void)cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
  if (status == cudaErrorMemoryAllocation)
    throw Error(ErrorKind::kOutOfMemory, "out of device memory: " + msg);
  if (status == cudaErrorNoDevice || status == cudaErrorInsufficientDriver)
    throw Error(ErrorKind::kNoDevice, "no usable CUDA device: " + msg);
  throw Error(ErrorKind::kRuntime, msg);
}

bool cuda_device_available(std::string* why) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    if (why)
      *why = status != cudaSuccess ? std::string(cudaGetErrorString(status)) : std::string("no CUDA device found");
    (void)cudaGetLastError();
    return false;
  }
  return true;
}

DeviceInfo open_device(int ordinal) {
  std::string why;
  if (!cuda_device_available(&why))
    throw Error(ErrorKind::kNoDevice, "no usable CUDA GPU on this machine (" + why +
                                          "); rlgemm needs an NVIDIA GPU with compute capability 8.0 or newer");
  int count = 0;
  RLGEMM_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (ordinal < 0 || ordinal >= count)
    throw Error(ErrorKind::kInvalidInput,
                "GPU " + std::to_string(ordinal) + " does not exist (" + std::to_string(count) + " found)");
  RLGEMM_CUDA_CHECK(cudaSetDevice(ordinal));
  cudaDeviceProp prop{};
  RLGEMM_CUDA_CHECK(cudaGetDeviceProperties(&prop, ordinal));
  DeviceInfo info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.l2_bytes = prop.l2CacheSize;
  info.global_mem_bytes = prop.totalGlobalMem;
  info.smem_per_block_optin = int(prop.sharedMemPerBlockOptin);
  RLGEMM_CUDA_CHECK(cudaDeviceGetAttribute(&info.sm_clock_khz, cudaDevAttrClockRate, ordinal));
  RLGEMM_CUDA_CHECK(cudaDeviceGetAttribute(&info.mem_clock_khz, cudaDevAttrMemoryClockRate, ordinal));
  RLGEMM_CUDA_CHECK(cudaDriverGetVersion(&info.driver_version));
  RLGEMM_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtime_version));
  if (info.cc_major < 8)
    throw Error(ErrorKind::kNoDevice, "GPU '" + info.name + "' has compute capability " +
                                          std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor) +
                                          "; rlgemm needs 8.0 or newer");
  return info;
}

}  // namespace rlgemm
