// Pretraining a policy on measurements already made: results of fixed design sets on many shapes (the
// harness's rows, e.g. `rlgemm bench --designs` over the grid) teach the policy which designs win where,
// before it measures anything itself. Each logged shape is one batch: its designs replayed as trajectories,
// imitated with weights exp((r - r_best) / temperature) where r = log(t_lt_auto / t) is the tuner's reward
// (advantage-weighted imitation: the logged designs had no sampling probabilities that a policy-gradient
// step could correct for), and the baseline fitted to the rewards. A policy pretrained on some shapes is then warm-started on others
// (`rlgemm tune --policy`), or proposes designs for shapes it never saw (`rlgemm propose`).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "rlgemm/problem.h"
#include "search/rl_policy.h"
#include "search/tuner.h"

namespace rlgemm::search {

// One logged measurement: a design's speedup over lt_auto on a problem.
struct LoggedResult {
  Problem problem;
  std::string design;  // text form
  double speedup = 0;  // t_lt_auto / t_design
};

struct PretrainOptions {
  int epochs = 30;
  double temperature = 0.05;  // in units of log speedup
  uint64_t seed = 1;
  int sm_count = 132;
  std::vector<Shape> exclude;  // shapes left out (held out for evaluation)
  std::FILE* progress = nullptr;
};

struct PretrainReport {
  size_t problems = 0;          // shapes trained on
  size_t samples = 0;           // logged results used
  size_t outside_space = 0;     // logged designs the space cannot express (left out)
  // After training, over the shapes trained on: how often the greedy proposal is the logged best design, and
  // the geometric mean over shapes of (logged speedup of the proposal / best logged speedup), counting a
  // proposal that was never logged as missing (it is in `unlogged_proposals`).
  double top1 = 0;
  double proposal_quality = 0;
  size_t unlogged_proposals = 0;
};

// Trains `policy` (whose space is that of `spaces` for each layout met) on `results`. Throws
// Error(kInvalidInput) when no result is left to train on, a speedup is not positive, or the policy was made
// for another space.
PretrainReport pretrain(Policy& policy, DesignSpaces& spaces, const std::vector<LoggedResult>& results,
                        const PretrainOptions& options);

}  // namespace rlgemm::search

namespace rlgemm::search {

// What one tuned problem teaches a policy that its strategy did not train itself (independent problems tune
// on copies of the starting policy): the problem's correct measurements, imitated as pretraining does, in
// `steps` epochs (one per strategy round the problem took is what the policy would have had). Returns false,
// changing nothing, when fewer than two correct designs of the policy's space were measured.
// `spaces` is kept across problems: it builds each layout's space once.
bool learn_from_outcome(Policy& policy, DesignSpaces& spaces, const ProblemOutcome& outcome, int sm_count,
                        int steps);

}  // namespace rlgemm::search
