// The assembly game: the state is a schedule of one kernel (order[slot] = original instruction index); an
// action moves one memory instruction one slot up or down, swapping it with its neighbour. The mask of
// legal actions encodes every rule that keeps the kernel correct (see legality() in game.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sass/dependence.h"
#include "sass/isa.h"

namespace rlgemm::sass {

struct Move {
  int instruction = 0;  // original index of the memory instruction that moves
  int direction = 0;    // -1: one slot up (earlier), +1: one slot down (later)
  friend bool operator==(const Move&, const Move&) = default;
};

class Schedule {
 public:
  explicit Schedule(const KernelCode& code);
  const KernelCode& code() const { return *code_; }
  const std::vector<int>& order() const { return order_; }
  const std::vector<int>& slot_of() const { return slot_of_; }
  int slot(int instruction) const { return slot_of_[instruction]; }

  // Action space: 2 actions per movable instruction (up, down), in KernelCode::movable() order.
  size_t action_count() const { return code_->movable().size() * 2; }
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
  const KernelCode* code_;
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
class Game {
 public:
  Game(const KernelCode& code, Evaluator& evaluator, std::function<std::vector<uint8_t>(const std::vector<int>&)> patch);
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
  std::function<std::vector<uint8_t>(const std::vector<int>&)> patch_;
  double initial_time_ = 0.0;
  double current_time_ = 0.0;
  int evaluations_ = 0;
};

}  // namespace rlgemm::sass
