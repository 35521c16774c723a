// Whether a candidate (a kernel design, a rescheduled cubin, a route) is really faster than what it is compared
// with: a gain with a confidence interval from interleaved rounds. The tuner's reward, the handle's route checks and
// the SASS game's final check all rest on it.
//
// The original and the candidate are timed in rounds; in each round both run one batch, in an order shuffled
// afresh per round (bench::time_side_by_side), so that the GPU's slow spells (clocks, power, a neighbour on
// the host) fall on both sides of a round alike. Each round gives one ratio r = original / candidate, and
// the analysis works on its logarithm d = ln r: a clock change that slows both by a factor cancels in d, and
// logs make a 5% gain and a 5% loss symmetric. Over n rounds
//   gain      = exp(mean d) - 1
//   interval  = exp(mean d -/+ t(0.975, n-1) * sd(d) / sqrt(n)) - 1    (Student's t, two-sided 95%)
// A schedule is kept only when the interval's lower bound is above zero: a gain the rounds cannot tell from
// no gain at all is noise, however large its point estimate. The t-interval assumes the rounds' log ratios
// are independent draws around a common mean; slow drifts cancel within a round, and a stray slow batch
// widens the interval (it raises sd) rather than faking a gain.
#pragma once

#include <string>
#include <vector>

namespace rlgemm {

struct GainInterval {
  int rounds = 0;
  double gain = 0;   // exp(mean log ratio) - 1
  double low = 0;    // the 95% interval of the gain
  double high = 0;
  bool significant() const { return rounds >= 2 && low > 0; }
  std::string to_string() const;  // "+3.10% (95% CI +2.41% .. +3.80%, 60 rounds)"
};

// Median of a non-empty list (of rounds' times).
double median(std::vector<double> values);

// Two-sided 95% quantile of Student's t with `dof` degrees of freedom (dof >= 1).
double student_t_975(int dof);

// The gain of the candidate over the original from paired per-round times (microseconds per call, one entry
// per round, both lists in round order). Throws Error(kInvalidInput) for lists of different lengths, fewer
// than two rounds, or a time that is not positive and finite.
GainInterval gain_interval(const std::vector<double>& original_us, const std::vector<double>& candidate_us);

}  // namespace rlgemm
