// Result rows of the harness, their CSV form and the summary printed at the end of a run.
#pragma once

#include <cmath>
#include <cstdint>
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
  DType dtype = DType::kF16;  // files written before the dtype column read as fp16
  std::string impl;
  Mode mode = Mode::kOffline;
  double time_us = 0;     // NaN when not timed (failed the gate)
  double speedup = 0;     // lt_auto time / this time, NaN when either is missing
  double speedup_vendor = NAN;  // best vendor time (assign_best_vendor) / this time, NaN when either is missing
  // This row against the best vendor row of its problem and mode, round by round (gain_interval of their
  // timing.rounds_us): the gain is the speedup, paired; rounds 0 where the two were not timed in the same
  // rounds (torch, timed in its own process; a row without its rounds).
  GainInterval paired_vendor;
  bool correct = false;
  Timing timing;
  std::string detail;     // algorithm chosen, or why the gate failed (no commas)

  double tflops() const { return shape.flops() / (time_us * 1e-6) / 1e12; }
  Problem problem() const { return Problem{shape, layout, dtype}; }
};

// M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_best_vendor,speedup_vs_lt_auto,correct,time_min_us,
// time_max_us,samples,batch,detail,dtype,paired_vs_best_vendor,paired_low,paired_high,rounds_us: the paired
// speedup and its 95% interval (Row::paired_vendor as 1 + gain), and the per-call time of every round,
// separated by ';'.
extern const char* const kCsvHeader;
void write_csv_row(std::ostream& out, const Row& row);
// Reads rows written by write_csv_row (header required); throws Error naming the line on malformed input.
// Columns are found by their header names, so files written before speedup_vs_best_vendor existed read too:
// for those, the column is worked out from the file's own rows (assign_best_vendor); files without a dtype
// column hold fp16 rows.
std::vector<Row> read_csv(const std::string& path);

// For --resume: the rows of a results file that a run was killed while writing. A last line without its
// newline is a torn write: it is dropped, and with it every row of its problem (shape and layout) that stands
// directly before it, so that the problem is measured again whole. `keep_bytes` is where the kept part of the
// file ends (the file is cut there before appending), `dropped` what was dropped (empty when nothing).
struct ResumableCsv {
  std::vector<Row> rows;
  uintmax_t keep_bytes = 0;
  std::string dropped;
};
ResumableCsv read_csv_for_resume(const std::string& path);

// The vendor calls of one run compared with every subject: for each (shape, layout, dtype, mode), the fastest
// correct row whose implementation is a vendor call (is_vendor_implementation: cublas_nn, cublas_tn,
// lt_heuristic, lt_auto, lt_auto_graph) gives every row of that problem and mode its speedup_vendor, the ratio of
// the two medians, and its paired_vendor, round by round, where both rows hold the same number (at least two) of
// rounds and the row is not torch's. Rows of other runs must not be mixed in.
//
// Why both: the median of each row's seven batches is taken apart from the other's. On compute-bound shapes the
// batches of an H200 fall at two speeds (bf16 2048x3072x3072 in graphs: every implementation's between 52.2 and
// 59.0 us), and on which side a row's median lands is chance: in bench/results/h200/bf16-llm.csv the library ran
// the best vendor call's own algorithm there, its fastest batch as fast as the vendor call's, and measured 0.911
// by the medians. The paired figure compares the two batches of each round, and its interval says how sure it is.
void assign_best_vendor(std::vector<Row>& rows);

enum class Bucket { kSmall, kMedium, kLarge };  // MNK < 2^30, 2^30 <= MNK < 2^36, MNK >= 2^36
Bucket bucket_of(const Shape& shape);
const char* bucket_name(Bucket bucket);

struct Stats {
  int count = 0;
  double arith_mean = 0;
  double geo_mean = 0;
};
Stats speedup_stats(const std::vector<double>& speedups);

// Speedups of one group against one reference, over all shapes and per MNK bucket.
struct SpeedupSummary {
  Stats all;
  Stats by_bucket[3];
  std::vector<Row> worst;  // up to 5 lowest speedups
};

