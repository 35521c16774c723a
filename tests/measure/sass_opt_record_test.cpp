// The record of sass-opt runs: the CSV (its columns, quoting, the first format rewritten in the current one,
// rows found by column name for resuming) and the final check's decision, driven by a judge that answers with
// given timings.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "measure/sass_opt_record.h"
#include "measure_test_util.h"
#include "rlgemm/error.h"

namespace rlgemm::measure {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSm90Design = "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg";
constexpr const char* kSm80Design = "sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg";

fs::path scratch(const std::string& name) { return testing::scratch_file("sass-record", name); }
using testing::lines_of;

SassOptCsvRow design_row(const std::string& design, Shape shape, const std::string& actions) {
  SassOptCsvRow row;
  row.kernel = design;
  row.problem = {shape, Layout::kTN};
  row.time_before_us = 100;
  row.time_after_us = 90;
  row.gain = 100.0 / 90.0 - 1.0;
  row.bitwise_equal = true;
  row.moves = 7;
  row.set = default_sass_opt_set(design);
  row.actions = actions;
  row.ci_low = 0.05;
  row.ci_high = 0.17;
  row.graph_gain = 0.08;
  row.graph_ci_low = 0.03;
  row.graph_ci_high = 0.13;
  row.changes = "displaced=4 stall=2 yield=0 reuse=1";
  return row;
}

TEST(SassOptCsv, WritesTheHeaderOnceAndOneRowPerRun) {
  const fs::path file = scratch("csv/sub/sass-opt.csv");  // parent folders are created
  fs::remove(file);
  append_sass_opt_csv(file.string(), design_row(kSm90Design, {4096, 2048, 1024}, "both"));
  SassOptCsvRow not_kept = design_row(kSm80Design, {2048, 2048, 2048}, "moves");
  not_kept.problem.layout = Layout::kNN;
  not_kept.time_after_us = not_kept.time_before_us;
  not_kept.gain = 0;
  not_kept.moves = 0;
  not_kept.ci_low.reset();
  not_kept.ci_high.reset();
  not_kept.changes.clear();
  not_kept.graph_gain.reset();
  not_kept.graph_ci_low.reset();
  not_kept.graph_ci_high.reset();
  append_sass_opt_csv(file.string(), not_kept);
  const auto lines = lines_of(file);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], kSassOptCsvHeader);
  EXPECT_EQ(lines[0],
            "kernel,M,N,K,layout,time_before_us,time_after_us,gain,bitwise_equal,moves,set,actions,ci_low,ci_high,changes,"
            "graph_gain,graph_ci_low,graph_ci_high");
  EXPECT_EQ(lines[1], std::string(kSm90Design) +
                          ",4096,2048,1024,tn,100.0000,90.0000,0.1111,true,7,sm90,both,0.0500,0.1700,"
                          "displaced=4 stall=2 yield=0 reuse=1,0.0800,0.0300,0.1300");
  EXPECT_EQ(lines[2], std::string(kSm80Design) + ",2048,2048,2048,nn,100.0000,100.0000,0.0000,true,0,sm80,moves,,,,,,");
}

TEST(SassOptCsv, AForeignKernelWithoutAProblemLeavesItsShapeEmptyAndNamesAreQuoted) {
  SassOptCsvRow row = design_row("odd,\"name\"", {8, 8, 8}, "control");
  row.set = "triton";
  EXPECT_EQ(format_sass_opt_csv_row(row),
            "\"odd,\"\"name\"\"\",8,8,8,tn,100.0000,90.0000,0.1111,true,7,triton,control,0.0500,0.1700,"
            "displaced=4 stall=2 yield=0 reuse=1,0.0800,0.0300,0.1300");
  row.problem = Problem{{0, 0, 0}};
  EXPECT_EQ(format_sass_opt_csv_row(row).rfind("\"odd,\"\"name\"\"\",,,,,100.0000,", 0), 0u) << format_sass_opt_csv_row(row);
  const fs::path file = scratch("quoted.csv");
  fs::remove(file);
  append_sass_opt_csv(file.string(), row);
  EXPECT_EQ(sass_opt_rows_done(file.string()).count(sass_opt_row_key("triton", "odd,\"name\"", row.problem, "control")), 1u);
}

TEST(SassOptCsv, RefusesAForeignFileAndLeavesItAlone) {
  const fs::path file = scratch("foreign.csv");
  std::ofstream(file) << "a,b,c\n1,2,3\n";
  EXPECT_THROW(append_sass_opt_csv(file.string(), design_row(kSm90Design, {8, 8, 8}, "moves")), Error);
  EXPECT_EQ(lines_of(file).size(), 2u) << "the foreign file was changed";
  EXPECT_THROW(sass_opt_rows_done(file.string()), Error);
}

