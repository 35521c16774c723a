// Compiling generated kernels to cubins: NVRTC in isolated processes (isolated_nvrtc.h), spread over a
// thread pool, behind the on-disk cubin cache (cubin_cache.h).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "compile/isolated_nvrtc.h"
#include "generate/generate.h"

namespace rlgemm {

struct CompileOptions {
  // Where cubins are cached; nullopt disables the cache. Defaults to CubinCache::default_dir().
  std::optional<std::filesystem::path> cache_dir = default_cache_dir();
  std::chrono::milliseconds timeout{180000};  // per kernel
  int threads = 0;                            // compile_all's parallelism; 0: one per CPU core
  CompilerFault fault = CompilerFault::kNone;  // test hook (see isolated_nvrtc.h)

  static std::optional<std::filesystem::path> default_cache_dir();
};

// Resource usage ptxas reported for the kernel (-Xptxas -v); -1 where the log did not say. Where it did not, the
// registers and the stack frame are read from the cubin's own records (compile_kernel); the spill counts are not
// recorded there.
struct KernelResources {
  int registers = -1;
  int spill_store_bytes = -1;
  int spill_load_bytes = -1;
  int static_smem_bytes = -1;
  int stack_bytes = -1;
};

struct CompiledKernel {
  std::string name;
  std::string arch;
  std::vector<char> cubin;
  std::string log;
  KernelResources resources;
  std::string cache_key;        // SHA-256 (hex) of everything that decides the cubin
  bool from_cache = false;
  double compile_seconds = 0;   // wall time of the compile (0 for a cache hit)
};

// The NVRTC options rlgemm compiles with for an architecture ("sm_80", "sm_90a").
std::vector<std::string> nvrtc_options(const std::string& arch);

// The cache key of (kernel, options): covers the source, every embedded header, the options (which name the
// architecture) and the NVRTC version.
std::string cache_key(const GeneratedKernel& kernel, const std::vector<std::string>& options);

KernelResources parse_ptxas_resources(const std::string& log);

// Fills the registers and the stack frame the log left at -1 from the cubin's own records (.nv.info); leaves them
// where the image does not say or cannot be read. compile_kernel calls it on every kernel it returns: on some
// machines NVRTC's log comes back without the counts.
void complete_from_image(CompiledKernel& kernel);

// Why a kernel that ptxas made spill registers to local memory is not one to keep ("spills 8 bytes of registers
// (8 stored, 8 loaded)"), or nullopt when it spills nothing. Where the log gave no spill counts, the stack frame
// decides (the image's, see complete_from_image: "uses 16 bytes of local memory a thread ..."); nullopt where
// neither is known.
std::optional<std::string> spill_reason(const KernelResources& resources);

// Compiles one kernel (or takes it from the cache). Throws Error(kRuntime) with the compiler log, or
// with what happened to the compiler process (crash signal, timeout), when no cubin results.
CompiledKernel compile_kernel(const GeneratedKernel& kernel, const CompileOptions& options = {});

struct CompileResult {
  std::optional<CompiledKernel> kernel;
  std::string error;  // when !kernel
};

// Compiles many kernels concurrently; one failure does not stop the others. Results keep input order.
std::vector<CompileResult> compile_all(const std::vector<GeneratedKernel>& kernels, const CompileOptions& options = {});

}  // namespace rlgemm
