// The policy file round trip, its errors, and zero-shot proposals for shapes never measured.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "rlgemm/error.h"
#include "search/rl_policy.h"
#include "search/search_test_util.h"
#include "search/synthetic_measurer.h"
#include "search/tuner.h"

namespace rlgemm::search {
namespace {

using testing::small_spec;
using testing::TempDir;

Policy trained_policy(Store& store, int evals) {
  DesignSpace space(small_spec(), Layout::kTN);
  Policy policy(space, RlOptions{}, 11);
  auto strategy = make_rl_strategy(policy, 11);
  SyntheticMeasurer measurer;
  Tuner tuner(store, measurer, *strategy, small_spec());
  TuneOptions options;
  options.problems = {{{4096, 4096, 1024}, Layout::kTN}, {{256, 2048, 4096}, Layout::kTN},
                      {{8192, 1024, 2048}, Layout::kTN}, {{1024, 8192, 512}, Layout::kTN}};
  options.budget.evaluations = evals;
  tuner.run(options);
  return policy;
}

TEST(Policy, SaveAndLoadRoundTrip) {
  TempDir dir;
  Store store(dir / "t.db");
  const Policy policy = trained_policy(store, 48);
  EXPECT_GT(policy.updates(), 0);
  policy.save(dir / "p.policy");
  const Policy loaded = Policy::load(dir / "p.policy");
  EXPECT_EQ(loaded.space_signature(), policy.space_signature());
  EXPECT_EQ(loaded.updates(), policy.updates());
  EXPECT_EQ(loaded.sm_count(), policy.sm_count());
  DesignSpace space(small_spec(), Layout::kTN);
  for (const Shape s : {Shape{64, 64, 64}, Shape{3000, 1000, 520}, Shape{16384, 128, 8192}}) {
    const Problem p{s, Layout::kTN};
    EXPECT_EQ(propose(loaded, space, p, 132), propose(policy, space, p, 132));
    std::mt19937_64 a(5), b(5);
    const auto ta = policy.sample(space, shape_features(p, 132), a, false);
    const auto tb = loaded.sample(space, shape_features(p, 132), b, false);
    ASSERT_EQ(ta.steps.size(), tb.steps.size());
    for (size_t i = 0; i < ta.steps.size(); ++i) EXPECT_NEAR(ta.steps[i].log_prob, tb.steps[i].log_prob, 1e-6);
  }
  std::ifstream in(dir / "p.policy");
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "rlgemm-policy 1");
}

TEST(Policy, MalformedFilesAreRejectedWithTheRule) {
  TempDir dir;
  DesignSpace space(small_spec(), Layout::kTN);
  Policy(space, RlOptions{}, 1).save(dir / "good.policy");
  std::string text;
  {
    std::ifstream in(dir / "good.policy");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto expect_error = [&](const std::string& content, const std::string& words) {
    std::ofstream(dir / "bad.policy") << content;
    try {
      Policy::load(dir / "bad.policy");
      ADD_FAILURE() << "accepted: " << content.substr(0, 60);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  expect_error("hello", "rlgemm-policy");
  expect_error("rlgemm-policy 2\n" + text.substr(text.find('\n') + 1), "version 2");
  expect_error(text.substr(0, text.size() / 2), "truncated");
  EXPECT_THROW(Policy::load(dir / "missing.policy"), Error);
  // A policy for another space refuses to sample in this one.
  SpaceSpec other = small_spec();
  other.stages = {3, 4};
  DesignSpace other_space(other, Layout::kTN);
  const Policy p = Policy::load(dir / "good.policy");
  EXPECT_THROW(propose(p, other_space, {{64, 64, 64}, Layout::kTN}, 132), Error);
}

// The built-in policy was written before the pdl field: it loads into its space with pdl off and proposes
// what it proposed before (these designs are what rlgemm proposed from it then), also once saved again.
TEST(Policy, FileFromBeforePdlProposesAsBefore) {
  const Policy old = Policy::load(std::string(RLGEMM_SOURCE_DIR) + "/data/policies/h100.txt");
  EXPECT_TRUE(old.space_signature().ends_with(";pdl:off")) << old.space_signature();
  TempDir dir;
  old.save(dir / "again.policy");
  const Policy again = Policy::load(dir / "again.policy");
  EXPECT_EQ(again.space_signature(), old.space_signature());
  const std::pair<Problem, const char*> before[] = {
      {{{64, 64, 128}, Layout::kTN}, "sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/splitk1/epi_reg"},
      {{{16, 4096, 4096}, Layout::kTN}, "sm90.ws.pingpong/64x64x128/s6/c1x1/raster_n.g8/splitk2.serial/epi_reg/swap"},
      {{{16, 4096, 4096}, Layout::kNN}, "sm90.ws.pingpong/64x64x128/s6/c1x1/raster_m.g8/splitk4.parallel/epi_reg"},
      {{{4096, 4096, 4096}, Layout::kTN}, "sm90.ws.coop/128x256x64/s4/c1x2/raster_n.g8/splitk1/epi_tma"},
      {{{128, 8192, 1024}, Layout::kNN}, "sm90.ws.pingpong/64x128x64/s6/c1x1/raster_m.g8/splitk1/epi_reg"},
  };
  std::map<Layout, std::unique_ptr<DesignSpace>> spaces;
  for (const auto& [problem, design] : before) {
    auto& space = spaces[problem.layout];
    if (!space) space = std::make_unique<DesignSpace>(spec_from_signature(old.space_signature()), problem.layout);
    EXPECT_EQ(to_string(propose(old, *space, problem, 132)), design) << problem.shape.to_string();
    std::mt19937_64 a(5), b(5);
    const auto ta = old.sample(*space, shape_features(problem, 132), a, false);
    const auto tb = again.sample(*space, shape_features(problem, 132), b, false);
    ASSERT_EQ(ta.point, tb.point);
    for (size_t i = 0; i < ta.steps.size(); ++i) EXPECT_NEAR(ta.steps[i].log_prob, tb.steps[i].log_prob, 1e-6);
  }
}

// A policy carries over to a space with other options: adapted to a wider space (new tile widths, one stage
// count dropped) and back, it is the policy it was, option for option; in the wider space it samples the new
// options too, and keeps what it learned of the shared ones.
TEST(Policy, AdaptsToASpaceWithOtherOptionsByTheirNames) {
  TempDir dir;
  Store store(dir / "t.db");
  const Policy policy = trained_policy(store, 48);
  SpaceSpec wider = small_spec();
  wider.tile_n = {16, 32, 64, 96, 128, 160, 256};
  wider.stages = {2, 3, 4, 5};  // 6 dropped, 5 new
  const DesignSpace narrow_space(small_spec(), Layout::kTN), wide_space(wider, Layout::kTN);
  const Policy wide = policy.adapted_to(wide_space);
  EXPECT_EQ(wide.space_signature(), wide_space.signature());
  EXPECT_EQ(wide.updates(), policy.updates());
  EXPECT_EQ(policy.adapted_to(narrow_space).space_signature(), policy.space_signature());  // the same space: a copy
  // Back to the first space: every option it holds was carried both ways, except stages 6, which the wider
  // space dropped and which comes back at its field's mean.
  SpaceSpec without6 = small_spec();
  without6.stages = {2, 3, 4};
  const DesignSpace without6_space(without6, Layout::kTN);
  const Policy direct = policy.adapted_to(without6_space), round_trip = wide.adapted_to(without6_space);
  EXPECT_EQ(direct.space_signature(), round_trip.space_signature());
  for (const Shape s : {Shape{64, 64, 64}, Shape{3000, 1000, 520}, Shape{16384, 128, 8192}}) {
    const Problem p{s, Layout::kTN};
    std::mt19937_64 a(7), b(7);
    const auto ta = direct.sample(without6_space, shape_features(p, 132), a, false);
    const auto tb = round_trip.sample(without6_space, shape_features(p, 132), b, false);
    ASSERT_EQ(ta.point, tb.point);
    for (size_t i = 0; i < ta.steps.size(); ++i) EXPECT_NEAR(ta.steps[i].log_prob, tb.steps[i].log_prob, 1e-9);
  }
  // In the wider space the new widths are drawn as well as the old ones.
  std::set<int> widths;
  std::mt19937_64 rng(3);
  for (int i = 0; i < 400; ++i)
    widths.insert(wide_space.design(wide.sample(wide_space, shape_features({{512, 512, 512}, Layout::kTN}, 132), rng,
                                                false).point).bn);
  EXPECT_TRUE(widths.count(16) || widths.count(32) || widths.count(96) || widths.count(160)) << widths.size();
  EXPECT_TRUE(widths.count(64) || widths.count(128) || widths.count(256));
  // A field that shares no option with the policy's space: nothing learned carries over.
  SpaceSpec disjoint = small_spec();
  disjoint.tile_k = {128};
  EXPECT_THROW(policy.adapted_to(DesignSpace(disjoint, Layout::kTN)), Error);
}

TEST(Policy, ProposesAGoodValidDesignForAnUnseenShape) {
  TempDir dir;
  Store store(dir / "t.db");
  const Policy policy = trained_policy(store, 120);
  CostModel model;
  for (Layout layout : {Layout::kTN, Layout::kNN}) {
    DesignSpace space(small_spec(), layout);
    const Problem unseen{{3072, 2560, 1536}, layout};  // off the grid, never measured
    const Design d = propose(policy, space, unseen, 132);
    EXPECT_FALSE(why_invalid(d, layout)) << to_string(d);
    EXPECT_LT(space.index_of(space.encode(d)), space.size());
    // Better than a typical design of the space: the policy carried something over.
    std::vector<double> times;
    for (size_t i = 0; i < space.size(); ++i) times.push_back(model.time_us(space.design(i), unseen));
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    EXPECT_LT(model.time_us(d, unseen), times[times.size() / 2]) << to_string(d);
  }
}

}  // namespace
}  // namespace rlgemm::search
