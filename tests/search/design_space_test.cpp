// The design space: every point is a valid design, decisions round-trip, masking never strands a choice.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <set>
#include <tuple>

#include "rlgemm/error.h"
#include "search/design_space.h"
#include "search/rl_policy.h"
#include "search/search_test_util.h"

namespace rlgemm::search {
namespace {

TEST(DesignSpace, EveryPointIsValidAndRoundTrips) {
  for (Layout layout : {Layout::kTN, Layout::kNN}) {
    DesignSpace space(testing::small_spec(), layout);
    ASSERT_GT(space.size(), 100u);
    std::set<std::string> texts;
    for (size_t i = 0; i < space.size(); ++i) {
      const Design d = space.design(i);
      ASSERT_FALSE(why_invalid(d, layout)) << to_string(d) << ": " << *why_invalid(d, layout);
      ASSERT_EQ(space.encode(d), space.point(i)) << to_string(d);
      ASSERT_EQ(parse_design(to_string(d)), d);
      texts.insert(to_string(d));
    }
    EXPECT_EQ(texts.size(), space.size()) << "two points give the same design";
  }
}

// A tuner, pretraining and the handle meet many problems: each layout's space is built once and kept.
TEST(DesignSpaces, BuildEachLayoutsSpaceOnceWithTheirLimit) {
  DesignSpaces spaces(testing::small_spec(), 100 * 1024);
  const DesignSpace& tn = spaces.of(Layout::kTN);
  EXPECT_EQ(&spaces.of(Layout::kTN), &tn);
  EXPECT_EQ(tn.layout(), Layout::kTN);
  EXPECT_EQ(spaces.of(Layout::kNN).layout(), Layout::kNN);
  EXPECT_EQ(&spaces.of(Layout::kTN), &tn);
  EXPECT_EQ(tn.size(), DesignSpace(testing::small_spec(), Layout::kTN, 100 * 1024).size());
  EXPECT_LT(tn.size(), DesignSpace(testing::small_spec(), Layout::kTN).size());  // the limit reached the space
}

TEST(DesignSpace, DefaultHopperSpaceHoldsBothFamilies) {
  DesignSpace space(SpaceSpec::for_gpu(9), Layout::kTN);
  const auto families = space.valid_options(space.full_range(), int(Field::kFamily));
  EXPECT_EQ(families.size(), 2u);
  DesignSpace ampere(SpaceSpec::for_gpu(8), Layout::kTN);
  EXPECT_EQ(ampere.design(0).family, Family::kSm80);
  EXPECT_LT(ampere.size(), space.size());
}

TEST(DesignSpace, PdlIsTheLastFieldOffByDefaultAndOnlyOnHopper) {
  // The default space leaves PDL out (a back-to-back benchmark would credit it with what a model loses)...
  EXPECT_EQ(DesignSpace(SpaceSpec::for_gpu(9), Layout::kTN).option_count(int(Field::kPdl)), 1);
  // ...and a space that offers it has every design with and without it, in both families, next to each other.
  SpaceSpec spec = SpaceSpec::for_gpu(9);
  spec.pdl = {false, true};
  spec.tile_m = {64, 128};
  spec.splits = {{SplitK::kNone, 1}, {SplitK::kParallel, 2}};
  const DesignSpace hopper(spec, Layout::kTN);
  EXPECT_EQ(hopper.option_count(int(Field::kPdl)), 2);
  EXPECT_TRUE(hopper.signature().ends_with(";static:dynamic static;pdl:off on")) << hopper.signature();
  ASSERT_EQ(hopper.size() % 2, 0u);
  for (size_t i = 0; i < hopper.size(); i += 2) {
    Design plain = hopper.design(i), pdl = hopper.design(i + 1);
    ASSERT_FALSE(plain.pdl);
    ASSERT_TRUE(pdl.pdl);
    pdl.pdl = false;
    ASSERT_EQ(pdl, plain);
  }
  EXPECT_EQ(hopper.encode(parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg/pdl")).back(), 1);
  const DesignSpace ampere(SpaceSpec::for_gpu(8), Layout::kTN);
  EXPECT_EQ(ampere.option_count(int(Field::kPdl)), 1);
  EXPECT_TRUE(ampere.encode(parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg/pdl")).empty());
  EXPECT_FALSE(ampere.encode(parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg")).empty());
}

TEST(DesignSpace, DecodeShapesGetSixteenSlicesAndSm80TilesOf16And32Rows) {
  const DesignSpace space(SpaceSpec::for_gpu(9), Layout::kNN);
  size_t bm16 = 0, bm32 = 0;
  for (size_t i = 0; i < space.size(); ++i) {
    const Design d = space.design(i);
    if (d.bm > 32) continue;
    ++(d.bm == 16 ? bm16 : bm32);
    ASSERT_EQ(d.family, Family::kSm80) << to_string(d);  // wgmma tiles have 64 rows per warpgroup
    ASSERT_LE(d.warp_m, d.bm) << to_string(d);
  }
  EXPECT_GT(bm16, 0u);
  EXPECT_GT(bm32, 0u);
  // The decode tile measured 1.29x the best vendor call at 1,4096,4096 in graphs is in the space.
  EXPECT_FALSE(space.encode(parse_design("sm80/16x64x128/w16x16/s4/swz/raster_m.g1/splitk4.parallel/epi_reg")).empty());
  for (const char* text : {"sm80/32x64x64/w32x32/s4/swz/raster_m.g8/splitk16.parallel/epi_reg",
                           "sm80/32x128x64/w32x32/s3/pad/raster_n.g4/splitk16.serial/epi_smem/swap",
                           "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk8.parallel/epi_reg",
                           "sm90.ws.pingpong/64x64x128/s6/c1x1/raster_m.g8/splitk16.parallel/epi_reg",
                           "sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk16.serial/epi_reg"})
    EXPECT_FALSE(space.encode(parse_design(text)).empty()) << text;
  EXPECT_TRUE(space.encode(parse_design("sm90.ws.pingpong/32x64x64/s4/c1x1/raster_m.g8/splitk1/epi_reg")).empty());
}

TEST(DesignSpace, MaskedChoicesAlwaysReachAValidDesign) {
  DesignSpace space(testing::small_spec(), Layout::kNN);
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    auto range = space.full_range();
    Point p(kFieldCount);
    for (int f = 0; f < kFieldCount; ++f) {
      const auto options = space.valid_options(range, f);
      ASSERT_FALSE(options.empty());
      p[f] = uint8_t(options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)]);
      range = space.narrow(range, f, p[f]);
      ASSERT_FALSE(range.empty());
    }
    EXPECT_LT(space.index_of(p), space.size());
  }
}

TEST(DesignSpace, ProjectionRepairsAnyCombination) {
  DesignSpace space(testing::small_spec(), Layout::kNN);
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 500; ++trial) {
    Point wanted(kFieldCount);
    for (int f = 0; f < kFieldCount; ++f)
      wanted[f] = uint8_t(std::uniform_int_distribution<int>(0, space.option_count(f) - 1)(rng));
    const Point p = space.project(wanted, rng);
    ASSERT_LT(space.index_of(p), space.size());
    if (space.index_of(wanted) < space.size()) EXPECT_EQ(p, wanted);  // valid points stay as they are
  }
}

TEST(DesignSpace, SignatureRebuildsTheSpace) {
  DesignSpace space(testing::small_spec(), Layout::kTN);
  DesignSpace rebuilt(spec_from_signature(space.signature()), Layout::kTN);
  EXPECT_EQ(rebuilt.signature(), space.signature());
  EXPECT_EQ(rebuilt.size(), space.size());
  EXPECT_THROW(spec_from_signature("family:sm90"), Error);
  EXPECT_TRUE(space.encode(parse_design("test.fault")).empty());
}

// The cooperative schedule that splits columns is a schedule option of its own ("coopn"), out of the default
// space until its kernels are measured; a space that offers it rebuilds from its signature, and an unknown
// schedule label is refused.
TEST(DesignSpace, CoopColumnsIsAScheduleOptionOutOfTheDefaultSpace) {
  EXPECT_EQ(SpaceSpec{}.schedules, (std::vector<Sm90Schedule>{Sm90Schedule::kCooperative, Sm90Schedule::kPingpong}));
  SpaceSpec spec = testing::small_spec();
  spec.schedules = {Sm90Schedule::kCooperative, Sm90Schedule::kCooperativeColumns, Sm90Schedule::kPingpong};
  const DesignSpace space(spec, Layout::kTN);
  EXPECT_NE(space.signature().find("schedule:coop coopn pingpong"), std::string::npos) << space.signature();
  const SpaceSpec rebuilt = spec_from_signature(space.signature());
  EXPECT_EQ(rebuilt.schedules, spec.schedules);
  bool offered = false;
  for (size_t i = 0; i < space.size(); ++i) {
    const Design d = space.design(i);
    if (d.family == Family::kSm90 && d.schedule == Sm90Schedule::kCooperativeColumns) {
      offered = true;
      EXPECT_FALSE(why_invalid(d, Layout::kTN)) << to_string(d);
    }
  }
  EXPECT_TRUE(offered);
  std::string bad = space.signature();
  bad.replace(bad.find("coopn"), 5, "coopx");
  EXPECT_THROW(spec_from_signature(bad), Error);
}

// A cluster pairs tiles along the raster's direction: the default space leaves out c2x1 with raster_n and c1x2
// with raster_m (valid designs all the same), keeps them along it, and a spec may ask for every combination.
TEST(DesignSpace, ClustersPairTilesAlongTheRasterOnly) {
  const auto design = [](const char* cluster, const char* raster) {
    return parse_design(std::string("sm90.ws.coop/128x128x64/s4/") + cluster + "/" + raster +
                        ".g8/splitk1/epi_tma");
  };
  SpaceSpec spec = testing::small_spec();
  spec.clusters_along_raster = true;
  const DesignSpace along(spec, Layout::kTN);
  spec.clusters_along_raster = false;
  const DesignSpace every(spec, Layout::kTN);
  EXPECT_LT(along.size(), every.size());
  // The same options, so a policy serves both; the signature names the filter where it is off.
  EXPECT_EQ(along.signature() + ";cluster_raster:any", every.signature());
  EXPECT_EQ(DesignSpace(spec_from_signature(every.signature()), Layout::kTN).size(), every.size());
  EXPECT_EQ(DesignSpace(spec_from_signature(along.signature()), Layout::kTN).size(), along.size());
  for (const auto& [cluster, raster, kept] : {std::tuple{"c1x1", "raster_m", true}, {"c1x1", "raster_n", true},
                                               {"c2x1", "raster_m", true}, {"c1x2", "raster_n", true},
                                               {"c2x1", "raster_n", false}, {"c1x2", "raster_m", false}}) {
    const Design d = design(cluster, raster);
    EXPECT_FALSE(why_invalid(d, Layout::kTN)) << to_string(d);
    EXPECT_FALSE(every.encode(d).empty()) << to_string(d);
    EXPECT_EQ(!along.encode(d).empty(), kept) << to_string(d);
    EXPECT_EQ(clusters_across_raster(d), !kept) << to_string(d);
  }
  for (size_t i = 0; i < along.size(); ++i) EXPECT_FALSE(clusters_across_raster(along.design(i))) << i;
  // Lines of four like pairs; a 2x2 cluster runs along both directions.
  EXPECT_TRUE(clusters_across_raster(design("c4x1", "raster_n")));
  EXPECT_TRUE(clusters_across_raster(design("c1x4", "raster_m")));
  EXPECT_FALSE(clusters_across_raster(design("c4x1", "raster_m")));
  EXPECT_FALSE(clusters_across_raster(design("c2x2", "raster_m")));
  EXPECT_FALSE(clusters_across_raster(design("c2x2", "raster_n")));
  EXPECT_TRUE(SpaceSpec{}.clusters_along_raster);
  try {
    spec_from_signature(along.signature() + ";cluster_raster:sometimes");
    ADD_FAILURE() << "an unknown filter value was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("cluster_raster is 'any' or 'along'"), std::string::npos) << e.what();
  }
}

// The bulk tail (/bulktail) is the epilogue field's third option: offered on Hopper, valid only where an sm90
// epi_tma design has columns past its warpgroups' whole 64-column chunks, each such design beside its twin with
// the register tail. Old signatures (epilogue:reg staged) rebuild their space without it; Ampere's space has none.
TEST(DesignSpace, TheBulkTailIsAnEpilogueOptionWhereAWarpgroupHasATail) {
  const DesignSpace hopper(SpaceSpec::for_gpu(9), Layout::kTN);
  EXPECT_NE(hopper.signature().find(";epilogue:reg staged bulktail;"), std::string::npos) << hopper.signature();
  size_t with_tail = 0;
  for (size_t i = 0; i < hopper.size(); i += 7) {
    const Design d = hopper.design(i);
    if (!d.bulk_tail) continue;
    ++with_tail;
    ASSERT_EQ(d.family, Family::kSm90) << to_string(d);
    ASSERT_EQ(d.epilogue, Epilogue::kTma) << to_string(d);
    ASSERT_NE(d.bn % 64, 0) << to_string(d);
    Design twin = d;
    twin.bulk_tail = false;
    ASSERT_FALSE(hopper.encode(twin).empty()) << to_string(twin);
    ASSERT_EQ(hopper.encode(d), hopper.point(i));
  }
  EXPECT_GT(with_tail, 0u);
  const Design tail = parse_design("sm90.ws.pingpong/128x160x64/s5/c2x1/raster_m.g8/splitk1/epi_tma/bulktail");
  const Point p = hopper.encode(tail);
  ASSERT_FALSE(p.empty());
  EXPECT_EQ(hopper.option_label(int(Field::kEpilogue), p[int(Field::kEpilogue)]), "bulktail");
  EXPECT_EQ(hopper.design(p), tail);
  // No tail to store (BN 128), or no TMA store: not in the space.
  Design no_tail = parse_design("sm90.ws.pingpong/128x128x64/s5/c2x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_FALSE(hopper.encode(no_tail).empty());
  no_tail.bulk_tail = true;
  EXPECT_TRUE(hopper.encode(no_tail).empty());
  EXPECT_EQ(DesignSpace(spec_from_signature(hopper.signature()), Layout::kTN).size(), hopper.size());

  const DesignSpace ampere(SpaceSpec::for_gpu(8), Layout::kTN);
  EXPECT_EQ(ampere.option_count(int(Field::kEpilogue)), 2);
  SpaceSpec old = SpaceSpec::for_gpu(9);
  old.epilogues = {EpilogueOption::kRegisters, EpilogueOption::kStaged};
  const DesignSpace before(old, Layout::kTN);
  EXPECT_NE(before.signature().find(";epilogue:reg staged;"), std::string::npos);
  EXPECT_EQ(spec_from_signature(before.signature()).epilogues, old.epilogues);
  EXPECT_LT(before.size(), hopper.size());
  std::string bad = before.signature();
  bad.replace(bad.find("reg staged"), 10, "reg stged");
  EXPECT_THROW(spec_from_signature(bad), Error);
}

// Policy files from before the pdl field (data/policies/h100.txt) name 15 fields: their space is the same,
// launched without pdl, and keeps its own split and tile options.
TEST(DesignSpace, SignatureWithoutPdlRebuildsTheSpaceWithPdlOff) {
  std::ifstream in(std::string(RLGEMM_SOURCE_DIR) + "/data/policies/h100.txt");
  std::string line;
  while (std::getline(in, line) && !line.starts_with("space ")) {
  }
  ASSERT_TRUE(line.starts_with("space ")) << "data/policies/h100.txt has no space line";
  const std::string old = line.substr(6);
  ASSERT_EQ(old.find("pdl"), std::string::npos);
  const SpaceSpec spec = spec_from_signature(old);
  EXPECT_EQ(spec.pdl, std::vector<bool>{false});
  EXPECT_EQ(spec.tile_m, (std::vector<int>{64, 128, 256}));
  EXPECT_EQ(spec.splits.size(), 7u);
  const DesignSpace space(spec, Layout::kTN);
  EXPECT_EQ(space.signature(), old + ";pdl:off");
  for (size_t i = 0; i < space.size(); i += 997) ASSERT_FALSE(space.design(i).pdl);
  // Without static, a signature still lacks a field.
  EXPECT_THROW(spec_from_signature(old.substr(0, old.rfind(';'))), Error);
}

}  // namespace
}  // namespace rlgemm::search
