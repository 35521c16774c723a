// The dependence graph of a schedule: every ordered pair of instructions of one basic block whose order
// matters, named by original instruction index. A legal reordering leaves it unchanged; check_invariants()
// is the test of that.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "sass/isa.h"

namespace rlgemm::sass {

enum class DepKind { kRaw, kWar, kWaw, kMemory, kScoreboard, kFence, kWait };
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
//   the same scoreboard), fence order (every instruction vs. every fence of its block), and wait coverage
//   (a waiter vs. the later instructions that rely on its wait, see wait_coverage()).
DepGraph build_dependence_graph(const KernelCode& code, const std::vector<int>& order);

// Wait coverage. A wait mask protects more than the instruction that carries it: ptxas waits for a
// scoreboard once, on the first instruction that needs it, and every later instruction that touches a
// register of one of the scoreboard's pending producers (the setters since the previous wait on it) relies
// on that same wait. Moving such an instruction above the waiter lets it read a result that has not arrived
// (RAW/WAW on a write scoreboard) or overwrite a source that a memory request has not read yet (WAR on a
// read scoreboard), though it has no register in common with the waiter itself.
// covered[w]: the instructions after w in its block (compiled order) that rely on w's wait, sorted.
std::vector<std::vector<int>> wait_coverage(const KernelCode& code);

// Issue spacing of memory requests. ptxas never issues two load/store-pipe requests (Instruction::
// memory_pipe) fewer than kMemoryIssueCycles apart: every pair of consecutive requests in the compiled
// sm_80/sm_90a kernels rlgemm reads is 4 or more stall cycles apart, back-to-back requests included (they
// get S04 rather than S01). A schedule keeps that spacing, or the compiled one where it was closer.
inline constexpr int kMemoryIssueCycles = 4;
struct IssueSpacing {
  std::vector<int> compiled_prev;  // per instruction: the compiled schedule's previous request in its block, or -1
  std::vector<int> compiled_gap;   // per instruction: cycles from that request
  // Per block: cycles from the block's first slot to its first request and from its last request (own stall
  // included) to the block's end, capped at kMemoryIssueCycles; together they bound the spacing across an
  // edge between blocks, whose slots never change.
  std::vector<int> head, tail;
  std::vector<int> block_begin, block_end;  // slot range [begin, end) of each block
  int required(int earlier, int later) const;
};
IssueSpacing issue_spacing(const KernelCode& code);
// The first spacing violation among requests near slots [first, last] (one block) of a schedule given by
// id_at(slot), or "" when none. Requests further than kMemoryIssueCycles slots away are not looked at:
// a pair that far apart is far enough.
// `controls` (per original index): the stall counts to use; nullptr: the compiled ones.
std::string issue_spacing_violation(const KernelCode& code, const IssueSpacing& spacing,
                                    const std::function<int(int)>& id_at, int first, int last,
                                    const std::vector<ControlFields>* controls = nullptr);

// Whether the two instructions' order matters (the pairwise test the graph is built from).
bool memory_conflict(const Instruction& a, const Instruction& b);
bool register_conflict(const Instruction& a, const Instruction& b);
bool scoreboard_conflict(const Instruction& a, const Instruction& b);

// A producer/consumer pair that relies on stall counts rather than a scoreboard: a fixed-latency result
// and each of its readers in the block (until it is written again), or a memory instruction without a read
// scoreboard and the next writer of its sources.
struct LatencyPair {
  int producer = 0;
  int consumer = 0;
  int required = 0;  // minimum stall cycles between them: min(latency, what the compiled schedule had to the
                     // result's first reader, or to the next writer)
};
std::vector<LatencyPair> latency_pairs(const KernelCode& code);
// The same windows where the consumer lies beyond the producer's basic block: a fixed-latency result (or a
// late reader's source) not yet read or overwritten when its block ends must stay `required` cycles from
// the block's end (consumer = -1), min(latency, what the compiled schedule had), since the next block's
// first instructions may be its consumers.
std::vector<LatencyPair> exit_windows(const KernelCode& code);
// The rest of such a window at the head of each block that may follow (the next block and branch targets):
// where the block-end window is shorter than the latency (ELECT ends its block one cycle after it issues),
// each reader of the pending result in the successor, until the result is written again or waited for (an
// HGMMA's accumulators after "WARPGROUP.DEPBAR.LE gsb0, 0x0"), stays `required` cycles from its block's
// first slot: min(the first such reader's compiled distance from there, the latency not yet covered).
// `producer` names the instruction in the block before, `consumer` the reader.
std::vector<LatencyPair> entry_windows(const KernelCode& code);

// A scoreboard takes effect a cycle after its setter issues: ptxas keeps a setter's stall at 2 or more
// where a waiter might follow. A setter's stall stays at least min(compiled stall, kScoreboardSetupCycles).
inline constexpr int kScoreboardSetupCycles = 2;

// Stall cycles issued from slot of `from` up to (not including) slot of `to`.
int stall_distance(const KernelCode& code, const std::vector<int>& order, const std::vector<int>& slot_of, int from, int to);

// Compares `order` against the compiled order: same dependence graph, same blocks per slot, pinned and
// fence instructions in place, every latency pair, block-end window (exit_windows) and block-start window
// (entry_windows) still far enough apart, memory requests spaced, in the stall counts of `controls` (per original index; nullptr: the
// compiled ones). Returns the violations (empty: ok).
std::vector<std::string> check_invariants(const KernelCode& code, const std::vector<int>& order,
                                          const std::vector<ControlFields>* controls = nullptr);

// The rules for changed control fields (per original index), re-derived from the compiled kernel: the
// scoreboard fields are the compiled ones, a barrier's yield bit is unchanged and its stall no shorter, a
// changed field is
// encodable, every reuse flag is either the compiled one on its compiled pair or caches a register the
// next instruction reads in the same slot, and scoreboard setters keep their setup cycles. The windows and
// spacing in the new stall counts are check_invariants(code, order, &controls)'s part. Empty: ok.
std::vector<std::string> check_controls(const KernelCode& code, const std::vector<int>& order,
                                        const std::vector<ControlFields>& controls);

}  // namespace rlgemm::sass
