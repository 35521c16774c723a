// Programmatic dependent launch (/pdl) in both families: the generated kernels ask for the grid dependency,
// NVRTC builds them for Hopper without spills, and their machine code waits for the previous grid (ACQBULK,
// griddepcontrol.wait) before any global-memory instruction and lets the next grid launch (PREEXIT,
// griddepcontrol.launch_dependents); plain designs hold neither. Read with nvdisasm, which that part skips
// without. Below sm_90 a /pdl design is refused, by the generator and by the kernel headers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compile/compiler.h"
#include "generate/generate.h"
#include "rlgemm/error.h"
#include "support/error_of.h"
#include "sass/nvdisasm.h"

namespace rlgemm {
namespace {

struct Case {
  const char* design;  // without /pdl
  const char* arch;
  Layout layout;
};

// Every kind of first global access: cp.async loads, the serial split-K ticket, parallel split-K partials,
// TMA loads (clusters, multicast), the stream-K ticket, the TMA store.
const Case kCases[] = {
    {"sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_smem", "sm_90", Layout::kTN},
    {"sm80/64x64x32/w32x32/s4/pad/raster_n.g8/splitk3.serial/epi_reg", "sm_90a", Layout::kNN},
    {"sm80/32x64x64/w32x32/s3/swz/raster_m.g8/splitk16.parallel/epi_reg/swap", "sm_90a", Layout::kTN},
    {"sm90.ws.pingpong/64x64x128/s6/c1x1/raster_m.g8/splitk2.serial/epi_reg/swap", "sm_90a", Layout::kNN},
    {"sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/splitk3.parallel/epi_tma", "sm_90a", Layout::kTN},
    {"sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/streamk/epi_reg", "sm_90a", Layout::kTN},
};

Design with_pdl(const char* text, bool pdl) {
  Design d = parse_design(text);
  d.pdl = pdl;
  return d;
}

using testing::error_of;

bool global_access(const std::string& op) {
  for (const char* prefix : {"LDG", "STG", "ATOMG", "REDG", "RED.E", "UTMALDG", "UTMASTG", "UBLKCP", "ST.E", "LD.E"})
    if (op.starts_with(prefix)) return true;
  return false;
}

TEST(PdlKernels, CompileForHopperAndWaitBeforeTheFirstGlobalAccess) {
  std::vector<GeneratedKernel> kernels;
  for (const Case& c : kCases)
    for (bool pdl : {false, true})
      kernels.push_back(generate_kernel(with_pdl(c.design, pdl), Problem{{1000, 1032, 520}, c.layout}, c.arch));
  for (size_t k = 0; k < kernels.size(); k += 2) {
    const bool sm80 = kernels[k].source.find("sm80/gemm.cuh") != std::string::npos;
    const std::string flag = sm80 ? "/*PDL=*/true" : "kPdl = true";
    EXPECT_EQ(kernels[k].source.find(flag), std::string::npos) << kernels[k].source;
    EXPECT_NE(kernels[k + 1].source.find(flag), std::string::npos) << kernels[k + 1].source;
    EXPECT_NE(kernels[k].name, kernels[k + 1].name);  // the caches tell them apart
  }
  CompileOptions options;
  options.cache_dir.reset();
  const auto results = compile_all(kernels, options);
  ASSERT_EQ(results.size(), kernels.size());
  const bool disasm = sass::nvdisasm_available();
  for (size_t k = 0; k < kernels.size(); ++k) {
    ASSERT_TRUE(results[k].kernel) << kernels[k].name << ":\n" << results[k].error;
    EXPECT_EQ(results[k].kernel->resources.spill_store_bytes, 0) << results[k].kernel->log;
    if (!disasm) continue;
    const bool pdl = k % 2 == 1;
    const std::vector<uint8_t> cubin(results[k].kernel->cubin.begin(), results[k].kernel->cubin.end());
    int waits = 0, launches = 0;
    bool global_before_wait = false;
    for (const auto& i : sass::disassemble_kernel(cubin, kernels[k].name).instructions) {
      waits += i.opcode.starts_with("ACQBULK");
      launches += i.opcode.starts_with("PREEXIT");
      if (waits == 0 && global_access(i.opcode)) global_before_wait = true;
    }
    EXPECT_EQ(waits > 0, pdl) << kernels[k].name;
    EXPECT_EQ(launches > 0, pdl) << kernels[k].name;
    if (pdl) EXPECT_FALSE(global_before_wait) << kernels[k].name << ": a global access precedes the wait";
  }
  if (!disasm) GTEST_SKIP() << "compiled; nvdisasm not found, so the instructions were not read";
}

TEST(PdlKernels, RefusedBelowSm90) {
  const Design d = with_pdl("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg", true);
  const Problem p{{100, 200, 136}, Layout::kTN};
  EXPECT_EQ(generate_kernel(d, p).arch, "sm_90");  // the oldest architecture that runs it
  const std::string why = error_of([&] { generate_kernel(d, p, "sm_80"); });
  EXPECT_NE(why.find("needs sm_90 or later"), std::string::npos) << why;
  EXPECT_NE(error_of([&] { generate_kernel(d, p, arch_for_device(d, 8, 6)); }).find("/pdl"), std::string::npos);
  // The kernel headers refuse it too, should a source reach NVRTC for sm_80.
  GeneratedKernel kernel = generate_kernel(d, p, "sm_90");
  kernel.arch = "sm_80";
  CompileOptions options;
  options.cache_dir.reset();
  const std::string nvrtc = error_of([&] { compile_kernel(kernel, options); });
  EXPECT_NE(nvrtc.find("griddepcontrol"), std::string::npos) << nvrtc;
}

}  // namespace
}  // namespace rlgemm
