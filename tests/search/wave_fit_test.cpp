// Tile widths fitted to a problem's waves (search/wave_fit.h): the cases measured on an H100
// (bench/results/h100/fitted-widths.csv), the controls where no width helps, and the designs without waves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "rlgemm/error.h"
#include "search/design_space.h"
#include "search/wave_fit.h"
#include "support/error_of.h"

namespace rlgemm::search {
namespace {

const std::vector<int> kWidths = SpaceSpec{}.tile_n;

Problem tn(int m, int n, int k) { return Problem{{m, n, k}, Layout::kTN}; }

TEST(WaveFit, TheSearchOffersTheWidthsTheFitsNeed) {
  for (int width : {96, 144, 160, 176, 200, 224, 240})
    EXPECT_NE(std::find(kWidths.begin(), kWidths.end(), width), kWidths.end()) << width;
}

// 512x5120: 128x192 tiles are 108, one wave of 132 with 24 SMs idle; 128x160 tiles are 128 (measured on an H100:
// 0.898 -> 1.003 of the best vendor call). 512x9216: 192 tiles, two waves; 144 wide, 256 tiles in two fuller
// waves (0.747 -> 0.985).
TEST(WaveFit, TakesTheWidthThatFillsTheWaves) {
  const Design coop = parse_design("sm90.ws.coop/128x192x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_EQ(wave_cost(coop, tn(512, 5120, 4096), 132), 1LL * 128 * 192);
  const auto a = wave_fitted(coop, tn(512, 5120, 4096), 132, kWidths);
  ASSERT_TRUE(a);
  EXPECT_EQ(to_string(*a), "sm90.ws.coop/128x160x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_EQ(wave_cost(*a, tn(512, 5120, 4096), 132), 1LL * 128 * 160);
  const auto b = wave_fitted(coop, tn(512, 9216, 7168), 132, kWidths);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->bn, 144);
  // From 128x256 on 512x9216 (144 tiles, two waves), 144 wide would cost least, but is under two thirds of 256:
  // not tried. Of the rest, 176 (212 tiles, two waves) costs least.
  const Design wide = parse_design("sm90.ws.coop/128x256x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  const auto c = wave_fitted(wide, tn(512, 9216, 7168), 132, kWidths);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->bn, 176);
  // A swapped design tiles the problem's M as its N: narrow tiles there are not tried below 64.
  Design swapped = parse_design("sm90.ws.coop/128x192x64/s5/c1x1/raster_n.g4/splitk1/epi_reg/swap");
  const auto d = wave_fitted(swapped, tn(512, 5120, 4096), 132, kWidths);
  if (d) EXPECT_GE(d->bn, 128);
}

// /bulktail stores a warpgroup's columns past its whole 64-column chunks: fitted to a width with such columns the
// design keeps it, fitted to a multiple of 64 it has none to store and drops it (a valid design either way).
TEST(WaveFit, TheBulkTailGoesWhereTheFittedWidthHasNoTail) {
  // 512x5120 in 128x224 tiles: 92, one wave with 40 SMs idle; 160 wide makes 128 (keeps 32 columns of tail).
  const Design tail = parse_design("sm90.ws.coop/128x224x64/s4/c1x1/raster_m.g8/splitk1/epi_tma/bulktail");
  ASSERT_FALSE(why_invalid(tail, Layout::kTN));
  const auto a = wave_fitted(tail, tn(512, 5120, 4096), 132, kWidths);
  ASSERT_TRUE(a);
  EXPECT_EQ(to_string(*a), "sm90.ws.coop/128x160x64/s4/c1x1/raster_m.g8/splitk1/epi_tma/bulktail");
  // 512x4096: 76 tiles of 224, 88 of 192, both one wave; 192 covers it with less: no tail there.
  const auto b = wave_fitted(tail, tn(512, 4096, 4096), 132, std::vector<int>{192, 224});
  ASSERT_TRUE(b);
  EXPECT_EQ(to_string(*b), "sm90.ws.coop/128x192x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_FALSE(why_invalid(*b, Layout::kTN));
}

// The tuner fits widths in wgmma's steps of 8, finer than the search's list: on 2048x11008 a 128-row tile fills its
// waves at 168 (66 x 16 = 1056 tiles, 8 waves of 132), the width of cuBLASLt's fastest kernel there; 128 wide takes
// 11 waves. With a tile's fixed cost of 8 columns, 168 costs 8 x 176 against 11 x 136, 5.9% less; of the list's
// widths, 200 (7 waves) and 96 (14) save 2.7%, under the 5% asked for.
TEST(WaveFit, TheTunerFitsInStepsOfEightAndFinds168WhereCublasLtDoes) {
  const std::vector<int> widths = fitting_widths();
  ASSERT_EQ(widths.size(), 25u);
  for (size_t i = 0; i < widths.size(); ++i) EXPECT_EQ(widths[i], 64 + 8 * int(i));
  const Design coop = parse_design("sm90.ws.coop/128x128x64/s5/c1x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_FALSE(wave_fitted(coop, tn(2048, 11008, 4096), 132, kWidths));
  const auto fitted = wave_fitted(coop, tn(2048, 11008, 4096), 132, widths);
  ASSERT_TRUE(fitted);
  EXPECT_EQ(fitted->bn, 168);
  EXPECT_EQ(wave_cost(*fitted, tn(2048, 11008, 4096), 132), 8LL * 128 * 168);
  EXPECT_EQ(wave_cost(coop, tn(2048, 11008, 4096), 132), 11LL * 128 * 128);
  EXPECT_EQ(fit_cost(*fitted, tn(2048, 11008, 4096), 132), 8LL * 128 * (168 + kTileFixedColumns));
  EXPECT_EQ(fit_cost(coop, tn(2048, 11008, 4096), 132), 11LL * 128 * (128 + kTileFixedColumns));
}

// What a tuner or an autotuning handle measures beside the predictor's guesses: each guess's fitted design, in
// the guesses' order, once, never one that is a guess already, nothing for a guess that fills its waves.
TEST(WaveFit, FittedAlternativesFollowTheGuessesOnceEach) {
  const std::vector<Design> guesses = {
      parse_design("sm90.ws.coop/128x192x64/s4/c1x1/raster_m.g8/splitk1/epi_tma"),   // -> 160
      parse_design("sm90.ws.coop/128x128x64/s5/c1x1/raster_m.g8/splitk1/epi_tma"),   // 160 tiles -> 160
      parse_design("sm90.ws.coop/128x160x64/s4/c1x1/raster_m.g8/splitk1/epi_tma"),   // fills its wave
      parse_design("sm90.ws.coop/128x256x64/s4/c1x1/raster_m.g8/splitk1/epi_tma"),   // -> 176 (not under 2/3)
      parse_design("sm90.ws.coop/128x192x64/s4/c1x1/raster_n.g8/splitk1/epi_tma"),   // -> 160
      parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/streamk/epi_tma"),   // no waves
  };
  const Problem problem = tn(512, 5120, 4096);
  const std::vector<Design> fitted = fitted_alternatives(guesses, problem, 132);
  std::vector<std::string> texts;
  for (const Design& d : fitted) texts.push_back(to_string(d));
  // 128x192's fit is 128x160 s4 raster_m: a guess already, so left out; raster_n's fit is new.
  const std::vector<std::string> expected = {"sm90.ws.coop/128x160x64/s5/c1x1/raster_m.g8/splitk1/epi_tma",
                                             "sm90.ws.coop/128x176x64/s4/c1x1/raster_m.g8/splitk1/epi_tma",
                                             "sm90.ws.coop/128x160x64/s4/c1x1/raster_n.g8/splitk1/epi_tma"};
  EXPECT_EQ(texts, expected);
  EXPECT_TRUE(fitted_alternatives({}, problem, 132).empty());
}

// 4096^3 in 128x128 tiles is 1024 tiles in 8 waves, 97% full: no width is 3% cheaper. A ping-pong 128-row tile
// takes no width over 168 (its accumulators would spill), so none is proposed that why_invalid refuses; at
// 2048x11008 it takes 168, the width of cuBLASLt's tile there (8 whole waves).
TEST(WaveFit, KeepsAWidthThatAlreadyFillsItsWaves) {
  const Design ping = parse_design("sm90.ws.pingpong/128x128x64/s6/c1x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_FALSE(wave_fitted(ping, tn(4096, 4096, 4096), 132, kWidths));
  for (int m : {512, 2048})
    for (int n : {3072, 5120, 9216, 11008, 21888})
      if (const auto fitted = wave_fitted(ping, tn(m, n, 4096), 132, kWidths)) {
        EXPECT_FALSE(why_invalid(*fitted, Layout::kTN)) << to_string(*fitted);
        EXPECT_LE(fitted->bn, 168) << to_string(*fitted);
      }
  // Six stages of 128x168 do not fit in shared memory: the fit takes five.
  const auto llama = wave_fitted(ping, tn(2048, 11008, 4096), 132, fitting_widths());
  ASSERT_TRUE(llama);
  EXPECT_EQ(to_string(*llama), "sm90.ws.pingpong/128x168x64/s5/c1x1/raster_m.g8/splitk1/epi_tma");
  // Asking for a 3% gain, or for none at all.
  const Design coop = parse_design("sm90.ws.coop/128x192x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_FALSE(wave_fitted(coop, tn(512, 5120, 4096), 132, kWidths, 0.25));
  EXPECT_TRUE(wave_fitted(coop, tn(512, 5120, 4096), 132, kWidths, 0.0));
}

TEST(WaveFit, SwapClustersAndSlicesCountAsTheKernelSeesThem) {
  const Design plain = parse_design("sm90.ws.pingpong/64x96x64/s6/c1x1/raster_m.g8/splitk1/epi_reg");
  Design swapped = plain;
  swapped.swap_ab = true;
  EXPECT_EQ(wave_cost(swapped, tn(9216, 512, 4096), 132), wave_cost(plain, tn(512, 9216, 4096), 132));
  // Clusters of 2 on 133 SMs: 132 CTAs a wave.
  const Design cluster = parse_design("sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_EQ(wave_cost(cluster, tn(128 * 132, 128, 1024), 133), 1LL * 128 * 128);
  EXPECT_EQ(wave_cost(cluster, tn(128 * 133, 128, 1024), 133), 2LL * 128 * 128);
  // Tiles round up to whole clusters, as the kernel walks them: 3 x 44 tiles are 2 x 44 = 88 clusters, over the 66
  // that 132 SMs hold at once.
  EXPECT_EQ(wave_cost(cluster, tn(128 * 3, 128 * 44, 1024), 132), 2LL * 128 * 128);
  // Four slices of 33 tiles: 132 units, one wave.
  const Design split = parse_design("sm90.ws.pingpong/64x128x64/s6/c1x1/raster_m.g8/splitk4.parallel/epi_reg");
  EXPECT_EQ(wave_cost(split, tn(64 * 33, 128, 4096), 132), 1LL * 64 * 128);
}

TEST(WaveFit, DesignsWithoutWavesOfWholeTilesKeepTheirWidth) {
  for (const char* text : {"sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/streamk/epi_tma",
                           "sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg"}) {
    EXPECT_EQ(wave_cost(parse_design(text), tn(512, 5120, 4096), 132), 0) << text;
    EXPECT_FALSE(wave_fitted(parse_design(text), tn(512, 5120, 4096), 132, kWidths)) << text;
  }
  const Design coop = parse_design("sm90.ws.coop/128x192x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  EXPECT_NE(testing::error_of([&] { wave_cost(coop, tn(64, 64, 64), 0); }).find("sm_count"), std::string::npos);
}

// The rule against measurements: bench/results/h100/fine-widths.csv timed 13 sm90 designs beside each other in CUDA
// graphs on 48 mid-size layers (one run, one process). From every design there whose width is a multiple of 64,
// where the rule proposes another width and the run timed a design of that width (same schedule, tile rows,
// cluster, split and epilogue; its own stage count), the proposal must have run faster.
TEST(WaveFit, WhereTheRuleProposedAWidthItRanFasterOnTheH100) {
  std::ifstream in(std::string(RLGEMM_SOURCE_DIR) + "/bench/results/h100/fine-widths.csv");
  ASSERT_TRUE(in) << "bench/results/h100/fine-widths.csv";
  using Key = std::tuple<Sm90Schedule, int, int, int, int, SplitK, Epilogue>;  // the design, less its stages
  auto key_of = [](const Design& d) {
    return Key{d.schedule, d.bm, d.bn, d.cluster_m, d.cluster_n, d.split, d.epilogue};
  };
  std::map<std::tuple<int, int, int>, std::map<Key, std::pair<Design, double>>> timed;  // graph rows, by shape
  std::string line;
  std::getline(in, line);
  ASSERT_EQ(line.rfind("M,N,K,layout,impl,mode,time_us,", 0), 0u) << line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream fields(line);
    for (std::string cell; f.size() < 7 && std::getline(fields, cell, ',');) f.push_back(cell);
    if (f.size() < 7 || f[5] != "graph" || f[4].rfind("sm90.", 0) != 0) continue;
    const Design d = parse_design(f[4]);
    timed[{std::stoi(f[0]), std::stoi(f[1]), std::stoi(f[2])}][key_of(d)] = {d, std::stod(f[6])};
  }
  ASSERT_EQ(timed.size(), 48u);
  int compared = 0;
  double log_sum = 0;
  for (const auto& [shape, designs] : timed) {
    const Problem problem = tn(std::get<0>(shape), std::get<1>(shape), std::get<2>(shape));
    for (const auto& [key, origin] : designs) {
      if (origin.first.bn % 64 != 0) continue;
      const auto fitted = wave_fitted(origin.first, problem, 132, fitting_widths());
      if (!fitted) continue;
      const auto measured = designs.find(key_of(*fitted));
      if (measured == designs.end()) continue;
      ++compared;
      log_sum += std::log(origin.second / measured->second.second);
      EXPECT_LT(measured->second.second, origin.second)
          << problem.shape.to_string() << ": " << to_string(origin.first) << " -> " << to_string(*fitted);
    }
  }
  EXPECT_GE(compared, 50);
  std::printf("wave fit on bench/results/h100/fine-widths.csv: %d proposals timed, geometric mean speedup %.3f\n",
              compared, std::exp(log_sum / compared));
}

// The tile's fixed cost against measurements: bench/results/h100/mid-oracle, fine-widths and fitted-widths timed
// designs of several widths side by side in CUDA graphs. In each set of one design's widths on one shape (3 or
// more widths; the stage count goes with the width), the width of least fit_cost ran closer to the set's fastest
// than the width of least wave_cost (no fixed cost).
TEST(WaveFit, ATilesFixedCostPicksWidthsCloserToTheFastest) {
  using Key = std::tuple<std::string, int, int, int, Sm90Schedule, int, int, int, SplitK, int, Epilogue, bool>;
  std::map<Key, std::map<int, std::pair<Design, double>>> sets;  // by width
  for (const std::string file : {"mid-oracle", "fine-widths", "fitted-widths"}) {
    std::ifstream in(std::string(RLGEMM_SOURCE_DIR) + "/bench/results/h100/" + file + ".csv");
    ASSERT_TRUE(in) << file;
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::vector<std::string> f;
      std::stringstream fields(line);
      for (std::string cell; f.size() < 11 && std::getline(fields, cell, ',');) f.push_back(cell);
      if (f.size() < 11 || f[5] != "graph" || f[4].rfind("sm90.", 0) != 0 || f[10] != "1") continue;
      const Design d = parse_design(f[4]);
      if (d.split == SplitK::kStreamK) continue;
      const Key key{file, std::stoi(f[0]), std::stoi(f[1]), std::stoi(f[2]), d.schedule, d.bm, d.cluster_m,
                    d.cluster_n, d.split, d.splits, d.epilogue, d.swap_ab};
      sets[key][d.bn] = {d, std::stod(f[6])};
    }
  }
  int counted = 0;
  double plain_log = 0, fixed_log = 0;
  for (const auto& [key, widths] : sets) {
    if (widths.size() < 3) continue;
    const Problem problem = tn(std::get<1>(key), std::get<2>(key), std::get<3>(key));
    double fastest = 1e300;
    for (const auto& [width, timed] : widths) fastest = std::min(fastest, timed.second);
    auto pick = [&](auto cost) {  // least cost, the wider on ties (the map is by width)
      const std::pair<Design, double>* best = nullptr;
      long long best_cost = 0;
      for (const auto& [width, timed] : widths) {
        const long long c = cost(timed.first, problem, 132);
        if (!best || c <= best_cost) best = &timed, best_cost = c;
      }
      return best->second;
    };
    ++counted;
    plain_log += std::log(pick(wave_cost) / fastest);
    fixed_log += std::log(pick(fit_cost) / fastest);
  }
  ASSERT_GE(counted, 150);
  const double plain = std::exp(plain_log / counted), fixed = std::exp(fixed_log / counted);
  std::printf("%d sets of widths: the pick of wave_cost ran %.4f of the fastest, of fit_cost %.4f\n", counted, plain,
              fixed);
  EXPECT_LT(fixed, plain);
  EXPECT_LT(fixed, 1.01);
}

}  // namespace
}  // namespace rlgemm::search