TEST(SassOptCsv, AFirstFormatFileIsRewrittenAndItsRowsResume) {
  // A file of the first format, as bench/results/h100/sass-opt.csv was written.
  const fs::path file = scratch("v1.csv");
  {
    std::ofstream out(file);
    out << kSassOptCsvHeaderV1 << "\n";
    out << kSm80Design << ",2048,2048,2048,tn,48.3616,46.7992,0.0334,true,17\n";
    out << kSm90Design << ",1024,1024,4096,tn,24.0952,24.0952,0.0000,true,0\n";
  }
  // Resuming reads it as it is: moves-only runs of each design's family.
  auto done = sass_opt_rows_done(file.string());
  EXPECT_EQ(done.size(), 2u);
  EXPECT_EQ(done.count(sass_opt_row_key("sm80", kSm80Design, {{2048, 2048, 2048}, Layout::kTN}, "moves")), 1u);
  EXPECT_EQ(done.count(sass_opt_row_key("sm90", kSm90Design, {{1024, 1024, 4096}, Layout::kTN}, "moves")), 1u);
  EXPECT_EQ(done.count(sass_opt_row_key("sm90", kSm90Design, {{1024, 1024, 4096}, Layout::kTN}, "both")), 0u);

  // Appending rewrites it in the current format first, keeping every old row.
  append_sass_opt_csv(file.string(), design_row(kSm90Design, {1024, 1024, 4096}, "both"));
  const auto lines = lines_of(file);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], kSassOptCsvHeader);
  EXPECT_EQ(lines[1], std::string(kSm80Design) + ",2048,2048,2048,tn,48.3616,46.7992,0.0334,true,17,sm80,moves,,,,,,");
  EXPECT_EQ(lines[2], std::string(kSm90Design) + ",1024,1024,4096,tn,24.0952,24.0952,0.0000,true,0,sm90,moves,,,,,,");
  done = sass_opt_rows_done(file.string());
  EXPECT_EQ(done.size(), 3u);
  EXPECT_EQ(done.count(sass_opt_row_key("sm90", kSm90Design, {{1024, 1024, 4096}, Layout::kTN}, "both")), 1u);
}

TEST(SassOptCsv, ASecondFormatFileGainsEmptyGraphColumns) {
  // A file written before schedules were re-timed in CUDA graphs.
  const fs::path file = scratch("v2.csv");
  const std::string old_row = std::string(kSm90Design) +
                              ",1024,1024,4096,tn,24.0952,23.0000,0.0476,true,5,sm90,both,0.0100,0.0800,displaced=2 stall=1 yield=0 reuse=0";
  {
    std::ofstream out(file);
    out << kSassOptCsvHeaderV2 << "\n" << old_row << "\n";
  }
  EXPECT_EQ(sass_opt_rows_done(file.string()).size(), 1u);
  append_sass_opt_csv(file.string(), design_row(kSm80Design, {2048, 2048, 2048}, "moves"));
  const auto lines = lines_of(file);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], kSassOptCsvHeader);
  EXPECT_EQ(lines[1], old_row + ",,,");
  EXPECT_EQ(sass_opt_rows_done(file.string()).size(), 2u);
}

TEST(SassOptCsv, RowsAreFoundByColumnName) {
  // Columns in another order, and one more: resuming still finds the rows.
  const fs::path file = scratch("shuffled.csv");
  {
    std::ofstream out(file);
    out << "actions,note,set,layout,K,N,M,kernel\n";
    out << "both,x,triton,nn,4096,4096,4096,triton_128x256x64\n";
  }
  const auto done = sass_opt_rows_done(file.string());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(*done.begin(), sass_opt_row_key("triton", "triton_128x256x64", {{4096, 4096, 4096}, Layout::kNN}, "both"));
  EXPECT_TRUE(sass_opt_rows_done(scratch("missing.csv").string()).empty());
}

// A judge that answers with the timings it was given (in graph mode `graph_answer` where set), and counts what
// it was asked.
class GivenTimings : public CubinJudge {
 public:
  CubinComparison answer;
  std::optional<CubinComparison> graph_answer;
  int calls = 0;
  std::vector<uint8_t> last;
  std::vector<bench::Mode> modes;
  CubinComparison compare(const std::vector<uint8_t>& cubin, int, const bench::TimingOptions& timing,
                          bench::Mode mode) override {
    ++calls;
    last = cubin;
    modes.push_back(mode);
    const CubinComparison& given = mode == bench::Mode::kGraph && graph_answer ? *graph_answer : answer;
    CubinComparison c = given;
    c.original_rounds_us.resize(size_t(timing.batches), given.original_rounds_us.empty() ? 0 : given.original_rounds_us[0]);
    c.candidate_rounds_us.resize(size_t(timing.batches), given.candidate_rounds_us.empty() ? 0 : given.candidate_rounds_us[0]);
    return c;
  }
};

