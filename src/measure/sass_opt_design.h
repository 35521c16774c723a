// `rlgemm sass-opt --design`: reschedule the SASS of one of rlgemm's own designs for one problem.
//
// The design is compiled for Hopper (or a given cubin of it is taken), the assembly game runs with the
// chosen evaluator, the best schedule is verified (verify_patch, a replay, one more evaluation), and then --
// on the GPU -- the compiled and the rescheduled cubin are re-measured in interleaved rounds, many more than
// the search used, which give the gain a 95% confidence interval (gain_interval.h). Only a schedule that is
// bitwise identical on fresh draws and whose interval lies above zero (and whose gain reaches min_gain) is
// kept: written with --out, stored with --db (optimized_cubins, so that tuned kernels can load it) and
// recorded with its gain in --csv. Otherwise the compiled cubin stays (gain 0, nothing written or stored; the
// CSV row says so, with the interval that was measured).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/gain_interval.h"
#include "measure/sass_opt_record.h"
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
  int confirm = 0;             // fresh measurements that confirm a new best (sass::SearchOptions::confirm)
  int final_batches = 60;      // interleaved rounds (one offline batch each) of the final re-measure
  int final_draws = 8;         // fresh input draws of the final bitwise check
  double min_gain = 0;         // a floor on the re-measured gain, besides its interval lying above zero
  std::string set;             // the CSV's set column; empty: the design's family (sm80, sm90)
  std::string out_path;        // write the kept cubin here
  std::string db_path;         // store it in this tuning database
  std::string csv_path;        // append a row to this CSV
};

struct SassOptDesignReport : SassOptOutcome {
  std::string design;  // canonical
  Problem problem;
  bool stored = false;
};

// Throws Error: kInvalidInput for a design, shape or layout that does not parse or breaks a rule, or options
// that do not fit together; kNoDevice for --evaluator gpu without a usable Hopper GPU; kRuntime for a
// compile failure or a candidate that lost the CUDA context (a fault), kHang for a candidate that hung the GPU.
// After a fault or a hang, --csv first gets the run's row: the compiled cubin kept (gain 0, bitwise equal),
// `changes` "stopped: " and the reason, which names the saved faulting schedule; the process can then run
// nothing more on the GPU, and after a hang it must end without waiting for the device.
SassOptDesignReport run_sass_opt_design(const SassOptDesignOptions& options);

}  // namespace rlgemm::measure
