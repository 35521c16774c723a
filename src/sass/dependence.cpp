#include "sass/dependence.h"

#include <algorithm>
#include <numeric>
#include <regex>

namespace rlgemm::sass {

const char* to_string(DepKind k) {
  switch (k) {
    case DepKind::kRaw: return "RAW";
    case DepKind::kWar: return "WAR";
    case DepKind::kWaw: return "WAW";
    case DepKind::kMemory: return "memory";
    case DepKind::kScoreboard: return "scoreboard";
    case DepKind::kFence: return "fence";
    case DepKind::kWait: return "wait";
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

std::vector<std::vector<int>> wait_coverage(const KernelCode& code) {
  const size_t n = code.size();
  const auto& block = code.block_of();
  std::vector<std::vector<int>> covered(n);
  for (size_t w = 0; w < n; ++w) {
    const int mask = code.at(w).control.wait_mask;
    if (mask == 0) continue;
    size_t end = w + 1;
    while (end < n && block[end] == block[w]) ++end;
    for (int k = 0; k < 6; ++k) {
      if (!(mask >> k & 1)) continue;
      // Pending producers of scoreboard k at w: the setters since the previous wait on k in the block. When
      // the block has none, the producers come from elsewhere (a predecessor, or this block's own tail
      // through a loop's back edge): every other setter of k counts.
      std::vector<int> pending;
      bool closed = false;
      size_t begin = w;
      for (size_t i = w; i-- > 0 && block[i] == block[w];) {
        begin = i;
        const auto& c = code.at(i).control;
        if (c.sets_mask() >> k & 1) pending.push_back(int(i));
        if (c.wait_mask >> k & 1) {  // waits before it sets: what came earlier is covered there
          closed = true;
          break;
        }
      }
      if (!closed)
        for (size_t i = 0; i < n; ++i)
          if ((i < begin || i > w) && (code.at(i).control.sets_mask() >> k & 1)) pending.push_back(int(i));
      // What each producer's scoreboard k guards: its results (write scoreboard) or its sources (read).
      RegSet results, sources;
      for (int p : pending) {
        const Instruction& a = code.at(p);
        if (a.control.write_sb == k) results |= a.defs;
        if (a.control.read_sb == k) sources |= a.uses & ~a.defs;
      }
      for (size_t o = w + 1; o < end; ++o) {
        const Instruction& b = code.at(o);
        if (b.control.wait_mask >> k & 1) continue;  // waits for itself
        if ((results & (b.uses | b.defs)).any() || (sources & b.defs).any()) covered[w].push_back(int(o));
      }
    }
    std::sort(covered[w].begin(), covered[w].end());
    covered[w].erase(std::unique(covered[w].begin(), covered[w].end()), covered[w].end());
  }
  return covered;
}

IssueSpacing issue_spacing(const KernelCode& code) {
  const size_t n = code.size();
  const auto& block = code.block_of();
  IssueSpacing sp;
  sp.compiled_prev.assign(n, -1);
  sp.compiled_gap.assign(n, 0);
  for (size_t b = 0; b < n; ++b) {
    if (b == 0 || block[b] != block[b - 1]) {
      sp.block_begin.push_back(int(b));
      if (b > 0) sp.block_end.push_back(int(b));
    }
  }
  if (n > 0) sp.block_end.push_back(int(n));
  sp.head.assign(sp.block_begin.size(), 0);
  sp.tail.assign(sp.block_begin.size(), 0);
  for (size_t k = 0; k < sp.block_begin.size(); ++k) {
    int prev = -1, cycles = 0;
    for (int i = sp.block_begin[k]; i < sp.block_end[k]; ++i) {
      const Instruction& ins = code.at(i);
      if (ins.memory_pipe) {
        if (prev < 0) sp.head[k] = std::min(cycles, kMemoryIssueCycles);
        sp.compiled_prev[i] = prev;
        sp.compiled_gap[i] = cycles;
        prev = i;
        cycles = 0;
      }
      cycles += std::max(1, ins.control.stall);
    }
    if (prev >= 0) sp.tail[k] = std::min(cycles, kMemoryIssueCycles);
  }
  return sp;
}

int IssueSpacing::required(int earlier, int later) const {
  if (compiled_prev[later] == earlier) return std::min(compiled_gap[later], kMemoryIssueCycles);
  return kMemoryIssueCycles;
}

std::string issue_spacing_violation(const KernelCode& code, const IssueSpacing& spacing,
                                    const std::function<int(int)>& id_at, int first, int last,
                                    const std::vector<ControlFields>* controls) {
  auto stall = [&](int id) { return std::max(1, controls ? (*controls)[id].stall : code.at(id).control.stall); };
  const size_t k = size_t(code.block_of()[first]);
  const int begin = spacing.block_begin[k], end = spacing.block_end[k];
  // A pair affected by a change within [first, last] and closer than kMemoryIssueCycles has both requests
  // within kMemoryIssueCycles slots of it (every slot stalls at least a cycle).
  const int from = std::max(begin, first - kMemoryIssueCycles - 1);
  const int to = std::min(end - 1, last + kMemoryIssueCycles + 1);
  int prev = -1, cycles = 0;
  for (int slot = from; slot <= to; ++slot) {
    const int id = id_at(slot);
    const Instruction& ins = code.at(id);
    if (ins.memory_pipe) {
      if (prev >= 0 && cycles < spacing.required(prev, id))
        return ins.dis.text() + " would issue " + std::to_string(cycles) + " cycles after " + code.at(prev).dis.text() +
               ", needs " + std::to_string(spacing.required(prev, id));
      if (prev < 0 && from == begin && cycles < spacing.head[k])
        return ins.dis.text() + " would issue " + std::to_string(cycles) + " cycles after its block's start, needs " +
               std::to_string(spacing.head[k]);
      prev = id;
      cycles = 0;
    }
    cycles += stall(id);
  }
  if (prev >= 0 && to == end - 1 && cycles < spacing.tail[k])
    return code.at(prev).dis.text() + " would leave " + std::to_string(cycles) + " cycles before its block's end, needs " +
           std::to_string(spacing.tail[k]);
  return "";
}

DepGraph build_dependence_graph(const KernelCode& code, const std::vector<int>& order) {
  DepGraph g;
  const auto& block = code.block_of();
  // Wait coverage: an edge from the waiter to each instruction relying on its wait, while it comes later.
  std::vector<int> slot_of(order.size());
  for (size_t s = 0; s < order.size(); ++s) slot_of[order[s]] = int(s);
  const auto covered = wait_coverage(code);
  for (size_t w = 0; w < covered.size(); ++w)
    for (int o : covered[w])
      if (slot_of[w] < slot_of[o]) g.insert({int(w), o, DepKind::kWait});
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

namespace {

// The blocks control may enter from block `k` (slots [begin, end)): the next one (taken as a successor even
// after an unconditional branch: it only adds windows) and the targets of its control-flow instructions.
std::vector<int> successor_blocks(const KernelCode& code, size_t begin, size_t end) {
  static const std::regex hex(R"(0x[0-9a-fA-F]+)");
  const auto& block = code.block_of();
  std::vector<int> next;
  if (end < code.size()) next.push_back(block[end]);
  for (size_t i = begin; i < end; ++i) {
    const auto& ins = code.at(i);
    if (!ins.dis.control_flow) continue;
    for (std::sregex_iterator it(ins.dis.operands.begin(), ins.dis.operands.end(), hex), e; it != e; ++it) {
      const uint64_t target = std::stoull((*it)[0], nullptr, 16);
      if (target % kInstructionBytes == 0 && target / kInstructionBytes < code.size())
        next.push_back(block[target / kInstructionBytes]);
    }
  }
  std::sort(next.begin(), next.end());
  next.erase(std::unique(next.begin(), next.end()), next.end());
  return next;
}

// Whether `b` waits until `producer` has completed, results written and sources read: an HGMMA's
// accumulators are complete after "WARPGROUP.DEPBAR.LE gsb0, 0x0" (wgmma.wait_group 0, which PTX requires
// before the accumulators are accessed; ptxas reads them only after such a wait), however far it is.
bool waits_for(const Instruction& producer, const Instruction& b) {
  if (producer.base() != "HGMMA" || b.dis.opcode.rfind("WARPGROUP.DEPBAR", 0) != 0) return false;
  const auto ops = split_operands(b.dis.operands);
  return ops.size() == 2 && ops[1] == "0x0";
}

// The fixed-latency windows of the compiled code: each producer's first reader (or next writer, for a late
// reader's sources) in its block, the producers still pending when their block ends (consumer -1), and the
// readers at the head of a successor block that the block-end window leaves short (entry windows).
void latency_windows(const KernelCode& code, std::vector<LatencyPair>* pairs, std::vector<LatencyPair>* exits,
                     std::vector<LatencyPair>* entries = nullptr) {
  const size_t n = code.size();
  const auto& block = code.block_of();
  std::vector<size_t> block_begin;
  for (size_t i = 0; i < n; ++i)
    if (i == 0 || block[i] != block[i - 1]) block_begin.push_back(i);
  // Each block's successors, found once (entry windows only).
  std::vector<std::vector<int>> successors;
  if (entries)
    for (size_t k = 0; k < block_begin.size(); ++k)
      successors.push_back(successor_blocks(code, block_begin[k], k + 1 < block_begin.size() ? block_begin[k + 1] : n));
  for (size_t p = 0; p < n; ++p) {
    const Instruction& a = code.at(p);
    const bool late_reader = a.mem != MemClass::kNone && a.control.read_sb == kNoScoreboard && a.uses.any();
    if (!a.fixed_latency && !late_reader) continue;
    RegSet pending_defs = a.fixed_latency ? a.defs : RegSet();  // until written again
    RegSet unread = pending_defs;                                  // not read yet either
    RegSet pending_uses = late_reader ? a.uses : RegSet();
    // Predicate results not yet read as a guard (nor overwritten): a guard read needs more than a.latency
    // (kGuardPredicateLatency).
    RegSet unguarded;
    for (int k = kPredBase; k < kRegSlots; ++k) unguarded[size_t(k)] = pending_defs[size_t(k)];
    int had = 0;           // stall cycles from p to c
    int first_read = -1;   // stall cycles from p to its first reader
    size_t c = p + 1;
    for (; c < n && block[c] == block[p]; ++c) {
      had += std::max(1, code.at(c - 1).control.stall);
      const Instruction& b = code.at(c);
      if (waits_for(a, b)) pending_defs.reset(), unread.reset(), unguarded.reset(), pending_uses.reset();
      const bool raw = (pending_defs & b.uses).any();
      const bool war = (pending_uses & b.defs).any();
      const bool guard = b.guard >= 0 && pending_defs[size_t(b.guard)];
      if (raw && first_read < 0) first_read = had;
      // Every reader of the result is bound, by as much as the first one had (what ptxas found enough), so that
      // a later reader moved above the first (readers may pass each other) does not come closer. The first
      // writer of a late reader's sources is bound: later writers follow it. A reader of the result as its
      // guard predicate is bound by the guard's latency as well (kGuardPredicateLatency), each by as much as
      // it had itself: an ELECT, a BRA.U.ANY or a BRA that issued 12 cycles after the PLOP3/ISETP/ELECT
      // writing its guard hung or faulted an H100 where every window of a.latency cycles held, and a first
      // guard read closer than that (ptxas reads a VOTEU's uniform predicate as a guard 5 cycles after it)
      // says nothing of the later ones.
      int required = raw ? std::min(first_read, a.latency) : std::min(had, 2);
      if (guard) required = std::max(required, std::min(had, kGuardPredicateLatency));
      if (raw || war) pairs->push_back({int(p), int(c), required});
      unread &= ~(b.uses | b.defs);
      if (guard) unguarded.reset(size_t(b.guard));
      // A guarded write may leave the result in place for the readers after it.
      if (b.dis.predicate.empty()) pending_defs &= ~b.defs, unguarded &= ~b.defs;
      pending_uses &= ~b.defs;
    }
    had += std::max(1, code.at(c - 1).control.stall);
    if (c >= n) continue;  // the kernel's end: nothing follows
    // The next block's first instructions may read the result, a late reader's sources, or a predicate as
    // their guard (a loop's "@P0 BRA" back to its head, a predicate set before a label).
    int required = 0;
    if (unread.any()) required = std::min(had, a.latency);
    if (unguarded.any()) required = std::max(required, std::min(had, kGuardPredicateLatency));
    if (pending_uses.any()) required = std::max(required, std::min(had, 2));
    if (required > 0) exits->push_back({int(p), -1, required});
    // Entry windows. The block-end window keeps `required` cycles before the end, all the compiled code had
    // where that was less than the latency: the rest of the latency lies at the head of the successor,
    // before the reader there, e.g. ELECT (a block of its own) and the "@P2 PLOP3" three instructions into
    // the next block that reads its predicate as a guard. The readers of a pending result in a successor,
    // until the result is written again (or waited for: waits_for), keep min(the first reader's compiled
    // distance from the block's start, the latency not yet covered) cycles from that start (consumer = the
    // reader, counted from its block's first slot): as inside a block, a later reader is bound by as much
    // as the first one had, what ptxas found enough. A reader of a pending predicate as its guard keeps
    // min(its own distance, the guard latency not yet covered), as inside a block. (Each reader's own distance
    // froze whole epilogues: the F2FPs and STGs hundreds of cycles into the block after the main loop, behind
    // its "WARPGROUP.DEPBAR.LE gsb0, 0x0", kept their distance from the loop's last HGMMA, which has no
    // modelled latency.)
    if (!entries || required == 0) continue;
    for (int t : successors[size_t(block[p])]) {
      RegSet results = unread, guards = unguarded;
      int d = 0;                // stall cycles from the successor's first slot to r
      int first_result = -1;    // ... to the first reader of a pending result
      for (size_t r = block_begin[size_t(t)]; r < n && block[r] == t && (results | guards).any(); ++r) {
        const Instruction& b = code.at(r);
        if (waits_for(a, b)) break;
        const bool reads = (results & b.uses).any();
        const bool guarded = b.guard >= 0 && guards[size_t(b.guard)];
        if (reads && first_result < 0) first_result = d;
        int bound = 0;
        if (reads && a.latency > required) bound = std::min(first_result, a.latency - required);
        if (guarded && kGuardPredicateLatency > required)
          bound = std::max(bound, std::min(d, kGuardPredicateLatency - required));
        if (bound > 0) entries->push_back({int(p), int(r), bound});
        if (b.dis.predicate.empty()) results &= ~b.defs, guards &= ~b.defs;
        d += std::max(1, b.control.stall);
      }
    }
  }
}

}  // namespace

std::vector<LatencyPair> latency_pairs(const KernelCode& code) {
  std::vector<LatencyPair> pairs, exits;
  latency_windows(code, &pairs, &exits);
  return pairs;
}

std::vector<LatencyPair> exit_windows(const KernelCode& code) {
  std::vector<LatencyPair> pairs, exits;
  latency_windows(code, &pairs, &exits);
  return exits;
}

std::vector<LatencyPair> entry_windows(const KernelCode& code) {
  std::vector<LatencyPair> pairs, exits, entries;
  latency_windows(code, &pairs, &exits, &entries);
  return entries;
}

std::vector<std::string> check_controls(const KernelCode& code, const std::vector<int>& order,
                                        const std::vector<ControlFields>& controls) {
  std::vector<std::string> problems;
  const size_t n = code.size();
  if (order.size() != n || controls.size() != n) return {"schedule size differs from the kernel's"};
  std::vector<int> slot_of(n);
  for (size_t s = 0; s < n; ++s) slot_of[order[s]] = int(s);
  const auto& block = code.block_of();
  for (size_t i = 0; i < n; ++i) {
    const Instruction& ins = code.at(i);
    const ControlFields& now = controls[i];
    const ControlFields& was = ins.control;
    const std::string name = std::to_string(i) + " (" + ins.dis.text() + ")";
    if (now.write_sb != was.write_sb || now.read_sb != was.read_sb || now.wait_mask != was.wait_mask)
      problems.push_back("scoreboard fields of " + name + " changed");
    if (ins.fence && now.yield != was.yield) problems.push_back("yield bit of barrier " + name + " changed");
    if (ins.fence && now.stall < was.stall) problems.push_back("stall of barrier " + name + " below the compiled one");
    if (now != was && !encodable(now)) problems.push_back("stall and yield of " + name + " not encodable");
    if (was.sets_mask() && std::max(1, now.stall) < std::min(std::max(1, was.stall), kScoreboardSetupCycles))
      problems.push_back("scoreboard setup: stall of " + name + " below " + std::to_string(kScoreboardSetupCycles));
    for (int k = 0; k < 4; ++k) {
      if (!(now.reuse >> k & 1)) continue;
      const int s = slot_of[i];
      const bool has_next = size_t(s + 1) < n && block[s + 1] == block[s];
      const int next = has_next ? order[s + 1] : -1;
      if ((was.reuse >> k & 1) && next == int(i) + 1) continue;  // the compiled flag on its compiled pair
      if (!has_next) {
        problems.push_back("reuse flag " + std::to_string(k) + " of " + name + " has no next instruction");
        continue;
      }
      const Instruction& y = code.at(next);
      const std::string reg = reuse_operand(ins, k);
      if (reg.empty() || reg != reuse_operand(y, k) || ins.base() != y.base() || ins.defs[std::stoi(reg.substr(1))])
        problems.push_back("reuse flag " + std::to_string(k) + " of " + name + " does not cache an operand of " +
                           y.dis.text());
    }
  }
  return problems;
}

std::vector<std::string> check_invariants(const KernelCode& code, const std::vector<int>& order,
                                          const std::vector<ControlFields>* controls) {
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
  const IssueSpacing spacing = issue_spacing(code);
  for (size_t k = 0; k < spacing.block_begin.size(); ++k) {
    if (spacing.block_begin[k] == spacing.block_end[k]) continue;
    const std::string why = issue_spacing_violation(
        code, spacing, [&](int slot) { return order[slot]; }, spacing.block_begin[k], spacing.block_end[k] - 1, controls);
    if (!why.empty()) problems.push_back("memory issue spacing: " + why);
  }
  auto cycles = [&](int from_slot, int to_slot) {
    int c = 0;
    for (int s = from_slot; s < to_slot; ++s)
      c += std::max(1, controls ? (*controls)[order[s]].stall : code.at(order[s]).control.stall);
    return c;
  };
  for (const auto& p : latency_pairs(code)) {
    const int d = cycles(slot_of[p.producer], slot_of[p.consumer]);
    if (d < p.required)
      problems.push_back("latency window: " + std::to_string(p.producer) + "->" + std::to_string(p.consumer) + " only " +
                         std::to_string(d) + " cycles apart, needs " + std::to_string(p.required));
  }
  for (const auto& e : exit_windows(code)) {
    const int d = cycles(slot_of[e.producer], spacing.block_end[size_t(block[e.producer])]);
    if (d < e.required)
      problems.push_back("latency window: " + std::to_string(e.producer) + " only " + std::to_string(d) +
                         " cycles before its block's end, needs " + std::to_string(e.required));
  }
  for (const auto& e : entry_windows(code)) {
    const int d = cycles(spacing.block_begin[size_t(block[e.consumer])], slot_of[e.consumer]);
    if (d < e.required)
      problems.push_back("latency window: " + std::to_string(e.consumer) + " only " + std::to_string(d) +
                         " cycles after its block's start, needs " + std::to_string(e.required) + " (producer " +
                         std::to_string(e.producer) + " in a block before)");
  }
  return problems;
}

}  // namespace rlgemm::sass