SassOptOutcome searched(const std::vector<uint8_t>& patched) {
  SassOptOutcome o;
  o.game.search.initial_time_us = 10;
  o.game.search.best_time_us = 9;
  o.game.search.path.resize(3);
  o.game.patched = patched;
  return o;
}

// A judge whose offline rounds show a 5% gain under alternating 2% noise: 60 rounds are sure of it.
GivenTimings five_percent_faster() {
  GivenTimings judge;
  judge.answer.ok = true;
  judge.answer.original_us = 100;
  judge.answer.candidate_us = 95;
  for (int i = 0; i < 60; ++i) {
    judge.answer.original_rounds_us.push_back(100 * (i % 2 ? 1.02 : 0.98));
    judge.answer.candidate_rounds_us.push_back(100 / 1.05 * (i % 3 ? 1.01 : 0.99));
  }
  return judge;
}

TEST(SassOptFinalCheck, KeepsAScheduleWhoseIntervalLiesAboveZero) {
  const std::vector<uint8_t> compiled{1, 2, 3}, patched{1, 3, 2};
  GivenTimings judge = five_percent_faster();
  SassOptOutcome o = searched(patched);
  final_check(o, &judge, compiled, {60, 8, 0.0, 1});
  // Offline first, then the same schedule re-timed in CUDA graphs.
  EXPECT_EQ(judge.calls, 2);
  EXPECT_EQ(judge.modes, (std::vector<bench::Mode>{bench::Mode::kOffline, bench::Mode::kGraph}));
  EXPECT_EQ(judge.last, patched);
  ASSERT_TRUE(o.interval.has_value());
  EXPECT_EQ(o.interval->rounds, 60);
  ASSERT_TRUE(o.graph_interval.has_value());
  EXPECT_GT(o.graph_interval->low, 0);
  EXPECT_TRUE(o.kept) << o.verdict;
  EXPECT_NE(o.verdict.find("in CUDA graphs"), std::string::npos) << o.verdict;
  EXPECT_NEAR(o.gain, 0.05, 0.01);
  EXPECT_EQ(o.gain, o.interval->gain);
  EXPECT_EQ(o.time_before_us, 100);
  EXPECT_EQ(o.time_after_us, 95);
  EXPECT_EQ(o.moves, 3);
  const SassOptCsvRow row = csv_row(o, kSm80Design, {{2048, 2048, 2048}, Layout::kTN}, sass::ActionSpace::kBoth);
  EXPECT_EQ(row.actions, "both");
  EXPECT_EQ(row.ci_low, o.interval->low);
  EXPECT_GT(*row.ci_low, 0);
  EXPECT_EQ(row.graph_gain, o.graph_interval->gain);
  EXPECT_EQ(row.graph_ci_low, o.graph_interval->low);
  EXPECT_EQ(row.graph_ci_high, o.graph_interval->high);
}

// A gain back-to-back launches show and CUDA graphs do not (a launch effect): not kept, and the row says both.
TEST(SassOptFinalCheck, AGainThatDoesNotHoldInCudaGraphsIsNotKept) {
  const std::vector<uint8_t> compiled{1, 2, 3}, patched{1, 3, 2};
  GivenTimings judge = five_percent_faster();
  CubinComparison graph;
  graph.ok = true;
  graph.original_us = 80;
  graph.candidate_us = 80;
  for (int i = 0; i < 60; ++i) {
    graph.original_rounds_us.push_back(80 * (i % 2 ? 1.01 : 0.99));
    graph.candidate_rounds_us.push_back(80 * (i % 4 < 2 ? 1.01 : 0.99));
  }
  judge.graph_answer = graph;
  SassOptOutcome o = searched(patched);
  final_check(o, &judge, compiled, {60, 8, 0.0, 1});
  EXPECT_EQ(judge.calls, 2);
  ASSERT_TRUE(o.interval.has_value());
  EXPECT_GT(o.interval->low, 0);
  ASSERT_TRUE(o.graph_interval.has_value());
  EXPECT_LE(o.graph_interval->low, 0);
  EXPECT_FALSE(o.kept) << o.verdict;
  EXPECT_EQ(o.gain, 0);
  EXPECT_EQ(o.time_after_us, o.time_before_us);
  EXPECT_EQ(o.verdict.rfind("not kept: held offline", 0), 0u) << o.verdict;
  EXPECT_NE(o.verdict.find("in CUDA graphs"), std::string::npos) << o.verdict;
  const SassOptCsvRow row = csv_row(o, kSm80Design, {{2048, 2048, 2048}, Layout::kTN}, sass::ActionSpace::kMoves);
  EXPECT_TRUE(row.graph_ci_low.has_value());
  EXPECT_TRUE(row.changes.empty());

  // A schedule that fails when captured is not kept either, and says so.
  graph.ok = false;
  graph.failure = "cannot be captured in a CUDA graph";
  judge.graph_answer = graph;
  SassOptOutcome failed = searched(patched);
  final_check(failed, &judge, compiled, {60, 8, 0.0, 1});
  EXPECT_FALSE(failed.kept);
  EXPECT_FALSE(failed.graph_interval.has_value());
  EXPECT_NE(failed.verdict.find("failed in CUDA graphs: cannot be captured"), std::string::npos) << failed.verdict;
}

