#include "env/reward.h"

#include "rlgemm/error.h"

namespace rlgemm::env {

ModeReward mode_reward(const std::vector<std::string>& names, const std::vector<bench::Timing>& times) {
  if (names.size() != times.size())
    fail("timings of " + std::to_string(times.size()) + " subjects for " + std::to_string(names.size()) + " names");
  if (times.size() < 2) fail("a reward needs the submission's timing and at least one vendor call's");
  ModeReward r;
  r.time_us = times[0].time_us;
  size_t best = 0;
  for (size_t i = 1; i < times.size(); ++i) {
    r.vendor_us[names[i]] = times[i].time_us;
    if (best == 0 || times[i].time_us < times[best].time_us) best = i;
  }
  r.best_vendor = names[best];
  r.best_vendor_us = times[best].time_us;
  // The vendor call is the original, the submission the candidate: a gain of g is a speedup of 1 + g.
  const GainInterval gain = gain_interval(times[best].rounds_us, times[0].rounds_us);
  r.speedup = 1 + gain.gain;
  r.low = 1 + gain.low;
  r.high = 1 + gain.high;
  r.rounds = gain.rounds;
  return r;
}

void write_reward(nlohmann::json& record, const ModeReward& r, const std::string& suffix) {
  nlohmann::json vendors = nlohmann::json::object();
  for (const auto& [name, us] : r.vendor_us) vendors[name] = us;
  record["time_us" + suffix] = r.time_us;
  record["vendor_us" + suffix] = vendors;
  record["best_vendor" + suffix] = r.best_vendor;
  record["best_vendor_us" + suffix] = r.best_vendor_us;
  record["speedup_vs_best_vendor" + suffix] = r.speedup;
  record["speedup_vs_best_vendor" + suffix + "_interval"] = {{"low", r.low}, {"high", r.high}, {"rounds", r.rounds}};
}

}  // namespace rlgemm::env
