// The reward's arithmetic without a GPU: the best vendor call of a mode, the speedup over it from paired rounds
// with its 95% interval, and the record fields clients read; and the check the GPU test applies to each
// kernel case's record, on records that lack the timing fields or hold them as integers.
#include <gtest/gtest.h>

#include <cmath>

#include "env/reward.h"
#include "env_test_util.h"
#include "rlgemm/error.h"

namespace rlgemm::env {
namespace {

using nlohmann::json;

bench::Timing timing(std::vector<double> rounds) {
  bench::Timing t;
  t.rounds_us = rounds;
  t.samples = int(rounds.size());
  t.time_us = bench::median(rounds);
  return t;
}

TEST(EnvReward, TheBestVendorIsTheLowestMedianAndTheSpeedupComesFromPairedRounds) {
  // A slow spell in rounds 2 and 3 falls on every subject alike: paired, it cancels.
  const std::vector<double> spell = {1.0, 1.0, 1.3, 1.3, 1.0, 1.0};
  std::vector<double> sub, lt, cublas;
  for (size_t r = 0; r < spell.size(); ++r) {
    sub.push_back(10.0 * spell[r] * (r % 2 ? 1.01 : 0.99));
    lt.push_back(12.0 * spell[r]);
    cublas.push_back(15.0 * spell[r]);
  }
  const ModeReward r = mode_reward({"submission", "cublas_tn", "lt_auto"}, {timing(sub), timing(cublas), timing(lt)});
  EXPECT_EQ(r.best_vendor, "lt_auto");
  EXPECT_DOUBLE_EQ(r.best_vendor_us, bench::median(lt));
  EXPECT_DOUBLE_EQ(r.time_us, bench::median(sub));
  EXPECT_EQ(r.vendor_us.size(), 2u);
  EXPECT_DOUBLE_EQ(r.vendor_us.at("cublas_tn"), bench::median(cublas));
  // exp(mean ln(12 / (10 * 0.99 or 1.01))): 1.2 within the rounding of the alternating 1%.
  EXPECT_NEAR(r.speedup, 1.2, 0.001);
  EXPECT_LT(r.low, r.speedup);
  EXPECT_GT(r.high, r.speedup);
  EXPECT_LT(r.high - r.low, 0.05) << "the spell must cancel in the paired ratios";
  EXPECT_EQ(r.rounds, 6);
  // Paired wrongly (the submission's rounds shifted by two, so that its slow spell meets the vendor's quick
  // rounds), the same times give an interval several times as wide.
  std::vector<double> shifted(sub.begin() + 2, sub.end());
  shifted.insert(shifted.end(), sub.begin(), sub.begin() + 2);
  const GainInterval unpaired = gain_interval(lt, shifted);
  EXPECT_GT(unpaired.high - unpaired.low, 3 * (r.high - r.low));
}

TEST(EnvReward, TheRecordCarriesBothModesUnderTheirNames) {
  const ModeReward graph = mode_reward({"s", "lt_auto"}, {timing({10, 10.2, 9.9}), timing({11, 11.1, 11})});
  const ModeReward offline = mode_reward({"s", "cublas_tn"}, {timing({12, 12, 12.1}), timing({12.5, 12.4, 12.6})});
  json record = json::object();
  write_reward(record, graph, "");
  write_reward(record, offline, "_offline");
  EXPECT_EQ(record.at("best_vendor"), "lt_auto");
  EXPECT_EQ(record.at("best_vendor_offline"), "cublas_tn");
  EXPECT_DOUBLE_EQ(record.at("speedup_vs_best_vendor").get<double>(), graph.speedup);
  EXPECT_DOUBLE_EQ(record.at("speedup_vs_best_vendor_offline").get<double>(), offline.speedup);
  EXPECT_DOUBLE_EQ(record.at("time_us").get<double>(), graph.time_us);
  EXPECT_DOUBLE_EQ(record.at("time_us_offline").get<double>(), offline.time_us);
  EXPECT_DOUBLE_EQ(record.at("vendor_us").at("lt_auto").get<double>(), graph.best_vendor_us);
  EXPECT_DOUBLE_EQ(record.at("best_vendor_us_offline").get<double>(), offline.best_vendor_us);
  for (const char* key : {"speedup_vs_best_vendor_interval", "speedup_vs_best_vendor_offline_interval"}) {
    const json& interval = record.at(key);
    EXPECT_TRUE(interval.at("low").is_number_float()) << key;
    EXPECT_TRUE(interval.at("high").is_number_float()) << key;
    EXPECT_EQ(interval.at("rounds"), 3) << key;
  }
  // What the record's reader sees after a trip through JSON text (the database keeps the dump).
  const json again = json::parse(record.dump());
  EXPECT_DOUBLE_EQ(again.at("speedup_vs_best_vendor_interval").at("low").get<double>(), graph.low);
}

TEST(EnvReward, RoundsThatCannotBePairedAreAnError) {
  EXPECT_THROW(mode_reward({"s"}, {timing({1, 2})}), Error);
  EXPECT_THROW(mode_reward({"s", "v"}, {timing({1, 2})}), Error);
  EXPECT_THROW(mode_reward({"s", "v"}, {timing({1, 2, 3}), timing({1, 2})}), Error);
  EXPECT_THROW(mode_reward({"s", "v"}, {timing({1}), timing({1})}), Error);
}

// The GPU test's check of a record, on the records the service gives without a GPU: an honest kernel rejected
// on the CPU (no timing fields at all) is a mismatch named as such, never a JSON type error; integer numbers
// read as numbers; a speedup outside its interval, or a missing offline ratio, is named.
TEST(EnvReward, TheCaseCheckReadsEveryRecordShape) {
  const testing::KernelCase honest{"honest", "", "accepted", ""};
  const json cpu_rejected = {{"kind", "source"}, {"verdict", "rejected"}, {"correct", false},
                             {"rejection", {{"reason", "forbidden_symbol"}, {"detail", "the launch calls x"}}}};
  std::string why;
  EXPECT_NO_THROW(why = testing::verdict_mismatch(honest, cpu_rejected));
  EXPECT_NE(why.find("verdict 'rejected'"), std::string::npos) << why;
  EXPECT_NE(why.find("no number 'time_us'"), std::string::npos) << why;

  json accepted = {{"verdict", "accepted"}, {"correct", true}, {"max_error", 0}, {"time_us", 12},
                   {"speedup_vs_best_vendor", 1}, {"speedup_vs_best_vendor_interval", {{"low", 1}, {"high", 1}, {"rounds", 16}}},
                   {"speedup_vs_best_vendor_offline", 0.9},
                   {"speedup_vs_best_vendor_offline_interval", {{"low", 0.85}, {"high", 0.95}, {"rounds", 16u}}},
                   {"best_vendor", "lt_auto"}, {"best_vendor_offline", "cublas_tn"}, {"rejection", nullptr}};
  EXPECT_EQ(testing::verdict_mismatch(honest, accepted), "");
  json outside = accepted;
  outside["speedup_vs_best_vendor_offline"] = 1.2;
  EXPECT_NE(testing::verdict_mismatch(honest, outside).find("outside its interval"), std::string::npos);
  json old_record = accepted;
  old_record.erase("speedup_vs_best_vendor_offline");
  EXPECT_NE(testing::verdict_mismatch(honest, old_record).find("speedup_vs_best_vendor_offline"), std::string::npos);

  const testing::KernelCase gaming{"per_thread_stream", "", "rejected", "no_work|legacy_stream"};
  EXPECT_EQ(testing::verdict_mismatch(gaming, {{"verdict", "rejected"}, {"rejection", {{"reason", "legacy_stream"}}}}), "");
  EXPECT_NE(testing::verdict_mismatch(gaming, {{"verdict", "rejected"}, {"rejection", {{"reason", "fault"}}}}), "");
  EXPECT_NE(testing::verdict_mismatch(gaming, accepted), "");
}

}  // namespace
}  // namespace rlgemm::env
