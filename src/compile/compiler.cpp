#include "compile/compiler.h"

#include <algorithm>
#include <cctype>
#include <atomic>
#include <thread>

#include "compile/cubin_cache.h"
#include "compile/sha256.h"
#include "generate/embedded_headers.h"
#include "sass/cubin.h"
#include "rlgemm/error.h"

namespace rlgemm {
namespace {

// Every embedded header takes part in the key: a kernel's cubin changes when a header it includes does.
const std::string& headers_digest() {
  static const std::string digest = [] {
    Sha256 h;
    for (const auto& header : embedded_headers()) h.field(header.name).field(header.text);
    return h.hex_digest();
  }();
  return digest;
}

// The largest count written as "<number> <unit>" anywhere in the log, or -1 where none is: ptxas's notes mention
// "registers" in prose too ("to allow use of registers in GMMA"), and a cubin of several entry functions has a
// line for each (the kernel's resources are those of the largest).
int number_before(const std::string& log, const std::string& unit) {
  int largest = -1;
  for (size_t at = log.find(unit); at != std::string::npos; at = log.find(unit, at + 1)) {
    size_t start = at;
    while (start > 0 && log[start - 1] == ' ') --start;
    const size_t end = start;
    while (start > 0 && std::isdigit(static_cast<unsigned char>(log[start - 1]))) --start;
    if (start == end || end - start > 9) continue;
    largest = std::max(largest, std::stoi(log.substr(start, end - start)));
  }
  return largest;
}

}  // namespace

std::optional<std::filesystem::path> CompileOptions::default_cache_dir() { return CubinCache::default_dir(); }

std::vector<std::string> nvrtc_options(const std::string& arch) {
  return {"--gpu-architecture=" + arch, "-std=c++17", "--device-as-default-execution-space", "--fmad=true",
          "-DNDEBUG", "--ptxas-options=-v"};
}

std::string cache_key(const GeneratedKernel& kernel, const std::vector<std::string>& options) {
  Sha256 h;
  h.field("rlgemm-cubin-v1").field(nvrtc_version_string()).field(kernel.arch).field(kernel.name);
  for (const auto& o : options) h.field(o);
  h.field(headers_digest()).field(kernel.source);
  return h.hex_digest();
}

KernelResources parse_ptxas_resources(const std::string& log) {
  KernelResources r;
  r.registers = number_before(log, "registers");
  r.spill_store_bytes = number_before(log, "bytes spill stores");
  r.spill_load_bytes = number_before(log, "bytes spill loads");
  r.stack_bytes = number_before(log, "bytes stack frame");
  r.static_smem_bytes = number_before(log, "bytes smem");
  if (r.registers >= 0 && r.static_smem_bytes < 0) r.static_smem_bytes = 0;  // ptxas omits "0 bytes smem"
  return r;
}

void complete_from_image(CompiledKernel& k) {
  KernelResources& r = k.resources;
  if (r.registers >= 0 && r.stack_bytes >= 0) return;
  try {
    const sass::ImageResources image =
        sass::Cubin::parse_any_sm(std::vector<uint8_t>(k.cubin.begin(), k.cubin.end()), k.name).resources(k.name);
    if (r.registers < 0) r.registers = image.registers;
    if (r.stack_bytes < 0) r.stack_bytes = image.frame_bytes;
  } catch (const Error&) {
    // An image this reader does not understand keeps what the log said.
  }
}

std::optional<std::string> spill_reason(const KernelResources& r) {
  const int bytes = std::max(r.spill_store_bytes, r.spill_load_bytes);
  // Without the log's spill counts, the stack frame: spilled registers live there, and no kernel of rlgemm's tuned
  // tables has a frame otherwise.
  if (bytes < 0 && r.stack_bytes > 0)
    return "uses " + std::to_string(r.stack_bytes) +
           " bytes of local memory a thread (spilled registers or a stack frame; the compiler's log gave no counts)";
  if (bytes <= 0) return std::nullopt;
  return "spills " + std::to_string(bytes) + " bytes of registers (" + std::to_string(std::max(r.spill_store_bytes, 0)) +
         " stored, " + std::to_string(std::max(r.spill_load_bytes, 0)) + " loaded)";
}

CompiledKernel compile_kernel(const GeneratedKernel& kernel, const CompileOptions& options) {
  const auto flags = nvrtc_options(kernel.arch);
  CompiledKernel out;
  out.name = kernel.name;
  out.arch = kernel.arch;
  out.cache_key = cache_key(kernel, flags);
  std::optional<CubinCache> cache;
  if (options.cache_dir) cache.emplace(*options.cache_dir);
  if (cache && options.fault == CompilerFault::kNone) {
    if (auto hit = cache->load(out.cache_key)) {
      out.cubin = std::move(hit->cubin);
      out.log = std::move(hit->log);
      out.resources = parse_ptxas_resources(out.log);
      complete_from_image(out);
      out.from_cache = true;
      return out;
    }
  }
  NvrtcJob job{kernel.name + ".cu", kernel.source, flags, options.fault};
  const auto start = std::chrono::steady_clock::now();
  NvrtcOutcome result = compile_isolated(job, options.timeout);
  out.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!result.ok()) {
    std::string message = "compiling kernel " + kernel.name + " for " + kernel.arch + " failed: " + result.detail;
    if (!result.log.empty()) message += "\n" + result.log;
    throw Error(ErrorKind::kRuntime, message);
  }
  out.cubin = std::move(result.cubin);
  out.log = std::move(result.log);
  out.resources = parse_ptxas_resources(out.log);
  complete_from_image(out);
  if (cache) cache->store(out.cache_key, CachedKernel{out.cubin, out.log});
  return out;
}

std::vector<CompileResult> compile_all(const std::vector<GeneratedKernel>& kernels, const CompileOptions& options) {
  std::vector<CompileResult> results(kernels.size());
  int threads = options.threads > 0 ? options.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min<int>(threads, int(kernels.size()));
  start_compile_service();  // fork the zygote once, from this thread, before the pool exists
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < kernels.size(); i = next++) {
      try {
        results[i].kernel = compile_kernel(kernels[i], options);
      } catch (const std::exception& e) {
        results[i].error = e.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return results;
}

}  // namespace rlgemm
