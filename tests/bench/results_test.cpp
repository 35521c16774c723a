#include "bench/results.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/implementation.h"
#include "core/gain_interval.h"
#include "rlgemm/error.h"

namespace rlgemm::bench {
namespace {

Row make_row(Shape s, const std::string& impl, double t, double speedup, bool correct = true) {
  Row r;
  r.shape = s;
  r.layout = Layout::kTN;
  r.impl = impl;
  r.mode = Mode::kOffline;
  r.time_us = t;
  r.speedup = speedup;
  r.correct = correct;
  r.timing.time_us = t;
  r.timing.samples = 7;
  r.timing.batch = 3;
  r.detail = "candidate 2, of 8";
  return r;
}

TEST(Results, HeaderLeadsWithBestVendorBesideLtAuto) {
  EXPECT_EQ(std::string(kCsvHeader).rfind(
                "M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_best_vendor,speedup_vs_lt_auto,correct,", 0),
            0u);
}

TEST(Results, RowsRoundTripThroughCsv) {
  const auto path = std::filesystem::temp_directory_path() / "rlgemm_results_test.csv";
  {
    std::ofstream out(path);
    out << kCsvHeader << '\n';
    std::vector<Row> rows{make_row({4096, 4096, 4096}, "cublas_tn", 200.0, 0.95),
                          make_row({1, 72, 24}, "lt_heuristic", NAN, NAN, false)};
    assign_best_vendor(rows);
    for (const Row& r : rows) write_csv_row(out, r);
  }
  auto rows = read_csv(path.string());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].shape, (Shape{4096, 4096, 4096}));
  EXPECT_EQ(rows[0].impl, "cublas_tn");
  EXPECT_NEAR(rows[0].time_us, 200.0, 1e-9);
  EXPECT_NEAR(rows[0].speedup, 0.95, 1e-9);
  EXPECT_EQ(rows[0].detail, "candidate 2; of 8");  // commas never break the columns
  EXPECT_FALSE(rows[1].correct);
  EXPECT_TRUE(std::isnan(rows[1].time_us));
  std::ifstream in(path);
  std::string header, line;
  std::getline(in, header);
  std::getline(in, line);
  EXPECT_EQ(line.rfind("4096,4096,4096,tn,cublas_tn,offline,200.000,687.19,1.0000,0.9500,1,", 0), 0u) << line;
  EXPECT_NEAR(rows[0].speedup_vendor, 1.0, 1e-9);
}

// The dtype column: written last, read by its header name; files without it hold fp16 rows. The best vendor
// of a problem is of its own element type.
TEST(Results, DtypeColumnRoundTripsAndKeysTheBestVendor) {
  const auto path = std::filesystem::temp_directory_path() / "rlgemm_results_dtype.csv";
  {
    std::ofstream out(path);
    out << kCsvHeader << '\n';
    std::vector<Row> rows{make_row({64, 64, 64}, "lt_auto", 10.0, 1.0), make_row({64, 64, 64}, "lt_auto", 20.0, 1.0),
                          make_row({64, 64, 64}, "rlgemm", 16.0, 1.25)};
    rows[1].dtype = rows[2].dtype = DType::kBF16;
    assign_best_vendor(rows);
    EXPECT_NEAR(rows[2].speedup_vendor, 1.25, 1e-12);  // against the bf16 lt_auto, not the faster fp16 one
    for (const Row& r : rows) write_csv_row(out, r);
  }
  const auto rows = read_csv(path.string());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].dtype, DType::kF16);
  EXPECT_EQ(rows[1].dtype, DType::kBF16);
  EXPECT_EQ(rows[2].problem(), (Problem{{64, 64, 64}, Layout::kTN, DType::kBF16}));
  const auto groups = summarize(rows);
  ASSERT_EQ(groups.size(), 3u);  // lt_auto fp16, lt_auto bf16, rlgemm bf16
  EXPECT_EQ(groups[1].dtype, DType::kBF16);
  std::ofstream(path) << "M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_best_vendor,speedup_vs_lt_auto,correct,"
                         "time_min_us,time_max_us,samples,batch,detail,dtype\n"
                         "64,64,64,tn,lt_auto,offline,10.000,0.05,1.0,1.0000,1,9.0,12.0,7,69,,fp8\n";
  EXPECT_THROW(read_csv(path.string()), Error);
}

