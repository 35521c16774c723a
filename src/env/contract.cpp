#include "env/contract.h"

#include <elf.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>

#include "compile/isolated_nvrtc.h"
#include "rlgemm/error.h"

namespace rlgemm::env {
namespace {

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Runtime functions a launch needs: launching (the <<<>>> stubs and the explicit forms), kernel attributes and
// occupancy, the device's properties, a memset on the stream (zeroing a workspace or C), error queries.
const char* const kAllowedRuntime[] = {
    "cudaLaunchKernel", "cudaLaunchKernelExC", "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC_ptsz",
    "cudaFuncSetAttribute", "cudaFuncGetAttributes", "cudaFuncSetCacheConfig", "cudaGetDevice",
    "cudaDeviceGetAttribute", "cudaGetDeviceProperties", "cudaOccupancyMaxActiveBlocksPerMultiprocessor",
    "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", "cudaOccupancyMaxActiveClusters",
    "cudaOccupancyMaxPotentialClusterSize", "cudaMemsetAsync", "cudaMemset2DAsync", "cudaGetLastError",
    "cudaPeekAtLastError", "cudaGetErrorString", "cudaGetErrorName", "cudaGetFuncBySymbol",
    "cudaGetDeviceProperties_v2", "cudaGetDeviceCount", "cudaLaunchCooperativeKernel",
    "cudaLaunchCooperativeKernel_ptsz", "cudaFuncGetName", "cudaDriverGetVersion", "cudaRuntimeGetVersion"};

// What the C and C++ runtimes contribute to any compiled file (static initialisers, exceptions, guards).
// Printing (a model's launch code may report what it chose) and host arithmetic are harmless too.
const char* const kAllowedSystem[] = {"_Unwind_Resume", "__gxx_personality_v0", "__gmon_start__", "__stack_chk_fail",
                                      "memcpy", "memset", "memmove", "memcmp", "strlen", "abort", "__assert_fail",
                                      "_Znwm", "_ZdlPv", "_ZdlPvm", "_Znam", "_ZdaPv", "__cxa_finalize", "printf",
                                      "fprintf", "puts", "putchar", "fputs", "fwrite", "fflush", "snprintf",
                                      "sprintf", "vprintf", "vfprintf", "vsprintf", "vsnprintf", "stderr",
                                      "stdout"};

// The function a fortified import stands for. With _FORTIFY_SOURCE (on by default in some distributions' compilers
// at -O2, Ubuntu's among them) glibc's headers turn printf, memcpy, snprintf, fread, ... into checked variants
// (__printf_chk, __memcpy_chk, __snprintf_chk, __fread_chk; open into __open_2): the same function with a bounds
// check, so each is held to the contract exactly as the plain function is. Returns `name` itself otherwise.
std::string unfortified(const std::string& name) {
  auto strip = [&](const char* suffix) -> std::optional<std::string> {
    const size_t n = std::strlen(suffix);
    if (name.size() > 2 + n && starts_with(name, "__") && name.compare(name.size() - n, n, suffix) == 0 &&
        name[2] != '_')
      return name.substr(2, name.size() - 2 - n);
    return std::nullopt;
  };
  if (auto plain = strip("_chk")) return *plain;
  for (const char* f : {"__open_2", "__open64_2", "__openat_2", "__openat64_2", "__mq_open_2"})
    if (name == f) return name.substr(2, name.size() - 4);
  return name;
}

// A symbol left to another library: nullopt when the contract allows it, else why not. `shown` names it in the
// rejection: the function, and the symbol the compiler made of it where that differs.
std::optional<Rejection> classify_function(const std::string& name, const std::string& shown) {
  for (const char* s : kAllowedRuntime)
    if (name == s) return std::nullopt;
  for (const char* s : kAllowedSystem)
    if (name == s) return std::nullopt;
  static const std::regex math("^(sqrt|cbrt|ceil|floor|round|trunc|fmin|fmax|log|log2|log10|exp|exp2|pow|fabs|lround|"
                                "llround|lrint|ldexp|frexp|modf|fmod)f?$");
  if (std::regex_match(name, math)) return std::nullopt;
  // Threads and files of libstdc++ would let the launch act outside the call (work started later, state kept
  // between evaluations): not part of a launch.
  if ((starts_with(name, "_ZNSt") || starts_with(name, "_ZSt") || starts_with(name, "_ZNKSt")) &&
      (name.find("thread") != std::string::npos || name.find("fstream") != std::string::npos ||
       name.find("filesystem") != std::string::npos || name.find("filebuf") != std::string::npos))
    return Rejection{"forbidden_symbol", "the launch calls " + shown + ": threads and files are outside the contract"};
  // The runtime's registration and launch-stub internals, the C++ ABI, libstdc++'s std:: functions.
  if (starts_with(name, "__cuda") || starts_with(name, "__cxa_") || starts_with(name, "_ITM_") ||
      starts_with(name, "_ZSt") || starts_with(name, "_ZNSt") || starts_with(name, "_ZNKSt"))
    return std::nullopt;
  if (starts_with(name, "cublas"))
    return Rejection{"cublas", "the launch calls " + shown + ": the reward measures the submission's own kernels, not cuBLAS"};
  static const std::regex allocation("^(cudaMalloc|cudaFree|cudaHostAlloc|cudaMallocHost|cudaMallocManaged|"
                                     "cudaMallocAsync|cudaFreeAsync|cudaMallocFromPoolAsync|cudaMallocPitch|"
                                     "cudaMalloc3D|cudaMallocArray|cudaHostRegister|cudaMemPool).*");
  if (std::regex_match(name, allocation))
    return Rejection{"allocation", "the launch calls " + shown +
                                       ": memory is allocated per call; ask for a workspace with rlgemm_workspace_bytes"};
  static const std::regex sync("^(cudaDeviceSynchronize|cudaStreamSynchronize|cudaEventSynchronize|cudaStreamQuery|"
                               "cudaEventQuery|cudaStreamWaitEvent|cudaMemcpy|cudaMemcpyAsync|cudaMemcpy2D|"
                               "cudaMemcpyToSymbol|cudaMemcpyFromSymbol|cudaMemset|cudaThreadSynchronize|"
                               "cudaDeviceReset|cudaLaunchHostFunc|cudaStreamAddCallback)(_v2|_ptds|_ptsz)?$");
  if (std::regex_match(name, sync))
    return Rejection{"host_sync", "the launch calls " + shown +
                                      ": it synchronizes with the host or copies through it inside the timed call"};
  if (starts_with(name, "cudaStreamCreate") || starts_with(name, "cudaStreamDestroy") ||
      starts_with(name, "cudaEventCreate") || starts_with(name, "cudaEventRecord") ||
      starts_with(name, "cudaStreamBeginCapture") || starts_with(name, "cudaGraph"))
    return Rejection{"other_stream", "the launch calls " + shown + ": all work must go to the stream it is given"};
  if (name == "dlopen" || name == "dlsym" || name == "dlmopen" || name == "dlvsym" || starts_with(name, "cu") ||
      starts_with(name, "cudaGetDriverEntryPoint"))
    return Rejection{"forbidden_symbol", "the launch calls " + shown +
                                             ": the driver API and loading other libraries are outside the contract"};
  return Rejection{"forbidden_symbol", "the launch calls " + shown + ", which the contract does not allow"};
}

std::optional<Rejection> classify_library(const std::string& name) {
  if (starts_with(name, "libcublas"))
    return Rejection{"cublas", "the shared object links " + name + ": the reward measures the submission's own kernels"};
  for (const char* ok : {"libcudart.so", "libstdc++.so", "libgcc_s.so", "libc.so", "libm.so", "ld-linux"})
    if (starts_with(name, ok)) return std::nullopt;
  return Rejection{"forbidden_symbol", "the shared object links " + name + ", which the contract does not allow"};
}

std::string make_temp_dir() {
  std::random_device rd;
  const auto base = std::filesystem::temp_directory_path();
  for (int attempt = 0; attempt < 16; ++attempt) {
    auto dir = base / ("rlgemm-env-" + std::to_string(::getpid()) + "-" + std::to_string(rd()));
    if (std::filesystem::create_directory(dir)) return dir.string();
  }
  throw Error(ErrorKind::kRuntime, "cannot create a temporary folder for the compile");
}

}  // namespace

const std::string& contract_prelude() {
  static const std::string text =
      "#include <cstddef>\n#include <cstdint>\n#include <cuda_runtime.h>\n#include <cuda_fp16.h>\n"
      "// layout: 0 = tn (B stored N x K row-major), 1 = nn (B K x N row-major); A is M x K and C M x N, row-major.\n"
      "struct rlgemm_problem { int64_t m, n, k; int32_t layout; };\n"
      "extern \"C\" int rlgemm_launch(const rlgemm_problem* problem, const void* a, const void* b, void* c,\n"
      "                              void* workspace, size_t workspace_bytes, cudaStream_t stream);\n"
      "#line 1 \"submission.cu\"\n";
  return text;
}

Request parse_request(const nlohmann::json& j) {
  if (!j.is_object()) fail("a request is a JSON object with \"source\" or \"design\", and \"shape\"");
  Request r;
  const bool has_source = j.contains("source"), has_design = j.contains("design");
  if (has_source == has_design) fail("a request has exactly one of \"source\" (CUDA C++) and \"design\" (rlgemm's grammar)");
  const auto& text = has_source ? j.at("source") : j.at("design");
  if (!text.is_string()) fail(std::string("\"") + (has_source ? "source" : "design") + "\" must be a string");
  r.kind = has_source ? Request::Kind::kSource : Request::Kind::kDesign;
  r.text = text.get<std::string>();
  if (r.text.size() > kMaxSourceBytes)
    fail("the submission is " + std::to_string(r.text.size()) + " bytes, over the limit of " +
         std::to_string(kMaxSourceBytes));
  if (!j.contains("shape")) fail("a request needs \"shape\": \"M,N,K\"");
  const auto& s = j.at("shape");
  if (s.is_string()) {
    r.problem.shape = parse_shape(s.get<std::string>());
  } else if (s.is_array() && s.size() == 3 && s[0].is_number_integer() && s[1].is_number_integer() &&
             s[2].is_number_integer()) {
    r.problem.shape = {s[0].get<int64_t>(), s[1].get<int64_t>(), s[2].get<int64_t>()};
  } else if (s.is_object() && s.contains("m") && s.contains("n") && s.contains("k") && s["m"].is_number_integer() &&
             s["n"].is_number_integer() && s["k"].is_number_integer()) {
    r.problem.shape = {s["m"].get<int64_t>(), s["n"].get<int64_t>(), s["k"].get<int64_t>()};
  } else {
    fail("\"shape\" must be \"M,N,K\", [M,N,K] or {\"m\":M,\"n\":N,\"k\":K}");
  }
  validate(r.problem.shape);
  if (j.contains("layout")) {
    if (!j["layout"].is_string()) fail("\"layout\" must be \"tn\" or \"nn\"");
    r.problem.layout = parse_layout(j["layout"].get<std::string>());
  }
  return r;
}

std::optional<Rejection> check_source(const std::string& source) {
  if (source.size() > kMaxSourceBytes)
    return Rejection{"too_large", "the source is " + std::to_string(source.size()) + " bytes, over the limit of " +
                                      std::to_string(kMaxSourceBytes)};
  static const std::regex launch(R"(extern\s+"C"[^;{}]*\brlgemm_launch\s*\([^;]*\)\s*\{)");
  if (!std::regex_search(source, launch))
    return Rejection{"no_launch_function",
                     "no definition of extern \"C\" int rlgemm_launch(const rlgemm_problem*, const void* a, const void* b, "
                     "void* c, void* workspace, size_t workspace_bytes, cudaStream_t stream)"};
  static const std::regex kernel(R"(extern\s+"C"\s+__global__|__global__[^;{]*extern\s+"C")");
  if (!std::regex_search(source, kernel))
    return Rejection{"no_launch_function", "no extern \"C\" __global__ kernel in the source"};
  static const std::regex cublas_header(R"(#\s*include\s*[<"]\s*cublas)");
  if (std::regex_search(source, cublas_header))
    return Rejection{"cublas", "the source includes a cuBLAS header: the reward measures the submission's own kernels"};
  return std::nullopt;
}

