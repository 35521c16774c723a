// The CUDA driver API entry points rlgemm uses, resolved at run time through the CUDA runtime
// (cudaGetDriverEntryPointByVersion) so that nothing links libcuda: binaries load and their CPU tests run
// on machines without a GPU driver.
#pragma once

#include <cuda.h>

namespace rlgemm {

struct DriverApi {
  decltype(&::cuModuleLoadData) cuModuleLoadData = nullptr;
  decltype(&::cuModuleUnload) cuModuleUnload = nullptr;
  decltype(&::cuModuleGetFunction) cuModuleGetFunction = nullptr;
  decltype(&::cuFuncSetAttribute) cuFuncSetAttribute = nullptr;
  decltype(&::cuFuncGetAttribute) cuFuncGetAttribute = nullptr;
  decltype(&::cuLaunchKernelEx) cuLaunchKernelEx = nullptr;
  decltype(&::cuTensorMapEncodeTiled) cuTensorMapEncodeTiled = nullptr;
  decltype(&::cuTensorMapReplaceAddress) cuTensorMapReplaceAddress = nullptr;
  decltype(&::cuGetErrorName) cuGetErrorName = nullptr;
  decltype(&::cuGetErrorString) cuGetErrorString = nullptr;
  decltype(&::cuOccupancyMaxActiveClusters) cuOccupancyMaxActiveClusters = nullptr;
  // Reading a kernel launch back from a recorded CUDA graph (dispatch/lt_direct.h).
  decltype(&::cuGraphKernelNodeGetParams) cuGraphKernelNodeGetParams = nullptr;
  decltype(&::cuGraphKernelNodeGetAttribute) cuGraphKernelNodeGetAttribute = nullptr;
  decltype(&::cuFuncGetParamInfo) cuFuncGetParamInfo = nullptr;
  decltype(&::cuFuncGetName) cuFuncGetName = nullptr;
  decltype(&::cuKernelGetFunction) cuKernelGetFunction = nullptr;
  decltype(&::cuMemsetD2D8Async) cuMemsetD2D8Async = nullptr;
  decltype(&::cuMemsetD2D16Async) cuMemsetD2D16Async = nullptr;
  decltype(&::cuMemsetD2D32Async) cuMemsetD2D32Async = nullptr;
};

// Resolves the entry points once (thread-safe); throws Error(kNoDevice) when no driver is present.
const DriverApi& driver();

// Throws Error(kRuntime) naming the call and the driver's error name when `status` is not CUDA_SUCCESS.
void check_driver(CUresult status, const char* call);

// How many clusters of `cluster_size` CTAs (along x) of `function`, with `block_threads` threads and
// `smem_bytes` of dynamic shared memory each, the device can hold resident at once. A persistent kernel whose
// CTAs wait on each other (sm90 stream-K) must launch no more clusters than this.
int max_active_clusters(CUfunction function, unsigned cluster_size, unsigned block_threads, int smem_bytes);

// Launches `function` on `stream` with cuLaunchKernelEx: `grid` and `block` extents (3 each), `smem_bytes` of
// dynamic shared memory, and the cluster shape `cluster` (3 extents) when it holds more than one block. `args`
// as cuLaunchKernelEx takes them: one pointer per kernel parameter. `programmatic`: launch as a programmatic
// dependent of the previous kernel in the stream (a kernel that waits with griddepcontrol.wait; sm_90+).
// Throws Error(kRuntime) when the launch is refused.
void launch_function(CUfunction function, const unsigned* grid, const unsigned* block, const unsigned* cluster,
                     unsigned smem_bytes, CUstream stream, void** args, bool programmatic = false);

#define RLGEMM_CU_CHECK(call) ::rlgemm::check_driver((call), #call)

}  // namespace rlgemm