// Files written before the best-vendor column read by their header, and get the column from their own rows.
TEST(Results, OlderFilesReadAndGainTheBestVendorColumn) {
  const auto path = std::filesystem::temp_directory_path() / "rlgemm_results_old.csv";
  std::ofstream(path) << "M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_lt_auto,correct,time_min_us,time_max_us,"
                         "samples,batch,detail\n"
                         "64,64,64,tn,lt_auto,offline,10.000,0.05,1.0000,1,9.0,12.0,7,69,candidate 2 of 3 timed\n"
                         "64,64,64,tn,lt_heuristic,offline,8.000,0.07,1.2500,1,7.0,9.0,7,80,\n"
                         "64,64,64,tn,rlgemm,offline,4.000,0.13,2.5000,1,3.0,5.0,7,90,tuned sm80/x\n";
  const auto rows = read_csv(path.string());
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].timing.batch, 69);
  EXPECT_EQ(rows[0].detail, "candidate 2 of 3 timed");
  EXPECT_NEAR(rows[0].speedup_vendor, 0.8, 1e-12);  // the heuristic was the fastest vendor call
  EXPECT_NEAR(rows[2].speedup_vendor, 2.0, 1e-12);
  EXPECT_NEAR(rows[2].speedup, 2.5, 1e-12);
}

TEST(Results, BestVendorIsTheFastestCorrectVendorCallPerProblemAndMode) {
  const Shape s{64, 64, 64}, t{128, 64, 64};
  std::vector<Row> rows{make_row(s, "lt_auto", 10, 1.0),       make_row(s, "cublas_tn", 9, 1.1),
                        make_row(s, "lt_heuristic", 5, 2, false),  // wrong: never the yardstick
                        make_row(s, "torch", 4, 2.5),             // calls cuBLAS: not a vendor call of its own
                        make_row(s, "lt_twin", 3, 3.3),           // the control: not a vendor call
                        make_row(s, "rlgemm", 6, 1.6),           make_row(t, "rlgemm", 6, 1.6),
                        make_row(t, "lt_heuristic", 12, 0.9)};
  rows.push_back(make_row(s, "cublas_tn", 4.5, 2.2));
  rows.back().mode = Mode::kServer;  // another mode: its own best
  rows.push_back(make_row(s, "rlgemm", 9, 1.0));
  rows.back().mode = Mode::kServer;
  assign_best_vendor(rows);
  EXPECT_NEAR(rows[0].speedup_vendor, 0.9, 1e-12);
  EXPECT_NEAR(rows[5].speedup_vendor, 1.5, 1e-12);
  EXPECT_NEAR(rows[6].speedup_vendor, 2.0, 1e-12);
  EXPECT_NEAR(rows[9].speedup_vendor, 0.5, 1e-12);
  EXPECT_TRUE(std::isnan(rows[2].speedup_vendor));  // a wrong row has no time worth comparing
}

// The paired speedup: each round's batch of the best vendor row over the row's own, on their logs (the tuner's
// reward, gain_interval). Two rows at two speeds whose medians land on either side measure 0.91 by the medians
// and 0.99 paired, with an interval that says how little seven such rounds tell.
Row with_rounds(Row r, std::vector<double> rounds) {
  r.timing.rounds_us = std::move(rounds);
  r.time_us = r.timing.time_us = median(r.timing.rounds_us);
  return r;
}