DynamicImports dynamic_imports(const std::vector<char>& elf) {
  auto bad = [] { fail("the compiled file is not a 64-bit ELF shared object"); };
  if (elf.size() < sizeof(Elf64_Ehdr) || std::memcmp(elf.data(), ELFMAG, SELFMAG) != 0 || elf[EI_CLASS] != ELFCLASS64)
    bad();
  Elf64_Ehdr header;
  std::memcpy(&header, elf.data(), sizeof header);
  if (header.e_shentsize != sizeof(Elf64_Shdr) || header.e_shoff + uint64_t(header.e_shnum) * sizeof(Elf64_Shdr) > elf.size())
    bad();
  std::vector<Elf64_Shdr> sections(header.e_shnum);
  std::memcpy(sections.data(), elf.data() + header.e_shoff, sections.size() * sizeof(Elf64_Shdr));
  auto in_file = [&](const Elf64_Shdr& s) { return s.sh_offset + s.sh_size <= elf.size(); };
  auto string_at = [&](const Elf64_Shdr& table, uint64_t offset) {
    if (offset >= table.sh_size) bad();
    const char* start = elf.data() + table.sh_offset + offset;
    return std::string(start, strnlen(start, table.sh_size - offset));
  };
  DynamicImports out;
  for (const auto& s : sections) {
    if ((s.sh_type != SHT_DYNSYM && s.sh_type != SHT_DYNAMIC) || !in_file(s)) continue;
    if (s.sh_link >= sections.size() || !in_file(sections[s.sh_link])) bad();
    const Elf64_Shdr& strings = sections[s.sh_link];
    if (s.sh_type == SHT_DYNSYM) {
      for (uint64_t off = sizeof(Elf64_Sym); off + sizeof(Elf64_Sym) <= s.sh_size; off += sizeof(Elf64_Sym)) {
        Elf64_Sym sym;
        std::memcpy(&sym, elf.data() + s.sh_offset + off, sizeof sym);
        if (sym.st_shndx == SHN_UNDEF && sym.st_name) out.undefined.push_back(string_at(strings, sym.st_name));
      }
    } else {
      for (uint64_t off = 0; off + sizeof(Elf64_Dyn) <= s.sh_size; off += sizeof(Elf64_Dyn)) {
        Elf64_Dyn dyn;
        std::memcpy(&dyn, elf.data() + s.sh_offset + off, sizeof dyn);
        if (dyn.d_tag == DT_NULL) break;
        if (dyn.d_tag == DT_NEEDED) out.needed.push_back(string_at(strings, dyn.d_un.d_val));
      }
    }
  }
  return out;
}

