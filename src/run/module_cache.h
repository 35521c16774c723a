// Loaded kernels: each cubin is loaded once per device (cuModuleLoadData into the device's primary
// context, which the CUDA runtime shares) and kept for the life of the process unless released.
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

namespace rlgemm {

class ModuleCache {
 public:
  static ModuleCache& instance();

  // The kernel `name` of `cubin` on the current device, loaded on first use. `key` identifies the cubin
  // (the compile cache key). Raises the function's dynamic shared-memory limit to `smem_bytes` when needed.
  CUfunction function(const std::string& key, const std::vector<char>& cubin, const std::string& name,
                      int smem_bytes);

  // Unloads the module of `key` on the current device, if loaded; its functions must not be launched again.
  // For cubins tried once and dropped (the SASS game loads thousands of candidates in one process).
  // Returns whether a module was unloaded.
  bool release(const std::string& key);

 private:
  ModuleCache() = default;
};

}  // namespace rlgemm
