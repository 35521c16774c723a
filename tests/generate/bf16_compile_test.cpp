// The bf16 kernels of both families compile with NVRTC (sm80 for sm_80 and sm_90a, sm90 for sm_90a) without
// spills, and their machine code holds bf16 tensor-core instructions and bf16 conversions where the fp16
// kernel of the same design holds fp16 ones (read with nvdisasm; that part skips where nvdisasm is missing).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "compile/compiler.h"
#include "generate/generate.h"
#include "sass/nvdisasm.h"

namespace rlgemm {
namespace {

struct Case {
  const char* design;
  const char* arch;
  Layout layout;
};

// Both families, both layouts (ldmatrix and ldmatrix.trans; K- and MN-major wgmma operands), every epilogue,
// split-K (the fp32 partials are converted at the end) and swap.
const Case kCases[] = {
    {"sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg", "sm_80", Layout::kTN},
    {"sm80/64x128x32/w32x64/s4/pad/raster_n.g4/splitk3.serial/epi_smem/swap", "sm_80", Layout::kNN},
    {"sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk2.parallel/epi_reg", "sm_90a", Layout::kTN},
    {"sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma", "sm_90a", Layout::kTN},
    {"sm90.ws.pingpong/128x128x64/s5/c1x1/raster_m.g8/splitk1/epi_reg", "sm_90a", Layout::kNN},
    {"sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/streamk/epi_reg/swap", "sm_90a", Layout::kTN},
};

// The opcodes of the kernel's tensor-core and fp32 -> 16-bit conversion instructions.
std::vector<std::string> mma_and_conversions(const CompiledKernel& kernel, const std::string& name) {
  std::vector<std::string> out;
  const std::vector<uint8_t> cubin(kernel.cubin.begin(), kernel.cubin.end());
  for (const auto& i : sass::disassemble_kernel(cubin, name).instructions)
    if (i.opcode.starts_with("HMMA") || i.opcode.starts_with("HGMMA") || i.opcode.starts_with("F2FP") ||
        i.opcode.starts_with("F2F."))
      out.push_back(i.opcode);
  return out;
}

TEST(Bf16Kernels, CompileAndCarryBf16Instructions) {
  std::vector<GeneratedKernel> kernels;
  for (const Case& c : kCases)
    for (DType dtype : {DType::kF16, DType::kBF16}) {
      Design d = parse_design(c.design);
      d.dtype = dtype;
      kernels.push_back(generate_kernel(d, Problem{{1000, 1032, 520}, c.layout, dtype}, c.arch));
    }
  CompileOptions options;
  options.cache_dir.reset();
  const auto results = compile_all(kernels, options);
  ASSERT_EQ(results.size(), kernels.size());
  const bool disasm = sass::nvdisasm_available();
  for (size_t k = 0; k < kernels.size(); k += 2) {
    const auto& fp16 = results[k];
    const auto& bf16 = results[k + 1];
    ASSERT_TRUE(fp16.kernel) << kernels[k].name << ":\n" << fp16.error;
    ASSERT_TRUE(bf16.kernel) << kernels[k + 1].name << ":\n" << bf16.error;
    EXPECT_EQ(bf16.kernel->resources.spill_store_bytes, 0) << bf16.kernel->log;
    if (!disasm) continue;
    const auto f = mma_and_conversions(*fp16.kernel, kernels[k].name);
    const auto b = mma_and_conversions(*bf16.kernel, kernels[k + 1].name);
    int bf16_mma = 0, bf16_cvt = 0, fp16_bf16 = 0;
    for (const auto& op : b) {
      const bool is_bf16 = op.find("BF16") != std::string::npos;
      bf16_mma += is_bf16 && op.find("MMA") != std::string::npos;
      bf16_cvt += is_bf16 && op.starts_with("F2F");
      EXPECT_FALSE(op.find("MMA") != std::string::npos && !is_bf16) << kernels[k + 1].name << ": " << op;
    }
    for (const auto& op : f) fp16_bf16 += op.find("BF16") != std::string::npos;
    EXPECT_GT(bf16_mma, 0) << kernels[k + 1].name;
    EXPECT_GT(bf16_cvt, 0) << kernels[k + 1].name;
    EXPECT_EQ(fp16_bf16, 0) << kernels[k].name;
    EXPECT_FALSE(f.empty()) << kernels[k].name;
  }
  if (!disasm) GTEST_SKIP() << "compiled; nvdisasm not found, so the instructions were not read";
}

}  // namespace
}  // namespace rlgemm
