// The dependence graph of a schedule: every ordered pair of instructions of one basic block whose order
// matters, named by original instruction index. A legal reordering leaves it unchanged; check_invariants()
// is the test of that.
#pragma once

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "sass/isa.h"

namespace rlgemm::sass {

enum class DepKind { kRaw, kWar, kWaw, kMemory, kScoreboard, kFence };
const char* to_string(DepKind k);

struct DepEdge {
  int from = 0;  // original index of the earlier instruction
  int to = 0;    // original index of the later one
  DepKind kind = DepKind::kRaw;
  friend auto operator<=>(const DepEdge&, const DepEdge&) = default;
};

using DepGraph = std::set<DepEdge>;

// order[slot] = original index. Edges join instructions of the same block:
//   register RAW / WAR / WAW (R, UR, P, UP, wide operands expanded), memory order between accesses that may
//   touch the same space with at least one write, scoreboard order (setter vs. waiter, setter vs. setter of
//   the same scoreboard), and fence order (every instruction vs. every fence of its block).
DepGraph build_dependence_graph(const KernelCode& code, const std::vector<int>& order);

// Whether the two instructions' order matters (the pairwise test the graph is built from).
bool memory_conflict(const Instruction& a, const Instruction& b);
bool register_conflict(const Instruction& a, const Instruction& b);
bool scoreboard_conflict(const Instruction& a, const Instruction& b);

// A producer/consumer pair that relies on stall counts rather than a scoreboard: a fixed-latency result
// and its reader, or a memory instruction without a read scoreboard and the next writer of its sources.
struct LatencyPair {
  int producer = 0;
  int consumer = 0;
  int required = 0;  // minimum stall cycles between them: min(latency, what the compiled schedule had)
};
std::vector<LatencyPair> latency_pairs(const KernelCode& code);

// Stall cycles issued from slot of `from` up to (not including) slot of `to`.
int stall_distance(const KernelCode& code, const std::vector<int>& order, const std::vector<int>& slot_of, int from, int to);

// Compares `order` against the compiled order: same dependence graph, same blocks per slot, pinned and
// fence instructions in place, every latency pair still far enough apart. Returns the violations (empty: ok).
std::vector<std::string> check_invariants(const KernelCode& code, const std::vector<int>& order);

}  // namespace rlgemm::sass
