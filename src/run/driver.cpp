#include "run/driver.h"

#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "rlgemm/error.h"

namespace rlgemm {
namespace {

template <class F>
bool resolve(const char* symbol, F& out, std::string& error) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  // CUDA_VERSION: the ABI of the declarations this file was compiled against.
  const cudaError_t status = cudaGetDriverEntryPointByVersion(symbol, &fn, CUDA_VERSION, cudaEnableDefault, &found);
  if (status != cudaSuccess || found != cudaDriverEntryPointSuccess || !fn) {
    if (error.empty())
      error = std::string("the CUDA driver does not provide ") + symbol + " (" +
              (status != cudaSuccess ? cudaGetErrorString(status) : "symbol not found") +
              "): install a driver for CUDA " + std::to_string(CUDA_VERSION / 1000) + " or newer";
    return false;
  }
  out = reinterpret_cast<F>(fn);
  return true;
}

}  // namespace

const DriverApi& driver() {
  static DriverApi api;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    resolve("cuModuleLoadData", api.cuModuleLoadData, error);
    resolve("cuModuleUnload", api.cuModuleUnload, error);
    resolve("cuModuleGetFunction", api.cuModuleGetFunction, error);
    resolve("cuFuncSetAttribute", api.cuFuncSetAttribute, error);
    resolve("cuFuncGetAttribute", api.cuFuncGetAttribute, error);
    resolve("cuLaunchKernelEx", api.cuLaunchKernelEx, error);
    resolve("cuTensorMapEncodeTiled", api.cuTensorMapEncodeTiled, error);
    resolve("cuTensorMapReplaceAddress", api.cuTensorMapReplaceAddress, error);
    resolve("cuGetErrorName", api.cuGetErrorName, error);
    resolve("cuGetErrorString", api.cuGetErrorString, error);
    resolve("cuOccupancyMaxActiveClusters", api.cuOccupancyMaxActiveClusters, error);
    resolve("cuGraphKernelNodeGetParams", api.cuGraphKernelNodeGetParams, error);
    resolve("cuGraphKernelNodeGetAttribute", api.cuGraphKernelNodeGetAttribute, error);
    resolve("cuFuncGetParamInfo", api.cuFuncGetParamInfo, error);
    resolve("cuFuncGetName", api.cuFuncGetName, error);
    resolve("cuKernelGetFunction", api.cuKernelGetFunction, error);
    resolve("cuMemsetD2D8Async", api.cuMemsetD2D8Async, error);
    resolve("cuMemsetD2D16Async", api.cuMemsetD2D16Async, error);
    resolve("cuMemsetD2D32Async", api.cuMemsetD2D32Async, error);
  });
  if (!error.empty()) throw Error(ErrorKind::kNoDevice, error);
  return api;
}

void launch_function(CUfunction function, const unsigned* grid, const unsigned* block, const unsigned* cluster,
                     unsigned smem_bytes, CUstream stream, void** args, bool programmatic) {
  CUlaunchConfig config{};
  config.gridDimX = grid[0], config.gridDimY = grid[1], config.gridDimZ = grid[2];
  config.blockDimX = block[0], config.blockDimY = block[1], config.blockDimZ = block[2];
  config.sharedMemBytes = smem_bytes;
  config.hStream = stream;
  CUlaunchAttribute attributes[2]{};
  config.attrs = attributes;
  if (cluster[0] * cluster[1] * cluster[2] > 1) {
    CUlaunchAttribute& a = attributes[config.numAttrs++];
    a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = cluster[0];
    a.value.clusterDim.y = cluster[1];
    a.value.clusterDim.z = cluster[2];
  }
  if (programmatic) {
    // The previous kernel in the stream need not finish before this one starts: this one waits for it with
    // griddepcontrol.wait. A stream capture records the edge as programmatic too.
    CUlaunchAttribute& a = attributes[config.numAttrs++];
    a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a.value.programmaticStreamSerializationAllowed = 1;
  }
  RLGEMM_CU_CHECK(driver().cuLaunchKernelEx(&config, function, args, nullptr));
}

int max_active_clusters(CUfunction function, unsigned cluster_size, unsigned block_threads, int smem_bytes) {
  CUlaunchConfig config{};
  // The grid is not part of the answer, but it must be a whole number of clusters.
  config.gridDimX = cluster_size, config.gridDimY = 1, config.gridDimZ = 1;
  config.blockDimX = block_threads, config.blockDimY = 1, config.blockDimZ = 1;
  config.sharedMemBytes = static_cast<unsigned>(smem_bytes);
  CUlaunchAttribute attribute{};
  attribute.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  attribute.value.clusterDim.x = cluster_size;
  attribute.value.clusterDim.y = 1;
  attribute.value.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  int clusters = 0;
  RLGEMM_CU_CHECK(driver().cuOccupancyMaxActiveClusters(&clusters, function, &config));
  return clusters;
}

void check_driver(CUresult status, const char* call) {
  if (status == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  const DriverApi& api = driver();
  if (api.cuGetErrorName) api.cuGetErrorName(status, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(status, &text);
  throw Error(status == CUDA_ERROR_OUT_OF_MEMORY ? ErrorKind::kOutOfMemory : ErrorKind::kRuntime,
              std::string(call) + " failed: " + (name ? name : "CUDA error " + std::to_string(int(status))) +
                  (text ? std::string(" (") + text + ")" : ""));
}

}  // namespace rlgemm
