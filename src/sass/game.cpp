#include "sass/game.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <regex>

#include "rlgemm/error.h"

namespace rlgemm::sass {

const char* to_string(ActionKind k) {
  switch (k) {
    case ActionKind::kMove: return "move";
    case ActionKind::kStall: return "stall";
    case ActionKind::kYield: return "yield";
    case ActionKind::kReuse: return "reuse";
  }
  return "?";
}

const char* to_string(ActionSpace a) {
  switch (a) {
    case ActionSpace::kMoves: return "moves";
    case ActionSpace::kControl: return "control";
    case ActionSpace::kBoth: return "both";
  }
  return "?";
}

ActionSpace parse_action_space(const std::string& text) {
  if (text == "moves") return ActionSpace::kMoves;
  if (text == "control") return ActionSpace::kControl;
  if (text == "both") return ActionSpace::kBoth;
  fail("unknown action space '" + text + "': expected moves, control or both");
}

Move inverse(const Move& m) {
  Move r = m;
  if (m.kind == ActionKind::kMove || m.kind == ActionKind::kStall) r.direction = -m.direction;
  return r;
}

std::string to_string(const Move& m) {
  const std::string id = std::to_string(m.instruction);
  switch (m.kind) {
    case ActionKind::kMove: return "move " + id + (m.direction < 0 ? " up" : " down");
    case ActionKind::kStall: return "stall " + id + (m.direction < 0 ? " -1" : " +1");
    case ActionKind::kYield: return "yield " + id;
    case ActionKind::kReuse: return "reuse " + id + " " + char('A' + m.operand);
  }
  return "?";
}

Schedule::Schedule(const KernelCode& code, ActionSpace space) : code_(&code), space_(space) {
  pairs_ = latency_pairs(code);
  exits_ = exit_windows(code);
  entries_ = entry_windows(code);
  pairs_by_instruction_.resize(code.size());
  for (size_t i = 0; i < pairs_.size(); ++i) {
    pairs_by_instruction_[pairs_[i].producer].push_back(int(i));
    pairs_by_instruction_[pairs_[i].consumer].push_back(int(i));
  }
  movable_rank_.assign(code.size(), -1);
  for (size_t r = 0; r < code.movable().size(); ++r) movable_rank_[code.movable()[r]] = int(r);
  if (space == ActionSpace::kMoves) {
    actors_ = code.movable();
  } else {
    actors_.resize(code.size());
    std::iota(actors_.begin(), actors_.end(), 0);
  }
  covered_ = wait_coverage(code);
  spacing_ = issue_spacing(code);
  reset();
}

void Schedule::reset() {
  order_.resize(code_->size());
  std::iota(order_.begin(), order_.end(), 0);
  slot_of_ = order_;
  controls_.clear();
  for (const auto& ins : code_->instructions()) controls_.push_back(ins.control);
}

KernelText Schedule::text() const {
  KernelText t = code_->text();
  for (size_t i = 0; i < t.words.size() && i < controls_.size(); ++i) t.words[i] = encode_control(t.words[i], controls_[i]);
  return t;
}

int Schedule::actions_per_actor() const {
  return space_ == ActionSpace::kMoves ? 2 : space_ == ActionSpace::kControl ? 7 : 9;
}

Move Schedule::action_move(size_t action) const {
  const size_t k = size_t(actions_per_actor());
  const int id = actors_.at(action / k);
  int a = int(action % k);
  if (space_ == ActionSpace::kMoves) return {id, a == 0 ? -1 : +1};
  if (space_ == ActionSpace::kBoth) {
    if (a < 2) return {id, a == 0 ? -1 : +1};
    a -= 2;
  }
  if (a < 2) return {id, a == 0 ? -1 : +1, ActionKind::kStall};
  if (a == 2) return {id, 0, ActionKind::kYield};
  return {id, 0, ActionKind::kReuse, a - 3};
}

size_t Schedule::move_action(const Move& m) const {
  if (m.instruction < 0 || size_t(m.instruction) >= code_->size())
    fail("instruction " + std::to_string(m.instruction) + " does not exist");
  const size_t k = size_t(actions_per_actor());
  if (space_ == ActionSpace::kMoves) {
    if (m.kind != ActionKind::kMove) fail(to_string(m) + " is not in the moves action space");
    const int rank = movable_rank_.at(m.instruction);
    if (rank < 0) fail("instruction " + std::to_string(m.instruction) + " is not movable");
    return size_t(rank) * 2 + (m.direction < 0 ? 0 : 1);
  }
  const size_t base = size_t(m.instruction) * k;
  const size_t control = space_ == ActionSpace::kBoth ? 2 : 0;
  switch (m.kind) {
    case ActionKind::kMove:
      if (space_ != ActionSpace::kBoth) fail(to_string(m) + " is not in the control action space");
      return base + (m.direction < 0 ? 0 : 1);
    case ActionKind::kStall: return base + control + (m.direction < 0 ? 0 : 1);
    case ActionKind::kYield: return base + control + 2;
    case ActionKind::kReuse: return base + control + 3 + size_t(std::clamp(m.operand, 0, 3));
  }
  fail("unknown action");
}

std::string Schedule::why_illegal(const Move& m) const {
  const auto& code = *code_;
  if (m.instruction < 0 || size_t(m.instruction) >= code.size()) return "no such instruction";
  const bool control = m.kind != ActionKind::kMove;
  if (control && space_ == ActionSpace::kMoves)
    return std::string("not in the action space: ") + to_string(m.kind) + " changes need --actions control or both";
  if (!control && space_ == ActionSpace::kControl) return "not in the action space: moves need --actions moves or both";
  switch (m.kind) {
    case ActionKind::kMove: return why_illegal_move(m);
    case ActionKind::kStall: return why_illegal_stall(m);
    case ActionKind::kYield: {
      // Yield hints where the warp scheduler may switch; a barrier, wait or branch keeps the compiled hint,
      // which the synchronization it implements may rely on.
      const Instruction& x = code.at(m.instruction);
      if (x.fence) return "yield change on a barrier (" + x.fence_reason + "): " + x.dis.text();
      ControlFields changed = controls_[m.instruction];
      changed.yield = !changed.yield;
      if (!encodable(changed)) return "not encodable: a yield bit needs a stall of 1 to 11";
      return "";
    }
    case ActionKind::kReuse: return why_illegal_reuse(m);
  }
  return "unknown action";
}

std::string Schedule::why_illegal_stall(const Move& m) const {
  const auto& code = *code_;
  if (m.direction != -1 && m.direction != 1) return "a stall changes by one cycle";
  const Instruction& x = code.at(m.instruction);
  const ControlFields& c = controls_[m.instruction];
  const int now = c.stall + m.direction;
  if (now < 1 || now > 15) return "stall out of range: " + std::to_string(now) + " (1 to 15)";
  if (c.yield && now > 11) return "not encodable: a yield bit needs a stall of 1 to 11";
  if (m.direction > 0) return "";  // waiting longer keeps every dependence
  // Barriers, waits and branches keep at least their compiled stall: what they synchronize with or where
  // control goes is outside the windows rlgemm derives.
  if (x.fence && now < x.control.stall)
    return "stall decrease on a barrier (" + x.fence_reason + "): " + x.dis.text();
  const int s = slot_of_[m.instruction];
  const int less = std::max(1, c.stall) - std::max(1, now);
  // A scoreboard takes effect a cycle after its setter issues: the next waiter must not come sooner.
  if (c.sets_mask() && std::max(1, now) < std::min(std::max(1, x.control.stall), kScoreboardSetupCycles))
    return "scoreboard setup: " + x.dis.text() + " sets a scoreboard and needs a stall of " +
           std::to_string(kScoreboardSetupCycles);
  // Fixed-latency dependences (no scoreboard covers them) whose window spans this slot.
  for (const auto& p : pairs_) {
    const int from = slot_of_[p.producer], to = slot_of_[p.consumer];
    if (from > s || to <= s) continue;
    int d = 0;
    for (int slot = from; slot < to; ++slot) d += cycles(slot);
    if (d - less < p.required)
      return "latency window: " + code.at(p.consumer).dis.text() + " would come " + std::to_string(d - less) +
             " cycles after its producer " + code.at(p.producer).dis.text() + " (fixed latency, no scoreboard), needs " +
             std::to_string(p.required);
  }
  const size_t k = size_t(code.block_of()[s]);
  for (const auto& e : exits_) {
    const int from = slot_of_[e.producer];
    if (from > s || code.block_of()[from] != int(k)) continue;
    int d = 0;
    for (int slot = from; slot < spacing_.block_end[k]; ++slot) d += cycles(slot);
    if (d - less < e.required)
      return "latency window: " + code.at(e.producer).dis.text() + " would leave " + std::to_string(d - less) +
             " cycles before its block's end (fixed latency, consumers may follow), needs " + std::to_string(e.required);
  }
  // And the rest of such a window at the head of the next block, before the reader there.
  for (const auto& e : entries_) {
    const int to = slot_of_[e.consumer];
    if (to <= s || code.block_of()[to] != int(k)) continue;
    int d = 0;
    for (int slot = spacing_.block_begin[k]; slot < to; ++slot) d += cycles(slot);
    if (d - less < e.required)
      return "latency window: " + code.at(e.consumer).dis.text() + " would come " + std::to_string(d - less) +
             " cycles after its block's start, where its producer " + code.at(e.producer).dis.text() +
             " in a block before needs " + std::to_string(e.required);
  }
  std::vector<ControlFields> changed = controls_;
  changed[m.instruction].stall = now;
  const std::string spacing = issue_spacing_violation(code, spacing_, [&](int slot) { return order_[slot]; }, s, s, &changed);
  if (!spacing.empty()) return "memory issue spacing: " + spacing;
  return "";
}

std::string Schedule::why_illegal_reuse(const Move& m) const {
  const auto& code = *code_;
  if (m.operand < 0 || m.operand > 3) return "no such operand slot (reuse flags A to D)";
  const Instruction& x = code.at(m.instruction);
  if (controls_[m.instruction].reuse >> m.operand & 1) return "";  // clearing a flag only stops caching
  // The reuse cache keeps the operand read in slot k for the next instruction's slot k: setting the flag
  // is correct only where the next instruction of the block reads the same register there.
  const int s = slot_of_[m.instruction];
  // The compiled flag back on its compiled pair (the undo of clearing it): ptxas's own choice.
  if ((x.control.reuse >> m.operand & 1) && size_t(s + 1) < code.size() && order_[s + 1] == m.instruction + 1) return "";
  if (size_t(s + 1) >= code.size() || code.block_of()[s + 1] != code.block_of()[s])
    return "reuse flag with no next instruction in the block";
  const Instruction& y = code.at(order_[s + 1]);
  const std::string reg = reuse_operand(x, m.operand);
  const std::string slot(1, char('A' + m.operand));
  if (reg.empty()) return "reuse flag on operand " + slot + " of " + x.dis.text() + ", which is not a register source";
  if (x.base() != y.base() || reuse_operand(y, m.operand) != reg)
    return "reuse flag: the next instruction " + y.dis.text() + " does not read " + reg + " in operand " + slot;
  if (x.defs[size_t(std::stoi(reg.substr(1)))]) return "reuse flag: " + x.dis.text() + " overwrites " + reg;
  return "";
}

std::string Schedule::why_illegal_move(const Move& m) const {
  const auto& code = *code_;
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
  if (controls_[m.instruction].reuse || controls_[other].reuse) return "operand-reuse flags on the pair";
  if (upper > 0 && controls_[order_[upper - 1]].reuse) return "operand reuse of the previous instruction";
  // Producer-latency window: a consumer that relies on a fixed latency (no scoreboard) must stay at least
  // the producer's latency away, counted in stall cycles, or as far as the compiled schedule had it.
  auto slot_after = [&](int id) { return id == m.instruction ? t : id == other ? s : slot_of_[id]; };
  auto id_at = [&](int slot) { return slot == s ? other : slot == t ? m.instruction : order_[slot]; };
  for (int id : {m.instruction, other}) {
    for (int pi : pairs_by_instruction_[id]) {
      const auto& p = pairs_[pi];
      int cycles = 0;
      for (int slot = slot_after(p.producer); slot < slot_after(p.consumer); ++slot)
        cycles += std::max(1, controls_[id_at(slot)].stall);
      if (cycles < p.required)
        return "latency window: " + code.at(p.consumer).dis.text() + " would come " + std::to_string(cycles) +
               " cycles after its producer, needs " + std::to_string(p.required);
    }
  }
  // The same for results still pending at the block's end, whose consumers may open the next block.
  const size_t k = size_t(code.block_of()[s]);
  for (const auto& e : exits_) {
    if (e.producer != m.instruction && e.producer != other) continue;
    int cycles = 0;
    for (int slot = slot_after(e.producer); slot < spacing_.block_end[k]; ++slot) cycles += std::max(1, controls_[id_at(slot)].stall);
    if (cycles < e.required)
      return "latency window: " + code.at(e.producer).dis.text() + " would leave " + std::to_string(cycles) +
             " cycles before its block's end, needs " + std::to_string(e.required);
  }
  // And for the readers at the block's head of a result pending at the end of a block before.
  for (const auto& e : entries_) {
    if (e.consumer != m.instruction && e.consumer != other) continue;
    int cycles = 0;
    for (int slot = spacing_.block_begin[k]; slot < slot_after(e.consumer); ++slot) cycles += std::max(1, controls_[id_at(slot)].stall);
    if (cycles < e.required)
      return "latency window: " + code.at(e.consumer).dis.text() + " would come " + std::to_string(cycles) +
             " cycles after its block's start, needs " + std::to_string(e.required);
  }
  // Memory issue spacing: two load/store-pipe requests stay kMemoryIssueCycles apart, as ptxas keeps them.
  const std::string spacing = issue_spacing_violation(code, spacing_, id_at, std::min(s, t), std::max(s, t), &controls_);
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
  if (!why.empty()) fail("illegal action (" + to_string(m) + "): " + why);
  if (m.kind != ActionKind::kMove) {
    ControlFields& c = controls_[m.instruction];
    if (m.kind == ActionKind::kStall) c.stall += m.direction;
    else if (m.kind == ActionKind::kYield) c.yield = !c.yield;
    else c.reuse ^= 1 << m.operand;
    return;
  }
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
    const ControlFields& control = schedule.control(order[s]);
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
    t += std::max(1, control.stall);
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

Game::Game(const KernelCode& code, Evaluator& evaluator, PatchFunction patch, ActionSpace space)
    : schedule_(code, space), evaluator_(&evaluator), patch_(std::move(patch)) {}

Measurement Game::measure(const Schedule& s) {
  ++evaluations_;
  Candidate c{s, [this, &s] { return patch_ ? patch_(s) : std::vector<uint8_t>(); }};
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
    schedule_.apply(inverse(move));  // back to the last schedule that worked
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
