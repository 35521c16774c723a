// rlgemm compile: writes a design's generated source and its cubin for inspection, and reports the
// compile time and the kernel's resources (registers, spills, shared memory).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/command.h"
#include "compile/compiler.h"
#include "core/cuda_util.h"
#include "generate/generate.h"
#include "rlgemm/design.h"
#include "rlgemm/error.h"

namespace rlgemm::cli {
namespace {

struct CompileArgs {
  std::string design;
  std::string arch;
  std::string layout = "tn";
  std::string shape;
  std::string out = ".";
  bool no_cache = false;
};

void write_file(const std::filesystem::path& path, const char* data, size_t size) {
  std::ofstream out(path, std::ios::binary);
  out.write(data, std::streamsize(size));
  if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + path.string());
}

int run_compile(const CompileArgs& args) {
  const Design design = parse_design(args.design);
  Problem problem = layout_problem(parse_layout(args.layout), design.dtype);
  if (!args.shape.empty()) problem.shape = parse_shape(args.shape);
  if (design.static_shape && args.shape.empty())
    fail("design " + args.design + " is static (/static): give the shape it is specialized to with --shape M,N,K");
  const GeneratedKernel kernel = generate_kernel(design, problem, args.arch);
  CompileOptions options;
  if (args.no_cache) options.cache_dir.reset();
  const CompiledKernel compiled = compile_kernel(kernel, options);

  std::filesystem::create_directories(args.out);
  const auto base = std::filesystem::path(args.out) / kernel.name;
  const auto cu = base.string() + ".cu";
  const auto cubin = base.string() + ".cubin";
  write_file(cu, kernel.source.data(), kernel.source.size());
  write_file(cubin, compiled.cubin.data(), compiled.cubin.size());

  const LaunchPlan plan = family_for(design).plan(design, problem.shape.m ? problem : layout_problem(problem.layout, problem.dtype),
                                                  DeviceInfo{});
  const KernelResources& r = compiled.resources;
  std::printf("design        %s\n", to_string(design).c_str());
  std::printf("kernel        %s (%s, layout %s)\n", kernel.name.c_str(), kernel.arch.c_str(),
              std::string(to_string(problem.layout)).c_str());
  if (compiled.from_cache)
    std::printf("compile time  cached (key %s)\n", compiled.cache_key.substr(0, 16).c_str());
  else
    std::printf("compile time  %.3f s (NVRTC %s, isolated process)\n", compiled.compile_seconds,
                nvrtc_version_string().c_str());
  std::printf("registers     %d per thread, %d threads per block\n", r.registers,
              int(plan.block[0] * plan.block[1] * plan.block[2]));
  std::printf("spills        %d bytes stored, %d bytes loaded, %d bytes stack\n", r.spill_store_bytes,
              r.spill_load_bytes, r.stack_bytes);
  std::printf("shared memory %d bytes dynamic + %d bytes static\n", plan.smem_bytes, r.static_smem_bytes);
  if (r.spill_store_bytes < 0 || r.spill_load_bytes < 0) {
    // The counts above come from the compiler's log; where it did not give them, the log itself says why.
    std::printf("compiler log  (no resource counts in it; registers and stack frame above are the cubin's records)\n");
    std::istringstream log(compiled.log);
    for (std::string line; std::getline(log, line);)
      if (!line.empty()) std::printf("              %s\n", line.c_str());
  }
  std::printf("wrote         %s\n              %s\n", cu.c_str(), cubin.c_str());
  return 0;
}

const CommandRegistration registration("compile", [](CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  auto* cmd = app.add_subcommand("compile", "Generate and compile one design; write its source and cubin");
  cmd->add_option("--design", args->design, "design text, e.g. sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg")
      ->required();
  cmd->add_option("--arch", args->arch, "target architecture: sm_80, sm_90 (sm80 designs), sm_90a (default: the family's)");
  cmd->add_option("--layout", args->layout, "B layout: tn (B stored N x K) or nn (B is K x N)")
      ->check(CLI::IsMember({"tn", "nn"}));
  cmd->add_option("--shape", args->shape, "M,N,K: the shape a /static design is specialized to");
  cmd->add_option("--out", args->out, "folder for <kernel>.cu and <kernel>.cubin")->required();
  cmd->add_flag("--no-cache", args->no_cache, "always compile, ignoring the cubin cache");
  return [args] { return run_compile(*args); };
});

}  // namespace
}  // namespace rlgemm::cli
