// Sample efficiency of the strategies: each strategy tunes the same problems with the same budget (several
// seeds), and the table reports how many evaluations each needed to reach a quality target: `quality`
// (0.98) of the best speed any strategy found for that problem.
//
// Runs share the store, so a design two strategies propose is measured once; each run still counts it as
// its own evaluation (Tuner's own_evaluations_only), which keeps the comparison fair and the GPU time low.
#pragma once

#include <cstdio>
#include <ostream>
#include <string>
#include <vector>

#include "search/rl_policy.h"
#include "search/tuner.h"

namespace rlgemm::search {

struct CompareOptions {
  std::vector<Problem> problems;
  std::vector<std::string> strategies{"rl", "evo", "random"};
  int budget = 200;  // evaluations per problem per run
  int seeds = 1;
  uint64_t first_seed = 1;
  int batch = 8;
  double quality = 0.98;
  TimingMode mode = TimingMode::kOffline;
  SpaceSpec spec;
  RlOptions rl;
  std::FILE* progress = nullptr;
  // Where strategy "rl-warm" starts from: a policy file trained before (rlgemm tune-pretrain, rlgemm tune).
  std::string warm_policy;
  // When set, the policy the first seed's rl-warm run (else its rl run) ended with is saved here.
  std::string save_policy;
};

struct CompareRow {
  std::string strategy;
  uint64_t seed = 0;
  Problem problem;
  int budget = 0;
  int evaluations_to_target = 0;  // the budget when the target was not reached
  bool reached = false;
  double best_us = 0;          // this run's best design's time
  double reference_us = 0;     // the reference's, in that design's own rounds
  double best_speedup = 0;     // this run's best paired speedup over the reference
  double target_speedup = 0;   // the best of every run * quality
};

struct CompareSummary {
  std::string strategy;
  double mean_evaluations = 0;  // unreached runs count as the budget
  double median_evaluations = 0;
  double reached_fraction = 0;
  double geomean_speedup = 0;   // of each run's best paired speedup over the reference
};

struct CompareResult {
  std::string gpu_name;
  std::vector<CompareRow> rows;
  std::vector<CompareSummary> summary;
};

// Evaluations (1-based) until an evaluation whose paired speedup over the reference reaches `target_speedup`,
// or 0 when none reached it. Speedups, not times: each is measured beside the reference in its own rounds,
// so evaluations made at different moments compare.
int evaluations_to_reach(const ProblemOutcome& outcome, double target_speedup);

CompareResult compare_strategies(Store& store, Measurer& measurer, const CompareOptions& options);

// CSV with a header: gpu,layout,m,n,k,strategy,seed,budget,evals_to_target,reached,best_us,reference_us,
// best_speedup,target_speedup; one row per (strategy, seed, problem).
void write_compare_csv(const CompareResult& result, std::ostream& out);
// Summary CSV: strategy,runs,mean_evals_to_target,median_evals_to_target,reached_fraction,geomean_speedup
void write_compare_summary_csv(const CompareResult& result, std::ostream& out);

}  // namespace rlgemm::search
