#include "run/module_cache.h"

#include <cuda_runtime.h>

#include <map>
#include <mutex>

#include "core/cuda_util.h"
#include "run/driver.h"

namespace rlgemm {
namespace {

struct Loaded {
  CUmodule module = nullptr;
  CUfunction function = nullptr;
  int smem_limit = 0;  // dynamic shared memory the function may use so far
};

std::mutex mutex;
std::map<std::pair<int, std::string>, Loaded> loaded;  // (device, key) -> module

}  // namespace

ModuleCache& ModuleCache::instance() {
  static ModuleCache cache;
  return cache;
}

CUfunction ModuleCache::function(const std::string& key, const std::vector<char>& cubin, const std::string& name,
                                 int smem_bytes) {
  int device = 0;
  RLGEMM_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard lock(mutex);
  Loaded& entry = loaded[{device, key}];
  if (!entry.module) {
    RLGEMM_CUDA_CHECK(cudaFree(nullptr));  // makes the device's primary context current
    const DriverApi& api = driver();
    RLGEMM_CU_CHECK(api.cuModuleLoadData(&entry.module, cubin.data()));
    const CUresult status = api.cuModuleGetFunction(&entry.function, entry.module, name.c_str());
    if (status != CUDA_SUCCESS) {
      api.cuModuleUnload(entry.module);
      entry.module = nullptr;
      check_driver(status, ("cuModuleGetFunction(" + name + ")").c_str());
    }
  }
  if (smem_bytes > entry.smem_limit) {
    RLGEMM_CU_CHECK(driver().cuFuncSetAttribute(entry.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                smem_bytes));
    entry.smem_limit = smem_bytes;
  }
  return entry.function;
}

bool ModuleCache::release(const std::string& key) {
  int device = 0;
  RLGEMM_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard lock(mutex);
  const auto it = loaded.find({device, key});
  if (it == loaded.end()) return false;
  CUmodule module = it->second.module;
  loaded.erase(it);
  // After a sticky error (the context is lost) unloading fails too; the entry is forgotten either way.
  if (module) driver().cuModuleUnload(module);
  return module != nullptr;
}

}  // namespace rlgemm
