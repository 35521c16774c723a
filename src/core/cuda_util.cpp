#include "core/cuda_util.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

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

namespace {

std::atomic<bool> g_device_hung{false};

template <typename Query>
void wait_until_done(Query query, const std::string& what, double seconds) {
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    const cudaError_t status = query();
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) throw_cuda_error(status, what.c_str(), __FILE__, __LINE__);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) {
      g_device_hung = true;
      throw Error(ErrorKind::kHang, what + " did not finish within " + std::to_string(int(seconds)) +
                                        " s: a kernel is hung (deadlocked); the GPU stays busy until this process ends");
    }
    // Spin briefly (short kernels), then yield the CPU.
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

}  // namespace

double watchdog_seconds() {
  static const double seconds = [] {
    const char* env = std::getenv("RLGEMM_WATCHDOG_S");
    const double v = env ? std::atof(env) : 0.0;
    return v > 0 ? v : 60.0;
  }();
  return seconds;
}

bool device_hung() { return g_device_hung; }

void wait_for(cudaStream_t stream, const std::string& what, double seconds) {
  wait_until_done([stream] { return cudaStreamQuery(stream); }, what, seconds);
}

void wait_for(cudaEvent_t event, const std::string& what, double seconds) {
  wait_until_done([event] { return cudaEventQuery(event); }, what, seconds);
}

}  // namespace rlgemm
