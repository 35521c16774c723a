// The design value's text form (round trip, syntax errors) and its feasibility rules (the right reason).
#include "rlgemm/design.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <tuple>
#include <vector>

#include "design/sm90_shape.h"
#include "rlgemm/error.h"

namespace rlgemm {
namespace {

std::vector<Design> valid_sm80_sweep() {
  std::vector<Design> out;
  const int tiles[][4] = {{16, 16, 16, 16}, {16, 64, 16, 32}, {32, 32, 32, 32}, {64, 64, 32, 32}, {64, 128, 64, 32},
                          {128, 64, 64, 32}, {128, 128, 64, 64}, {128, 256, 64, 64}, {256, 128, 64, 64}};
  for (auto& t : tiles)
    for (int bk : {32, 64})
      for (int stages : {2, 3, 4})
        for (SplitK split : {SplitK::kNone, SplitK::kSerial, SplitK::kParallel})
          for (bool swap : {false, true}) {
            Design d;
            d.family = Family::kSm80;
            d.bm = t[0], d.bn = t[1], d.warp_m = t[2], d.warp_n = t[3];
            d.bk = bk, d.stages = stages, d.split = split, d.splits = split == SplitK::kNone ? 1 : 3;
            d.swap_ab = swap;
            d.static_shape = stages == 3;
            d.smem = stages == 2 ? SmemLayout::kPad : SmemLayout::kSwizzle;
            d.epilogue = swap ? Epilogue::kSmem : Epilogue::kRegisters;
            d.raster = bk == 64 ? Raster::kAlongN : Raster::kAlongM;
            d.group = stages == 4 ? 1 : 8;
            if (!why_invalid(d, Layout::kTN) && !why_invalid(d, Layout::kNN)) out.push_back(d);
          }
  return out;
}

std::vector<Design> valid_sm90_sweep() {
  std::vector<Design> out;
  for (auto schedule : {Sm90Schedule::kCooperative, Sm90Schedule::kPingpong, Sm90Schedule::kCooperativeColumns})
    for (int bm : {64, 128, 192, 256})
      for (int bn : {64, 128, 192, 256})
        for (int bk : {32, 64, 128})
          for (auto cluster : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}})
            for (SplitK split : {SplitK::kNone, SplitK::kSerial, SplitK::kParallel, SplitK::kStreamK}) {
              Design d;
              d.family = Family::kSm90;
              d.schedule = schedule;
              d.bm = bm, d.bn = bn, d.bk = bk, d.stages = 4;
              d.cluster_m = cluster.first, d.cluster_n = cluster.second;
              d.split = split, d.splits = (split == SplitK::kSerial || split == SplitK::kParallel) ? 2 : 1;
              d.epilogue = bn % 128 == 0 ? Epilogue::kTma : Epilogue::kRegisters;
              d.swap_ab = bk == 128;
              if (!why_invalid(d, Layout::kTN)) out.push_back(d);
            }
  return out;
}

TEST(DesignText, SweepsRoundTrip) {
  auto sm80 = valid_sm80_sweep();
  auto sm90 = valid_sm90_sweep();
  EXPECT_GT(sm80.size(), 100u);
  EXPECT_GT(sm90.size(), 100u);
  for (const auto* sweep : {&sm80, &sm90})
    for (const Design& d : *sweep) {
      const std::string text = to_string(d);
      const Design parsed = parse_design(text);
      EXPECT_EQ(parsed, d) << text;
      EXPECT_EQ(to_string(parsed), text);
    }
}

