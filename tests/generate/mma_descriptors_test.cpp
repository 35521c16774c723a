// The sm90 family's main loop as the GPU runs it: each k-block waits for its stage, then issues its wgmmas with
// their shared-memory descriptors read from uniform registers, built there once per k-block and stepped by
// constants (src/kernels/sm90/gemm.cuh, desc_a_step and desc_b_step). Moving a descriptor from the vector
// registers before every wgmma (R2UR) took twice the instructions per k-block. Read with nvdisasm; skipped
// without it.
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
  Layout layout;  // nn: B is N-major in shared memory (MN-major descriptors)
};

// Both schedules, the two consumer warpgroups of a cooperative tile (each its own rows of A, or its own columns
// of B), BK 32 to 128, clusters, swap (A and B trade places), and N-major B.
const Case kCases[] = {
    {"sm90.ws.coop/128x128x64/s5/c1x1/raster_n.g8/splitk1/epi_tma", Layout::kTN},
    {"sm90.ws.coop/256x128x32/s6/c1x1/raster_m.g8/splitk1/epi_reg", Layout::kTN},
    {"sm90.ws.coop/128x168x64/s5/c1x1/raster_n.g8/splitk1/epi_tma", Layout::kTN},
    {"sm90.ws.pingpong/128x128x64/s5/c2x1/raster_m.g8/splitk1/epi_tma", Layout::kNN},
    {"sm90.ws.pingpong/64x64x128/s6/c1x1/raster_m.g8/splitk2.serial/epi_reg/swap", Layout::kNN},
    {"sm90.ws.coop/128x256x64/s4/c1x2/raster_n.g8/splitk1/epi_tma", Layout::kNN},
    // The tile's columns split between the warpgroups: each its own columns of B.
    {"sm90.ws.coopn/192x192x64/s3/c1x1/raster_n.g8/splitk1/epi_tma", Layout::kTN},
    {"sm90.ws.coopn/128x256x64/s3/c1x1/raster_m.g8/splitk1/epi_tma", Layout::kNN},
};

struct KBlock {
  int instructions = 0;
  int wgmmas = 0;
  int moves_to_uniform = 0;
};

// The k-blocks of a kernel: from each wait on a barrier's phase to the wgmma that closes the group.
std::vector<KBlock> k_blocks(const std::vector<sass::DisasmInstruction>& code) {
  std::vector<KBlock> blocks;
  bool open = false;
  KBlock cur;
  for (const auto& i : code) {
    if (i.opcode.starts_with("SYNCS.PHASECHK")) {
      open = true;
      cur = {};
      continue;
    }
    if (!open) continue;
    ++cur.instructions;
    cur.moves_to_uniform += i.opcode.starts_with("R2UR");
    if (i.opcode.starts_with("HGMMA")) {
      ++cur.wgmmas;
      if (i.operands.find("gsb0") != std::string::npos) {
        blocks.push_back(cur);
        open = false;
      }
    }
  }
  return blocks;
}

TEST(MmaDescriptors, EachKBlockReadsItsDescriptorsFromUniformRegisters) {
  std::string why;
  if (!sass::nvdisasm_available(&why)) GTEST_SKIP() << why;
  std::vector<GeneratedKernel> kernels;
  for (const Case& c : kCases)
    kernels.push_back(generate_kernel(parse_design(c.design), Problem{{1000, 1032, 520}, c.layout}, "sm_90a"));
  CompileOptions options;
  options.cache_dir.reset();
  const auto results = compile_all(kernels, options);
  ASSERT_EQ(results.size(), kernels.size());
  for (size_t k = 0; k < kernels.size(); ++k) {
    ASSERT_TRUE(results[k].kernel) << kernels[k].name << ":\n" << results[k].error;
    EXPECT_EQ(results[k].kernel->resources.spill_store_bytes, 0) << results[k].kernel->log;
    const std::vector<uint8_t> cubin(results[k].kernel->cubin.begin(), results[k].kernel->cubin.end());
    const auto blocks = k_blocks(sass::disassemble_kernel(cubin, kernels[k].name).instructions);
    ASSERT_FALSE(blocks.empty()) << kernels[k].name;
    for (const KBlock& b : blocks) {
      EXPECT_EQ(b.moves_to_uniform, 0) << kernels[k].name << ": " << b.instructions << " instructions, "
                                       << b.wgmmas << " wgmmas";
      // Per wgmma: its two descriptors' address words (one constant step each) and the high words; plus the
      // k-block's own bookkeeping (stage, phase, barrier addresses, the release of the previous stage).
      EXPECT_LE(b.instructions, 6 * b.wgmmas + 16) << kernels[k].name << ": " << b.wgmmas << " wgmmas";
    }
  }
}

}  // namespace
}  // namespace rlgemm
