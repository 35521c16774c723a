// Result rows of the harness, their CSV form and the summary printed at the end of a run.
#pragma once

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "rlgemm/problem.h"

namespace rlgemm::bench {

struct Row {
  Shape shape;
  Layout layout = Layout::kTN;
  std::string impl;
  Mode mode = Mode::kOffline;
  double time_us = 0;     // NaN when not timed (failed the gate)
  double speedup = 0;     // lt_auto time / this time, NaN when either is missing
  bool correct = false;
  Timing timing;
  std::string detail;     // algorithm chosen, or why the gate failed (no commas)

  double tflops() const { return shape.flops() / (time_us * 1e-6) / 1e12; }
};

// The first ten columns are fixed: M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_lt_auto,correct.
extern const char* const kCsvHeader;
void write_csv_row(std::ostream& out, const Row& row);
// Reads rows written by write_csv_row (header required); throws Error naming the line on malformed input.
std::vector<Row> read_csv(const std::string& path);

enum class Bucket { kSmall, kMedium, kLarge };  // MNK < 2^30, 2^30 <= MNK < 2^36, MNK >= 2^36
Bucket bucket_of(const Shape& shape);
const char* bucket_name(Bucket bucket);

struct Stats {
  int count = 0;
  double arith_mean = 0;
  double geo_mean = 0;
};
Stats speedup_stats(const std::vector<double>& speedups);

struct SummaryGroup {
  Mode mode;
  Layout layout;
  std::string impl;
  Stats all;
  Stats by_bucket[3];
  int incorrect = 0;
  std::vector<Row> worst;  // up to 5 lowest speedups
};

// rlgemm design rows are named by the design's text form, which always contains '/'.
bool is_design_row(const Row& row);
// For each (shape, layout, mode), the rows of rlgemm designs reduced to the fastest correct one, named
// `name`, with the design in its detail column; other rows pass through. A problem where no design passed
// keeps one row with correct = 0 saying so.
std::vector<Row> best_of_designs(const std::vector<Row>& rows, const std::string& name = "rlgemm_best");

// Groups correct rows with a speedup by (mode, layout, implementation), in first-seen order.
std::vector<SummaryGroup> summarize(const std::vector<Row>& rows);
void print_summary(std::ostream& out, const std::vector<SummaryGroup>& groups);
// The summary as recorded in a run's JSON.
nlohmann::json summary_json(const std::vector<SummaryGroup>& groups);

}  // namespace rlgemm::bench
