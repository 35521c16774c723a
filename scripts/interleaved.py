"""Timing two or more subjects side by side in interleaved rounds, and the ratio of two with its spread.

The PyTorch measurements (bench_torch_op.py, model_e2e.py) time torch and rlgemm the way the C++ harness does
(bench::time_side_by_side, src/core/gain_interval.h): in rounds, each round one sample of every subject in
an order shuffled afresh from a seeded generator, so that a slow spell of the machine (clocks, power, the host
scheduler, a Python garbage collection) falls on all subjects of a round alike, and no subject always finds
the GPU as one particular other subject left it. Each round gives one ratio; the analysis works on its log:
  median      the median of the per-round ratios (the figure a table shows)
  geomean     exp(mean log ratio)
  interval    exp(mean -/+ t(0.975, n-1) * sd / sqrt(n)) of the log ratios: Student's t, two-sided 95%
  min, max    the per-round extremes
A run stops after `min_rounds` once the interval's half-width (in log units, about a relative error) is
at most `target`, or when its round or time budget is spent; the interval then says how far it got.

Standard library only, so that it is importable (and testable) without torch or a GPU.
"""
import math
import random
import statistics
import time

# Two-sided 95% quantiles of Student's t up to 30 degrees of freedom (the table gain_interval.cpp uses).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def student_t_975(dof):
    """Two-sided 95% quantile of Student's t: the table up to 30 degrees of freedom, then the Cornish-Fisher
    expansion around the normal quantile (within 1e-4 of the table from 30 on), as in gain_interval.cpp."""
    if dof < 1:
        raise ValueError("Student's t needs at least one degree of freedom")
    if dof <= 30:
        return _T975[dof - 1]
    z, v = 1.959963984540054, float(dof)
    return (z + (z ** 3 + z) / (4 * v) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * v * v)
            + (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / (384 * v ** 3))


class Ratio:
    """The per-round ratios of two subjects: median, geometric mean with its 95% interval, extremes."""

    def __init__(self, ratios):
        ratios = list(ratios)
        if not ratios:
            raise ValueError("no rounds to summarize")
        for r in ratios:
            if not (r > 0 and math.isfinite(r)):
                raise ValueError(f"a round's ratio is {r}: every time must be positive and finite")
        logs = [math.log(r) for r in ratios]
        self.rounds = len(ratios)
        self.median = statistics.median(ratios)
        mean = statistics.fmean(logs)
        self.geomean = math.exp(mean)
        self.half_width = (student_t_975(self.rounds - 1) * statistics.stdev(logs) / math.sqrt(self.rounds)
                           if self.rounds >= 2 else math.inf)
        self.low = math.exp(mean - self.half_width) if self.rounds >= 2 else 0.0
        self.high = math.exp(mean + self.half_width) if self.rounds >= 2 else math.inf
        self.min, self.max = min(ratios), max(ratios)

    def __str__(self):
        return (f"x{self.median:.3f} (95% CI {self.low:.3f}..{self.high:.3f}, min {self.min:.3f} max {self.max:.3f}, "
                f"{self.rounds} rounds)")


def ratio(numerator_times, denominator_times):
    """Ratio of paired per-round times: numerator / denominator in each round (a speedup of the denominator's
    subject when the numerator is the reference)."""
    if len(numerator_times) != len(denominator_times):
        raise ValueError(f"paired rounds: {len(numerator_times)} times against {len(denominator_times)}")
    return Ratio(a / b for a, b in zip(numerator_times, denominator_times))


def run_rounds(subjects, pairs, seed, min_rounds=8, max_rounds=200, max_seconds=20.0, target=0.01,
               clock=time.monotonic):
    """Times `subjects` ({name: callable returning one sample's time}) in rounds of shuffled order until the
    ratio of every pair in `pairs` ([(numerator, denominator), ...]) has a 95% half-width of at most `target`
    (after `min_rounds`), or `max_rounds` rounds or `max_seconds` seconds were spent; `min_rounds` (at least
    2) always run. Returns {name: [time per round]}."""
    if min_rounds < 2:
        raise ValueError(f"min_rounds is {min_rounds}: an interval needs at least 2 rounds")
    if max_rounds < min_rounds:
        raise ValueError(f"max_rounds ({max_rounds}) must be at least min_rounds ({min_rounds})")
    if not pairs:
        raise ValueError("no pair of subjects to compare")
    for name in (name for p in pairs for name in p):
        if name not in subjects:
            raise ValueError(f"{name!r} is not one of the subjects {sorted(subjects)}")
    rng = random.Random(seed)
    names = list(subjects)
    times = {name: [] for name in names}
    start = clock()
    while True:
        for name in rng.sample(names, len(names)):
            times[name].append(subjects[name]())
        n = len(times[names[0]])
        if n >= max_rounds:
            break
        if n >= min_rounds:
            if clock() - start >= max_seconds or all(ratio(times[a], times[b]).half_width <= target for a, b in pairs):
                break
    return times


def geometric_mean(values):
    values = list(values)
    if not values:
        raise ValueError("no values")
    return math.exp(statistics.fmean(math.log(v) for v in values))