TEST(SassOptFinalCheck, DoesNotKeepAGainTheRoundsCannotTellFromNoise) {
  const std::vector<uint8_t> compiled{1, 2, 3}, patched{1, 3, 2};
  GivenTimings judge;
  judge.answer.ok = true;
  judge.answer.original_us = 100;
  judge.answer.candidate_us = 99;
  for (int i = 0; i < 60; ++i) {
    judge.answer.original_rounds_us.push_back(100 * (i % 2 ? 1.05 : 0.95));
    judge.answer.candidate_rounds_us.push_back(99 * (i % 4 < 2 ? 1.05 : 0.95));
  }
  SassOptOutcome o = searched(patched);
  final_check(o, &judge, compiled, {60, 8, 0.0, 1});
  EXPECT_EQ(judge.calls, 1);  // nothing to re-time in graphs
  ASSERT_TRUE(o.interval.has_value());
  EXPECT_FALSE(o.graph_interval.has_value());
  EXPECT_LE(o.interval->low, 0) << o.interval->to_string();
  EXPECT_FALSE(o.kept);
  EXPECT_EQ(o.gain, 0);
  EXPECT_EQ(o.time_after_us, o.time_before_us);
  EXPECT_EQ(o.rejected_after_us, 99);
  EXPECT_EQ(o.moves, 0);
  EXPECT_NE(o.verdict.find("does not exclude zero"), std::string::npos) << o.verdict;
  // The row still carries the interval that was measured, and no changes.
  const SassOptCsvRow row = csv_row(o, kSm80Design, {{2048, 2048, 2048}, Layout::kTN}, sass::ActionSpace::kMoves);
  EXPECT_TRUE(row.ci_low.has_value());
  EXPECT_TRUE(row.changes.empty());
}

TEST(SassOptFinalCheck, AScheduleThatFailsTheFinalBitwiseCheckIsNotKept) {
  GivenTimings judge;
  judge.answer.ok = false;
  judge.answer.failure = "buffer 'c' differs";
  SassOptOutcome o = searched({1, 3, 2});
  // The compiled schedule's time then comes from a second call, which fails too: an error, not a made-up time.
  EXPECT_THROW(final_check(o, &judge, {1, 2, 3}, {60, 8, 0.0, 1}), Error);
  EXPECT_FALSE(o.kept);
  EXPECT_FALSE(o.bitwise_equal);
  EXPECT_NE(o.verdict.find("buffer 'c' differs"), std::string::npos) << o.verdict;
}

TEST(SassOptFinalCheck, NothingChangedMeansNothingToJudge) {
  GivenTimings judge;
  judge.answer.ok = true;
  judge.answer.original_us = 50;
  judge.answer.candidate_us = 50;
  judge.answer.original_rounds_us = {50};
  judge.answer.candidate_rounds_us = {50};
  SassOptOutcome o = searched({1, 2, 3});
  final_check(o, &judge, {1, 2, 3}, {60, 8, 0.0, 1});
  EXPECT_EQ(judge.calls, 1);  // the compiled schedule timed once, for the record
  EXPECT_FALSE(o.kept);
  EXPECT_FALSE(o.interval.has_value());
  EXPECT_EQ(o.time_before_us, 50);
  EXPECT_EQ(o.time_after_us, 50);
  EXPECT_NE(o.verdict.find("no action paid"), std::string::npos);
}

TEST(SassOptFinalCheck, TheSyntheticModelKeepsWhatIsFasterInIt) {
  SassOptOutcome o = searched({1, 3, 2});
  final_check(o, nullptr, {1, 2, 3}, {60, 8, 0.0, 1});
  EXPECT_TRUE(o.kept);
  EXPECT_NEAR(o.gain, 10.0 / 9.0 - 1.0, 1e-12);
  EXPECT_FALSE(o.interval.has_value());
  SassOptOutcome floor = searched({1, 3, 2});
  final_check(floor, nullptr, {1, 2, 3}, {60, 8, 0.5, 1});
  EXPECT_FALSE(floor.kept);
}

}  // namespace
}  // namespace rlgemm::measure
