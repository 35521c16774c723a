#include "sass/game.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <regex>

#include "rlgemm/error.h"

namespace rlgemm::sass {

Schedule::Schedule(const KernelCode& code) : code_(&code) {
  pairs_ = latency_pairs(code);
  pairs_by_instruction_.resize(code.size());
  for (size_t i = 0; i < pairs_.size(); ++i) {
    pairs_by_instruction_[pairs_[i].producer].push_back(int(i));
    pairs_by_instruction_[pairs_[i].consumer].push_back(int(i));
  }
  movable_rank_.assign(code.size(), -1);
  for (size_t r = 0; r < code.movable().size(); ++r) movable_rank_[code.movable()[r]] = int(r);
  covered_ = wait_coverage(code);
  spacing_ = issue_spacing(code);
  reset();
}

void Schedule::reset() {
  order_.resize(code_->size());
  std::iota(order_.begin(), order_.end(), 0);
  slot_of_ = order_;
}

Move Schedule::action_move(size_t action) const {
  return {code_->movable().at(action / 2), action % 2 == 0 ? -1 : +1};
}

size_t Schedule::move_action(const Move& m) const {
  const int rank = movable_rank_.at(m.instruction);
  if (rank < 0) fail("instruction " + std::to_string(m.instruction) + " is not movable");
  return size_t(rank) * 2 + (m.direction < 0 ? 0 : 1);
}

std::string Schedule::why_illegal(const Move& m) const {
  const auto& code = *code_;
  if (m.instruction < 0 || size_t(m.instruction) >= code.size()) return "no such instruction";
  if (m.direction != -1 && m.direction != 1) return "a move is one slot up or down";
  const Instruction& x = code.at(m.instruction);
  // Only the memory instructions of the game move on their own (LDG, STG, LDS, STS, LDSM, STSM, LDGSTS).
  if (!x.movable) return "not a movable memory instruction";
  const int s = slot_of_[m.instruction];
  const int t = s + m.direction;
  if (t < 0 || size_t(t) >= code.size()) return "at the edge of the code";
  // Basic blocks are fixed ranges of slots: a move never crosses a label or follows a branch.
  if (code.block_of()[s] != code.block_of()[t]) return "crosses a basic-block boundary";
  const int other = order_[t];
  const Instruction& y = code.at(other);
  // Banned neighbours: barriers, fences, waits (DEPBAR, WARPGROUP.*, SYNCS), control flow and anything
  // with a PC-relative operand, unknown opcodes, and instructions pinned by attributes rlgemm does not read.
  if (y.fence) return "banned neighbour (" + y.fence_reason + "): " + y.dis.text();
  // Register dependence with the neighbour: RAW, WAR or WAW on R, UR, P or UP (wide operands expanded,
  // guard predicates count as uses, a guarded write also reads its destination).
  if (register_conflict(x, y)) return "register dependence with " + y.dis.text();
  // Memory order: two accesses that may touch the same space (global, shared, local) with a write among them
  // keep their order; rlgemm does not prove addresses disjoint.
  if (memory_conflict(x, y)) return "memory order with " + y.dis.text();
  // Scoreboards: the neighbour waits on a scoreboard this one sets or the reverse (the wait would no longer
  // cover its producer, or would cover the wrong one), or both set the same scoreboard (DEPBAR.LE counts
  // completions in issue order).
  if (scoreboard_conflict(x, y)) return "scoreboard conflict with " + y.dis.text();
  // Wait coverage: a wait protects every later instruction that touches the registers of the scoreboard's
  // pending producers, not only the waiter. Neither may pass the other when the later one relies on the
  // earlier one's wait (e.g. an address register rewritten while an LDGSTS still has to read it, with the
  // wait for its read scoreboard on the LDSM in between).
  {
    const int earlier = m.direction > 0 ? m.instruction : other, later = m.direction > 0 ? other : m.instruction;
    const auto& cov = covered_[earlier];
    if (std::binary_search(cov.begin(), cov.end(), later))
      return "wait coverage: " + code.at(later).dis.text() + " relies on the scoreboard wait of " +
             code.at(earlier).dis.text();
  }
  // Operand reuse caches a source for the next instruction: moving an instruction into or out of a reuse
  // pair would leave the flag pointing at a different instruction.
  const int upper = std::min(s, t);
  if (x.control.reuse || y.control.reuse) return "operand-reuse flags on the pair";
  if (upper > 0 && code.at(order_[upper - 1]).control.reuse) return "operand reuse of the previous instruction";
  // Producer-latency window: a consumer that relies on a fixed latency (no scoreboard) must stay at least
  // the producer's latency away, counted in stall cycles, or as far as the compiled schedule had it.
  auto slot_after = [&](int id) { return id == m.instruction ? t : id == other ? s : slot_of_[id]; };
  auto id_at = [&](int slot) { return slot == s ? other : slot == t ? m.instruction : order_[slot]; };
  for (int id : {m.instruction, other}) {
    for (int pi : pairs_by_instruction_[id]) {
      const auto& p = pairs_[pi];
      int cycles = 0;
      for (int slot = slot_after(p.producer); slot < slot_after(p.consumer); ++slot)
        cycles += std::max(1, code.at(id_at(slot)).control.stall);
      if (cycles < p.required)
        return "latency window: " + code.at(p.consumer).dis.text() + " would come " + std::to_string(cycles) +
               " cycles after its producer, needs " + std::to_string(p.required);
    }
  }
  // Memory issue spacing: two load/store-pipe requests stay kMemoryIssueCycles apart, as ptxas keeps them.
  const std::string spacing = issue_spacing_violation(code, spacing_, id_at, std::min(s, t), std::max(s, t));
  if (!spacing.empty()) return "memory issue spacing: " + spacing;
  return "";
}

std::vector<uint8_t> Schedule::legal_mask() const {
  std::vector<uint8_t> mask(action_count(), 0);
  for (size_t a = 0; a < mask.size(); ++a) mask[a] = legal(action_move(a)) ? 1 : 0;
  return mask;
}

std::vector<Move> Schedule::legal_moves() const {
  std::vector<Move> moves;
  for (size_t a = 0; a < action_count(); ++a)
    if (legal(action_move(a))) moves.push_back(action_move(a));
  return moves;
}

void Schedule::apply(const Move& m) {
  const std::string why = why_illegal(m);
  if (!why.empty()) fail("illegal move of instruction " + std::to_string(m.instruction) + ": " + why);
  const int s = slot_of_[m.instruction], t = s + m.direction;
  const int other = order_[t];
  std::swap(order_[s], order_[t]);
  slot_of_[m.instruction] = t;
  slot_of_[other] = s;
}

// ---- Synthetic evaluator ----------------------------------------------------------------------------

namespace {

int variable_latency(const Instruction& ins) {
  const std::string b = ins.base();
  if (b == "LDG" || b == "LD" || b == "LDGSTS" || b == "LDL") return 400;
  if (b == "LDS" || b == "LDSM" || b == "ATOMS") return 30;
  return 20;
}

// Cycles a memory pipe stays busy with one request.
int pipe_cycles(const Instruction& ins) {
  const std::string& op = ins.dis.opcode;
  const bool wide = op.find(".128") != std::string::npos || op.find(".4") != std::string::npos;
  return wide ? 8 : 4;
}

}  // namespace

double SyntheticEvaluator::cycles(const Schedule& schedule) const {
  const auto& code = schedule.code();
  const auto& order = schedule.order();
  const size_t n = code.size();
  // Loop depth per slot from backward branches (slots of branches and targets never move).
  std::vector<int> depth(n, 0);
  static const std::regex hex(R"(0x[0-9a-fA-F]+)");
  for (size_t i = 0; i < n; ++i) {
    const auto& ins = code.at(i);
    if (ins.base() != "BRA") continue;
    std::smatch m;
    if (!std::regex_search(ins.dis.operands, m, hex)) continue;
    const size_t target = std::stoull(m[0], nullptr, 16) / kInstructionBytes;
    if (target <= i)
      for (size_t s = target; s <= i; ++s) ++depth[s];
  }
  std::array<double, 6> sb_ready{};
  std::array<double, 3> pipe_free{};  // global, shared, other
  double t = 0.0, weighted = 0.0;
  for (size_t s = 0; s < n; ++s) {
    const Instruction& ins = code.at(order[s]);
    const double start = t;
    for (int b = 0; b < 6; ++b)
      if (ins.control.wait_mask >> b & 1) t = std::max(t, sb_ready[b]);
    if (ins.mem != MemClass::kNone && ins.mem != MemClass::kConstant) {
      const int pipe = (ins.reads | ins.writes) & kSpaceGlobal ? 0 : (ins.reads | ins.writes) & kSpaceShared ? 1 : 2;
      t = std::max(t, pipe_free[pipe]);
      pipe_free[pipe] = t + pipe_cycles(ins);
    }
    if (ins.control.write_sb < 6) sb_ready[ins.control.write_sb] = std::max(sb_ready[ins.control.write_sb], t + variable_latency(ins));
    if (ins.control.read_sb < 6) sb_ready[ins.control.read_sb] = std::max(sb_ready[ins.control.read_sb], t + 10);
    t += std::max(1, ins.control.stall);
    weighted += (t - start) * std::pow(8.0, std::min(depth[s], 3));
  }
  return weighted;
}

Measurement SyntheticEvaluator::evaluate(const Candidate& candidate) {
  Measurement m;
  m.ok = true;
  m.time_us = cycles(candidate.schedule) / 1755.0;  // at a 1755 MHz clock
  return m;
}

// ---- Game ----------------------------------------------------------------------------------------

Game::Game(const KernelCode& code, Evaluator& evaluator, std::function<std::vector<uint8_t>(const std::vector<int>&)> patch)
    : schedule_(code), evaluator_(&evaluator), patch_(std::move(patch)) {}

Measurement Game::measure(const Schedule& s) {
  ++evaluations_;
  Candidate c{s, [this, &s] { return patch_ ? patch_(s.order()) : std::vector<uint8_t>(); }};
  return evaluator_->evaluate(c);
}

void Game::reset() {
  schedule_.reset();
  if (initial_time_ <= 0.0) {
    const Measurement m = measure(schedule_);
    // Not fatal: the kernel itself cannot be judged (e.g. a reduction whose output is not reproducible bit
    // for bit), which is a property of the input, and other kernels can still be optimized.
    if (!m.ok)
      throw Error(m.fatal ? ErrorKind::kRuntime : ErrorKind::kInvalidInput,
                  "the compiled schedule itself fails evaluation: " + m.failure);
    initial_time_ = m.time_us;
  }
  current_time_ = initial_time_;
}

StepResult Game::step(const Move& move) {
  schedule_.apply(move);
  StepResult r;
  r.measurement = measure(schedule_);
  if (!r.measurement.ok) {
    schedule_.apply({move.instruction, -move.direction});  // back to the last schedule that worked
    r.reward = -1.0;
    r.done = true;
    return r;
  }
  // perf = 1/time: reward = (perf_now - perf_prev) / perf_initial
  r.reward = (1.0 / r.measurement.time_us - 1.0 / current_time_) * initial_time_;
  current_time_ = r.measurement.time_us;
  return r;
}

}  // namespace rlgemm::sass
