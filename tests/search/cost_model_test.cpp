// The synthetic cost model: deterministic, plausible, and with something to find.
#include <gtest/gtest.h>

#include "rlgemm/error.h"
#include "search/cost_model.h"
#include "search/search_test_util.h"
#include "search/synthetic_measurer.h"

namespace rlgemm::search {
namespace {

const char* kBig = "sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma";

TEST(CostModel, IsDeterministicAndPositive) {
  CostModel a, b;
  const Problem p{{4096, 4096, 4096}, Layout::kTN};
  const Design d = parse_design(kBig);
  EXPECT_EQ(a.time_us(d, p), b.time_us(d, p));
  EXPECT_GT(a.time_us(d, p), 0);
  EXPECT_THROW(a.time_us(parse_design("test.hang"), p), Error);
}

TEST(CostModel, TimesArePlausibleForAnH100) {
  CostModel model;
  const Design d = parse_design(kBig);
  const Problem big{{8192, 8192, 8192}, Layout::kTN};
  const double tflops = big.shape.flops() / (model.time_us(d, big) * 1e-6) / 1e12;
  EXPECT_GT(tflops, 450);
  EXPECT_LT(tflops, 990);  // below the tensor-core peak
  // Small problems are dominated by the launch.
  const Problem tiny{{64, 64, 64}, Layout::kTN};
  EXPECT_GT(model.time_us(d, tiny), 4.0);
  EXPECT_LT(model.time_us(d, tiny), 15.0);
  EXPECT_LT(model.time_us(d, tiny), model.time_us(d, big));
}

TEST(CostModel, SplitKPaysOnlyWhenTilesDoNotFillAWave) {
  CostModel model;
  Design none = parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma");
  Design split = parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk4.serial/epi_tma");
  const Problem skinny{{256, 256, 16384}, Layout::kTN};  // 4 tiles, long K
  const Problem square{{8192, 8192, 1024}, Layout::kTN};  // 4096 tiles
  EXPECT_LT(model.time_us(split, skinny), model.time_us(none, skinny));
  EXPECT_GT(model.time_us(split, square), model.time_us(none, square));
}

TEST(CostModel, SearchCanBeatTheReference) {
  CostModel model;
  DesignSpace space(testing::small_spec(), Layout::kTN);
  int better = 0;
  const std::vector<Problem> problems = {{{512, 4096, 1024}, Layout::kTN}, {{8192, 8192, 2048}, Layout::kTN},
                                         {{128, 1024, 8192}, Layout::kTN}, {{64, 64, 64}, Layout::kTN}};
  for (const auto& p : problems) {
    double best = 1e300;
    for (size_t i = 0; i < space.size(); ++i) best = std::min(best, model.time_us(space.design(i), p));
    const double speedup = model.reference_us(p) / best;
    EXPECT_GT(speedup, 0.9) << p.shape.to_string();
    EXPECT_LT(speedup, 2.0) << p.shape.to_string();
    better += speedup > 1.0;
  }
  EXPECT_GE(better, 3);
}

TEST(SyntheticMeasurer, ReusesCompiledDesignsAcrossShapes) {
  SyntheticMeasurer m;
  const Design d = parse_design(kBig);
  const auto first = m.measure(d, {{1024, 1024, 1024}, Layout::kTN}, TimingMode::kOffline);
  const auto second = m.measure(d, {{2048, 512, 1024}, Layout::kTN}, TimingMode::kOffline);
  const auto other_layout = m.measure(d, {{2048, 512, 1024}, Layout::kNN}, TimingMode::kOffline);
  EXPECT_EQ(first.status, MeasureStatus::kOk);
  EXPECT_GT(first.compile_seconds, 0);
  EXPECT_EQ(second.compile_seconds, 0);
  EXPECT_EQ(first.source_hash, second.source_hash);
  EXPECT_GT(other_layout.compile_seconds, 0);
  EXPECT_NE(other_layout.source_hash, first.source_hash);
  EXPECT_EQ(m.compilations(), 2);
  Design baked = d;
  baked.static_shape = true;  // the shape is compiled in: one compile per shape
  m.measure(baked, {{1024, 1024, 1024}, Layout::kTN}, TimingMode::kOffline);
  m.measure(baked, {{2048, 1024, 1024}, Layout::kTN}, TimingMode::kOffline);
  EXPECT_EQ(m.compilations(), 4);
  // In-process, fault-injection designs are refused rather than acted out.
  EXPECT_EQ(m.measure(parse_design("test.fault"), {{64, 64, 64}, Layout::kTN}, TimingMode::kOffline).status,
            MeasureStatus::kFailed);
}

}  // namespace
}  // namespace rlgemm::search