TEST(Results, PairedSpeedupComparesEachRoundWithTheBestVendorCall) {
  const Shape s{2048, 3072, 3072};
  // Rounds 3 and 4 caught the library slow and the vendor call fast, round 7 the other way about; in rounds 5
  // and 6 both were slow.
  std::vector<Row> rows{
      with_rounds(make_row(s, "lt_heuristic", 0, 1), {52.3, 52.2, 52.4, 52.4, 57.5, 57.4, 57.6}),
      with_rounds(make_row(s, "lt_auto", 0, 1), {57.2, 57.3, 57.2, 57.4, 57.5, 57.4, 57.6}),
      with_rounds(make_row(s, "rlgemm", 0, 1), {52.3, 52.2, 57.5, 57.4, 57.6, 57.5, 52.4}),
      with_rounds(make_row(s, "torch", 0, 1), {52.3, 52.2, 52.4, 52.4, 52.5, 52.4, 52.6}),  // its own process
      with_rounds(make_row(s, "cublas_tn", 0, 1), {60, 60, 60}),  // another count of rounds: not paired
  };
  assign_best_vendor(rows);
  EXPECT_NEAR(rows[2].speedup_vendor, 52.4 / 57.4, 1e-12);  // the medians: 0.913
  const GainInterval& g = rows[2].paired_vendor;
  EXPECT_EQ(g.rounds, 7);
  EXPECT_NEAR(g.gain, -0.013, 0.002);
  EXPECT_LT(g.low, -0.04);  // the interval is wide: three rounds of seven disagree
  EXPECT_GT(g.high, 0.01);
  EXPECT_NEAR(rows[0].paired_vendor.gain, 0, 1e-12);  // the best vendor call against itself
  EXPECT_LT(rows[1].paired_vendor.gain, -0.04);
  EXPECT_EQ(rows[3].paired_vendor.rounds, 0);
  EXPECT_EQ(rows[4].paired_vendor.rounds, 0);

  // It goes through the CSV with its rounds, and the summary counts the rows below the floor.
  const auto path = std::filesystem::temp_directory_path() / "rlgemm_results_paired.csv";
  {
    std::ofstream out(path);
    out << kCsvHeader << '\n';
    for (const Row& r : rows) write_csv_row(out, r);
  }
  const auto back = read_csv(path.string());
  ASSERT_EQ(back.size(), rows.size());
  EXPECT_EQ(back[2].timing.rounds_us, rows[2].timing.rounds_us);
  EXPECT_NEAR(back[2].paired_vendor.gain, g.gain, 1e-4);
  EXPECT_NEAR(back[2].paired_vendor.low, g.low, 1e-4);
  EXPECT_NEAR(back[2].paired_vendor.high, g.high, 1e-4);
  EXPECT_EQ(back[3].paired_vendor.rounds, 0);
  const auto groups = summarize(back);
  const auto group = [&](const std::string& impl) {
    return *std::find_if(groups.begin(), groups.end(), [&](const SummaryGroup& x) { return x.impl == impl; });
  };
  EXPECT_EQ(group("rlgemm").paired.all.count, 1);
  EXPECT_EQ(group("rlgemm").paired.below, 0);
  EXPECT_EQ(group("lt_auto").paired.below, 1);           // 0.956 by the estimate
  EXPECT_EQ(group("lt_auto").paired.credibly_below, 0);  // its interval reaches above 0.97
  EXPECT_EQ(group("torch").paired.all.count, 0);
  std::ostringstream text;
  print_summary(text, groups);
  EXPECT_NE(text.str().find("Paired with the best vendor call"), std::string::npos) << text.str();
  EXPECT_EQ(summary_json(groups)[2]["paired_vs_best_vendor"]["all"]["count"], 1);

  // A paired figure without its interval is refused.
  std::ofstream(path) << kCsvHeader << "\n64,64,64,tn,x,offline,1,1,1,1,1,1,1,7,1,,fp16,1.02,,,1;1\n";
  EXPECT_THROW(read_csv(path.string()), Error);
}

