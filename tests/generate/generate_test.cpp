// Kernel generation: names, sources, architectures, embedded headers, and the sm80 family's launch plans
// and parameter blocks (CPU only).
#include "generate/generate.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>

#include "generate/embedded_headers.h"
#include "generate/families.h"
#include "kernels/sm80/params.h"
#include "rlgemm/error.h"
#include "support/error_of.h"

namespace rlgemm {
namespace {

Problem problem(int64_t m, int64_t n, int64_t k, Layout layout = Layout::kTN) { return Problem{{m, n, k}, layout}; }

using testing::error_of;

TEST(Generate, KernelNamesAreIdentifiersAndDistinguishLayoutAndStaticShape) {
  const Design d = parse_design("sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg");
  EXPECT_EQ(kernel_name(d, problem(1, 8, 8)), "rlgemm_sm80_128x128x32_w64x64_s3_swz_raster_m_g8_splitk1_epi_reg_tn");
  EXPECT_EQ(kernel_name(d, problem(1, 8, 8)), kernel_name(d, problem(100, 200, 136)));  // shape is run-time
  EXPECT_NE(kernel_name(d, problem(1, 8, 8)), kernel_name(d, problem(1, 8, 8, Layout::kNN)));
  const Design s = parse_design("sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg/static");
  EXPECT_NE(kernel_name(s, problem(1, 8, 8)), kernel_name(s, problem(1, 8, 16)));
  EXPECT_TRUE(kernel_name(s, problem(7, 200, 136)).ends_with("_tn_7_200_136")) << kernel_name(s, problem(7, 200, 136));
}

TEST(Generate, EmbeddedHeadersHoldTheDeviceCode) {
  std::set<std::string> names;
  for (const auto& h : embedded_headers()) {
    names.insert(h.name);
    EXPECT_GT(std::strlen(h.text), 0u) << h.name;
  }
  for (const char* needed : {"common/types.cuh", "common/tile_order.cuh", "common/sync.cuh", "ptx/sm80.cuh",
                             "sm80/gemm.cuh", "sm80/params.h", "sm80/smem_tile.cuh", "test/faults.cuh",
                             "test/params.h"})
    EXPECT_TRUE(names.count(needed)) << needed;
}

TEST(Generate, Bf16DesignsChooseTheirElementTypeBeforeAnyHeader) {
  for (const char* text : {"sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg",
                           "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma"}) {
    const Design fp16 = parse_design(text);
    const Design bf16 = parse_design(std::string(text) + "/bf16");
    Problem p = problem(100, 200, 136);
    const GeneratedKernel f = generate_kernel(fp16, p, fp16.family == Family::kSm90 ? "sm_90a" : "sm_80");
    EXPECT_EQ(f.source.find("RLGEMM_BF16"), std::string::npos) << f.source;
    p.dtype = DType::kBF16;
    const GeneratedKernel b = generate_kernel(bf16, p, f.arch);
    const auto define = b.source.find("#define RLGEMM_BF16 1");
    ASSERT_NE(define, std::string::npos) << b.source;
    EXPECT_LT(define, b.source.find("#include")) << b.source;
    EXPECT_NE(b.name, f.name);  // the cubin cache and the module cache tell them apart
    EXPECT_TRUE(b.name.ends_with("_bf16_tn")) << b.name;
    // A design of the other type is refused, naming the rule.
    const std::string why = error_of([&] { generate_kernel(fp16, p, f.arch); });
    EXPECT_NE(why.find("element type (fp16) must be the problem's"), std::string::npos) << why;
    EXPECT_EQ(layout_problem(Layout::kNN, DType::kBF16).dtype, DType::kBF16);
  }
  // The instructions the macro selects: the MMAs' input types and the epilogue's rounding to nearest even.
  std::string types;
  for (const auto& h : embedded_headers())
    if (std::string(h.name) == "common/types.cuh") types = h.text;
  for (const char* needed : {"\"bf16.bf16\"", "cvt.rn.bf16x2.f32", "cvt.rn.bf16.f32", "\"f16.f16\"", "cvt.rn.f16x2.f32"})
    EXPECT_NE(types.find(needed), std::string::npos) << needed;
}

TEST(Generate, Sm80SourceInstantiatesTheTemplate) {
  const Design d = parse_design("sm80/64x128x32/w32x64/s4/pad/raster_n.g4/splitk3.serial/epi_smem/swap");
  const GeneratedKernel k = generate_kernel(d, problem(100, 200, 136, Layout::kNN));
  EXPECT_EQ(k.arch, "sm_80");
  EXPECT_NE(k.source.find("#include \"sm80/gemm.cuh\""), std::string::npos);
  EXPECT_NE(k.source.find("extern \"C\" __global__"), std::string::npos);
  EXPECT_NE(k.source.find(k.name + "(const __grid_constant__ rlgemm::sm80::Params params)"), std::string::npos);
  // swapped nn: A' = B^T is N-contiguous (M'-major), B' = A^T is K-major, D = C^T
  EXPECT_NE(k.source.find("/*A_KMAJOR=*/false, /*B_KMAJOR=*/true, /*D_TRANSPOSED=*/true"), std::string::npos)
      << k.source;
  EXPECT_NE(k.source.find("rlgemm::sm80::kSplitSerial"), std::string::npos);
  EXPECT_NE(k.source.find("/*SWIZZLE=*/false"), std::string::npos);
  EXPECT_NE(k.source.find("/*RASTER_M=*/false, /*GROUP=*/4"), std::string::npos);
  EXPECT_EQ(k.source.find("STATIC_M"), std::string::npos);
  const Design s = parse_design("sm80/64x128x32/w32x64/s4/swz/raster_m.g8/splitk1/epi_reg/static");
  EXPECT_NE(generate_kernel(s, problem(100, 200, 136)).source.find("/*STATIC_M, N, K=*/100, 200, 136"),
            std::string::npos);
}

TEST(Generate, ArchitectureRules) {
  const Design sm80 = parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg");
  EXPECT_EQ(generate_kernel(sm80, problem(8, 8, 8), "sm_90").arch, "sm_90");
  EXPECT_EQ(generate_kernel(sm80, problem(8, 8, 8), "sm_90a").arch, "sm_90a");
  EXPECT_NE(error_of([&] { generate_kernel(sm80, problem(8, 8, 8), "sm_75"); }).find("sm_80 or later"),
            std::string::npos);
  EXPECT_NE(error_of([&] { generate_kernel(sm80, problem(8, 8, 8), "compute_90"); }).find("unknown architecture"),
            std::string::npos);
  EXPECT_EQ(arch_for_device(sm80, 9, 0), "sm_90");
  EXPECT_EQ(arch_for_device(sm80, 8, 6), "sm_86");
  const Design sm90 = parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg");
  EXPECT_EQ(arch_for_device(sm90, 9, 0), "sm_90a");
  EXPECT_NE(error_of([&] { generate_kernel(sm90, problem(8, 8, 8), "sm_90"); }).find("need sm_90a"),
            std::string::npos);
  EXPECT_EQ(family_for(parse_design("test.fault")).arch(parse_design("test.fault")), "sm_80");
}

TEST(Generate, InvalidDesignsAreRefusedWithTheReason) {
  const Design d = parse_design("sm80/128x128x32/w128x64/s3/swz/raster_m.g8/splitk1/epi_reg");
  const std::string why = error_of([&] { generate_kernel(d, problem(8, 8, 8)); });
  EXPECT_NE(why.find("accumulator registers"), std::string::npos) << why;
}

TEST(Sm80Family, LaunchPlans) {
  const DeviceInfo device;
  const auto& family = sm80_family();
  // 100 x 200 with 64 x 64 tiles: 2 x 4 tiles; K = 1000: 32 k-tiles of 32 -> 4 slices of 8.
  const Design par = parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk4.parallel/epi_reg");
  LaunchPlan p = family.plan(par, problem(100, 200, 1000), device);
  EXPECT_EQ(p.grid[0], 8u);
  EXPECT_EQ(p.grid[2], 4u);
  EXPECT_EQ(p.block[0], 128u);
  EXPECT_EQ(p.smem_bytes, 4 * (64 * 32 + 64 * 32) * 2);
  EXPECT_EQ(p.workspace_bytes, 256u + 4u * 8 * 64 * 64 * 4);
  EXPECT_TRUE(p.workspace_must_be_zero);
  // K = 24 is a single k-tile: one slice, whatever the design asks.
  EXPECT_EQ(family.plan(par, problem(100, 200, 24), device).grid[2], 1u);
  // 7 k-tiles in 3 requested slices -> 3 per slice -> 3 slices (3 + 3 + 1).
  const Design ser = parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk3.serial/epi_reg");
  p = family.plan(ser, problem(100, 200, 224), device);
  EXPECT_EQ(p.grid[2], 3u);
  EXPECT_EQ(p.workspace_bytes, 256u + 8u * 64 * 64 * 4) << "flags, then one fp32 running-sum tile per output tile";
  // swap_ab: tiles run over (N, M).
  const Design sw = parse_design("sm80/64x32x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_smem/swap");
  p = family.plan(sw, problem(7, 200, 136), device);
  EXPECT_EQ(p.grid[0], 4u * 1u);
  EXPECT_EQ(p.block[0], 64u);
  EXPECT_EQ(p.workspace_bytes, 0u);
}

TEST(Sm80Family, ParameterBlockInTheKernelsView) {
  const auto& family = sm80_family();
  alignas(16) static unsigned short a[16], b[16], c[16];
  GemmOperands ops{a, b, c, nullptr, 0};
  const Design sw = parse_design("sm80/64x32x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_smem/swap");
  const Problem pr = problem(7, 200, 136, Layout::kNN);
  const LaunchPlan plan = family.plan(sw, pr, DeviceInfo{});
  ParamBlock block;
  family.params(sw, pr, ops, plan, block);
  sm80::Params p;
  ASSERT_EQ(block.size, sizeof(p));
  std::memcpy(&p, block.bytes, sizeof(p));
  EXPECT_EQ(p.a, b);  // swapped
  EXPECT_EQ(p.b, a);
  EXPECT_EQ(p.d, c);
  EXPECT_EQ(p.m, 200);
  EXPECT_EQ(p.n, 7);
  EXPECT_EQ(p.k, 136);
  EXPECT_EQ(p.lda, 200);  // nn B is K x N
  EXPECT_EQ(p.ldb, 136);
  EXPECT_EQ(p.ldd, 200);
  EXPECT_EQ(p.tiles_m, 4);
  EXPECT_EQ(p.tiles_n, 1);
  // Misaligned operands and short workspaces are refused.
  GemmOperands bad{reinterpret_cast<const char*>(a) + 2, b, c, nullptr, 0};
  EXPECT_NE(error_of([&] { family.params(sw, pr, bad, plan, block); }).find("16-byte aligned"), std::string::npos);
  const Design par = parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk4.parallel/epi_reg");
  const LaunchPlan pp = family.plan(par, problem(100, 200, 1000), DeviceInfo{});
  EXPECT_NE(error_of([&] { family.params(par, problem(100, 200, 1000), ops, pp, block); }).find("workspace too small"),
            std::string::npos);
}

}  // namespace
}  // namespace rlgemm
