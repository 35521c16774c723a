// The reward of an accepted submission: its time beside the best vendor call, as a ratio with a 95% interval.
//
// The submission and the vendor calls (cuBLAS, cuBLASLt's heuristic choice, lt_auto) are timed side by side in
// interleaved rounds of shuffled order, in two modes that share the rounds (bench::time_modes_side_by_side):
//   graph    the calls captured in a CUDA graph and replayed: the GPU's time alone, the headline. A kernel
//            can beat the vendor there only by being faster on the GPU, never by a cheaper launch.
//   offline  back-to-back calls from the host: `rlgemm bench`'s default time, launch cost included.
// In each mode the best vendor call is the one with the lowest median, and the speedup over it comes from the
// paired rounds (gain_interval: entry r of both lists is from round r, so that a slow spell of the
// GPU falls on both alike): speedup = exp(mean ln(vendor_r / submission_r)), and its 95% t-interval.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "core/gain_interval.h"

namespace rlgemm::env {

// Rounds of each mode's timing: enough for an interval of a few percent on a quiet GPU (t(0.975, 15) = 2.13),
// few enough that an evaluation of a mid-size problem stays well under a second of GPU time.
inline constexpr int kRewardRounds = 16;

struct ModeReward {
  double time_us = 0;                       // the submission's median per call
  std::map<std::string, double> vendor_us;  // every vendor call's median per call
  std::string best_vendor;                  // the lowest median of them
  double best_vendor_us = 0;
  double speedup = 0;                       // over the best vendor call, from the paired rounds
  double low = 0, high = 0;                 // its 95% interval
  int rounds = 0;
};

// From one mode's timings: times[0] the submission's, times[i] (i >= 1) the vendor call named names[i].
// Throws Error(kInvalidInput) without a vendor call, for lists of different lengths, or rounds that cannot be
// paired (gain_interval).
ModeReward mode_reward(const std::vector<std::string>& names, const std::vector<bench::Timing>& times);

// Writes one mode's reward into an evaluation record: the headline mode's fields are time_us, vendor_us,
// best_vendor, best_vendor_us, speedup_vs_best_vendor and speedup_vs_best_vendor_interval
// ({"low", "high", "rounds"}); another mode's carry its name after each (time_us_offline,
// speedup_vs_best_vendor_offline, speedup_vs_best_vendor_offline_interval, ...).
void write_reward(nlohmann::json& record, const ModeReward& reward, const std::string& suffix);

}  // namespace rlgemm::env
