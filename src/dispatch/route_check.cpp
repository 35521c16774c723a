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
