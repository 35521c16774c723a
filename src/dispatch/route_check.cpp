#include "dispatch/route_check.h"

#include <algorithm>
#include <cstdio>

#include "rlgemm/error.h"

namespace rlgemm::dispatch {
namespace {

int winner(const std::vector<GainInterval>& gains, double margin) {
  int best = -1;
  for (size_t i = 0; i < gains.size(); ++i)
    if (gains[i].low > margin && (best < 0 || gains[i].gain > gains[size_t(best)].gain)) best = int(i);
  return best;
}

std::string gain_text(const GainInterval& g) {
  char text[96];
  std::snprintf(text, sizeof text, "%.2fx cuBLASLt (95%% CI %.2f..%.2f)", 1 + g.gain, 1 + g.low, 1 + g.high);
  return text;
}

}  // namespace

RouteVerdict decide_routes(const std::vector<GainInterval>& eager, const std::vector<GainInterval>& graph,
                           double margin) {
  if (eager.size() != graph.size())
    fail("route check: " + std::to_string(eager.size()) + " eager gains and " + std::to_string(graph.size()) +
         " graph gains");
  return {winner(eager, margin), winner(graph, margin)};
}

GainInterval weakest_of_sets(const std::vector<GainInterval>& on_sets) {
  if (on_sets.empty()) fail("route check: a gain measured on no operand set");
  return *std::min_element(on_sets.begin(), on_sets.end(), [](auto& a, auto& b) { return a.low < b.low; });
}

bool floor_slower_than_its_final(const GainInterval& floor_over_first, double kept_over_first, double tolerance) {
  if (!(kept_over_first > 0 && kept_over_first < 1)) return false;
  // The floor's time over the first's in the check is at least 1 / (1 + high); in its final, kept_over_first.
  return 1 / (1 + floor_over_first.high) > kept_over_first * (1 + tolerance);
}

GainInterval against_floor_as_chosen(const GainInterval& over_floor, const GainInterval& over_first,
                                     const GainInterval& floor_over_first, double kept_over_first, double tolerance) {
  if (!floor_slower_than_its_final(floor_over_first, kept_over_first, tolerance)) return over_floor;
  // The floor as its final found it ran kept_over_first of the first's time: a gain of (1 + g) over the first is
  // (1 + g) * kept_over_first over that floor.
  GainInterval chained = over_first;
  for (double* g : {&chained.gain, &chained.low, &chained.high}) *g = (1 + *g) * kept_over_first - 1;
  return chained.low < over_floor.low ? chained : over_floor;
}

bool eager_floor_choice(bool direct_launches, double graph_us, bool eager_known) {
  return !direct_launches || eager_known || graph_us >= kEagerScreenUs;
}

std::string route_verdict_text(const std::vector<std::string>& names, const std::vector<GainInterval>& gains,
                               int chosen) {
  if (chosen >= 0) return names.at(size_t(chosen)) + " at " + gain_text(gains.at(size_t(chosen)));
  if (gains.empty()) return "cuBLASLt";
  const auto best = std::max_element(gains.begin(), gains.end(), [](auto& a, auto& b) { return a.gain < b.gain; });
  const std::string& name = names.at(size_t(best - gains.begin()));
  return std::string("cuBLASLt; ") +
         (gains.size() == 1 ? "the kernel " + name : "the best of " + std::to_string(gains.size()) + " kernels, " + name + ",") +
         " measured " + gain_text(*best);
}

}  // namespace rlgemm::dispatch
