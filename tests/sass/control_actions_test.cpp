// Control fields as actions of the assembly game: random legal stall, yield and reuse changes (alone and
// mixed with moves) keep every dependence of the real sm_90a kernels, re-derived here from the dependence
// graph, and each kind of illegal change is refused with the rule it breaks.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "rlgemm/error.h"

#include "sass/agent.h"
#include "sass/game.h"
#include "sass/optimize.h"
#include "sass_fixture.h"

namespace rlgemm::sass {
namespace {

int distance(const Schedule& s, int from_slot, int to_slot) {
  int c = 0;
  for (int slot = from_slot; slot < to_slot; ++slot) c += std::max(1, s.control(s.order()[slot]).stall);
  return c;
}

// Every register dependence of the compiled program, honoured by schedule `s`: a producer with a write
// scoreboard keeps its scoreboard fields (the waits are unchanged), a fixed-latency producer's readers stay
// its latency away in stall cycles (as bounded by its closest compiled reader: ptxas knows the exact
// latency), and a result still pending at its block's end leaves as many cycles before the end.
std::vector<std::string> uncovered_dependences(const KernelCode& code, const Schedule& s) {
  std::vector<std::string> problems;
  const size_t n = code.size();
  std::vector<int> identity(n);
  for (size_t i = 0; i < n; ++i) identity[i] = int(i);
  const DepGraph graph = build_dependence_graph(code, identity);
  // Whether the edge's reader reads the producer's result: some register of it not written in between (in the
  // compiled order) by an unguarded instruction. The graph has an edge for every pair that touches a register.
  auto reads_result = [&](const auto& e) {
    RegSet live = code.at(e.from).defs & code.at(e.to).uses;
    for (int i = e.from + 1; i < e.to && live.any(); ++i)
      if (code.at(i).dis.predicate.empty()) live &= ~code.at(i).defs;
    return live.any();
  };
  std::vector<int> closest(n, 1 << 30);
  for (const auto& e : graph)
    if (e.kind == DepKind::kRaw && code.at(e.from).fixed_latency && reads_result(e))
      closest[e.from] = std::min(closest[e.from], distance(Schedule(code), e.from, e.to));
  for (const auto& e : graph) {
    if (e.kind != DepKind::kRaw || !reads_result(e)) continue;
    const Instruction& p = code.at(e.from);
    if (p.control.write_sb < 6) {
      if (s.control(e.from).write_sb != p.control.write_sb || s.control(e.to).wait_mask != code.at(e.to).control.wait_mask)
        problems.push_back("scoreboard of " + p.dis.text() + " changed");
      continue;
    }
    if (!p.fixed_latency) continue;
    const int need = std::min(p.latency, closest[e.from]);
    const int d = distance(s, s.slot(e.from), s.slot(e.to));
    if (d < need)
      problems.push_back(p.dis.text() + " -> " + code.at(e.to).dis.text() + ": " + std::to_string(d) + " cycles, needs " +
                         std::to_string(need));
  }
  const auto& block = code.block_of();
  for (size_t p = 0; p < n; ++p) {
    const Instruction& a = code.at(p);
    if (!a.fixed_latency) continue;
    RegSet pending = a.defs;
    size_t end = p + 1;
    for (; end < n && block[end] == block[p]; ++end) pending &= ~(code.at(end).uses | code.at(end).defs);
    if (end >= n || pending.none()) continue;
    const int need = std::min(a.latency, distance(Schedule(code), int(p), int(end)));
    const int d = distance(s, s.slot(int(p)), int(end));
    if (d < need) problems.push_back(a.dis.text() + " leaves " + std::to_string(d) + " cycles before its block's end");
  }
  return problems;
}

TEST(ControlActions, ReuseOperandSlotsMatchTheCompiledFlags) {
  RLGEMM_REQUIRE_NVDISASM();
  int checked = 0;
  for (const char* name : kSassKernels) {
    RLGEMM_SASS_CUBIN(path, name);
    const KernelCode code = KernelCode::load(Cubin::load(path), name);
    for (size_t i = 0; i < code.size(); ++i) {
      const Instruction& ins = code.at(i);
      const auto ops = split_operands(ins.dis.operands);
      for (int k = 0; k < 4; ++k) {
        const std::string reg = reuse_operand(ins, k);
        if (reg.empty()) continue;
        // Slot k is operand k + 1 of the layouts rlgemm changes: the flag is bit k exactly where nvdisasm
        // prints ".reuse" on that operand.
        const bool printed = ops[size_t(k) + 1].find(".reuse") != std::string::npos;
        EXPECT_EQ((ins.control.reuse >> k & 1) != 0, printed) << name << " " << i << " " << ins.dis.text();
        checked += printed;
      }
    }
    // The compiled fields keep every rule of the checker.
    std::vector<int> identity(code.size());
    for (size_t i = 0; i < code.size(); ++i) identity[i] = int(i);
    std::vector<ControlFields> compiled;
    for (const auto& ins : code.instructions()) compiled.push_back(ins.control);
    const auto problems = check_controls(code, identity, compiled);
    EXPECT_TRUE(problems.empty()) << name << ": " << (problems.empty() ? "" : problems.front());
  }
  EXPECT_GT(checked, 0) << "the mma.sync kernel's HMMAs carry reuse flags";
}

TEST(ControlActions, RandomLegalControlPlayKeepsEveryDependence) {
  RLGEMM_REQUIRE_NVDISASM();
  int faster = 0, yields = 0, reuses = 0;
  for (const char* name : kSassKernels) {
    RLGEMM_SASS_CUBIN(path, name);
    const Cubin cubin = Cubin::load(path);
    const KernelCode code = KernelCode::load(cubin, name);
    ASSERT_TRUE(uncovered_dependences(code, Schedule(code)).empty()) << name;
    for (const ActionSpace space : {ActionSpace::kControl, ActionSpace::kBoth}) {
      for (const uint64_t seed : {1u, 2u}) {
        Schedule schedule(code, space);
        std::mt19937_64 rng(seed);
        int applied = 0;
        // Stall decreases are drawn more often than increases, so the play presses against the windows.
        for (int attempt = 0; attempt < 40000 && applied < 1500; ++attempt) {
          Move m = schedule.action_move(rng() % schedule.action_count());
          if (m.kind == ActionKind::kStall && rng() % 4 != 0) m.direction = -1;
          const std::string why = schedule.why_illegal(m);
          if (!why.empty()) {
            EXPECT_THROW(schedule.apply(m), Error);
            continue;
          }
          schedule.apply(m);
          ++applied;
          if (applied % 500 == 0) {
            auto problems = check_invariants(code, schedule.order(), &schedule.controls());
            const auto more = check_controls(code, schedule.order(), schedule.controls());
            problems.insert(problems.end(), more.begin(), more.end());
            const auto uncovered = uncovered_dependences(code, schedule);
            problems.insert(problems.end(), uncovered.begin(), uncovered.end());
            ASSERT_TRUE(problems.empty()) << name << " " << to_string(space) << " seed " << seed << " after " << applied
                                          << " actions: " << problems.front();
          }
        }
        EXPECT_GE(applied, 1000) << name << " " << to_string(space);
        for (size_t i = 0; i < code.size(); ++i) {
          faster += schedule.control(int(i)).stall < code.at(i).control.stall;
          yields += schedule.control(int(i)).yield != code.at(i).control.yield;
          reuses += (schedule.control(int(i)).reuse & ~code.at(i).control.reuse) != 0;
        }
        // The patched cubin carries the new fields and verifies.
        const auto patched = cubin.write(schedule.text(), schedule.order());
        const auto problems = verify_patch(cubin, code, schedule.order(), patched, &schedule.controls());
        EXPECT_TRUE(problems.empty()) << name << ": " << (problems.empty() ? "" : problems.front());
        const KernelText reread = Cubin::parse(patched, "patched").kernel(name);
        for (size_t s = 0; s < code.size(); ++s)
          ASSERT_EQ(decode_control(reread.words[s]), schedule.control(schedule.order()[s])) << name << " slot " << s;
      }
    }
  }
  EXPECT_GT(faster, 0) << "random play should shorten some stalls";
  EXPECT_GT(yields, 0);
  EXPECT_GT(reuses, 0) << "random play should set some new reuse flags";
}

TEST(ControlActions, EachIllegalChangeIsRefusedWithItsRule) {
  RLGEMM_REQUIRE_NVDISASM();
  std::map<std::string, int> refused;
  int untimed_r2ur = 0;
  for (const char* name : kSassKernels) {
    RLGEMM_SASS_CUBIN(path, name);
    const KernelCode code = KernelCode::load(Cubin::load(path), name);
    Schedule schedule(code, ActionSpace::kControl);
    // Control changes are not actions of the moves game.
    EXPECT_NE(Schedule(code).why_illegal({0, -1, ActionKind::kStall}).find("not in the action space"), std::string::npos);
    EXPECT_NE(schedule.why_illegal(Move{code.movable().front(), -1}).find("not in the action space"), std::string::npos);
    const auto mask = schedule.legal_mask();
    ASSERT_EQ(mask.size(), code.size() * 7);
    for (size_t a = 0; a < mask.size(); ++a) {
      const Move m = schedule.action_move(a);
      ASSERT_EQ(schedule.move_action(m), a);
      const std::string why = schedule.why_illegal(m);
      ASSERT_EQ(mask[a] != 0, why.empty());
      const Instruction& x = code.at(m.instruction);
      switch (m.kind) {
        case ActionKind::kYield:
          // Never on a barrier; anywhere else where the result is encodable.
          EXPECT_EQ(why.empty(), !x.fence && (x.control.yield || (x.control.stall >= 1 && x.control.stall <= 11)))
              << x.dis.text() << " " << why;
          if (x.fence) EXPECT_NE(why.find("yield change on a barrier"), std::string::npos) << why;
          break;
        case ActionKind::kStall:
          if (m.direction > 0) EXPECT_EQ(why.empty(), x.control.stall < (x.control.yield ? 11 : 15)) << why;
          if (m.direction < 0 && x.fence && x.control.stall > 1)
            EXPECT_NE(why.find("stall decrease on a barrier"), std::string::npos) << why;
          break;
        case ActionKind::kReuse:
          // Clearing a compiled flag is always allowed, and so is setting it again on its compiled pair.
          if (x.control.reuse >> m.operand & 1) {
            EXPECT_TRUE(why.empty()) << why;
            Schedule cleared = schedule;
            cleared.apply(m);
            EXPECT_EQ(cleared.why_illegal(m), "") << x.dis.text();
          }
          break;
        case ActionKind::kMove: ADD_FAILURE() << "a move in the control action space";
      }
      for (const char* rule : {"latency window", "scoreboard setup", "memory issue spacing", "stall out of range", "not encodable", "stall decrease on a barrier",
                               "yield change on a barrier", "not a register source", "does not read"})
        refused[rule] += why.find(rule) != std::string::npos;
    }
    // A tight fixed-latency window: no stall inside it may shorten.
    std::vector<int> identity(code.size());
    for (size_t i = 0; i < code.size(); ++i) identity[i] = int(i);
    for (const auto& p : latency_pairs(code)) {
      if (stall_distance(code, identity, identity, p.producer, p.consumer) != p.required) continue;
      for (int i = p.producer; i < p.consumer; ++i)
        if (code.at(i).control.stall > 1)
          EXPECT_FALSE(schedule.legal({i, -1, ActionKind::kStall})) << code.at(i).dis.text();
    }
    // R2UR's result and a memory result without a scoreboard have no modelled latency: every reader stays as
    // far as the first one was (ptxas keeps R2UR's readers 8 and more cycles away, where 6 would have been let
    // through).
    std::map<int, int> first;  // producer -> its first window's distance
    for (const auto& p : latency_pairs(code)) {
      const Instruction& a = code.at(p.producer);
      if (!a.fixed_latency || (a.base() != "R2UR" && a.mem == MemClass::kNone)) continue;
      if ((a.defs & code.at(p.consumer).uses).none()) continue;  // a late reader's sources and their next writer
      first.emplace(p.producer, stall_distance(code, identity, identity, p.producer, p.consumer));
      EXPECT_EQ(p.required, first[p.producer]) << a.dis.text() << " -> " << code.at(p.consumer).dis.text();
      if (a.base() == "R2UR") ++untimed_r2ur;
    }
  }
  EXPECT_GT(untimed_r2ur, 0) << "no R2UR window in the test kernels";
  for (const auto& [rule, count] : refused) EXPECT_GT(count, 0) << "no action was refused for: " << rule;
}

TEST(ControlActions, UndoRestoresTheControlFields) {
  RLGEMM_REQUIRE_NVDISASM();
  RLGEMM_SASS_CUBIN(path, "mma_sync_gemm");
  const KernelCode code = KernelCode::load(Cubin::load(path), "mma_sync_gemm");
  Schedule schedule(code, ActionSpace::kBoth);
  const auto before = schedule.controls();
  int undone = 0;
  for (size_t a = 0; a < schedule.action_count() && undone < 200; ++a) {
    const Move m = schedule.action_move(a);
    if (m.kind == ActionKind::kMove || !schedule.legal(m)) continue;
    schedule.apply(m);
    EXPECT_NE(schedule.controls(), before) << to_string(m);
    ASSERT_TRUE(schedule.legal(inverse(m))) << to_string(m);
    schedule.apply(inverse(m));
    ASSERT_EQ(schedule.controls(), before) << to_string(m);
    ++undone;
  }
  EXPECT_EQ(undone, 200);
  EXPECT_THROW(parse_action_space("stalls"), Error);
  EXPECT_EQ(parse_action_space("both"), ActionSpace::kBoth);
}

TEST(ControlActions, AgentsPlayEveryActionSpaceAndTheResultVerifies) {
  RLGEMM_REQUIRE_NVDISASM();
  RLGEMM_SASS_CUBIN(path, "mma_sync_gemm");
  const Cubin cubin = Cubin::load(path);
  SyntheticEvaluator model;
  for (const std::string agent : {"anneal", "greedy", "ppo"}) {
    for (const ActionSpace space : {ActionSpace::kControl, ActionSpace::kBoth}) {
      const SassOptReport r = optimize_kernel(cubin, "mma_sync_gemm", model, agent, 150, 5, space);
      EXPECT_TRUE(r.problems.empty()) << agent << " " << to_string(space) << ": " << r.problems.front();
      EXPECT_LE(r.search.best_time_us, r.search.initial_time_us) << agent;
      if (r.patched.empty()) continue;
      const KernelText text = Cubin::parse(r.patched, "patched").kernel("mma_sync_gemm");
      for (size_t s = 0; s < text.words.size(); ++s)
        ASSERT_EQ(decode_control(text.words[s]), r.search.best_controls[r.search.best_order[s]]) << agent;
    }
  }
  // Shorter stalls are faster in the latency model: a greedy search over control fields alone finds some,
  // and the gain is all control fields (the order is the compiled one). (The stalls of the elect-one loops
  // and of the branches' guard windows, which paid most in the model, are not to be shortened: the few
  // that may are in straight-line code, which a random walk seldom keeps.)
  RLGEMM_SASS_CUBIN(wgmma, "wgmma_tma_gemm");
  const Cubin hopper = Cubin::load(wgmma);
  const SassOptReport r = optimize_kernel(hopper, "wgmma_tma_gemm", model, "greedy", 600, 5, ActionSpace::kControl);
  EXPECT_TRUE(r.problems.empty());
  EXPECT_GT(r.search.gain(), 0.0);
  for (size_t s = 0; s < r.search.best_order.size(); ++s) ASSERT_EQ(r.search.best_order[s], int(s));
  const KernelCode code = KernelCode::load(hopper, "wgmma_tma_gemm");
  int changed = 0;
  for (size_t i = 0; i < code.size(); ++i) changed += !(r.search.best_controls[i] == code.at(i).control);
  EXPECT_GT(changed, 0);
  EXPECT_EQ(r.changes.displaced, 0);
  // Each changed instruction counts once per field it changed.
  EXPECT_GE(r.changes.stall + r.changes.yield + r.changes.reuse, changed) << r.changes.to_string();
  EXPECT_LE(std::max({r.changes.stall, r.changes.yield, r.changes.reuse}), changed) << r.changes.to_string();
}

TEST(ControlActions, ScheduleChangesCountWhatASchedulesChanged) {
  RLGEMM_REQUIRE_NVDISASM();
  RLGEMM_SASS_CUBIN(path, "mma_sync_gemm");
  const KernelCode code = KernelCode::load(Cubin::load(path), "mma_sync_gemm");
  Schedule schedule(code, ActionSpace::kBoth);
  EXPECT_EQ(schedule_changes(code.text(), schedule.order(), schedule.controls()), ScheduleChanges{});
  // One move (two instructions change places), one stall change and one yield flip, each on an instruction of
  // its own.
  std::map<ActionKind, int> applied;
  std::set<int> touched;
  for (size_t a = 0; a < schedule.action_count(); ++a) {
    const Move m = schedule.action_move(a);
    if (m.kind == ActionKind::kReuse || applied[m.kind] > 0 || !schedule.legal(m)) continue;
    const int neighbour = m.kind == ActionKind::kMove ? schedule.order()[size_t(schedule.slot(m.instruction) + m.direction)] : -1;
    if (touched.count(m.instruction) || touched.count(neighbour)) continue;
    schedule.apply(m);
    ++applied[m.kind];
    touched.insert(m.instruction);
    if (neighbour >= 0) touched.insert(neighbour);
  }
  ASSERT_EQ(applied[ActionKind::kMove], 1);
  ASSERT_EQ(applied[ActionKind::kStall], 1);
  ASSERT_EQ(applied[ActionKind::kYield], 1);
  const ScheduleChanges c = schedule_changes(code.text(), schedule.order(), schedule.controls());
  EXPECT_EQ(c.displaced, 2) << c.to_string();
  EXPECT_EQ(c.stall, 1) << c.to_string();
  EXPECT_EQ(c.yield, 1) << c.to_string();
  EXPECT_EQ(c.reuse, 0) << c.to_string();
  EXPECT_EQ(c.to_string(), "displaced=2 stall=1 yield=1 reuse=0");
}

}  // namespace
}  // namespace rlgemm::sass
