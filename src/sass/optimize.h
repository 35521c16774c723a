// sass-opt: load a Hopper cubin, play the assembly game on one kernel, verify the best schedule and write
// the patched cubin only when every check passed.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sass/agent.h"
#include "sass/cubin.h"
#include "rlgemm/problem.h"
#include "sass/game.h"

namespace rlgemm::sass {

// Checks a patched cubin against the original: the schedule keeps every invariant (check_invariants), the
// patched image parses, its code is the permuted words, nvdisasm reads every slot as the instruction that
// moved there (so the multiset of instructions is unchanged), and every offset attribute and relocation
// names the same instruction as before. With `controls` (per original index), the words carry those control
// fields, which keep every rule of check_controls, and the disassembly is compared without ".reuse".
// Returns the problems (empty: verified).
std::vector<std::string> verify_patch(const Cubin& original, const KernelCode& code, const std::vector<int>& order,
                                      const std::vector<uint8_t>& patched,
                                      const std::vector<ControlFields>* controls = nullptr);

// What the GPU evaluator needs to run a kernel of the cubin: the design it was compiled from (canonical text)
// and the problem (shape and layout) to launch it on. The cubin's kernel `kernel` is the original schedule.
struct GpuEvaluationTarget {
  const Cubin& cubin;
  std::string kernel;
  std::string design;
  Problem problem;
};

// Builds the evaluator the GPU path uses. Installed by the measure stage (measure/sass_evaluator.h), which
// links the CUDA side; empty otherwise, and then "gpu" is refused with a clear message.
using GpuEvaluatorFactory = std::function<std::unique_ptr<Evaluator>(const GpuEvaluationTarget& target)>;
void set_gpu_evaluator_factory(GpuEvaluatorFactory factory);
// "synthetic" or "gpu"; "gpu" needs `target` (nullptr: refused, naming what is missing).
std::unique_ptr<Evaluator> make_evaluator(const std::string& kind, const GpuEvaluationTarget* target);

struct SassOptOptions {
  std::string cubin_path;
  std::string kernel;
  std::string out_path;         // empty: nothing written
  std::string evaluator = "synthetic";
  std::string agent = "ppo";
  ActionSpace actions = ActionSpace::kMoves;
  int steps = 2000;
  uint64_t seed = 1;
  int confirm = 0;  // SearchOptions::confirm
};

// What a schedule changed against the compiled one: instructions now in another slot, and instructions whose
// stall count, yield bit or operand-reuse flags differ from the compiled ones.
struct ScheduleChanges {
  int displaced = 0;
  int stall = 0;
  int yield = 0;
  int reuse = 0;
  std::string to_string() const;  // "displaced=4 stall=2 yield=0 reuse=1"
  friend bool operator==(const ScheduleChanges&, const ScheduleChanges&) = default;
};
// `order` and `controls` as the search reports its best schedule (order[slot] = original index; controls per
// original index, or empty when the action space left them alone).
ScheduleChanges schedule_changes(const KernelText& compiled, const std::vector<int>& order,
                                 const std::vector<ControlFields>& controls);

struct SassOptReport {
  SearchResult search;
  std::vector<std::string> notes;     // pinned instructions, stale address maps
  std::vector<std::string> problems;  // verification failures (then nothing was written)
  bool written = false;
  size_t instructions = 0;
  size_t movable = 0;
  std::vector<uint8_t> patched;       // the best schedule's cubin, when it verified (else empty)
  ScheduleChanges changes;            // of the best schedule
};

// Plays the game on kernel `kernel` of `cubin` with `agent` ("ppo", "anneal", "greedy") for `steps`
// evaluations (a new best confirmed by `confirm` more: SearchOptions::confirm), verifies the best schedule (verify_patch, a replay of its moves) and evaluates it once more:
// it must still run and give identical output. Writes nothing.
SassOptReport optimize_kernel(const Cubin& cubin, const std::string& kernel, Evaluator& evaluator,
                              const std::string& agent, int steps, uint64_t seed,
                              ActionSpace actions = ActionSpace::kMoves, int confirm = 0);

// The --cubin path of `rlgemm sass-opt`: optimize_kernel, then the cubin written to out_path when it verified.
SassOptReport run_sass_opt(const SassOptOptions& options);

}  // namespace rlgemm::sass
