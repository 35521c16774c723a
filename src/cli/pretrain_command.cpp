// `rlgemm tune-pretrain`: trains a policy on results already measured (the harness's CSV rows of kernel
// designs), so that tuning and zero-shot proposals start from what those measurements taught.
//
//   rlgemm tune-pretrain --from kernels-grid-all-designs.csv [--from more.csv] --policy policy.txt
//                        [--exclude held-out-shapes.csv] [--epochs 30]
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "bench/results.h"
#include "cli/command.h"
#include "rlgemm/error.h"
#include "rlgemm/shapes.h"
#include "search/pretrain.h"

namespace rlgemm::cli {
namespace {

struct PretrainArgs {
  std::vector<std::string> from;
  std::string policy;
  std::string exclude;
  int epochs = 30;
  uint64_t seed = 1;
  int sm_count = 132;
  int cc_major = 9;
  int smem = kHopperSmemPerBlock;
};

int run_pretrain(const PretrainArgs& a) {
  std::vector<search::LoggedResult> results;
  size_t failed_gate = 0;
  for (const auto& file : a.from) {
    for (const bench::Row& row : bench::read_csv(file)) {
      if (!bench::is_design_row(row)) continue;
      // A design that failed the gate has no speed to learn from; the bug that failed it may be fixed since.
      if (!row.correct || !std::isfinite(row.speedup) || !(row.speedup > 0)) {
        ++failed_gate;
        continue;
      }
      results.push_back({{row.shape, row.layout}, row.impl, row.speedup});
    }
  }
  search::PretrainOptions options;
  options.epochs = a.epochs;
  options.seed = a.seed;
  options.sm_count = a.sm_count;
  options.progress = stderr;
  if (!a.exclude.empty()) options.exclude = resolve_shapes(a.exclude);
  search::DesignSpaces spaces(search::SpaceSpec::for_gpu(a.cc_major), a.smem);
  search::Policy policy(spaces.of(Layout::kTN), search::RlOptions{}, a.seed);
  const auto report = search::pretrain(policy, spaces, results, options);
  policy.save(a.policy);
  std::printf("pretrained on %zu shapes (%zu results; %zu held out shapes; %zu results outside the design space, "
              "%zu without a correct timing left out)\n",
              report.problems, report.samples, options.exclude.size(), report.outside_space, failed_gate);
  std::printf("greedy proposal = best logged design on %.1f%% of the shapes; logged speed of the proposals %.3f of "
              "the best (geometric mean); %zu proposals not among the logged designs\n",
              100.0 * report.top1, report.proposal_quality, report.unlogged_proposals);
  std::printf("wrote %s\n", a.policy.c_str());
  return 0;
}

CommandRegistration pretrain_registration("tune-pretrain", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand("tune-pretrain",
                                 "Train a policy on measured results (harness CSV rows of designs) before tuning");
  auto args = std::make_shared<PretrainArgs>();
  cmd->add_option("--from", args->from, "Harness CSV with design rows (repeatable; later rows replace earlier ones)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--policy", args->policy, "Policy file to write")->required();
  cmd->add_option("--exclude", args->exclude, "CSV of M,N,K shapes to leave out (held out for evaluation)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--epochs", args->epochs, "Passes over the results")->default_val(30)->check(CLI::PositiveNumber);
  cmd->add_option("--seed", args->seed, "Seed of the initial weights and the order of the shapes")->default_val(1);
  cmd->add_option("--sm-count", args->sm_count, "SM count of the GPU the results were measured on")->default_val(132);
  cmd->add_option("--cc-major", args->cc_major, "Compute capability (major) of that GPU: its design space")
      ->default_val(9);
  cmd->add_option("--smem", args->smem, "Its shared memory per block (opt-in), bytes")->default_val(kHopperSmemPerBlock);
  return [args] { return run_pretrain(*args); };
});

}  // namespace
}  // namespace rlgemm::cli
