// The kernel contract of the evaluation service: what an outside program (a kernel-writing model under
// training) may hand rlgemm to be checked and timed, and the checks that need no GPU.
//
// A submission is either
//   - a design text of rlgemm's grammar ("sm90/128x128x64/..."), generated and compiled as the tuner does; or
//   - CUDA C++ source defining `extern "C" __global__` kernels and the host launch function
//       extern "C" int rlgemm_launch(const rlgemm_problem* problem, const void* a, const void* b, void* c,
//                                    void* workspace, size_t workspace_bytes, cudaStream_t stream);
//     and, when it needs a workspace, `extern "C" size_t rlgemm_workspace_bytes(const rlgemm_problem*)`
//     (the harness allocates it once, zeroed, with guard bands; a launch that needs it zero at every call zeroes
//     it on the stream with cudaMemsetAsync).
//     rlgemm_problem is declared by the prelude (contract_prelude()) that precedes the source.
//
// Why host code is compiled at all, and how it is held to the contract: a kernel-writing model writes its
// launch configuration (grid, shared memory, clusters, split-K passes) as host code, so the contract takes it
// as such. nvcc compiles the whole file into a shared object in an isolated process (the compile service of
// compile/isolated_nvrtc.h: time and memory limits, a crash contained). Before anything runs, the shared
// object's dynamic section is read: it may need only the CUDA runtime and the C/C++ runtimes, and may call
// only the runtime functions a launch needs (launching, kernel attributes, occupancy, memset on the stream,
// error queries). Allocation, synchronization, stream creation, cuBLAS/cuBLASLt, dlopen and the driver API
// are rejected by name here, with no GPU time spent. On the GPU (env/evaluator.h) the launch function then runs
// only inside a CUDA graph capture of the given stream in global mode, which fails for work on the legacy
// stream and for any synchronizing call that slipped past, and whatever it put on other streams is not in the
// graph the gate and the timings replay.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "rlgemm/problem.h"

namespace rlgemm::env {

inline constexpr const char* kLaunchSymbol = "rlgemm_launch";
inline constexpr const char* kWorkspaceSymbol = "rlgemm_workspace_bytes";
inline constexpr size_t kMaxSourceBytes = 256 * 1024;

// Why a submission is rejected: a stable code (the CSV's and the trainer's) and the details.
struct Rejection {
  std::string reason;  // compile_error, no_launch_function, too_large, invalid_shape, cublas, allocation,
                       // host_sync, other_stream, legacy_stream, forbidden_symbol, no_work, wrong_result,
                       // partial_output, stray_write, stale_output, timing_dependent, hang, fault, launch_error
  std::string detail;
};

// The declarations every source submission sees before its first line.
const std::string& contract_prelude();

// What a request asks for; parse_request throws Error(kInvalidInput) naming the rule it breaks.
struct Request {
  enum class Kind { kSource, kDesign } kind = Kind::kSource;
  std::string text;  // the source, or the design text
  Problem problem;
};
// {"source": "...", "shape": "M,N,K" | [M,N,K] | {"m":..,"n":..,"k":..}, "layout": "tn"} or {"design": "...", ...}
Request parse_request(const nlohmann::json& request);

// The checks on the text alone: size, the launch function, kernels, no cuBLAS header.
std::optional<Rejection> check_source(const std::string& source);

// The undefined dynamic symbols and the DT_NEEDED libraries of an ELF shared object (throws Error(kInvalidInput)
// for bytes that are not one).
struct DynamicImports {
  std::vector<std::string> needed;
  std::vector<std::string> undefined;  // as the dynamic symbol table has them ("name" or "name@VERSION")
};
DynamicImports dynamic_imports(const std::vector<char>& elf);

// The checks on the compiled shared object: which libraries it needs, which symbols it leaves to them.
// A fortified import (_FORTIFY_SOURCE: __printf_chk, __memcpy_chk, __fread_chk, ...) is judged as the function
// it checks, and a rejection names that function.
std::optional<Rejection> check_shared_object(const std::vector<char>& elf);
std::optional<Rejection> check_imports(const DynamicImports& imports);

struct BuildLimits {
  std::chrono::milliseconds timeout{120000};
  uint64_t memory_bytes = uint64_t(8) << 30;
};

struct Build {
  std::optional<Rejection> rejection;  // nothing to run when set
  std::vector<char> shared_object;
  std::string log;                     // the compiler's output
  double seconds = 0;
};

// check_source, then nvcc in the isolated compile service (`arch`: "sm_90a"), then check_shared_object.
Build build_source(const std::string& source, const std::string& arch, const BuildLimits& limits = {});

// The nvcc this build uses (RLGEMM_NVCC, else /usr/local/cuda/bin/nvcc).
std::string nvcc_path();

}  // namespace rlgemm::env
