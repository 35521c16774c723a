#include "predict/features.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace rlgemm::predict {
namespace {

double feature(const std::vector<double>& x, const std::string& name) {
  const auto& names = design_feature_names();
  const auto it = std::find(names.begin(), names.end(), name);
  EXPECT_NE(it, names.end()) << name;
  return x[size_t(it - names.begin())];
}

const Design kCoop = parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg");

TEST(Features, NamesMatchValues) {
  const Problem p{{1000, 4096, 4096}, Layout::kTN};
  EXPECT_EQ(shape_features(p, GpuTraits{}).size(), shape_feature_names().size());
  EXPECT_EQ(design_features(p, kCoop, GpuTraits{}).size(), design_feature_names().size());
  const std::vector<double> x = design_features(p, kCoop, GpuTraits{});
  EXPECT_EQ(std::vector<double>(x.begin(), x.begin() + long(shape_feature_names().size())), shape_features(p, GpuTraits{}));
  // From the shape's features computed once, the same values, whatever the buffer held before.
  std::vector<double> again(100, -1.0);
  design_features(shape_features(p, GpuTraits{}), p, kCoop, GpuTraits{}, again);
  EXPECT_EQ(again, x);
}

TEST(Features, WavesAndTileWaste) {
  // 132 tiles of 128x128 fill exactly one wave of a 132-SM GPU; one more starts a second, nearly empty wave.
  const auto full = design_features({{128 * 12, 128 * 11, 1024}, Layout::kTN}, kCoop, GpuTraits{});
  EXPECT_DOUBLE_EQ(feature(full, "log2_waves"), 0.0);
  EXPECT_DOUBLE_EQ(feature(full, "last_wave_fill"), 1.0);
  EXPECT_DOUBLE_EQ(feature(full, "waste_mn"), 0.0);
  const auto over = design_features({{128 * 12 + 8, 128 * 11, 1024}, Layout::kTN}, kCoop, GpuTraits{});
  EXPECT_NEAR(feature(over, "last_wave_fill"), 143.0 / 264.0, 1e-12);  // 13 x 11 tiles in two waves
  EXPECT_GT(feature(over, "waste_m"), 0.9 * 120.0 / 1664.0);
  // A GPU with fewer SMs needs more waves for the same tiles.
  GpuTraits small;
  small.sm_count = 66;
  EXPECT_DOUBLE_EQ(feature(design_features({{128 * 12, 128 * 11, 1024}, Layout::kTN}, kCoop, small), "log2_waves"), 1.0);
}

TEST(Features, SwapAndSplitChangeTheWork) {
  const Problem p{{16, 4096, 8192}, Layout::kTN};
  Design swapped = kCoop;
  swapped.swap_ab = true;
  const auto x = design_features(p, kCoop, GpuTraits{}), y = design_features(p, swapped, GpuTraits{});
  EXPECT_DOUBLE_EQ(feature(x, "log2_m_eff"), 4.0);
  EXPECT_DOUBLE_EQ(feature(y, "log2_m_eff"), 12.0);
  Design split = kCoop;
  split.split = SplitK::kSerial;
  split.splits = 4;
  const auto z = design_features(p, split, GpuTraits{});
  EXPECT_DOUBLE_EQ(feature(z, "log2_units") - feature(x, "log2_units"), 2.0);
  EXPECT_DOUBLE_EQ(feature(x, "log2_kblocks_per_unit") - feature(z, "log2_kblocks_per_unit"), 2.0);
  Design streamk = kCoop;
  streamk.split = SplitK::kStreamK;
  EXPECT_DOUBLE_EQ(feature(design_features(p, streamk, GpuTraits{}), "last_wave_fill"), 1.0);
}

TEST(Features, Sm80CtasPerSmFollowSharedMemory) {
  const Design small = parse_design("sm80/64x64x32/w32x32/s2/swz/raster_m.g8/splitk1/epi_reg");
  const Design big = parse_design("sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg");
  const Problem p{{4096, 4096, 4096}, Layout::kTN};
  EXPECT_GT(feature(design_features(p, small, GpuTraits{}), "ctas_per_sm"),
            feature(design_features(p, big, GpuTraits{}), "ctas_per_sm"));
  EXPECT_DOUBLE_EQ(feature(design_features(p, kCoop, GpuTraits{}), "ctas_per_sm"), 1.0);  // persistent
}

}  // namespace
}  // namespace rlgemm::predict
