// `rlgemm sass-opt --cubin FILE --kernel NAME [--launch SPEC --evaluator gpu]`: the SASS game on a kernel
// rlgemm did not write.
//
// Every input is checked on the CPU before any GPU work: the cubin is an sm_90 image (its ELF header says so),
// the kernel is one of its functions, the launch SPEC parses and its parameters are the kernel's, one for one
// and of the same sizes (the cubin's EIATTR_KPARAM_INFO records). With --evaluator gpu the original and
// every candidate run in an isolated worker (foreign_evaluator.h): a schedule that faults costs that worker,
// not the run. The best schedule then gets the same final check as a design's (sass_opt_record.h): bitwise on
// fresh draws, interleaved rounds, kept only when its gain's interval lies above zero.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "measure/sass_opt_record.h"
#include "search/measurer.h"

namespace rlgemm::measure {

struct SassOptForeignOptions {
  std::string cubin_path;
  std::string kernel;
  std::string launch_path;     // the launch SPEC (required with --evaluator gpu)
  std::string evaluator = "synthetic";
  std::string agent = "ppo";
  sass::ActionSpace actions = sass::ActionSpace::kMoves;
  int steps = 2000;
  uint64_t seed = 1;
  int confirm = 0;             // fresh measurements that confirm a new best (sass::SearchOptions::confirm)
  int search_draws = 3;        // input draws per candidate during the search
  int final_batches = 60;      // interleaved rounds of the final re-measure
  int final_draws = 8;         // input draws of the final bitwise check
  double min_gain = 0;
  std::string set;             // the CSV's set column; empty: the SPEC's, else "foreign"
  std::string out_path;
  std::string csv_path;
  // Starts the worker that serves the "sass-foreign" backend (start_foreign_worker); needed with gpu.
  std::function<search::MeasurerPtr()> start_worker;
};

struct SassOptForeignReport : SassOptOutcome {
  std::string name;  // the CSV's kernel column: the SPEC's name, else the kernel's
  Problem problem;   // the SPEC's problem, or shape 0,0,0 when it names none
  int faults = 0;    // candidates that crashed or hung their worker
};

// Checks every input on the CPU (Error(kInvalidInput) naming the rule) and says how the run's CSV row will name
// the kernel: name, set and problem as SassOptForeignReport has them.
struct ForeignRunName {
  std::string name;
  std::string set;
  Problem problem;
};
ForeignRunName check_sass_opt_foreign(const SassOptForeignOptions& options);

// Throws Error(kInvalidInput) for any input that breaks a rule (before GPU work), kNoDevice without a usable
// Hopper GPU in the worker, kRuntime when the original does not run with the SPEC.
SassOptForeignReport run_sass_opt_foreign(const SassOptForeignOptions& options);

}  // namespace rlgemm::measure