// lt_auto_graph (lt_auto chosen in CUDA graphs, asked for by name) is a vendor call: where it is the fastest,
// it is the yardstick.
TEST(Results, LtAutoGraphIsAVendorCall) {
  EXPECT_TRUE(is_vendor_implementation(kLtAutoGraphImplementation));
  EXPECT_FALSE(is_vendor_implementation("torch"));
  const Shape s{16, 4096, 4096};
  std::vector<Row> rows{make_row(s, "lt_auto", 10, 1.0), make_row(s, kLtAutoGraphImplementation, 8, 1.25),
                        make_row(s, "rlgemm", 9, 1.1)};
  for (Row& r : rows) r.mode = Mode::kGraph;
  assign_best_vendor(rows);
  EXPECT_NEAR(rows[0].speedup_vendor, 0.8, 1e-12);
  EXPECT_NEAR(rows[1].speedup_vendor, 1.0, 1e-12);
  EXPECT_NEAR(rows[2].speedup_vendor, 8.0 / 9.0, 1e-12);
}

// A run killed while writing leaves a last line without its newline: resume drops it and the rows of its
// problem before it, and says where the file is cut.
TEST(Results, ResumeDropsATornLastLineAndItsProblem) {
  const auto path = std::filesystem::temp_directory_path() / "rlgemm_results_torn.csv";
  std::string whole;
  {
    std::ostringstream out;
    out << kCsvHeader << '\n';
    write_csv_row(out, make_row({64, 64, 64}, "lt_auto", 10, 1.0));
    write_csv_row(out, make_row({64, 64, 64}, "rlgemm", 5, 2.0));
    whole = out.str();
    write_csv_row(out, make_row({128, 64, 64}, "lt_auto", 10, 1.0));
    const std::string torn = out.str() + "128,64,64,tn,rlgemm,offline,5.0";  // no newline: torn
    std::ofstream(path, std::ios::binary) << torn;
  }
  EXPECT_THROW(read_csv(path.string()), Error) << "a plain read refuses the torn row";
  const ResumableCsv kept = read_csv_for_resume(path.string());
  ASSERT_EQ(kept.rows.size(), 2u);
  EXPECT_EQ(kept.rows[1].impl, "rlgemm");
  EXPECT_EQ(kept.keep_bytes, whole.size());
  EXPECT_NE(kept.dropped.find("128,64,64,tn,lt_auto"), std::string::npos) << kept.dropped;
  // A whole file is kept whole.
  std::ofstream(path, std::ios::binary) << whole;
  const ResumableCsv intact = read_csv_for_resume(path.string());
  EXPECT_EQ(intact.rows.size(), 2u);
  EXPECT_TRUE(intact.dropped.empty());
  EXPECT_EQ(intact.keep_bytes, whole.size());
  // A malformed line that is not the last is still an error naming the line.
  std::ofstream(path, std::ios::binary) << kCsvHeader << "\n64,64,zz,tn,x,offline,1,1,1,1,1,1,1,7,1,\n" << whole.substr(whole.find('\n') + 1);
  try {
    read_csv_for_resume(path.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
  }
}

TEST(Results, FairnessComparesTheTwinWithLtAutoPerMode) {
  std::vector<Row> rows;
  const double twin_over_auto[] = {1.02, 0.98, 1.0, 1.05};
  for (int i = 0; i < 4; ++i) {
    const Shape s{64, 64, int64_t(64 * (i + 1))};
    rows.push_back(make_row(s, "lt_auto", 10, 1.0));
    rows.push_back(make_row(s, "lt_twin", 10 * twin_over_auto[i], 1 / twin_over_auto[i]));
  }
  rows.push_back(make_row({64, 64, 1024}, "lt_auto", 10, 1.0));  // no twin row: not counted
  auto f = fairness(rows);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].shapes, 4);
  EXPECT_FALSE(f[0].with_rlgemm);
  EXPECT_NEAR(f[0].geomean_twin_over_auto, std::pow(1.02 * 0.98 * 1.0 * 1.05, 0.25), 1e-12);
  EXPECT_NEAR(f[0].max_abs_dev, 0.05, 1e-12);
  EXPECT_EQ(f[0].apart, 1);  // 1.05 only: 1.02 and 0.98 are within kTwinApart
  rows.push_back(make_row({64, 64, 64}, "rlgemm", 5, 2.0));
  f = fairness(rows);
  EXPECT_TRUE(f[0].with_rlgemm);
  std::ostringstream out;
  write_fairness_row(out, f[0]);
  EXPECT_EQ(out.str().rfind("offline,1,4,", 0), 0u) << out.str();
  EXPECT_EQ(out.str().substr(out.str().rfind(',')), ",1\n") << out.str();
}

