// NVRTC compilation (CPU only): a sweep of sm80 designs builds for sm_80 and sm_90a, and a compiler
// process that crashes or hangs is reported without harming the caller.
#include "compile/compiler.h"

#include <gtest/gtest.h>

#include <cstdio>

#include "rlgemm/error.h"

namespace rlgemm {
namespace {

CompileOptions no_cache() {
  CompileOptions o;
  o.cache_dir.reset();
  return o;
}

const char* kSweep[] = {
    "sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg",
    "sm80/128x256x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_smem",
    "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg",
    "sm80/64x64x64/w32x32/s3/pad/raster_n.g4/splitk3.serial/epi_smem",
    "sm80/64x128x32/w32x64/s5/swz/raster_m.g8/splitk4.parallel/epi_reg",
    "sm80/16x64x64/w16x32/s4/swz/raster_m.g1/splitk1/epi_reg/swap",
    "sm80/32x32x128/w16x16/s2/pad/raster_m.g2/splitk2.parallel/epi_smem/swap",
    "sm80/16x16x32/w16x16/s8/swz/raster_m.g8/splitk1/epi_reg",
    "sm80/256x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_smem",
    "sm80/64x64x32/w32x32/s3/swz/raster_m.g8/splitk1/epi_reg/static",
};

TEST(Compile, Sm80SweepBuildsForAmpereAndHopper) {
  std::vector<GeneratedKernel> kernels;
  int i = 0;
  for (const char* text : kSweep)
    for (const char* arch : {"sm_80", "sm_90a"}) {
      // Alternate layouts so both B paths (ldmatrix and ldmatrix.trans) are compiled for both targets.
      const Layout layout = (i++ / 2) % 2 ? Layout::kNN : Layout::kTN;
      kernels.push_back(generate_kernel(parse_design(text), Problem{{100, 200, 136}, layout}, arch));
    }
  for (const char* text : {"test.fault", "test.hang", "test.wrong"})
    kernels.push_back(generate_kernel(parse_design(text), Problem{{100, 200, 136}, Layout::kTN}, "sm_80"));
  const auto results = compile_all(kernels, no_cache());
  ASSERT_EQ(results.size(), kernels.size());
  double total = 0;
  for (size_t k = 0; k < kernels.size(); ++k) {
    const auto& r = results[k];
    ASSERT_TRUE(r.kernel) << kernels[k].name << " (" << kernels[k].arch << "):\n" << r.error;
    EXPECT_FALSE(r.kernel->cubin.empty());
    EXPECT_GT(r.kernel->resources.registers, 0) << r.kernel->log;
    EXPECT_LE(r.kernel->resources.registers, 255);
    total += r.kernel->compile_seconds;
    std::printf("  %-6s %-80s %5.2f s  %3d regs  %d B spilled\n", kernels[k].arch.c_str(), kernels[k].name.c_str(),
                r.kernel->compile_seconds, r.kernel->resources.registers, r.kernel->resources.spill_store_bytes);
  }
  std::printf("  %zu kernels, %.2f s compile time on average (compiled %d at a time)\n", kernels.size(),
              total / double(kernels.size()), int(std::thread::hardware_concurrency()));
}

TEST(Compile, CompileErrorsCarryTheLog) {
  GeneratedKernel k{"broken_kernel", "extern \"C\" __global__ void broken_kernel() { undeclared_name = 1; }\n",
                    "sm_80"};
  try {
    compile_kernel(k, no_cache());
    FAIL() << "compiled";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
    EXPECT_NE(std::string(e.what()).find("undeclared_name"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("NVRTC rejected"), std::string::npos) << e.what();
  }
}

TEST(Compile, CrashingCompilerIsContained) {
  const auto kernel = generate_kernel(parse_design("test.wrong"), Problem{{8, 8, 8}, Layout::kTN});
  CompileOptions crash = no_cache();
  crash.fault = CompilerFault::kCrash;
  try {
    compile_kernel(kernel, crash);
    FAIL() << "a crashing compiler produced a kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SIGSEGV"), std::string::npos) << e.what();
  }
  // The service survives: the next compile works.
  EXPECT_FALSE(compile_kernel(kernel, no_cache()).cubin.empty());
}

TEST(Compile, HangingCompilerIsKilledAtTheTimeout) {
  const auto kernel = generate_kernel(parse_design("test.wrong"), Problem{{8, 8, 8}, Layout::kTN});
  CompileOptions hang = no_cache();
  hang.fault = CompilerFault::kHang;
  hang.timeout = std::chrono::milliseconds(1500);
  const auto start = std::chrono::steady_clock::now();
  try {
    compile_kernel(kernel, hang);
    FAIL() << "a hanging compiler produced a kernel";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeded the 1500 ms limit"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_FALSE(compile_kernel(kernel, no_cache()).cubin.empty());
}

TEST(Compile, ConcurrentFailuresStayWithTheirKernels) {
  auto good = generate_kernel(parse_design("test.wrong"), Problem{{8, 8, 8}, Layout::kTN});
  GeneratedKernel bad{"bad_kernel", "this is not C++", "sm_80"};
  const auto results = compile_all({good, bad, good, bad}, no_cache());
  EXPECT_TRUE(results[0].kernel);
  EXPECT_FALSE(results[1].kernel);
  EXPECT_TRUE(results[2].kernel);
  EXPECT_FALSE(results[3].kernel);
  EXPECT_NE(results[1].error.find("bad_kernel"), std::string::npos);
}

TEST(Compile, PtxasResourcesAreRead) {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas info    : Function properties for k\n"
      "ptxas         .     8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 256 bytes smem\n";
  const KernelResources r = parse_ptxas_resources(log);
  EXPECT_EQ(r.registers, 168);
  EXPECT_EQ(r.spill_store_bytes, 12);
  EXPECT_EQ(r.spill_load_bytes, 16);
  EXPECT_EQ(r.stack_bytes, 8);
  EXPECT_EQ(r.static_smem_bytes, 256);
  EXPECT_EQ(parse_ptxas_resources("").registers, -1);
}

// ptxas's notes on wgmma kernels say "registers" before the resource line does, and a cubin of two entry functions
// has two resource lines: the counts are the numbers, the largest of each.
TEST(Compile, PtxasResourcesSkipProseAndTakeTheLargestFunction) {
  const std::string log =
      "ptxas info    : (C7519) warpgroup.arrive is injected in around line 322 by compiler to allow use of registers "
      "in GMMA in function 'k'\n"
      "ptxas info    : 196 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas info    : Function properties for k\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 16 barriers\n"
      "ptxas info    : Compiling entry function 'reduce' for 'sm_90a'\n"
      "ptxas info    : Function properties for reduce\n"
      "ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 40 registers, 1024 bytes smem\n";
  const KernelResources r = parse_ptxas_resources(log);
  EXPECT_EQ(r.registers, 168);
  EXPECT_EQ(r.spill_store_bytes, 8);
  EXPECT_EQ(r.spill_load_bytes, 4);
  EXPECT_EQ(r.stack_bytes, 16);
  EXPECT_EQ(r.static_smem_bytes, 1024);
  EXPECT_EQ(parse_ptxas_resources("use of registers in GMMA").registers, -1);
}

// The cubin's own records give the registers and the stack frame that ptxas's log gives: where a log comes back
// without counts, they stand in (a spilling kernel's frame holds its spills). Hopper and sm80 images alike.
TEST(Compile, TheImageRecordsTheRegistersAndTheFrameTheLogGives) {
  struct Case {
    const char* design;
    const char* arch;
  };
  for (const Case& c : {Case{"sm90.ws.pingpong/64x32x128/s6/c1x1/raster_n.g1/splitk16.parallel/epi_reg/swap", "sm_90a"},
                        Case{"sm80/16x64x128/w16x16/s4/swz/raster_n.g1/splitk4.parallel/epi_reg/swap", "sm_80"}}) {
    SCOPED_TRACE(c.design);
    CompiledKernel k = compile_kernel(generate_kernel(parse_design(c.design), Problem{{256, 64, 16384}, Layout::kTN}, c.arch),
                                      no_cache());
    const KernelResources from_log = k.resources;
    ASSERT_GT(from_log.registers, 0);
    ASSERT_GE(from_log.stack_bytes, 0);
    k.resources = parse_ptxas_resources("");  // a log without counts
    complete_from_image(k);
    EXPECT_EQ(k.resources.registers, from_log.registers);
    EXPECT_EQ(k.resources.stack_bytes, from_log.stack_bytes);
    EXPECT_EQ(k.resources.spill_store_bytes, -1);  // the image does not record spills as such
    // The spill guard judges by the frame then: the spilling tile is refused, the sm80 tile is not.
    EXPECT_EQ(spill_reason(k.resources).has_value(), from_log.spill_store_bytes > 0);
  }
}

// A kernel that spills is refused by the tuner's measurements with this reason; none where ptxas said 0 bytes or
// nothing at all.
TEST(Compile, SpillingKernelsHaveAReason) {
  KernelResources r;
  r.spill_store_bytes = 12;
  r.spill_load_bytes = 16;
  EXPECT_EQ(spill_reason(r), "spills 16 bytes of registers (12 stored, 16 loaded)");
  r.spill_load_bytes = 0;
  EXPECT_EQ(spill_reason(r), "spills 12 bytes of registers (12 stored, 0 loaded)");
  r.spill_store_bytes = 0;
  EXPECT_EQ(spill_reason(r), std::nullopt);
  EXPECT_EQ(spill_reason(KernelResources{}), std::nullopt);
}

// Where the compiler's log gave no spill counts, the stack frame (the cubin's record) decides.
TEST(Compile, WithoutTheLogsSpillCountsTheStackFrameDecides) {
  KernelResources r;
  r.stack_bytes = 0;
  EXPECT_EQ(spill_reason(r), std::nullopt);
  r.stack_bytes = 16;
  ASSERT_TRUE(spill_reason(r).has_value());
  EXPECT_NE(spill_reason(r)->find("uses 16 bytes of local memory a thread"), std::string::npos);
  // The log's counts, where it gave them, are what counts.
  r.spill_store_bytes = r.spill_load_bytes = 0;
  EXPECT_EQ(spill_reason(r), std::nullopt);
}

}  // namespace
}  // namespace rlgemm
