#include "bench/results.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/implementation.h"
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

TEST(Results, HeaderStartsWithTheTenFixedColumns) {
  EXPECT_EQ(std::string(kCsvHeader).rfind("M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_lt_auto,correct,", 0), 0u);
}

TEST(Results, RowsRoundTripThroughCsv) {
  const auto path = std::filesystem::temp_directory_path() / "rlgemm_results_test.csv";
  {
    std::ofstream out(path);
    out << kCsvHeader << '\n';
    write_csv_row(out, make_row({4096, 4096, 4096}, "cublas_tn", 200.0, 0.95));
    write_csv_row(out, make_row({1, 72, 24}, "lt_heuristic", NAN, NAN, false));
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
  EXPECT_EQ(line.rfind("4096,4096,4096,tn,cublas_tn,offline,200.000,687.19,0.9500,1,", 0), 0u) << line;
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
  std::ofstream(path) << kCsvHeader << "\n64,64,64,tn,x,offline,1,1,1,1\n64,64,zz,tn,x,offline,1,1,1,1\n";
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
  EXPECT_EQ(g.all.count, 8);
  EXPECT_EQ(g.incorrect, 1);
  EXPECT_NEAR(g.all.arith_mean, (0.5 + 2 + 1 + 1 + 1 + 4 + 0.25 + 1.5) / 8, 1e-12);
  EXPECT_NEAR(g.by_bucket[0].geo_mean, 1.0, 1e-12);  // 0.5*2*1*1*1*4*0.25 = 1
  EXPECT_EQ(g.by_bucket[2].count, 1);
  ASSERT_EQ(g.worst.size(), 5u);
  EXPECT_DOUBLE_EQ(g.worst[0].speedup, 0.25);
  EXPECT_DOUBLE_EQ(g.worst[1].speedup, 0.5);
  std::ostringstream out;
  print_summary(out, groups);
  EXPECT_NE(out.str().find("MNK>=2^36"), std::string::npos);
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