TEST(Results, BestOfDesignsKeepsTheFastestCorrectDesignPerProblem) {
  const Shape s{64, 64, 64}, t{128, 64, 64};
  const std::vector<Row> rows{make_row(s, "lt_auto", 10, 1.0),
                              make_row(s, "sm90.ws.coop/a", 5, 2.0),
                              make_row(s, "sm80/b", 4, 2.5, false),  // faster but wrong: never chosen
                              make_row(s, "sm80/c", 8, 1.25),
                              make_row(t, "lt_auto", 10, 1.0),
                              make_row(t, "sm80/b", 20, 0.5, false)};
  const auto best = best_of_designs(rows);
  ASSERT_EQ(best.size(), 4u);
  EXPECT_EQ(best[1].impl, "rlgemm_best");
  EXPECT_EQ(best[1].detail, "sm90.ws.coop/a");
  EXPECT_DOUBLE_EQ(best[1].time_us, 5);
  EXPECT_FALSE(best[3].correct);
  EXPECT_EQ(best[3].detail, "no design passed the gate");
}

TEST(Results, MalformedCsvNamesTheLine) {
  const auto path = std::filesystem::temp_directory_path() / "rlgemm_results_bad.csv";
  std::ofstream(path) << kCsvHeader << "\n64,64,64,tn,x,offline,1,1,1,1,1\n64,64,zz,tn,x,offline,1,1,1,1,1\n";
  try {
    read_csv(path.string());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(":3:"), std::string::npos) << e.what();
  }
  std::ofstream(path) << "a,b,c\n";
  EXPECT_THROW(read_csv(path.string()), Error);
}

TEST(Results, BucketsFollowTheMnkThresholds) {
  EXPECT_EQ(bucket_of({1024, 1024, 512}), Bucket::kSmall);    // 2^29
  EXPECT_EQ(bucket_of({1024, 1024, 1024}), Bucket::kMedium);  // 2^30
  EXPECT_EQ(bucket_of({4096, 4096, 2048}), Bucket::kMedium);  // 2^35
  EXPECT_EQ(bucket_of({4096, 4096, 4096}), Bucket::kLarge);   // 2^36
}

TEST(Results, SummaryMeansBucketsAndWorst) {
  std::vector<Row> rows;
  const double speedups[] = {0.5, 2.0, 1.0, 1.0, 1.0, 4.0, 0.25};
  for (int i = 0; i < 7; ++i) rows.push_back(make_row({64, 64, int64_t(8 * (i + 1))}, "x", 10, speedups[i]));
  rows.push_back(make_row({4096, 4096, 4096}, "x", 10, 1.5));
  rows.push_back(make_row({64, 64, 64}, "x", 10, NAN, false));
  rows.push_back(make_row({64, 64, 64}, "y", 10, 1.0));
  auto groups = summarize(rows);
  ASSERT_EQ(groups.size(), 2u);
  const auto& g = groups[0];
  EXPECT_EQ(g.impl, "x");
  EXPECT_EQ(g.lt_auto.all.count, 8);
  EXPECT_EQ(g.incorrect, 1);
  EXPECT_NEAR(g.lt_auto.all.arith_mean, (0.5 + 2 + 1 + 1 + 1 + 4 + 0.25 + 1.5) / 8, 1e-12);
  EXPECT_NEAR(g.lt_auto.by_bucket[0].geo_mean, 1.0, 1e-12);  // 0.5*2*1*1*1*4*0.25 = 1
  EXPECT_EQ(g.lt_auto.by_bucket[2].count, 1);
  ASSERT_EQ(g.lt_auto.worst.size(), 5u);
  EXPECT_DOUBLE_EQ(g.lt_auto.worst[0].speedup, 0.25);
  EXPECT_DOUBLE_EQ(g.lt_auto.worst[1].speedup, 0.5);
  EXPECT_EQ(g.vendor.all.count, 0) << "no vendor speedup was assigned";
  for (auto& r : rows) r.speedup_vendor = r.speedup / 2;
  groups = summarize(rows);
  EXPECT_EQ(groups[0].vendor.all.count, 8);
  EXPECT_NEAR(groups[0].vendor.all.geo_mean, groups[0].lt_auto.all.geo_mean / 2, 1e-12);
  EXPECT_DOUBLE_EQ(groups[0].vendor.worst[0].speedup_vendor, 0.125);
  std::ostringstream out;
  print_summary(out, groups);
  EXPECT_NE(out.str().find("MNK>=2^36"), std::string::npos);
  EXPECT_LT(out.str().find("best vendor"), out.str().find("vs lt_auto")) << "the headline comes first";
  EXPECT_EQ(out.str().find("by mode"), std::string::npos) << "one mode: no side-by-side table";
}

