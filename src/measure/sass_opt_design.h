// `rlgemm sass-opt --design`: reschedule the SASS of one of rlgemm's own designs for one problem.
//
// The design is compiled for Hopper (or a given cubin of it is taken), the assembly game runs with the
// chosen evaluator, the best schedule is verified (verify_patch, a replay, one more evaluation), and then --
// on the GPU -- the compiled and the rescheduled cubin are re-measured side by side with many more batches
// than the search used. Only a schedule that is bitwise identical on fresh draws and faster on that
// re-measure by at least min_gain is kept: written with --out, stored with --db (optimized_cubins, so that
// tuned kernels can load it) and recorded with its gain in --csv. Otherwise the compiled cubin stays
// (gain 0, nothing written or stored; the CSV row says so).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rlgemm/problem.h"
#include "sass/optimize.h"

namespace rlgemm::measure {

struct SassOptDesignOptions {
  std::string design;          // text form (parsed, then canonical)
  std::string shape;           // "M,N,K"
  std::string layout = "tn";   // "tn" | "nn"
  std::string cubin_path;      // start from this cubin of the design instead of compiling it
  std::string kernel;          // kernel name inside the cubin; default: the design's generated name
  std::string evaluator = "gpu";
  std::string agent = "ppo";
  sass::ActionSpace actions = sass::ActionSpace::kMoves;
  int steps = 2000;
  uint64_t seed = 1;
  int final_batches = 60;      // offline batches of the final side-by-side re-measure
  int final_draws = 8;         // fresh input draws of the final bitwise check
  double min_gain = 0.005;     // a re-measured gain below this is treated as timing noise
  std::string out_path;        // write the kept cubin here
  std::string db_path;         // store it in this tuning database
  std::string csv_path;        // append a row to this CSV
};

struct SassOptDesignReport {
  sass::SassOptReport game;
  std::string design;          // canonical
  Problem problem;
  std::string kernel;
  std::string evaluator;
  double search_before_us = 0;  // the in-search numbers (noisy; informative only)
  double search_after_us = 0;
  double time_before_us = 0;    // the final re-measure
  double time_after_us = 0;     // of the kept cubin: the rescheduled one, or the compiled one when not kept
  double rejected_after_us = 0; // the best schedule's re-measured time when it was not kept (0 otherwise)
  double gain = 0;              // time_before / time_after - 1 (0 when not kept)
  bool bitwise_equal = false;   // the best schedule passed the final bitwise check
  bool kept = false;
  std::string verdict;          // why kept or not, one line
  int moves = 0;                // moves on the kept path
  bool written = false;
  bool stored = false;
  bool csv_written = false;
};

// Throws Error: kInvalidInput for a design, shape or layout that does not parse or breaks a rule, or options
// that do not fit together; kNoDevice for --evaluator gpu without a usable Hopper GPU; kRuntime for a
// compile failure or a candidate that lost the CUDA context.
SassOptDesignReport run_sass_opt_design(const SassOptDesignOptions& options);

// One row of bench/results/<gpu>/sass-opt.csv.
struct SassOptCsvRow {
  std::string kernel;  // the design's text form
  Problem problem;
  double time_before_us = 0;
  double time_after_us = 0;
  double gain = 0;
  bool bitwise_equal = false;
  int moves = 0;
};
inline constexpr const char* kSassOptCsvHeader =
    "kernel,M,N,K,layout,time_before_us,time_after_us,gain,bitwise_equal,moves";
std::string format_sass_opt_csv_row(const SassOptCsvRow& row);
// Appends the row, writing the header first when the file is new or empty. Creates missing parent folders.
// Throws Error(kInvalidInput) when an existing file has another header (it is not a sass-opt CSV).
void append_sass_opt_csv(const std::string& path, const SassOptCsvRow& row);

}  // namespace rlgemm::measure
