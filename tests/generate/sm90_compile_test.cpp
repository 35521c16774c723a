// CPU tests of the sm90 family: a sweep of designs generates and compiles (the compile stage's NVRTC, as
// the product does) for sm_90a without register spills, the launch plan is persistent and cluster-shaped,
// and designs the template cannot express are rejected with the reason. tests/measure runs them on a GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "generate/sm90_family.h"
#include "compile/compiler.h"
#include "design/sm90_shape.h"
#include "generate/generate.h"
#include "kernels/sm90/params.h"
#include "rlgemm/error.h"
#include "support/cluster_four.h"
#include "support/coop_columns.h"
#include "support/bulk_tail.h"
#include "support/evict_hints.h"
#include "support/swizzle_alignment.h"
#include "support/epilogue_pieces.h"
#include "support/pingpong_wide.h"
#include "support/multicast_overlap.h"
#include "support/tile_widths.h"

namespace rlgemm {
namespace {

// One design per feature: schedules, tile sizes and widths, BK 32/64/128, clusters, epilogues, split-K modes,
// stream-K, swap, static shapes, programmatic dependent launch.
const std::vector<std::string> kSweepFeatures = {
    "sm90.ws.coop/128x256x64/s4/c1x1/raster_m.g8/splitk1/epi_reg",
    "sm90.ws.coop/128x256x64/s3/c2x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.coop/256x128x64/s4/c1x2/raster_n.g4/splitk1/epi_reg",
    "sm90.ws.pingpong/128x128x64/s5/c2x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/64x72x128/s4/c1x1/raster_m.g1/splitk2.serial/epi_reg",
    "sm90.ws.coop/256x128x32/s6/c1x1/raster_m.g8/splitk3.parallel/epi_reg",
    "sm90.ws.pingpong/192x64x64/s4/c1x2/raster_m.g8/splitk1/epi_reg/swap",
    "sm90.ws.pingpong/64x16x64/s8/c2x1/raster_m.g8/splitk4.serial/epi_reg/swap",
    "sm90.ws.coop/128x128x128/s3/c1x1/raster_m.g8/splitk2.serial/epi_tma/static",
    "sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/streamk/epi_reg",
    "sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/streamk/epi_tma",
    "sm90.ws.pingpong/128x128x64/s5/c1x2/raster_n.g4/streamk/epi_tma",
    "sm90.ws.coop/128x192x64/s4/c1x2/raster_m.g8/streamk/epi_reg",
    "sm90.ws.pingpong/64x128x32/s6/c2x1/raster_m.g1/streamk/epi_reg/swap/static",
    "sm90.ws.coop/128x128x64/s4/c1x2/raster_n.g4/splitk16.serial/epi_tma/pdl",
};

// The features above, then the widths beside the multiples of 64 (tests/support/tile_widths.h), the
// cooperative schedule that splits columns (tests/support/coop_columns.h), the epilogue staged in 64x64 pieces
// (tests/support/epilogue_pieces.h), ping-pong tiles of more than 128 accumulators (tests/support/pingpong_wide.h)
// 2x1 clusters whose B tile's multicast halves overlap (tests/support/multicast_overlap.h), clusters of four
// CTAs (tests/support/cluster_four.h), the TMA-store epilogue's tail stored by bulk copies
// (tests/support/bulk_tail.h; its bf16 design is the GPU test's), the L2 eviction hints of the operand loads
// (tests/support/evict_hints.h) and the epilogue staged after stages that end 512 bytes short of 1024
// (tests/support/swizzle_alignment.h).
std::vector<std::string> sweep() {
  std::vector<std::string> designs = kSweepFeatures;
  designs.insert(designs.end(), test::kNewTileWidthDesigns.begin(), test::kNewTileWidthDesigns.end());
  designs.insert(designs.end(), test::kCoopColumnsDesigns.begin(), test::kCoopColumnsDesigns.end());
  designs.insert(designs.end(), test::kEpiloguePiecesDesigns.begin(), test::kEpiloguePiecesDesigns.end());
  designs.insert(designs.end(), test::kPingpongWideDesigns.begin(), test::kPingpongWideDesigns.end());
  designs.insert(designs.end(), test::kMulticastOverlapDesigns.begin(), test::kMulticastOverlapDesigns.end());
  designs.insert(designs.end(), test::kClusterFourDesigns.begin(), test::kClusterFourDesigns.end());
  designs.insert(designs.end(), test::kBulkTailDesigns.begin(), test::kBulkTailDesigns.end());
  designs.insert(designs.end(), test::kEvictHintDesigns.begin(), test::kEvictHintDesigns.end());
  designs.insert(designs.end(), test::kSwizzleAlignmentDesigns.begin(), test::kSwizzleAlignmentDesigns.end());
  return designs;
}
const std::vector<std::string> kSweep = sweep();

class Sm90Sweep : public ::testing::TestWithParam<std::tuple<std::string, Layout>> {};

TEST_P(Sm90Sweep, CompilesForSm90aWithoutSpills) {
  const auto& [text, layout] = GetParam();
  const Design d = parse_design(text);
  if (why_invalid(d, layout) || sm90_unsupported(d, layout)) GTEST_SKIP() << "not valid for this layout";
  const Problem p{{1000, 1032, 520}, layout};
  const GeneratedKernel kernel = generate_kernel(d, p, "sm_90a");
  EXPECT_NE(kernel.source.find("extern \"C\" __global__"), std::string::npos);
  CompileOptions options;
  options.cache_dir = std::nullopt;  // compile for real: the sweep checks the compiler's verdict
  CompiledKernel compiled;
  ASSERT_NO_THROW(compiled = compile_kernel(kernel, options));
  EXPECT_FALSE(compiled.cubin.empty());
  EXPECT_EQ(compiled.resources.spill_store_bytes, 0) << compiled.log;
  // setmaxnreg is honoured only under a register cap at entry; ptxas says C7508 when it ignores it, and
  // C7514 when it serializes the wgmma pipeline.
  EXPECT_EQ(compiled.log.find("C7508"), std::string::npos) << compiled.log;
  EXPECT_EQ(compiled.log.find("C7514"), std::string::npos) << compiled.log;
}

// Each design in each layout it is valid for (an nn design of a width that is not a multiple of 64 needs swap).
std::vector<std::tuple<std::string, Layout>> valid_sweep() {
  std::vector<std::tuple<std::string, Layout>> cases;
  for (const std::string& text : kSweep)
    for (Layout layout : {Layout::kTN, Layout::kNN})
      if (!why_invalid(parse_design(text), layout)) cases.emplace_back(text, layout);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Designs, Sm90Sweep, ::testing::ValuesIn(valid_sweep()));

// No design of the sweep drops out whole: each is valid in tn at least.
TEST(Sm90SweepList, EveryDesignCompilesInSomeLayout) {
  for (const std::string& text : kSweep) EXPECT_FALSE(why_invalid(parse_design(text), Layout::kTN)) << text;
}

DeviceInfo h100() {
  DeviceInfo d;
  d.sm_count = 132;
  d.smem_per_block_optin = 232448;
  return d;
}

TEST(Sm90Plan, PersistentGridOfWholeClusters) {
  const Design d = parse_design("sm90.ws.coop/128x256x64/s3/c2x1/raster_m.g8/splitk1/epi_tma");
  const LaunchPlan big = sm90_family().plan(d, {{8192, 8192, 8192}, Layout::kTN}, h100());
  EXPECT_EQ(big.grid[0], 132u);  // 66 clusters of 2: min(2048 tiles, SMs rounded down to clusters)
  EXPECT_EQ(big.cluster[0], 2u);
  EXPECT_EQ(big.block[0], 384u);
  EXPECT_EQ(big.smem_bytes, sm90_smem_bytes(d));  // what the design rules count against the limit
  EXPECT_LE(big.smem_bytes, 232448);
  EXPECT_EQ(big.workspace_bytes, 0u);
  // 3 x 2 tiles = 2 cluster tiles along M (ceil(3/2)) x 2 along N: 4 clusters, 8 CTAs.
  const LaunchPlan small = sm90_family().plan(d, {{300, 400, 64}, Layout::kTN}, h100());
  EXPECT_EQ(small.grid[0], 8u);
}

// The shared-memory layout the kernel computes from sm90/params.h, over every tile the template takes: each
// stage's A and B tiles start on their swizzle atom (512 bytes for BK 32, 1024 otherwise), the TMA-store
// epilogue's 128-byte swizzled staging on the first 1024 bytes past the stages. The epi_tma designs of
// tests/support/swizzle_alignment.h are tiles whose stages end 512 bytes short.
TEST(Sm90Layout, SwizzledBuffersStartOnTheirAtoms) {
  int short_stages = 0;
  for (const bool pingpong : {true, false})
    for (const int bm : {64, 128, 192, 256})
      for (int bn = 8; bn <= 256; bn += 8)
        for (const int bk : {32, 64, 128})
          for (int stages = 2; stages <= 8; ++stages)
            for (const bool epilogue_tma : {true, false}) {
              sm90::Shape s{};
              s.bm = bm, s.bn = bn, s.bk = bk, s.stages = stages, s.pingpong = pingpong;
              s.epilogue_tma = epilogue_tma;
              const int atom = bk == 32 ? 512 : 1024;
              for (int stage = 0; stage < stages; ++stage) {
                ASSERT_EQ(stage * sm90::stage_bytes(s) % atom, 0);                   // A
                ASSERT_EQ((stage * sm90::stage_bytes(s) + bm * bk * 2) % atom, 0);  // B
              }
              ASSERT_GE(sm90::epilogue_offset(s), stages * sm90::stage_bytes(s));
              if (!epilogue_tma) continue;
              ASSERT_EQ(sm90::epilogue_offset(s) % 1024, 0) << bm << "x" << bn << "x" << bk << " s" << stages;
              if (stages * sm90::stage_bytes(s) % 1024 != 0) ++short_stages;
              ASSERT_LT(sm90::epilogue_offset(s) - stages * sm90::stage_bytes(s), 1024);  // no more than the rounding
            }
  EXPECT_GT(short_stages, 0);  // the case exists: the rounding is not idle
  for (const auto& text : test::kSwizzleAlignmentDesigns) {  // its epi_tma designs are such tiles
    const sm90::Shape s = sm90_shape(parse_design(text));
    if (s.epilogue_tma) EXPECT_NE(s.stages * sm90::stage_bytes(s) % 1024, 0) << text;
  }
}

TEST(Sm90Plan, SplitKNeedsAZeroedWorkspace) {
  const Design serial = parse_design("sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk4.serial/epi_reg");
  const LaunchPlan ps = sm90_family().plan(serial, {{256, 256, 4096}, Layout::kTN}, h100());
  EXPECT_TRUE(ps.workspace_must_be_zero);
  EXPECT_EQ(ps.grid[0], 4u * 2u * 4u);  // tiles x splits
  EXPECT_GE(ps.workspace_bytes, 8u * sizeof(int));
  const Design parallel = parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk2.parallel/epi_reg");
  const LaunchPlan pp = sm90_family().plan(parallel, {{256, 256, 4096}, Layout::kTN}, h100());
  EXPECT_GE(pp.workspace_bytes, 4u * 2u * 128u * 128u * sizeof(float));
}

TEST(Sm90Plan, StreamKGridWorkspaceAndSource) {
  const Design d = parse_design("sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/streamk/epi_tma");
  const Problem big{{4096, 4096, 4096}, Layout::kTN};
  const LaunchPlan plan = sm90_family().plan(d, big, h100());
  EXPECT_EQ(plan.grid[0], 132u);  // 66 clusters of 2: the whole machine, whatever the tile count
  EXPECT_EQ(plan.cluster[0], 2u);
  EXPECT_TRUE(plan.workspace_must_be_zero);
  // A flag per (CTA, consumer warpgroup), rounded up to 256 bytes, then a BM x BN fp32 partial per CTA.
  EXPECT_EQ(plan.workspace_bytes, 256u * 5 + 132u * 128 * 128 * sizeof(float));
  // Never more clusters than k-blocks: 1 tile of 3 k-blocks keeps 3 clusters busy.
  const Design pingpong = parse_design("sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/streamk/epi_reg");
  const LaunchPlan small = sm90_family().plan(pingpong, {{64, 64, 192}, Layout::kTN}, h100());
  EXPECT_EQ(small.grid[0], 3u);
  EXPECT_EQ(small.workspace_bytes, 256u + 3u * 64 * 64 * sizeof(float));
  const std::string src = sm90_family().source(d, big, "k");
  EXPECT_NE(src.find("kSplits = 1, kSplitMode = rlgemm::sm90::kSplitStreamK"), std::string::npos) << src;
}

TEST(Sm90Source, RejectsWhatTheTemplateCannotExpress) {
  const Design swap_tma = parse_design("sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma/swap");
  ASSERT_TRUE(sm90_unsupported(swap_tma, Layout::kTN));
  EXPECT_NE(sm90_unsupported(swap_tma, Layout::kTN)->find("epi_tma"), std::string::npos);
  // The TMA-store epilogue takes whole 64-column chunks and the rest from registers: a tile narrower than one
  // chunk is refused, any wider multiple of 8 taken.
  const Design narrow_tma = parse_design("sm90.ws.pingpong/64x32x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  ASSERT_TRUE(sm90_unsupported(narrow_tma, Layout::kTN));
  EXPECT_NE(sm90_unsupported(narrow_tma, Layout::kTN)->find("at least 64"), std::string::npos);
  for (const char* text : {"sm90.ws.pingpong/64x72x64/s4/c1x1/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.pingpong/64x96x64/s4/c1x1/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.coop/128x168x64/s4/c1x1/raster_m.g8/splitk1/epi_tma"})
    EXPECT_FALSE(sm90_unsupported(parse_design(text), Layout::kTN)) << text;
}

TEST(Sm90Source, StaticShapeBakesTheKernelView) {
  const Design d = parse_design("sm90.ws.pingpong/64x64x64/s4/c1x1/raster_m.g8/splitk1/epi_reg/swap/static");
  const std::string src = sm90_family().source(d, {{7, 4096, 1024}, Layout::kNN}, "k");
  // Swapped: the kernel's M is the problem's N, its A operand (B^T of an nn problem) is MN-major.
  EXPECT_NE(src.find("kStaticM = 4096, kStaticN = 7, kStaticK = 1024"), std::string::npos) << src;
  EXPECT_NE(src.find("kAMnMajor = true, kBMnMajor = false"), std::string::npos) << src;
}

}  // namespace
}  // namespace rlgemm
