#include "search/compare.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "rlgemm/error.h"

namespace rlgemm::search {

int evaluations_to_reach(const ProblemOutcome& outcome, double target_speedup) {
  for (size_t i = 0; i < outcome.evaluations.size(); ++i) {
    const auto& e = outcome.evaluations[i];
    if (e.status == MeasureStatus::kOk && e.paired && e.paired->speedup() >= target_speedup) return int(i) + 1;
  }
  return 0;
}

CompareResult compare_strategies(Store& store, Measurer& measurer, const CompareOptions& options) {
  if (options.problems.empty()) fail("tune-compare needs at least one problem");
  if (options.strategies.empty()) fail("tune-compare needs at least one strategy");
  if (options.budget <= 0 || options.seeds <= 0) fail("tune-compare needs a positive budget and seed count");
  if (!(options.quality > 0 && options.quality <= 1)) fail("the quality target must be in (0, 1]");
  struct Run {
    std::string strategy;
    uint64_t seed;
    std::vector<ProblemOutcome> outcomes;
  };
  std::vector<Run> runs;
  std::optional<DesignSpace> policy_space;  // the rl strategies' space, built on first use
  const bool warm_listed =
      std::find(options.strategies.begin(), options.strategies.end(), "rl-warm") != options.strategies.end();
  for (int s = 0; s < options.seeds; ++s) {
    const uint64_t seed = options.first_seed + uint64_t(s);
    for (const auto& name : options.strategies) {
      std::unique_ptr<Policy> policy;
      StrategyPtr strategy;
      if (name == "random") strategy = make_random_strategy(seed);
      else if (name == "evo") strategy = make_evo_strategy(seed);
      else if (name == "rl" || name == "rl-warm") {
        if (!policy_space)
          policy_space.emplace(options.spec, options.problems.front().layout,
                               smem_limit_or_hopper(measurer.gpu().smem_per_block_optin));
        if (name == "rl") {
          // A fresh policy per seed, shared across the problems of the run.
          policy = std::make_unique<Policy>(*policy_space, options.rl, seed);
        } else {
          // The same learner, starting from a policy trained before (on other shapes).
          if (options.warm_policy.empty()) fail("strategy rl-warm needs a policy file to start from (--warm-policy)");
          // Trained on another space (an older one, say): its options matched by name to this one's.
          policy = std::make_unique<Policy>(Policy::load(options.warm_policy, options.rl).adapted_to(*policy_space));
        }
        strategy = make_rl_strategy(*policy, seed);
      } else {
        fail("unknown strategy '" + name + "': use rl, rl-warm, evo or random");
      }
      if (options.progress)
        std::fprintf(options.progress, "tune-compare: strategy %s, seed %llu\n", name.c_str(),
                     static_cast<unsigned long long>(seed));
      Tuner tuner(store, measurer, *strategy, options.spec);
      TuneOptions tune;
      tune.problems = options.problems;
      tune.budget.evaluations = options.budget;
      tune.mode = options.mode;
      tune.batch = options.batch;
      tune.own_evaluations_only = true;
      tune.progress = options.progress;
      runs.push_back({name, seed, tuner.run(tune)});
      if (policy && s == 0 && !options.save_policy.empty() && (name == "rl-warm" || !warm_listed))
        policy->save(options.save_policy);
    }
  }

  CompareResult result;
  result.gpu_name = measurer.gpu().name;
  for (size_t p = 0; p < options.problems.size(); ++p) {
    double best = 0;
    for (auto& run : runs) best = std::max(best, run.outcomes[p].speedup());
    const double target = best * options.quality;
    for (auto& run : runs) {
      const ProblemOutcome& o = run.outcomes[p];
      CompareRow row;
      row.strategy = run.strategy;
      row.seed = run.seed;
      row.problem = o.problem;
      row.budget = options.budget;
      const int reached = best > 0 ? evaluations_to_reach(o, target) : 0;
      row.reached = reached > 0;
      row.evaluations_to_target = reached > 0 ? reached : options.budget;
      row.best_us = o.best_us;
      row.reference_us = o.reference_us();
      row.best_speedup = o.speedup();
      row.target_speedup = target;
      result.rows.push_back(row);
    }
  }
  for (const auto& name : options.strategies) {
    std::vector<double> evals;
    double reached = 0, log_speedup = 0;
    int speedups = 0;
    for (auto& row : result.rows) {
      if (row.strategy != name) continue;
      evals.push_back(row.evaluations_to_target);
      reached += row.reached ? 1 : 0;
      if (row.best_speedup > 0) {
        log_speedup += std::log(row.best_speedup);
        ++speedups;
      }
    }
    CompareSummary s;
    s.strategy = name;
    for (double e : evals) s.mean_evaluations += e / double(evals.size());
    std::sort(evals.begin(), evals.end());
    const size_t n = evals.size();
    s.median_evaluations = n % 2 ? evals[n / 2] : (evals[n / 2 - 1] + evals[n / 2]) / 2;
    s.reached_fraction = reached / double(n);
    s.geomean_speedup = speedups ? std::exp(log_speedup / speedups) : 0;
    result.summary.push_back(s);
  }
  return result;
}

void write_compare_csv(const CompareResult& result, std::ostream& out) {
  out << "gpu,layout,m,n,k,strategy,seed,budget,evals_to_target,reached,best_us,reference_us,best_speedup,"
         "target_speedup\n";
  char buf[512];
  for (const auto& r : result.rows) {
    std::snprintf(buf, sizeof buf, "%s,%s,%lld,%lld,%lld,%s,%llu,%d,%d,%d,%.4f,%.4f,%.4f,%.4f\n",
                  result.gpu_name.c_str(), std::string(to_string(r.problem.layout)).c_str(),
                  static_cast<long long>(r.problem.shape.m), static_cast<long long>(r.problem.shape.n),
                  static_cast<long long>(r.problem.shape.k), r.strategy.c_str(),
                  static_cast<unsigned long long>(r.seed), r.budget, r.evaluations_to_target, r.reached ? 1 : 0,
                  r.best_us, r.reference_us, r.best_speedup, r.target_speedup);
    out << buf;
  }
}

void write_compare_summary_csv(const CompareResult& result, std::ostream& out) {
  out << "strategy,runs,mean_evals_to_target,median_evals_to_target,reached_fraction,geomean_speedup\n";
  char buf[256];
  for (const auto& s : result.summary) {
    size_t runs = 0;
    for (auto& r : result.rows) runs += r.strategy == s.strategy;
    std::snprintf(buf, sizeof buf, "%s,%zu,%.2f,%.1f,%.3f,%.4f\n", s.strategy.c_str(), runs, s.mean_evaluations,
                  s.median_evaluations, s.reached_fraction, s.geomean_speedup);
    out << buf;
  }
}

}  // namespace rlgemm::search
