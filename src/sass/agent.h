// Players of the assembly game. Each spends at most `steps` evaluations and returns the fastest verified-
// legal schedule it met with the moves that led there. PPO (as CuAsmRL) learns a policy over a
// per-instruction observation; greedy and simulated annealing are the baselines it has to beat.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sass/game.h"

namespace rlgemm::sass {

struct PaidMove {
  Move move;
  std::string text;   // the action and the instruction it changed
  double gain = 0.0;  // reward of the move: relative throughput change against the compiled schedule
};

struct SearchResult {
  std::vector<int> best_order;
  std::vector<ControlFields> best_controls;  // the best schedule's control fields (per original index)
  double initial_time_us = 0.0;
  double best_time_us = 0.0;
  std::vector<PaidMove> path;  // moves from the compiled schedule to the best one, in order
  int evaluations = 0;         // every measurement, confirmations included
  int confirmations = 0;       // of those, fresh measurements of a schedule that measured faster than the best
  double gain() const { return best_time_us > 0 ? initial_time_us / best_time_us - 1.0 : 0.0; }
};

struct SearchOptions {
  int steps = 2000;      // evaluation budget
  uint64_t seed = 1;
  int horizon = 32;      // PPO episode length (CuAsmRL's)
  // Fresh measurements of a schedule that measured faster than the best so far; it becomes the best at their
  // mean where that mean, plus its 97.5% Student's t bound, is faster still (0: at the one measurement that
  // found it). Not counted in `steps`.
  int confirm = 0;
};

SearchResult search_greedy(Game& game, const SearchOptions& options);
SearchResult search_anneal(Game& game, const SearchOptions& options);
SearchResult search_ppo(Game& game, const SearchOptions& options);

// Per-actor observation rows (exposed for tests): current control fields, memory class and dependence
// features of the instruction and of its two neighbours, its slot, and its action-mask bits
// (Schedule::actions_per_actor(); kObservationWidth for the moves action space).
inline constexpr int kObservationFeatures = 12;
inline constexpr int kObservationWidth = 3 * kObservationFeatures + 3;
int observation_width(const Schedule& schedule);
std::vector<float> observe(const Schedule& schedule, const std::vector<uint8_t>& mask);

}  // namespace rlgemm::sass