TEST(DesignText, ElementTypeIsATrailingSuffixAndFp16TextsAreUnchanged) {
  const std::string fp16 = "sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma";
  EXPECT_EQ(parse_design(fp16).dtype, DType::kF16);
  EXPECT_EQ(to_string(parse_design(fp16)), fp16);
  for (const char* text : {"sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma/bf16",
                           "sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/streamk/epi_reg/swap/static/bf16",
                           "sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg/bf16",
                           "sm80/16x64x64/w16x32/s4/swz/raster_m.g1/splitk4.parallel/epi_reg/swap/bf16"}) {
    const Design d = parse_design(text);
    EXPECT_EQ(d.dtype, DType::kBF16) << text;
    EXPECT_EQ(to_string(d), text);
    Design f = d;
    f.dtype = DType::kF16;
    EXPECT_NE(f, d);
    EXPECT_EQ(to_string(f) + "/bf16", text);  // the same design otherwise
  }
  for (auto sweep : {valid_sm80_sweep(), valid_sm90_sweep()})
    for (Design d : sweep) {
      d.dtype = DType::kBF16;
      EXPECT_EQ(parse_design(to_string(d)), d) << to_string(d);
    }
  auto error_of = [](const std::string& text) {
    try {
      parse_design(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  // fp16 is never written (one text per design); the type comes last.
  EXPECT_NE(error_of(fp16 + "/fp16").find("fp16 is the default"), std::string::npos);
  EXPECT_NE(error_of(fp16 + "/bf16/swap").find("element type /bf16"), std::string::npos);
  EXPECT_NE(error_of(fp16 + "/fp8").find("unexpected 'fp8'"), std::string::npos);
}

TEST(Design, ElementTypeMustBeTheProblems) {
  const Design bf16 = parse_design("sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg/bf16");
  const Design fp16 = parse_design("sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg");
  Problem p{{256, 256, 256}, Layout::kTN};
  const auto why = why_unfit(bf16, p);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("element type (bf16) must be the problem's (fp16)"), std::string::npos) << *why;
  EXPECT_FALSE(why_unfit(fp16, p));
  p.dtype = DType::kBF16;
  EXPECT_FALSE(why_unfit(bf16, p));
  EXPECT_TRUE(why_unfit(fp16, p));
  EXPECT_TRUE(why_unfit(parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg"), p));
  EXPECT_FALSE(why_invalid(bf16, Layout::kTN));  // the type changes no other rule
}

TEST(DesignText, DocumentedExamples) {
  for (const char* text : {"sm90.ws.pingpong/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.coop/256x128x64/s3/c1x2/raster_n.g4/splitk4.parallel/epi_reg/swap/static",
                           "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g1/streamk/epi_reg",
                           "sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg",
                           "sm80/16x64x64/w16x32/s6/pad/raster_n.g1/splitk8.serial/epi_smem/swap",
                           "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg/static", "test.fault",
                           "test.hang", "test.wrong"})
    EXPECT_EQ(to_string(parse_design(text)), text);
  const Design d = parse_design("sm80/16x64x64/w16x32/s6/pad/raster_n.g1/splitk8.serial/epi_smem/swap");
  EXPECT_EQ(d.family, Family::kSm80);
  EXPECT_EQ(d.bm, 16);
  EXPECT_EQ(d.bn, 64);
  EXPECT_EQ(d.bk, 64);
  EXPECT_EQ(d.warp_m, 16);
  EXPECT_EQ(d.warp_n, 32);
  EXPECT_EQ(d.stages, 6);
  EXPECT_EQ(d.smem, SmemLayout::kPad);
  EXPECT_EQ(d.raster, Raster::kAlongN);
  EXPECT_EQ(d.group, 1);
  EXPECT_EQ(d.split, SplitK::kSerial);
  EXPECT_EQ(d.splits, 8);
  EXPECT_EQ(d.epilogue, Epilogue::kSmem);
  EXPECT_TRUE(d.swap_ab);
  EXPECT_FALSE(d.static_shape);
  EXPECT_EQ(parse_design("test.hang").test, TestBehavior::kHang);
}

std::string parse_error(const std::string& text) {
  try {
    parse_design(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    return e.what();
  }
  ADD_FAILURE() << "parsed: " << text;
  return "";
}

TEST(DesignText, SyntaxErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "family"},
      {"sm70/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg", "family"},
      {"sm80/128x128/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg", "block tile"},
      {"sm80/128x128x32/64x64/s3/swz/raster_m.g8/splitk1/epi_reg", "warp tile"},
      {"sm80/128x128x32/w64x64/3/swz/raster_m.g8/splitk1/epi_reg", "stages"},
      {"sm80/128x128x32/w64x64/s03/swz/raster_m.g8/splitk1/epi_reg", "stages"},
      {"sm80/128x128x32/w64x64/s3/xor/raster_m.g8/splitk1/epi_reg", "shared-memory layout"},
      {"sm80/128x128x32/w64x64/s3/swz/raster_k.g8/splitk1/epi_reg", "raster"},
      {"sm80/128x128x32/w64x64/s3/swz/raster_m.g/splitk1/epi_reg", "raster group"},
      {"sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk4/epi_reg", "split"},
      {"sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk4.tree/epi_reg", "split"},
      {"sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_tma", "epilogue"},
      {"sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1", "at least 8 fields"},
      {"sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg/static/swap", "flags"},
      {"sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg/fast", "flags"},
      {"sm90.ws.mixed/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg", "schedule"},
      {"sm90.ws.coop/128x128x64/s4/2x1/raster_m.g8/splitk1/epi_reg", "cluster"},
      {"sm90.ws.coop/128x128x64/s4/c2/raster_m.g8/splitk1/epi_reg", "cluster"},
      {"sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_smem", "epilogue"},
      {"sm90.ws.coop/128x-128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg", "block tile"},
      {"test.explode", "test behaviour"},
  };
  for (auto [text, field] : cases) EXPECT_NE(parse_error(text).find(field), std::string::npos) << text << " -> " << parse_error(text);
}

TEST(DesignText, PdlFollowsStaticAndPrecedesTheElementType) {
  const std::string base = "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg";
  EXPECT_FALSE(parse_design(base).pdl);
  for (const std::string text : {base + "/pdl", base + "/pdl/bf16", base + "/swap/static/pdl",
                                 std::string("sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/splitk2.serial/epi_reg/pdl"),
                                 std::string("sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/streamk/epi_tma/static/pdl/bf16")}) {
    const Design d = parse_design(text);
    EXPECT_TRUE(d.pdl) << text;
    EXPECT_EQ(to_string(d), text);
    Design plain = d;
    plain.pdl = false;
    EXPECT_NE(plain, d);
    EXPECT_EQ(to_string(plain).find("pdl"), std::string::npos);
    EXPECT_FALSE(why_invalid(d, Layout::kTN)) << text;  // launch mode only: no layout rule
  }
  for (auto sweep : {valid_sm80_sweep(), valid_sm90_sweep()})
    for (Design d : sweep) {
      d.pdl = true;
      EXPECT_EQ(parse_design(to_string(d)), d) << to_string(d);
    }
  for (const std::string wrong : {base + "/pdl/static", base + "/bf16/pdl", base + "/pdl/pdl"})
    EXPECT_NE(parse_error(wrong).find("flags"), std::string::npos) << wrong;
}

// /bulktail (an epi_tma design's last BN % 64 columns of each warpgroup stored by bulk copies) follows /l2pP and
// precedes /pdl; it needs epi_tma and a warpgroup width that leaves such columns.
TEST(DesignText, BulkTailFollowsL2PromotionAndNeedsATail) {
  const std::string base = "sm90.ws.pingpong/128x168x64/s5/c2x1/raster_m.g8/splitk1/epi_tma";
  EXPECT_FALSE(parse_design(base).bulk_tail);
  for (const std::string text : {base + "/bulktail", base + "/l2p0/bulktail/pdl/bf16",
                                 std::string("sm90.ws.coopn/192x192x64/s4/c1x1/raster_n.g8/splitk1/epi_tma/bulktail")}) {
    const Design d = parse_design(text);
    EXPECT_TRUE(d.bulk_tail) << text;
    EXPECT_EQ(to_string(d), text);
    Design plain = d;
    plain.bulk_tail = false;
    EXPECT_NE(plain, d);
    EXPECT_EQ(to_string(plain).find("bulktail"), std::string::npos);
    EXPECT_FALSE(why_invalid(d, Layout::kTN)) << text << ": " << why_invalid(d, Layout::kTN).value_or("");
  }
  for (const std::string wrong : {base + "/bulktail/l2p0", base + "/pdl/bulktail", base + "/bulktail/bulktail"})
    EXPECT_NE(parse_error(wrong).find("flags"), std::string::npos) << wrong;
  // No columns past the whole chunks (BN 128; coopn 256: 128 a warpgroup), or no TMA-store epilogue: refused.
  for (const std::string wrong : {std::string("sm90.ws.pingpong/128x128x64/s5/c2x1/raster_m.g8/splitk1/epi_tma/bulktail"),
                                  std::string("sm90.ws.coopn/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma/bulktail"),
                                  std::string("sm90.ws.pingpong/128x168x64/s5/c2x1/raster_m.g8/splitk1/epi_reg/bulktail")})
    EXPECT_NE(why_invalid(parse_design(wrong), Layout::kTN).value_or("").find("/bulktail"), std::string::npos) << wrong;
  const auto sm80 = why_invalid(parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg/bulktail"),
                                Layout::kTN);
  EXPECT_NE(sm80.value_or("").find("sm80 designs have none"), std::string::npos) << sm80.value_or("");
}

// /evictAB (the L2 eviction hints of the TMA loads of the problem's A and B) follows /l2pP and precedes /bulktail;
// "nn" is the default and never written; it is an sm90 feature.
TEST(DesignText, EvictionHintsFollowL2PromotionAndPrecedeTheBulkTail) {
  const std::string base = "sm90.ws.pingpong/128x168x64/s5/c2x1/raster_m.g8/splitk1/epi_tma";
  EXPECT_EQ(parse_design(base).evict_a, EvictHint::kNormal);
  EXPECT_EQ(parse_design(base).evict_b, EvictHint::kNormal);
  for (auto [text, a, b] : {std::tuple{base + "/evictnl", EvictHint::kNormal, EvictHint::kLast},
                            std::tuple{base + "/evictfl", EvictHint::kFirst, EvictHint::kLast},
                            std::tuple{base + "/l2p0/evictlf/bulktail/pdl/bf16", EvictHint::kLast, EvictHint::kFirst},
                            std::tuple{base + "/swap/evictfn", EvictHint::kFirst, EvictHint::kNormal}}) {
    const Design d = parse_design(text);
    EXPECT_EQ(d.evict_a, a) << text;
    EXPECT_EQ(d.evict_b, b) << text;
    EXPECT_EQ(to_string(d), text);
    Design plain = d;
    plain.evict_a = plain.evict_b = EvictHint::kNormal;
    EXPECT_NE(plain, d);
    EXPECT_EQ(to_string(plain).find("evict"), std::string::npos);
  }
  EXPECT_FALSE(why_invalid(parse_design(base + "/evictfl"), Layout::kTN));
  for (const std::string wrong : {base + "/evictnn", base + "/evictx", base + "/evictfll", base + "/evict"})
    EXPECT_NE(parse_error(wrong).find("L2 eviction hints"), std::string::npos) << wrong;
  for (const std::string wrong : {base + "/bulktail/evictfl", base + "/evictfl/l2p0", base + "/evictfl/evictfl"})
    EXPECT_NE(parse_error(wrong).find("flags"), std::string::npos) << wrong;
  const auto sm80 = why_invalid(parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg/evictnl"),
                                Layout::kTN);
  EXPECT_NE(sm80.value_or("").find("an sm90 feature"), std::string::npos) << sm80.value_or("");
}

// /l2pP (the operands' tensor-map L2 promotion, when not the default 256 bytes) follows /static and precedes /pdl;
// it is an sm90 feature.
TEST(DesignText, L2PromotionFollowsStaticAndPrecedesPdl) {
  const std::string base = "sm90.ws.pingpong/128x168x64/s5/c2x1/raster_m.g8/splitk1/epi_tma";
  EXPECT_EQ(parse_design(base).l2_promotion, 256);
  for (auto [text, bytes] : {std::pair{base + "/l2p0", 0}, std::pair{base + "/l2p64/pdl/bf16", 64},
                             std::pair{base + "/static/l2p128", 128},
                             std::pair{std::string("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/streamk/epi_reg/swap/l2p0"), 0}}) {
    const Design d = parse_design(text);
    EXPECT_EQ(d.l2_promotion, bytes) << text;
    EXPECT_EQ(to_string(d), text);
    Design standard = d;
    standard.l2_promotion = 256;
    EXPECT_NE(standard, d);
    EXPECT_EQ(to_string(standard).find("l2p"), std::string::npos);
    EXPECT_FALSE(why_invalid(d, Layout::kTN)) << text;
  }
  for (const std::string wrong : {base + "/l2p0/static", base + "/pdl/l2p0", base + "/l2p0/l2p64"})
    EXPECT_NE(parse_error(wrong).find("flags"), std::string::npos) << wrong;
  for (const std::string wrong : {base + "/l2p256", base + "/l2p32", base + "/l2p"})
    EXPECT_NE(parse_error(wrong).find("L2 promotion"), std::string::npos) << wrong;
  Design odd = parse_design(base);
  odd.l2_promotion = 32;
  EXPECT_NE(why_invalid(odd, Layout::kTN).value_or("").find("0, 64, 128 or 256"), std::string::npos);
  const auto sm80 = why_invalid(parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg/l2p0"),
                                Layout::kTN);
  EXPECT_NE(sm80.value_or("").find("sm90 feature"), std::string::npos) << sm80.value_or("");
}

Design sm80(const char* text) { return parse_design(text); }

std::string reason(const std::string& text, Layout layout = Layout::kTN, int limit = 232448) {
  auto why = why_invalid(parse_design(text), layout, limit);
  return why ? *why : "";
}

TEST(DesignRules, ValidDesignsPass) {
  for (const char* text : {"sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg",
                           "sm80/16x16x32/w16x16/s2/pad/raster_m.g1/splitk2.parallel/epi_smem",
                           "sm80/256x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_smem",
                           "sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.pingpong/64x256x64/s5/c1x2/raster_n.g8/splitk1/epi_tma",
                           "sm90.ws.pingpong/128x128x64/s4/c1x1/raster_m.g8/splitk3.serial/epi_reg",
                           "sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/streamk/epi_tma",
                           "sm90.ws.pingpong/64x64x64/s8/c1x2/raster_n.g4/streamk/epi_reg/swap",
                           "sm90.ws.coopn/128x256x64/s3/c2x1/raster_m.g8/splitk2.serial/epi_tma", "test.wrong"})
    for (Layout layout : {Layout::kTN, Layout::kNN}) EXPECT_EQ(reason(text, layout), "") << text;
}

TEST(DesignRules, RejectionsNameTheRule) {
  const std::pair<const char*, const char*> cases[] = {
      // shared memory
      {"sm80/256x256x128/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg", "registers would spill"},
      {"sm80/128x256x128/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg", "shared memory over the limit"},
      {"sm90.ws.coop/256x256x128/s4/c1x1/raster_m.g8/splitk1/epi_reg", "accumulator registers"},
      {"sm90.ws.coop/128x256x128/s3/c1x1/raster_m.g8/splitk1/epi_tma", "shared memory over the limit"},
      // accumulators
      {"sm80/128x128x32/w128x64/s3/swz/raster_m.g8/splitk1/epi_reg", "accumulator registers per thread would spill"},
      {"sm90.ws.pingpong/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma", "accumulator registers per thread would spill"},
      // instruction shapes
      {"sm80/128x128x32/w24x64/s3/swz/raster_m.g8/splitk1/epi_reg", "multiple of 16, the mma.sync m16n8k16"},
      {"sm80/128x128x32/w64x8/s3/swz/raster_m.g8/splitk1/epi_reg", "warp tile N must be a multiple of 16"},
      {"sm80/128x64x32/w64x48/s3/swz/raster_m.g8/splitk1/epi_reg", "does not divide block tile"},
      {"sm80/40x64x32/w16x16/s3/swz/raster_m.g8/splitk1/epi_reg", "BM must be 16, 32, 64, 128 or 256"},
      {"sm80/64x96x32/w32x32/s3/swz/raster_m.g8/splitk1/epi_reg", "BN must be 16, 32, 64, 128 or 256"},
      {"sm80/256x256x32/w32x32/s3/swz/raster_m.g8/splitk1/epi_reg", "at most 16"},
      {"sm90.ws.coop/96x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg", "BM must be 64, 128, 192 or 256"},
      {"sm90.ws.coop/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg", "cooperative"},
      {"sm90.ws.coop/128x132x64/s4/c1x1/raster_m.g8/splitk1/epi_reg", "BN must be a multiple of 8"},
      {"sm90.ws.coop/128x264x64/s4/c1x1/raster_m.g8/splitk1/epi_reg", "BN must be a multiple of 8"},
      // the cooperative schedule that splits columns: each warpgroup BN/2 columns of all BM rows
      {"sm90.ws.coopn/192x200x64/s3/c1x1/raster_m.g8/splitk1/epi_reg", "multiple of 16"},
      {"sm90.ws.coopn/192x96x64/s4/c1x1/raster_m.g8/splitk1/epi_tma", "BN at least 128"},
      {"sm90.ws.coopn/256x192x64/s3/c1x1/raster_m.g8/splitk1/epi_reg", "256x96 fp32 = 192 per thread"},
      {"sm90.ws.coopn/192x128x64/s4/c1x1/raster_m.g8/splitk2.parallel/epi_reg", "does not take parallel split-K"},
      // coopn tiles wider than 256: a wgmma N of BN/2 each, the B tile in TMA boxes of at most 256 rows
      {"sm90.ws.coopn/128x528x64/s2/c2x1/raster_m.g8/splitk1/epi_reg", "multiple of 16 in 16..512"},
      {"sm90.ws.coopn/128x336x64/s3/c1x1/raster_m.g8/splitk1/epi_tma", "BN / CM <= 256"},
      {"sm90.ws.coopn/128x336x64/s3/c2x1/raster_m.g8/splitk1/epi_reg/swap", "needs tn, no swap"},
      // pipeline and K
      {"sm80/64x64x32/w32x32/s1/swz/raster_m.g8/splitk1/epi_reg", "stages must be 2..16"},
      {"sm90.ws.pingpong/64x16x64/s17/c1x1/raster_m.g8/splitk1/epi_reg", "stages must be 2..16"},
      {"sm80/64x64x16/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg", "BK must be 32, 64 or 128"},
      {"sm90.ws.coop/128x128x256/s2/c1x1/raster_m.g8/splitk1/epi_reg", "BK must be 32, 64 or 128"},
      // clusters, splits, features of the other family
      {"sm90.ws.coop/128x128x64/s4/c4x2/raster_m.g8/splitk1/epi_reg", "at most 4 CTAs"},
      {"sm90.ws.coop/128x128x64/s4/c3x1/raster_m.g8/splitk1/epi_reg", "CM and CN 1, 2 or 4"},
      {"sm90.ws.coop/128x128x64/s4/c1x8/raster_m.g8/splitk1/epi_reg", "CM and CN 1, 2 or 4"},
      {"sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1.serial/epi_reg", "needs 2..64 splits"},
      {"sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk0.parallel/epi_reg", "needs 2..64 splits"},
      {"sm80/64x64x32/w32x32/s4/swz/raster_m.g8/streamk/epi_reg", "stream-K"},
      {"sm80/64x64x32/w32x32/s4/swz/raster_m.g0/splitk1/epi_reg", "raster group must be 1..64"},
  };
  for (auto [text, expected] : cases) {
    const std::string why = reason(text);
    EXPECT_NE(why.find(expected), std::string::npos) << text << "\n  reason: '" << why << "'\n  expected: " << expected;
  }
  // An nn sm90 design reads B N-major: BN must be whole 64-column swizzle atoms.
  EXPECT_NE(reason("sm90.ws.coop/128x96x64/s4/c1x1/raster_m.g8/splitk1/epi_reg", Layout::kNN).find("multiple of 64"),
            std::string::npos);
  EXPECT_EQ(reason("sm90.ws.coop/128x96x64/s4/c1x1/raster_m.g8/splitk1/epi_reg", Layout::kTN), "");
  // coopn: each warpgroup's half of an N-major B tile is whole swizzle atoms too.
  EXPECT_NE(reason("sm90.ws.coopn/192x192x64/s3/c1x1/raster_m.g8/splitk1/epi_tma", Layout::kNN).find("128 or 256"),
            std::string::npos);
  EXPECT_EQ(reason("sm90.ws.coopn/192x192x64/s3/c1x1/raster_m.g8/splitk1/epi_tma", Layout::kTN), "");
  // A coopn tile wider than 256 is a tn tile (its B K-major, in parts of at most 256 rows).
  EXPECT_EQ(reason("sm90.ws.coopn/128x336x64/s3/c2x1/raster_m.g8/splitk1/epi_tma", Layout::kTN), "");
  EXPECT_NE(reason("sm90.ws.coopn/128x384x64/s3/c2x1/raster_m.g8/splitk1/epi_tma", Layout::kNN).find("needs tn"),
            std::string::npos);
  EXPECT_NE(reason("sm90.ws.coop/128x336x64/s3/c2x1/raster_m.g8/splitk1/epi_tma", Layout::kTN).find("16..256"),
            std::string::npos);  // the other schedules keep one wgmma N per warpgroup
  // The limit is the caller's: an A100-sized budget rejects what an H100 accepts.
  const char* big = "sm80/128x128x64/w64x64/s6/swz/raster_m.g8/splitk1/epi_reg";  // 196608 bytes
  EXPECT_EQ(reason(big), "");
  EXPECT_NE(reason(big, Layout::kTN, 166912).find("shared memory over the limit"), std::string::npos);
}

TEST(DesignRules, SharedMemoryAccounting) {
  // stages x (BM x BK + BN x BK) x 2 bytes, plus padding; the smem epilogue reuses the pipeline.
  EXPECT_EQ(sm80_smem_bytes(sm80("sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg"), Layout::kTN),
            3 * (128 * 32 + 128 * 32) * 2);
  EXPECT_EQ(sm80_smem_bytes(sm80("sm80/128x128x32/w64x64/s3/pad/raster_m.g8/splitk1/epi_reg"), Layout::kTN),
            3 * (128 * 40 + 128 * 40) * 2);
  EXPECT_EQ(sm80_smem_bytes(sm80("sm80/128x128x32/w64x64/s3/pad/raster_m.g8/splitk1/epi_reg"), Layout::kNN),
            3 * (128 * 40 + 32 * 136) * 2);
  EXPECT_EQ(sm80_smem_bytes(sm80("sm80/128x128x32/w64x64/s2/swz/raster_m.g8/splitk1/epi_smem"), Layout::kTN),
            128 * 136 * 2);  // staging (34816) > pipeline (32768)
  const Design d = parse_design("sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_GE(sm90_smem_bytes(d), 4 * (128 + 256) * 64 * 2);
  EXPECT_LE(sm90_smem_bytes(d), 232448);
}

// The TMA-store epilogue stages chunks of a warpgroup's whole rows where they fit beside the pipeline, and 64x64
// pieces where they do not: coopn 192x192 with 4 stages (4 x 48 KiB) and coop 256x128 with 4 stages fit only so.
TEST(DesignRules, EpilogueStagesPiecesWhereWholeRowsDoNotFit) {
  const auto shape_of = [](const char* text) { return sm90_shape(parse_design(text)); };
  const sm90::Shape coopn3 = shape_of("sm90.ws.coopn/192x192x64/s3/c1x1/raster_n.g8/splitk1/epi_tma");
  EXPECT_EQ(sm90::epilogue_rows(coopn3), 192);
  EXPECT_EQ(sm90::epilogue_bytes(coopn3), 2 * 192 * 64 * 2);  // one buffer each: 96 columns, one whole chunk
  for (const char* text : {"sm90.ws.coopn/192x192x64/s4/c1x1/raster_n.g8/splitk1/epi_tma",
                           "sm90.ws.coop/256x128x64/s4/c1x1/raster_n.g8/splitk1/epi_tma"}) {
    const Design d = parse_design(text);
    EXPECT_FALSE(why_invalid(d, Layout::kTN)) << text;
    const sm90::Shape s = sm90_shape(d);
    EXPECT_EQ(sm90::epilogue_rows(s), 64) << text;
    EXPECT_EQ(sm90::epilogue_buffers(s), 2) << text;  // three or four pieces per warpgroup: double-buffered
    EXPECT_EQ(sm90_smem_bytes(d), 1024 + 4 * 48 * 1024 + 2 * 2 * 64 * 64 * 2 + 2 * 4 * 8 + 64) << text;
    EXPECT_LE(sm90_smem_bytes(d), kHopperSmemPerBlock) << text;
  }
  // Registers do not stage: the same stages there need no room for an epilogue.
  EXPECT_EQ(sm90::epilogue_bytes(shape_of("sm90.ws.coopn/192x192x64/s4/c1x1/raster_n.g8/splitk1/epi_reg")), 0);
  // Five stages of 48 KiB leave no room even for pieces.
  const auto why = why_invalid(parse_design("sm90.ws.coop/256x128x64/s5/c1x1/raster_n.g8/splitk1/epi_tma"), Layout::kTN);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("shared memory over the limit"), std::string::npos) << *why;
}

// A 2x1 cluster's CTAs each multicast a part of the shared K-major tile that starts on a whole 8-row swizzle
// atom: halves of 168 rows (84) round up to 88, the second part starts at row 80, and each CTA receives 176 rows.
TEST(DesignRules, MulticastPartsStartOnWholeSwizzleAtoms) {
  EXPECT_EQ(sm90::multicast_part_rows(168, 2), 88);
  EXPECT_EQ(sm90::multicast_part_first_row(168, 2, 0), 0);
  EXPECT_EQ(sm90::multicast_part_first_row(168, 2, 1), 80);
  EXPECT_EQ(sm90::multicast_rows_received(168, 2), 176);
  // Halves of whole atoms do not overlap.
  EXPECT_EQ(sm90::multicast_part_rows(128, 2), 64);
  EXPECT_EQ(sm90::multicast_part_first_row(128, 2, 1), 64);
  EXPECT_EQ(sm90::multicast_rows_received(128, 2), 128);
  // A tile that is not shared is one part.
  EXPECT_EQ(sm90::multicast_part_rows(168, 1), 168);
  EXPECT_EQ(sm90::multicast_rows_received(168, 1), 168);
  for (int rows = 16; rows <= 256; rows += 8) {
    const int part = sm90::multicast_part_rows(rows, 2);
    EXPECT_EQ(part % 8, 0) << rows;
    EXPECT_EQ(sm90::multicast_part_first_row(rows, 2, 1) % 8, 0) << rows;
    EXPECT_EQ(sm90::multicast_part_first_row(rows, 2, 1) + part, rows) << rows;  // the parts cover the tile
    EXPECT_LE(sm90::multicast_rows_received(rows, 2) - rows, 8) << rows;         // and overlap by one atom at most
  }
  EXPECT_FALSE(why_invalid(parse_design("sm90.ws.pingpong/128x168x64/s5/c2x1/raster_m.g8/splitk1/epi_tma"), Layout::kTN));
  // Four parts (a 4x1 or 1x4 cluster): whole atoms, the last flush with the tile's end, covering it.
  EXPECT_EQ(sm90::multicast_part_rows(168, 4), 48);
  EXPECT_EQ(sm90::multicast_part_first_row(168, 4, 2), 96);
  EXPECT_EQ(sm90::multicast_part_first_row(168, 4, 3), 120);
  EXPECT_EQ(sm90::multicast_rows_received(168, 4), 192);
  for (int rows = 32; rows <= 256; rows += 8) {
    std::vector<int> covered(rows, 0);
    for (int part = 0; part < 4; ++part) {
      const int first = sm90::multicast_part_first_row(rows, 4, part);
      EXPECT_EQ(first % 8, 0) << rows;
      for (int r = first; r < first + sm90::multicast_part_rows(rows, 4); ++r) {
        ASSERT_LT(r, rows) << rows << " part " << part;
        covered[r] = 1;
      }
    }
    EXPECT_EQ(std::count(covered.begin(), covered.end(), 1), rows) << rows;
  }
}

// Each stage's operand tiles start on their swizzle atoms: K-major BK 32 tiles on 512 bytes (64-byte swizzle), every
// 128-byte swizzled tile on 1024: MN-major tiles (nn; with swap the A operand) and K-major tiles of BK 64 and 128.
// An nn design with swap and BK 32 whose stages would end 512 bytes short is refused.
TEST(DesignRules, StageTilesStartOnTheirSwizzleAtoms) {
  int refused = 0;
  for (const Layout layout : {Layout::kTN, Layout::kNN})
    for (const bool swap : {false, true})
      for (const int bk : {32, 64, 128})
        for (int bn = 16; bn <= 256; bn += 8)
          for (const int stages : {2, 3, 4, 5}) {
            const std::string text = "sm90.ws.pingpong/64x" + std::to_string(bn) + "x" + std::to_string(bk) + "/s" +
                                     std::to_string(stages) + "/c1x1/raster_m.g1/splitk1/epi_reg" +
                                     (swap ? "/swap" : "");
            const Design d = parse_design(text);
            if (const auto why = why_invalid(d, layout)) {
              if (why->find("nn design with swap and BK 32") != std::string::npos) ++refused;
              continue;
            }
            const bool a_mn = layout == Layout::kNN && swap, b_mn = layout == Layout::kNN && !swap;
            const sm90::Shape s = sm90_shape(d);
            const int k_atom = bk == 32 ? 512 : 1024;
            for (int stage = 0; stage < stages; ++stage) {
              const int a = stage * sm90::stage_bytes(s), b = a + s.bm * bk * 2;
              ASSERT_EQ(a % (a_mn ? 1024 : k_atom), 0) << text << " " << to_string(layout);
              ASSERT_EQ(b % (b_mn ? 1024 : k_atom), 0) << text << " " << to_string(layout);
            }
          }
  EXPECT_GT(refused, 0);
  const auto why = why_invalid(parse_design("sm90.ws.pingpong/64x72x32/s4/c1x1/raster_m.g1/splitk1/epi_reg/swap"),
                               Layout::kNN);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("needs BN a multiple of 16"), std::string::npos) << *why;
  EXPECT_FALSE(why_invalid(parse_design("sm90.ws.pingpong/64x72x32/s4/c1x1/raster_m.g1/splitk1/epi_reg/swap"),
                           Layout::kTN));
  EXPECT_FALSE(why_invalid(parse_design("sm90.ws.pingpong/64x80x32/s3/c1x1/raster_m.g1/splitk1/epi_reg/swap"),
                           Layout::kNN));
}

// Clusters of up to four CTAs: a 2x2 cluster shares both operands, 4x1 and 1x4 one operand four ways. An MN-major
// tile is split by k-rows, at least 8 per part.
TEST(DesignRules, ClustersOfFourShareTheirTilesInParts) {
  for (const char* text : {"sm90.ws.coop/128x128x64/s5/c2x2/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.pingpong/128x168x64/s5/c2x2/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.coop/128x256x64/s4/c4x1/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.coopn/192x192x64/s4/c1x4/raster_n.g8/splitk1/epi_tma"})
    EXPECT_FALSE(why_invalid(parse_design(text), Layout::kTN)) << text;
  // nn: B (or, swapped, A) is MN-major; BK 32 in four parts is 8 k-rows each.
  for (const char* text : {"sm90.ws.coop/128x128x32/s5/c4x1/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.coop/128x128x32/s5/c1x4/raster_n.g8/splitk1/epi_reg/swap"}) {
    const auto why = why_invalid(parse_design(text), Layout::kNN);
    EXPECT_FALSE(why) << text << ": " << why.value_or("");
  }
}

// A ping-pong warpgroup holds its whole tile: up to 168 accumulators per thread without a split of K, 128 with
// one (its fragments or the stream-K fixups spilled past that).
TEST(DesignRules, PingpongTilesHoldUpTo168AccumulatorsWithoutASplitOfK) {
  for (const char* text : {"sm90.ws.pingpong/128x168x64/s5/c1x1/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.pingpong/192x112x64/s4/c2x1/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.pingpong/256x80x64/s4/c1x1/raster_m.g8/splitk1/epi_reg/swap"})
    EXPECT_FALSE(why_invalid(parse_design(text), Layout::kTN)) << text;
  for (const char* text : {"sm90.ws.pingpong/128x176x64/s4/c1x1/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.pingpong/128x144x64/s4/c1x1/raster_m.g8/splitk2.parallel/epi_tma",
                           "sm90.ws.pingpong/128x144x64/s4/c1x1/raster_m.g8/splitk2.serial/epi_tma",
                           "sm90.ws.pingpong/128x144x64/s4/c1x1/raster_m.g8/streamk/epi_tma"}) {
    const auto why = why_invalid(parse_design(text), Layout::kTN);
    ASSERT_TRUE(why) << text;
    EXPECT_NE(why->find("accumulator registers per thread would spill"), std::string::npos) << *why;
  }
  const auto split = why_invalid(parse_design("sm90.ws.pingpong/128x144x64/s4/c1x1/raster_m.g8/streamk/epi_tma"),
                                 Layout::kTN);
  EXPECT_NE(split->find("over 128 for the ping-pong split-K schedule"), std::string::npos) << *split;
  // 128x128 with a split of K stays valid.
  EXPECT_FALSE(why_invalid(parse_design("sm90.ws.pingpong/128x128x64/s5/c1x2/raster_n.g4/streamk/epi_tma"), Layout::kTN));
}

TEST(Design, SplitKNeedsAKBlockPerSliceOnSm90) {
  const Design d = parse_design("sm90.ws.pingpong/64x64x128/s6/c1x1/raster_m.g8/splitk4.parallel/epi_reg");
  ASSERT_FALSE(why_invalid(d, Layout::kTN));
  const auto why = why_unfit(d, {{128, 12288, 64}, Layout::kTN});
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("4 k-blocks of 128"), std::string::npos) << *why;
  EXPECT_FALSE(why_unfit(d, {{128, 12288, 512}, Layout::kTN}));
  EXPECT_FALSE(why_unfit(parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg"), {{1, 8, 8}, Layout::kTN}));
  // sm80 split-K plans its slices from K at run time (fewer when K is short).
  EXPECT_FALSE(why_unfit(parse_design("sm80/64x64x64/w32x32/s4/swz/raster_m.g8/splitk2.serial/epi_reg"), {{64, 64, 64}, Layout::kTN}));
}

TEST(Design, StreamKIsAnSm90Split) {
  const Design sm90 = parse_design("sm90.ws.pingpong/64x64x128/s6/c1x1/raster_m.g8/streamk/epi_reg");
  EXPECT_EQ(sm90.split, SplitK::kStreamK);
  EXPECT_EQ(sm90.splits, 1);
  for (Layout layout : {Layout::kTN, Layout::kNN}) EXPECT_FALSE(why_invalid(sm90, layout)) << *why_invalid(sm90, layout);
  // Any K of the problem rules (a positive multiple of 8) gives a k-block to share out, however deep BK.
  EXPECT_FALSE(why_unfit(sm90, {{1, 8, 8}, Layout::kTN}));
  EXPECT_FALSE(why_unfit(sm90, {{4096, 4096, 65536}, Layout::kNN}));
  EXPECT_TRUE(why_unfit(sm90, {{64, 64, 0}, Layout::kTN}));
  const Design sm80 = parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/streamk/epi_reg");
  ASSERT_TRUE(why_invalid(sm80, Layout::kTN));
  EXPECT_NE(why_invalid(sm80, Layout::kTN)->find("stream-K"), std::string::npos);
  // Cooperative stream-K keeps at most 96 accumulators per thread (the fixup needs registers beside them).
  const auto coop = why_invalid(parse_design("sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/streamk/epi_tma"), Layout::kTN);
  ASSERT_TRUE(coop);
  EXPECT_NE(coop->find("cooperative stream-K"), std::string::npos) << *coop;
  EXPECT_FALSE(why_invalid(parse_design("sm90.ws.coop/128x192x64/s4/c2x1/raster_m.g8/streamk/epi_tma"), Layout::kTN));
  EXPECT_FALSE(why_invalid(parse_design("sm90.ws.pingpong/128x128x64/s5/c1x1/raster_m.g8/streamk/epi_tma"), Layout::kTN));
  // "splitk1.streamk" is not a spelling of it.
  EXPECT_THROW(parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1.streamk/epi_reg"), Error);
}

TEST(Design, DesignsFileSkipsCommentsAndNamesTheBadLine) {
  const auto dir = std::filesystem::temp_directory_path();
  const auto good = dir / "rlgemm_designs_good.txt", bad = dir / "rlgemm_designs_bad.txt";
  std::ofstream(good) << "# a set\n\nsm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg  # small\n"
                         "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg\n";
  const auto designs = read_designs(good.string());
  ASSERT_EQ(designs.size(), 1u) << "duplicates are kept once";
  EXPECT_EQ(to_string(designs[0]), "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg");
  std::ofstream(bad) << "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg\nsm80/64x64/oops\n";
  try {
    read_designs(bad.string());
    ADD_FAILURE() << "a bad line must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rlgemm_designs_bad.txt:2:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_designs((dir / "rlgemm_no_such_designs.txt").string()), Error);
}

// The committed design sets (bench/designs/*.txt, the --designs files of bench runs) name only designs that can
// be built for tn, where the runs use them.
TEST(Design, CommittedDesignSetsAreBuildableForTn) {
  const std::filesystem::path dir = std::filesystem::path(RLGEMM_SOURCE_DIR) / "bench" / "designs";
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".txt") continue;
    ++files;
    for (const Design& d : read_designs(entry.path().string()))
      EXPECT_FALSE(why_invalid(d, Layout::kTN)) << entry.path().filename() << ": " << to_string(d) << ": "
                                                << why_invalid(d, Layout::kTN).value_or("");
  }
  EXPECT_GE(files, 5);
}

}  // namespace
}  // namespace rlgemm
