#include "core/gain_interval.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "rlgemm/error.h"

namespace rlgemm {

double median(std::vector<double> v) {
  if (v.empty()) fail("the median of no values");
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double student_t_975(int dof) {
  if (dof < 1) fail("Student's t needs at least one degree of freedom");
  // The published table up to 30 degrees of freedom; beyond, the Cornish-Fisher expansion around the normal
  // quantile, which is within 1e-4 of the table from 30 on.
  static constexpr double kTable[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof <= 30) return kTable[dof - 1];
  const double z = 1.959963984540054, v = dof;
  const double z3 = z * z * z, z5 = z3 * z * z, z7 = z5 * z * z;
  return z + (z3 + z) / (4 * v) + (5 * z5 + 16 * z3 + 3 * z) / (96 * v * v) +
         (3 * z7 + 19 * z5 + 17 * z3 - 15 * z) / (384 * v * v * v);
}

GainInterval gain_interval(const std::vector<double>& original_us, const std::vector<double>& candidate_us) {
  if (original_us.size() != candidate_us.size())
    fail("paired rounds: " + std::to_string(original_us.size()) + " times of the original, " +
         std::to_string(candidate_us.size()) + " of the candidate");
  const size_t n = original_us.size();
  if (n < 2) fail("a confidence interval needs at least two rounds");
  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) {
    const double a = original_us[i], b = candidate_us[i];
    if (!(a > 0) || !(b > 0) || !std::isfinite(a) || !std::isfinite(b))
      fail("round " + std::to_string(i) + " has a time that is not positive and finite");
    d[i] = std::log(a / b);
  }
  double mean = 0;
  for (double x : d) mean += x;
  mean /= double(n);
  double ss = 0;
  for (double x : d) ss += (x - mean) * (x - mean);
  const double half = student_t_975(int(n) - 1) * std::sqrt(ss / double(n - 1)) / std::sqrt(double(n));
  GainInterval g;
  g.rounds = int(n);
  g.gain = std::expm1(mean);
  g.low = std::expm1(mean - half);
  g.high = std::expm1(mean + half);
  return g;
}

std::string GainInterval::to_string() const {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%+.2f%% (95%% CI %+.2f%% .. %+.2f%%, %d rounds)", 100 * gain, 100 * low, 100 * high,
                rounds);
  return buf;
}

}  // namespace rlgemm
