// The design space: every point is a valid design, decisions round-trip, masking never strands a choice.
#include <gtest/gtest.h>

#include <random>
#include <set>

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

TEST(DesignSpace, DefaultHopperSpaceHoldsBothFamilies) {
  DesignSpace space(SpaceSpec::for_gpu(9), Layout::kTN);
  const auto families = space.valid_options(space.full_range(), int(Field::kFamily));
  EXPECT_EQ(families.size(), 2u);
  DesignSpace ampere(SpaceSpec::for_gpu(8), Layout::kTN);
  EXPECT_EQ(ampere.design(0).family, Family::kSm80);
  EXPECT_LT(ampere.size(), space.size());
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

}  // namespace
}  // namespace rlgemm::search
