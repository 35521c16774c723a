// The assembly game: the state is a schedule of one kernel (order[slot] = original instruction index) and the
// control fields of each instruction. An action moves one memory instruction one slot up or down, swapping
// it with its neighbour, or (action spaces "control" and "both") changes one instruction's stall count by a
// cycle, flips its yield bit or flips one operand-reuse flag. The mask of legal actions encodes every rule
// that keeps the kernel correct (Schedule::why_illegal in game.cpp, the one place the agents, the
// optimizers and the tests ask).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sass/dependence.h"
#include "sass/isa.h"

namespace rlgemm::sass {

enum class ActionKind { kMove, kStall, kYield, kReuse };
const char* to_string(ActionKind k);

// Which actions the game offers: moves of memory instructions (the compiled control fields stay), control-
// field changes only (the order stays), or both.
enum class ActionSpace { kMoves, kControl, kBoth };
const char* to_string(ActionSpace a);
ActionSpace parse_action_space(const std::string& text);  // "moves", "control", "both"; Error otherwise

// One action of the game (named Move for the memory-instruction moves it started with).
struct Move {
  int instruction = 0;  // original index of the instruction the action changes
  int direction = 0;    // kMove: -1 one slot up (earlier), +1 down; kStall: -1 or +1 cycle; else unused
  ActionKind kind = ActionKind::kMove;
  int operand = 0;      // kReuse: the source-operand slot (0-3) whose reuse flag flips
  friend bool operator==(const Move&, const Move&) = default;
};
// The action that undoes `m` (a flip undoes itself).
Move inverse(const Move& m);
std::string to_string(const Move& m);

class Schedule {
 public:
  explicit Schedule(const KernelCode& code, ActionSpace space = ActionSpace::kMoves);
  const KernelCode& code() const { return *code_; }
  ActionSpace space() const { return space_; }
  const std::vector<int>& order() const { return order_; }
  const std::vector<int>& slot_of() const { return slot_of_; }
  int slot(int instruction) const { return slot_of_[instruction]; }
  // The current control fields of each instruction (original index); the compiled ones until changed.
  const ControlFields& control(int instruction) const { return controls_[instruction]; }
  const std::vector<ControlFields>& controls() const { return controls_; }
  // The kernel's words with the current control fields (original order), for Cubin::write.
  KernelText text() const;

  // Action space: actions_per_actor() actions per actor, actor by actor. Moves: the movable instructions,
  // 2 each (up, down). Control: every instruction, 7 each (stall -1, stall +1, yield, reuse A-D). Both:
  // every instruction, 9 each (up, down, then the 7 control actions; up and down are never legal on an
  // instruction that is not movable).
  const std::vector<int>& actors() const { return actors_; }
  int actions_per_actor() const;
  size_t action_count() const { return actors_.size() * size_t(actions_per_actor()); }
  Move action_move(size_t action) const;
  size_t move_action(const Move& m) const;

  // Empty when legal; otherwise the rule it breaks.
  std::string why_illegal(const Move& m) const;
  bool legal(const Move& m) const { return why_illegal(m).empty(); }
  std::vector<uint8_t> legal_mask() const;  // per action
  std::vector<Move> legal_moves() const;
  void apply(const Move& m);  // throws Error if illegal
  void reset();

 private:
  std::string why_illegal_move(const Move& m) const;
  std::string why_illegal_stall(const Move& m) const;
  std::string why_illegal_reuse(const Move& m) const;
  int cycles(int slot) const { return std::max(1, controls_[order_[slot]].stall); }

  const KernelCode* code_;
  ActionSpace space_ = ActionSpace::kMoves;
  std::vector<int> actors_;
  std::vector<ControlFields> controls_;
  std::vector<LatencyPair> exits_;  // exit_windows(): fixed-latency results still pending at their block's end
  std::vector<LatencyPair> entries_;  // entry_windows(): their readers at the head of a following block
  std::vector<int> order_;
  std::vector<int> slot_of_;
  std::vector<LatencyPair> pairs_;
  std::vector<std::vector<int>> pairs_by_instruction_;
  std::vector<int> movable_rank_;  // original index -> position in movable(), or -1
  std::vector<std::vector<int>> covered_;  // wait_coverage(): what relies on each instruction's wait
  IssueSpacing spacing_;
};

// ---- Reward --------------------------------------------------------------------------------------

// What an evaluator is asked to judge: a schedule and, on demand, the patched cubin bytes.
struct Candidate {
  const Schedule& schedule;
  std::function<std::vector<uint8_t>()> cubin;
};

struct Measurement {
  bool ok = false;        // launched and produced output bitwise identical to the original's
  double time_us = 0.0;   // measured kernel time (the harness's offline method on the GPU)
  std::string failure;    // why not ok
  bool fatal = false;     // the evaluator cannot judge anything more (e.g. the CUDA context is lost)
};

// Judges schedules. The GPU evaluator loads the patched cubin without compiling, checks its output against
// the original's on fresh random inputs over several draws and times it; the synthetic evaluator models it.
class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual Measurement evaluate(const Candidate& candidate) = 0;
  virtual std::string name() const = 0;
};

// A deterministic latency model of one warp issuing the schedule in order, for tests and CPU runs:
// stall counts set the issue rate, wait masks block until the scoreboards' producers finish
// (global 400 cycles, shared/ldmatrix 30, other variable-latency ops 20), and each memory pipe accepts one
// request every few cycles. Blocks inside loops (backward branches) are weighted by 8 per nesting level.
class SyntheticEvaluator : public Evaluator {
 public:
  Measurement evaluate(const Candidate& candidate) override;
  std::string name() const override { return "synthetic"; }
  double cycles(const Schedule& schedule) const;
};

// ---- Episodes ------------------------------------------------------------------------------------

struct StepResult {
  double reward = 0.0;
  bool done = false;
  Measurement measurement;
};

// One game with rewards as in CuAsmRL: reward = (perf_now - perf_prev) / perf_initial, perf = 1 / time;
// a failed evaluation gives -1 and ends the episode (the schedule is rolled back to the last good one).
using PatchFunction = std::function<std::vector<uint8_t>(const Schedule&)>;

class Game {
 public:
  Game(const KernelCode& code, Evaluator& evaluator, PatchFunction patch, ActionSpace space = ActionSpace::kMoves);
  void reset();  // back to the compiled schedule; measures it once (the first time)
  StepResult step(const Move& move);
  const Schedule& schedule() const { return schedule_; }
  double initial_time_us() const { return initial_time_; }
  double current_time_us() const { return current_time_; }
  Measurement measure(const Schedule& s);
  int evaluations() const { return evaluations_; }

 private:
  Schedule schedule_;
  Evaluator* evaluator_;
  PatchFunction patch_;
  double initial_time_ = 0.0;
  double current_time_ = 0.0;
  int evaluations_ = 0;
};

}  // namespace rlgemm::sass