// Offline and graph rows of one run: the summary puts each implementation's modes side by side.
TEST(Results, ModesSideBySide) {
  std::vector<Row> rows;
  for (Mode mode : {Mode::kOffline, Mode::kGraph})
    for (const auto& [impl, speedup] : {std::pair{"rlgemm", mode == Mode::kOffline ? 1.6 : 0.9}, std::pair{"lt_auto", 1.0}}) {
      Row r = make_row({64, 64, 128}, impl, 10, speedup);
      r.mode = mode;
      r.speedup_vendor = speedup;
      rows.push_back(r);
    }
  std::ostringstream out;
  print_summary(out, summarize(rows));
  const std::string text = out.str();
  const size_t table = text.find("by mode");
  ASSERT_NE(table, std::string::npos) << text;
  const size_t line = text.find("rlgemm", table);
  ASSERT_NE(line, std::string::npos) << text;
  const std::string row = text.substr(line, text.find('\n', line) - line);
  EXPECT_NE(row.find("1.600"), std::string::npos) << row;
  EXPECT_NE(row.find("0.900"), std::string::npos) << row;
  EXPECT_LT(row.find("1.600"), row.find("0.900")) << "offline first, as the modes came";
}

// The library's rows are split by what served them in their own way of calling: a route checked at first use by
// the verdict of its mode ("CUDA graphs: ..." for graph rows, "eager calls: ..." for the others), an unchecked one
// by its first word; other implementations' rows and unreadable details are not counted.
TEST(Results, LibraryRowsSplitByWhatServedThem) {
  const std::string checked =
      "cublaslt floor (timed on first use) (measured on first use: eager calls: cuBLASLt; the kernel sm90.ws.coop/"
      "128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma measured 0.99x cuBLASLt (95% CI 0.99..0.99); CUDA graphs: "
      "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma at 1.05x cuBLASLt (95% CI 1.05..1.05))";
  auto row = [](Shape s, const std::string& impl, Mode mode, double speedup, const std::string& detail) {
    Row r = make_row(s, impl, 10, speedup);
    r.mode = mode;
    r.speedup_vendor = speedup;
    r.detail = detail;
    return r;
  };
  EXPECT_EQ(served_by(row({64, 64, 64}, "rlgemm", Mode::kGraph, 1, checked)), ServedBy::kKernel);
  EXPECT_EQ(served_by(row({64, 64, 64}, "rlgemm", Mode::kOffline, 1, checked)), ServedBy::kCublasLt);
  EXPECT_EQ(served_by(row({64, 64, 64}, "rlgemm", Mode::kServer, 1, checked)), ServedBy::kCublasLt);
  // Where the check found the floor slower than its final, its note follows the verdicts with the same marker, and
  // a floor's own text may hold it too: the check's verdicts still decide (two details of
  // bench/results/h200/zero-shot-v19-fp16, as describe() writes them).
  const std::string kernel_then_note =
      "predicted sm80/16x64x128/w16x16/s4/swz/raster_m.g1/splitk4.parallel/epi_reg (the nearest tuned row's design) "
      "(measured on first use: eager calls: sm80/16x64x128/w16x16/s4/swz/raster_m.g1/splitk4.parallel/epi_reg at "
      "1.04x cuBLASLt (95% CI 1.04..1.04); CUDA graphs: sm80/16x64x128/w16x16/s4/swz/raster_m.g1/splitk4.parallel/"
      "epi_reg at 1.17x cuBLASLt (95% CI 1.17..1.17); on the scratch/the caller's operands: eager 1.04/1.05; graphs "
      "1.19/1.17; CUDA graphs: the floor ran slower against cuBLASLt's first candidate than in its final (0.94x): "
      "0.95x on set 2; the kernels held to the floor as its final found it; against cublaslt floor (timed on first "
      "use in CUDA graphs; on the caller's operands too: candidate 2 of 16; final: candidate 2 at 0.940/0.932/0.940 "
      "of candidate 0's time by operand set; candidate 2 kept) (its kernel launched directly))";
  const std::string floor_then_note =
      "cublaslt floor (timed on first use in CUDA graphs: candidate 8 of 13) (its kernel launched directly) "
      "(measured on first use: eager calls: cuBLASLt; the kernel sm80/16x64x128/w16x16/s6/swz/raster_m.g1/splitk1/"
      "epi_reg measured 0.96x cuBLASLt (95% CI 0.96..0.97); CUDA graphs: cuBLASLt; the kernel sm80/16x64x128/"
      "w16x16/s6/swz/raster_m.g1/splitk1/epi_reg measured 0.97x cuBLASLt (95% CI 0.97..0.97); on the scratch/the "
      "caller's operands: eager 0.96/1.03; graphs 0.97/0.99; eager calls: the floor ran slower against cuBLASLt's "
      "first candidate than in its final (0.95x): 0.98x on set 2; the kernels held to the floor as its final found "
      "it; CUDA graphs: the floor ran slower against cuBLASLt's first candidate than in its final (0.95x): 0.98x on "
      "set 2; the kernels held to the floor as its final found it)";
  for (Mode mode : {Mode::kGraph, Mode::kOffline}) {
    EXPECT_EQ(served_by(row({64, 64, 64}, "rlgemm", mode, 1, kernel_then_note)), ServedBy::kKernel);
    EXPECT_EQ(served_by(row({64, 64, 64}, "rlgemm", mode, 1, floor_then_note)), ServedBy::kCublasLt);
  }
  EXPECT_EQ(served_by(row({64, 64, 64}, "rlgemm_nearest", Mode::kGraph, 1, "tuned sm80/64x64x64/w32x32/s3/swz/"
                                                                           "raster_m.g8/splitk1/epi_reg")),
            ServedBy::kKernel);
  EXPECT_EQ(served_by(row({64, 64, 64}, "rlgemm", Mode::kGraph, 1, "cublaslt floor (timed on first use)")),
            ServedBy::kCublasLt);
  EXPECT_EQ(served_by(row({64, 64, 64}, "lt_auto", Mode::kGraph, 1, "candidate 2 of 8")), ServedBy::kUnknown);
  EXPECT_EQ(served_by(row({64, 64, 64}, "rlgemm", Mode::kGraph, 1, "something else")), ServedBy::kUnknown);

  std::vector<Row> rows = {row({64, 64, 64}, "rlgemm", Mode::kGraph, 1.2, checked),
                           row({64, 64, 128}, "rlgemm", Mode::kGraph, 1.05, checked),
                           row({4096, 4096, 4096}, "rlgemm", Mode::kGraph, 0.99, "cublaslt floor (timed)"),
                           row({64, 64, 64}, "lt_auto", Mode::kGraph, 1.0, "candidate 2 of 8")};
  const auto groups = summarize(rows);
  ASSERT_EQ(groups.size(), 2u);
  const RouteSplit& r = groups[0].routes;
  EXPECT_EQ(r.kernel_all.count, 2);
  EXPECT_NEAR(r.kernel_all.geo_mean, std::sqrt(1.2 * 1.05), 1e-12);
  EXPECT_EQ(r.kernel_by_bucket[0].count, 2);
  EXPECT_EQ(r.cublaslt_all.count, 1);
  EXPECT_EQ(r.cublaslt_by_bucket[2].count, 1);
  EXPECT_EQ(groups[1].routes.kernel_all.count + groups[1].routes.cublaslt_all.count, 0) << "lt_auto is not the library";
  std::ostringstream out;
  print_summary(out, groups);
  const std::string text = out.str();
  const size_t section = text.find("by what served them");
  ASSERT_NE(section, std::string::npos) << text;
  EXPECT_NE(text.find("kernel", section), std::string::npos);
  EXPECT_NE(text.find(" 1.122 (   2)", section), std::string::npos) << text;
  const nlohmann::json j = summary_json(groups);
  EXPECT_EQ(j[0]["served_by"]["cublaslt"]["all"]["count"], 1);
  EXPECT_FALSE(j[1].contains("served_by"));
}