// The paired speedups of one group against the best vendor call (Row::paired_vendor), where rows have them.
struct PairedSummary {
  Stats all;                 // of 1 + gain
  int below = 0;             // rows whose paired speedup is below kPairedFloor
  int credibly_below = 0;    // ... whose whole 95% interval is below it
  std::vector<Row> worst;    // up to 5 lowest
};
inline constexpr double kPairedFloor = 0.97;

// Which route served a row of the library (impl "rlgemm", "rlgemm_floor", ...) in its own way of calling, read
// from its detail column (the handle's describe()): kKernel, an rlgemm kernel; kCublasLt, cuBLASLt (the floor or
// a row that routes to it). Where the route was checked at first use, the verdict of the row's mode decides
// ("CUDA graphs: ..." for graph rows, "eager calls: ..." for the others); else the route's own first word.
// kUnknown for other rows (vendor calls, designs) and details that say neither.
enum class ServedBy { kUnknown, kKernel, kCublasLt };
ServedBy served_by(const Row& row);

// Speedups against the best vendor call of the shapes a library's rows served with a kernel and with cuBLASLt.
struct RouteSplit {
  Stats kernel_all, kernel_by_bucket[3];
  Stats cublaslt_all, cublaslt_by_bucket[3];
};

struct SummaryGroup {
  Mode mode;
  Layout layout;
  DType dtype;
  std::string impl;
  SpeedupSummary vendor;   // against the best vendor call of the same run (the headline)
  SpeedupSummary lt_auto;  // against lt_auto
  PairedSummary paired;    // against the best vendor call, round by round
  RouteSplit routes;       // the library's rows by what served them (counts 0 elsewhere)
  int incorrect = 0;
  // Graph rows whose detail says that captured calls took their workspace from graph memory (kGraphMemoryNote):
  // an allocation in the graph at every call, where every capture slot of the route was owned.
  std::vector<Shape> graph_memory;
};

// What a library's graph row adds to its detail where captured calls took their workspace from graph memory
// (dispatch's bench implementation writes it; summarize counts it).
inline constexpr const char* kGraphMemoryNote = "captured calls took their workspace from graph memory";

// rlgemm design rows are named by the design's text form, which always contains '/'.
bool is_design_row(const Row& row);
// For each (shape, layout, dtype, mode), the rows of rlgemm designs reduced to the fastest correct one, named
// `name`, with the design in its detail column; other rows pass through. A problem where no design passed
// keeps one row with correct = 0 saying so.
std::vector<Row> best_of_designs(const std::vector<Row>& rows, const std::string& name = "rlgemm_best");

// Groups correct rows with a speedup by (mode, layout, dtype, implementation), in first-seen order.
std::vector<SummaryGroup> summarize(const std::vector<Row>& rows);

// The fairness control (bench --control): per timing mode, how lt_twin (lt_auto's own algorithm under another
// name) measured against lt_auto in the same run. A fair harness gives a geometric mean of 1.
struct FairnessRow {
  Mode mode;
  bool with_rlgemm = false;  // the run also measured rlgemm (the library or designs)
  int shapes = 0;            // problems with both rows correct
  double geomean_twin_over_auto = NAN;  // geometric mean of lt_twin time / lt_auto time
  double max_abs_dev = NAN;             // max over problems of |ratio - 1|
  // Problems where the two, the same kernel, ran more than kTwinApart apart: how often a run's identical kernels
  // differ by that much, the spread a "best vendor call" over several subjects takes the fastest of.
  int apart = 0;
};
inline constexpr double kTwinApart = 0.03;
std::vector<FairnessRow> fairness(const std::vector<Row>& rows);
extern const char* const kFairnessHeader;  // mode,with_rlgemm,shapes,geomean_twin_over_auto,max_abs_dev,apart_3pct
void write_fairness_row(std::ostream& out, const FairnessRow& row);
void print_summary(std::ostream& out, const std::vector<SummaryGroup>& groups);
// The summary as recorded in a run's JSON.
nlohmann::json summary_json(const std::vector<SummaryGroup>& groups);

}  // namespace rlgemm::bench
