#include "sass/dependence.h"

#include <numeric>

namespace rlgemm::sass {

const char* to_string(DepKind k) {
  switch (k) {
    case DepKind::kRaw: return "RAW";
    case DepKind::kWar: return "WAR";
    case DepKind::kWaw: return "WAW";
    case DepKind::kMemory: return "memory";
    case DepKind::kScoreboard: return "scoreboard";
    case DepKind::kFence: return "fence";
  }
  return "?";
}

bool memory_conflict(const Instruction& a, const Instruction& b) {
  // Requests that rely on completing in issue order keep their order with every other memory request.
  if ((a.in_order || b.in_order) && a.mem != MemClass::kNone && b.mem != MemClass::kNone) return true;
  return (a.writes & (b.reads | b.writes)) != 0 || (b.writes & (a.reads | a.writes)) != 0;
}

bool register_conflict(const Instruction& a, const Instruction& b) {
  return (a.defs & (b.uses | b.defs)).any() || (b.defs & a.uses).any();
}

bool scoreboard_conflict(const Instruction& a, const Instruction& b) {
  const int sa = a.control.sets_mask(), sb = b.control.sets_mask();
  return (sa & b.control.wait_mask) != 0 || (sb & a.control.wait_mask) != 0 || (sa & sb) != 0;
}

DepGraph build_dependence_graph(const KernelCode& code, const std::vector<int>& order) {
  DepGraph g;
  const auto& block = code.block_of();
  size_t begin = 0;
  while (begin < order.size()) {
    size_t end = begin;
    while (end < order.size() && block[end] == block[begin]) ++end;  // blocks are fixed ranges of slots
    for (size_t i = begin; i < end; ++i) {
      const int x = order[i];
      const Instruction& a = code.at(x);
      for (size_t j = i + 1; j < end; ++j) {
        const int y = order[j];
        const Instruction& b = code.at(y);
        if ((a.defs & b.uses).any()) g.insert({x, y, DepKind::kRaw});
        if ((a.uses & b.defs).any()) g.insert({x, y, DepKind::kWar});
        if ((a.defs & b.defs).any()) g.insert({x, y, DepKind::kWaw});
        if (memory_conflict(a, b)) g.insert({x, y, DepKind::kMemory});
        if (scoreboard_conflict(a, b)) g.insert({x, y, DepKind::kScoreboard});
        if (a.fence || b.fence) g.insert({x, y, DepKind::kFence});
      }
    }
    begin = end;
  }
  return g;
}

int stall_distance(const KernelCode& code, const std::vector<int>& order, const std::vector<int>& slot_of, int from, int to) {
  int cycles = 0;
  for (int s = slot_of[from]; s < slot_of[to]; ++s) cycles += std::max(1, code.at(order[s]).control.stall);
  return cycles;
}

std::vector<LatencyPair> latency_pairs(const KernelCode& code) {
  std::vector<LatencyPair> pairs;
  const size_t n = code.size();
  std::vector<int> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  const auto& block = code.block_of();
  for (size_t p = 0; p < n; ++p) {
    const Instruction& a = code.at(p);
    const bool late_reader = a.mem != MemClass::kNone && a.control.read_sb == kNoScoreboard && a.uses.any();
    if (!a.fixed_latency && !late_reader) continue;
    RegSet pending_defs = a.fixed_latency ? a.defs : RegSet();
    RegSet pending_uses = late_reader ? a.uses : RegSet();
    for (size_t c = p + 1; c < n && block[c] == block[p] && (pending_defs.any() || pending_uses.any()); ++c) {
      const Instruction& b = code.at(c);
      const bool raw = (pending_defs & b.uses).any();
      const bool war = (pending_uses & b.defs).any();
      if (raw || war) {
        const int had = stall_distance(code, identity, identity, int(p), int(c));
        const int need = raw ? a.latency : 2;
        pairs.push_back({int(p), int(c), std::min(had, need)});
      }
      // Only the first reader/writer of each register is bound by the window: later ones come later still.
      pending_defs &= ~(b.uses | b.defs);
      pending_uses &= ~b.defs;
    }
  }
  return pairs;
}

std::vector<std::string> check_invariants(const KernelCode& code, const std::vector<int>& order) {
  std::vector<std::string> problems;
  const size_t n = code.size();
  if (order.size() != n) return {"schedule size differs from the kernel's"};
  std::vector<int> slot_of(n, -1);
  for (size_t s = 0; s < n; ++s) {
    if (order[s] < 0 || size_t(order[s]) >= n || slot_of[order[s]] != -1) return {"schedule is not a permutation"};
    slot_of[order[s]] = int(s);
  }
  const auto& block = code.block_of();
  for (size_t i = 0; i < n; ++i) {
    if (block[slot_of[i]] != block[i])
      problems.push_back("instruction " + std::to_string(i) + " left its basic block");
    if (code.at(i).fence && slot_of[i] != int(i))
      problems.push_back("fence/pinned instruction " + std::to_string(i) + " (" + code.at(i).dis.text() + ") moved");
  }
  std::vector<int> identity(n);
  std::iota(identity.begin(), identity.end(), 0);
  const DepGraph before = build_dependence_graph(code, identity);
  const DepGraph after = build_dependence_graph(code, order);
  if (before != after) {
    int shown = 0;
    for (const auto& e : before)
      if (!after.count(e) && shown++ < 5)
        problems.push_back(std::string(to_string(e.kind)) + " edge " + std::to_string(e.from) + "->" + std::to_string(e.to) + " lost");
    for (const auto& e : after)
      if (!before.count(e) && shown++ < 10)
        problems.push_back(std::string(to_string(e.kind)) + " edge " + std::to_string(e.from) + "->" + std::to_string(e.to) + " appeared");
    if (shown == 0) problems.push_back("dependence graph changed");
  }
  for (const auto& p : latency_pairs(code)) {
    const int d = stall_distance(code, order, slot_of, p.producer, p.consumer);
    if (d < p.required)
      problems.push_back("latency window: " + std::to_string(p.producer) + "->" + std::to_string(p.consumer) + " only " +
                         std::to_string(d) + " cycles apart, needs " + std::to_string(p.required));
  }
  return problems;
}

}  // namespace rlgemm::sass
