// Which route serves each way of calling a shape, from what its first-use check measured: the gains of the
// shape's kernel candidates over the floor (cuBLASLt with lt_auto's choice), each a paired interval
// (core/gain_interval.h), measured twice -- in graph mode (calls captured in a CUDA graph: the GPU's time alone)
// and offline (back-to-back eager calls: the host's launch cost too). Pure host logic, tested on the CPU.
//
// A kernel serves a way of calling only where the 95% interval of its gain in that way lies above the margin;
// among several, the one of the highest gain. The two ways are decided apart: a kernel that wins only by its
// lighter launch serves eager calls and never a CUDA graph, where the GPU's time is all a call costs.
#pragma once

#include <string>
#include <vector>

#include "core/gain_interval.h"

namespace rlgemm::dispatch {

// How far above 1 the interval of a kernel's gain must lie: at least 1% faster, with 95% confidence.
inline constexpr double kRouteMargin = 0.01;

struct RouteVerdict {
  int eager = -1;  // the candidate that serves eager calls; -1: the floor
  int graph = -1;  // the candidate that serves calls captured in CUDA graphs; -1: the floor
};

// Throws Error(kInvalidInput) when the two lists differ in length.
RouteVerdict decide_routes(const std::vector<GainInterval>& eager, const std::vector<GainInterval>& graph,
                           double margin = kRouteMargin);

// A kernel's gain measured on several operand sets (the handle's scratch operands and the caller's own, which lie
// elsewhere in memory): the set's interval of the lowest lower bound, so that a kernel serves only where it wins
// on every set. Throws Error(kInvalidInput) when `on_sets` is empty.
GainInterval weakest_of_sets(const std::vector<GainInterval>& on_sets);

// A kernel's gain over the floor where the floor's cuBLASLt candidate is not the heuristic's first and its final
// timed it against that first (`kept_over_first`, bench::LtChoice: its time over the first's there, below 1).
// The check then times the first beside the kernels and the floor: `over_floor` and `over_first` are a kernel's
// gains over the two, `floor_over_first` the floor's over the first, all from the check's rounds on one operand
// set. Some cuBLASLt kernels run in a slow state for spells (clusters of 4 at 16x28672x3584 on an H200: 54 us in
// a check where they ran 50.3 us in the screen before it and in the harness's rounds after), and a kernel
// timed against the floor in such a spell claimed 1.04x and then ran 0.965 of it. Where the floor ran slower
// against the first than in its final by more than `tolerance`, beyond the check's interval, the kernel must
// also win against the floor as its final found it (`over_first` scaled by `kept_over_first`): the weaker of the
// two is returned. Otherwise, and where `kept_over_first` is not in (0, 1), `over_floor`.
GainInterval against_floor_as_chosen(const GainInterval& over_floor, const GainInterval& over_first,
                                     const GainInterval& floor_over_first, double kept_over_first,
                                     double tolerance = kRouteMargin);
// Whether against_floor_as_chosen finds the floor slower against the first than in its final.
bool floor_slower_than_its_final(const GainInterval& floor_over_first, double kept_over_first,
                                 double tolerance = kRouteMargin);

// How long the fastest cuBLASLt candidate of a shape runs in CUDA graphs (us) before back-to-back eager calls
// through cublasLtMatmul, about 5-10 us of host work each, measure the GPU's time rather than the host's.
inline constexpr double kEagerScreenUs = 20.0;

// Whether the floor's eager calls take a cuBLASLt choice of their own, timed in back-to-back eager calls, beside
// the one timed in CUDA graphs. Always where eager calls go through cublasLtMatmul. With the floor's kernel
// launched directly, one choice timed in graphs serves both ways (an eager screen of a short kernel measures
// cuBLASLt's host path, and its choice is noise), except where the kernel is long enough for the eager screen to
// time the GPU (`graph_us`, the graph screen's fastest time, at least kEagerScreenUs) or an eager choice is
// known on this machine already: there the two ways rank the candidates apart (H200, 1x17920x5120: candidate 9
// fastest in graphs, 48.5 us; in eager calls candidate 8 at 47.9 us, candidate 9 at 50.3).
bool eager_floor_choice(bool direct_launches, double graph_us, bool eager_known);

// What serves one way of calling and why, for describe(): "<name> at 1.07x cuBLASLt (95% CI 1.05..1.09)", or
// "cuBLASLt; the kernel <name> measured 0.93x cuBLASLt (95% CI ...)" (of several: the best of them, named).
std::string route_verdict_text(const std::vector<std::string>& names, const std::vector<GainInterval>& gains,
                               int chosen);

}  // namespace rlgemm::dispatch