// A library graph row whose captured calls took their workspace from graph memory (the detail's note) timed an
// allocation with every call: summarize lists it per group and the printed summary warns, naming the shapes; an
// offline row with the same words, or a row without them, is not counted.
TEST(Results, GraphRowsOnGraphMemoryAreNamed) {
  auto row = [](Shape s, Mode mode, const std::string& detail) {
    Row r = make_row(s, "rlgemm", 10, 1);
    r.mode = mode;
    r.speedup_vendor = 1;
    r.detail = detail;
    return r;
  };
  const std::string note = std::string("tuned sm80/16x32x64/w16x16/s8/pad/raster_m.g1/splitk4.parallel/epi_reg (273 ") +
                           kGraphMemoryNote + ")";
  const std::vector<Row> rows = {row({1, 256, 1536}, Mode::kGraph, note), row({16, 512, 3584}, Mode::kGraph, "tuned x"),
                                 row({1, 256, 1536}, Mode::kOffline, note)};
  const auto groups = summarize(rows);
  ASSERT_EQ(groups.size(), 2u);
  ASSERT_EQ(groups[0].graph_memory.size(), 1u);
  EXPECT_EQ(groups[0].graph_memory[0].to_string(), "1,256,1536");
  EXPECT_TRUE(groups[1].graph_memory.empty());
  std::ostringstream out;
  print_summary(out, groups);
  const std::string text = out.str();
  const size_t warning = text.find("Warning: 1 tn fp16 rlgemm graph rows");
  ASSERT_NE(warning, std::string::npos) << text;
  const std::string line = text.substr(warning, text.find('\n', warning) - warning);
  EXPECT_NE(line.find("1,256,1536"), std::string::npos) << line;
  EXPECT_EQ(line.find("16,512,3584"), std::string::npos) << line;
}

// lt_auto's detail names the candidate it kept; the tuned table reads the index back from it.
TEST(LtAutoDetail, CandidateIndexReadsBack) {
  EXPECT_EQ(lt_auto_detail(3, 8, 0), "candidate 3 of 8 timed");
  EXPECT_EQ(lt_auto_detail(0, 5, 2), "candidate 0 of 5 timed (2 failed)");
  EXPECT_EQ(lt_auto_candidate(lt_auto_detail(3, 8, 0)), 3);
  EXPECT_EQ(lt_auto_candidate(lt_auto_detail(0, 5, 2)), 0);
  EXPECT_FALSE(lt_auto_candidate("first of 8 heuristic candidates"));
  EXPECT_FALSE(lt_auto_candidate("candidate 9 of 8 timed"));
  EXPECT_FALSE(lt_auto_candidate(""));
}

}  // namespace
}  // namespace rlgemm::bench
