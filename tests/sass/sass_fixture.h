// Real sm_90a cubins for the SASS tests: the kernels in tests/sass/data are compiled with nvcc the first time
// a test asks (cached in the build folder). Tests skip when nvcc or nvdisasm is missing.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "compile/compiler.h"
#include "sass/cubin.h"
#include "sass/nvdisasm.h"

namespace rlgemm::sass::testing {

inline std::string nvcc_path() {
  if (const char* env = std::getenv("CUDACXX"); env && std::filesystem::exists(env)) return env;
  return "/usr/local/cuda/bin/nvcc";
}

// Compiles tests/sass/data/<stem>.cu for sm_90a; returns the cubin path or "" (with why) on failure.
inline std::string compiled_cubin(const std::string& stem, std::string* why) {
  namespace fs = std::filesystem;
  const fs::path source = fs::path(RLGEMM_SOURCE_DIR) / "tests/sass/data" / (stem + ".cu");
  const fs::path dir = fs::path(RLGEMM_BINARY_DIR) / "sass-test-cubins";
  const fs::path out = dir / (stem + ".cubin");
  std::error_code ec;
  if (fs::exists(out, ec) && fs::last_write_time(out, ec) >= fs::last_write_time(source, ec)) return out.string();
  if (!fs::exists(nvcc_path())) {
    *why = "nvcc not found at " + nvcc_path();
    return "";
  }
  fs::create_directories(dir, ec);
  const std::string tmp = out.string() + ".tmp";
  const std::string cmd = nvcc_path() + " -cubin -arch=sm_90a -O3 -o '" + tmp + "' '" + source.string() + "' 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    *why = "nvcc failed: " + cmd;
    return "";
  }
  fs::rename(tmp, out, ec);
  return out.string();
}

// A cubin NVRTC compiles from `source` for `arch` ("sm_90a", "sm_80") with the options rlgemm compiles its own
// kernels with; `entry` is one of its extern "C" kernels. Nothing is cached.
inline std::vector<uint8_t> nvrtc_cubin(const std::string& source, const std::string& entry, const std::string& arch) {
  CompileOptions options;
  options.cache_dir = std::nullopt;
  const CompiledKernel k = compile_kernel({entry, source, arch}, options);
  return std::vector<uint8_t>(k.cubin.begin(), k.cubin.end());
}

}  // namespace rlgemm::sass::testing

#define RLGEMM_SASS_CUBIN(var, stem)                                          \
  std::string var;                                                            \
  do {                                                                        \
    std::string why_;                                                         \
    var = ::rlgemm::sass::testing::compiled_cubin(stem, &why_);               \
    if (var.empty()) GTEST_SKIP() << "cannot build the test cubin: " << why_; \
  } while (0)

#define RLGEMM_REQUIRE_NVDISASM()                                                             \
  do {                                                                                        \
    std::string why_;                                                                         \
    if (!::rlgemm::sass::nvdisasm_available(&why_)) GTEST_SKIP() << "needs nvdisasm: " << why_; \
  } while (0)

inline const char* kSassKernels[] = {"mma_sync_gemm", "wgmma_tma_gemm"};
