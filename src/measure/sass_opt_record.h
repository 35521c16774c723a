// The record of `rlgemm sass-opt` runs, for rlgemm's designs and foreign kernels alike: the final check of the
// best schedule and the decision whether it is kept, and one CSV row per kernel, action space and set
// (bench/results/<gpu>/sass-opt*.csv).
//
// Columns: kernel,M,N,K,layout,time_before_us,time_after_us,gain,bitwise_equal,moves,set,actions,ci_low,ci_high,
// changes,graph_gain,graph_ci_low,graph_ci_high. `kernel` is a design's text form or a foreign kernel's name;
// M,N,K,layout are empty for a foreign kernel whose launch SPEC names no problem; `set` groups rows (sm80, sm90,
// triton, ...); `actions` is the game's action space; ci_low and ci_high bound the re-measured offline gain
// (95%, core/gain_interval.h; empty when there was nothing to re-measure); `changes` says what the best schedule
// changed (sass::ScheduleChanges), or, for a search that a candidate's fault or hang stopped, "stopped: " and
// why (nothing kept); graph_gain and its interval are the same schedule re-timed in CUDA graphs
// (the GPU's own time; empty when the offline re-measure did not keep it, or without a GPU).
// Files of the earlier formats are rewritten in this one when a row is appended to them: first-format rows
// (the columns up to `moves`) are marked as moves-only runs of the set their design's family names; rows of
// either earlier format have no graph columns.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/gain_interval.h"
#include "measure/sass_evaluator.h"
#include "rlgemm/problem.h"
#include "sass/optimize.h"

namespace rlgemm::measure {

struct SassOptCsvRow {
  std::string kernel;  // the design's text form, or the foreign kernel's name
  Problem problem;     // shape 0,0,0: none (empty fields)
  double time_before_us = 0;
  double time_after_us = 0;
  double gain = 0;
  bool bitwise_equal = false;
  int moves = 0;
  std::string set;
  std::string actions = "moves";
  std::optional<double> ci_low;
  std::optional<double> ci_high;
  std::string changes;
  std::optional<double> graph_gain;
  std::optional<double> graph_ci_low;
  std::optional<double> graph_ci_high;
};
inline constexpr const char* kSassOptCsvHeader =
    "kernel,M,N,K,layout,time_before_us,time_after_us,gain,bitwise_equal,moves,set,actions,ci_low,ci_high,changes,"
    "graph_gain,graph_ci_low,graph_ci_high";
// The header of the second format (no graph columns).
inline constexpr const char* kSassOptCsvHeaderV2 =
    "kernel,M,N,K,layout,time_before_us,time_after_us,gain,bitwise_equal,moves,set,actions,ci_low,ci_high,changes";
// The header of the first format, which files written before the set, actions and interval columns carry.
inline constexpr const char* kSassOptCsvHeaderV1 =
    "kernel,M,N,K,layout,time_before_us,time_after_us,gain,bitwise_equal,moves";
std::string format_sass_opt_csv_row(const SassOptCsvRow& row);
// Appends the row, writing the header first when the file is new or empty, and rewriting a first-format file
// in the current format first (atomically). Creates missing parent folders. Throws Error(kInvalidInput) when
// an existing file has another header (it is not a sass-opt CSV).
void append_sass_opt_csv(const std::string& path, const SassOptCsvRow& row);

// The set a design's row belongs to when none is given: its family ("sm80", "sm90"), "" for anything else.
std::string default_sass_opt_set(const std::string& kernel);

// What identifies a run in the CSV: set, kernel, problem and action space.
std::string sass_opt_row_key(const std::string& set, const std::string& kernel, const Problem& problem,
                             const std::string& actions);
// The keys of the rows a sass-opt CSV holds (columns found by name; first-format rows count as moves-only
// runs of their design's family). Empty for a missing file.
std::set<std::string> sass_opt_rows_done(const std::string& path);

// The decision on a re-measured schedule: kept only when the interval of its gain lies above zero and the
// gain reaches `min_gain`.
struct KeepDecision {
  bool kept = false;
  std::string verdict;  // one line: why kept or not
};
KeepDecision decide_keep(const GainInterval& interval, double min_gain);

// What one sass-opt run of a kernel found and decided.
struct SassOptOutcome {
  sass::SassOptReport game;
  std::string kernel;           // the function's name in the cubin
  std::string evaluator;
  std::string set;              // the CSV's set column
  double search_before_us = 0;  // the in-search numbers (noisy; informative only)
  double search_after_us = 0;
  double time_before_us = 0;    // the final re-measure
  double time_after_us = 0;     // of the kept cubin: the rescheduled one, or the compiled one when not kept
  double rejected_after_us = 0; // the best schedule's re-measured time when it was not kept (0 otherwise)
  double gain = 0;              // the rounds' gain (GainInterval::gain; 0 when not kept)
  std::optional<GainInterval> interval;  // of the best schedule's re-measure (GPU, when it ran)
  // The schedule the offline re-measure kept, re-timed against the compiled one in CUDA graphs (GPU only).
  std::optional<GainInterval> graph_interval;
  bool bitwise_equal = false;   // the best schedule passed the final bitwise check
  bool kept = false;            // both re-measures (offline, and in graphs where a GPU judged) held
  std::string verdict;          // why kept or not, one line
  int moves = 0;                // actions on the kept path
  bool written = false;
  bool csv_written = false;
};

// The final check after the search. With `judge` (the GPU): the best schedule, if it differs from the compiled
// one, is checked bitwise on `draws` fresh draws and timed against it in `rounds` interleaved rounds offline;
// its gain and interval decide (decide_keep). A schedule that holds is re-timed the same way in CUDA graphs,
// and is kept only if it holds there too: a kernel of a few microseconds can win back-to-back launches by
// launch effects that a captured decode step never sees. Without a judge (the synthetic model): the model's
// times, kept when faster.
// Fills every field but game, kernel, evaluator, set, written and csv_written. Throws Error(kRuntime) when
// the best schedule lost the CUDA context of this process.
struct FinalCheck {
  int rounds = 60;
  int draws = 8;
  double min_gain = 0;
  uint64_t seed = 1;
};
void final_check(SassOptOutcome& outcome, CubinJudge* judge, const std::vector<uint8_t>& compiled,
                 const FinalCheck& check);

// The outcome's CSV row for `kernel_column` (a design's text, a foreign kernel's name) on `problem`.
SassOptCsvRow csv_row(const SassOptOutcome& outcome, const std::string& kernel_column, const Problem& problem,
                      sass::ActionSpace actions);

}  // namespace rlgemm::measure