std::optional<Rejection> check_shared_object(const std::vector<char>& elf) { return check_imports(dynamic_imports(elf)); }

std::optional<Rejection> check_imports(const DynamicImports& imports) {
  for (const auto& library : imports.needed)
    if (auto why = classify_library(library)) return why;
  // A cuBLAS call is named as such even when other symbols come first.
  std::optional<Rejection> first;
  for (const auto& symbol : imports.undefined) {
    const std::string name = symbol.substr(0, symbol.find('@'));
    const std::string plain = unfortified(name);
    if (auto why = classify_function(plain, plain == name ? name : plain + " (as " + name + ", its fortified form)")) {
      if (why->reason == "cublas") return why;
      if (!first) first = why;
    }
  }
  return first;
}

std::string nvcc_path() {
  if (const char* env = std::getenv("RLGEMM_NVCC"); env && *env) return env;
  return "/usr/local/cuda/bin/nvcc";
}

Build build_source(const std::string& source, const std::string& arch, const BuildLimits& limits) {
  Build build;
  if ((build.rejection = check_source(source))) return build;
  const std::string dir = make_temp_dir();
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{dir};
  const std::string input = dir + "/submission.cu", output = dir + "/submission.so";
  {
    std::ofstream out(input, std::ios::binary);
    out << contract_prelude() << source;
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + input);
  }
  NvrtcJob job;
  job.name = "submission.cu";
  job.exec = {nvcc_path(), "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "-O3", "-std=c++17",
              "-arch=" + arch, "-o", output, input};
  job.output = output;
  job.memory_limit_bytes = limits.memory_bytes;
  const auto start = std::chrono::steady_clock::now();
  NvrtcOutcome outcome = compile_isolated(job, limits.timeout);
  build.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  build.log = outcome.log;
  // The log names the temporary folder; the submitter knows the file as submission.cu.
  for (size_t at; (at = build.log.find(dir + "/")) != std::string::npos;) build.log.erase(at, dir.size() + 1);
  if (!outcome.ok()) {
    build.rejection = Rejection{"compile_error", outcome.detail};
    return build;
  }
  build.shared_object = std::move(outcome.cubin);
  build.rejection = check_shared_object(build.shared_object);
  return build;
}

}  // namespace rlgemm::env
