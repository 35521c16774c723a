// rlgemm sass-opt: reorders a compiled Hopper kernel's memory instructions (the SASS assembly game) and
// writes the faster schedule only after it verified.
//
//   rlgemm sass-opt --cubin FILE --kernel NAME [--evaluator synthetic]       a cubin on its own (CPU model)
//   rlgemm sass-opt --design TEXT --shape M,N,K --layout tn --evaluator gpu  one of rlgemm's designs, measured
//                   [--out FILE] [--db FILE] [--csv FILE]
#include <cstdio>

#include "cli/command.h"
#include "measure/sass_opt_design.h"
#include "rlgemm/error.h"
#include "sass/optimize.h"

namespace rlgemm::cli {
namespace {

struct SassOptArgs {
  sass::SassOptOptions cubin;          // the --cubin path
  measure::SassOptDesignOptions design;  // the --design path
};

void print_search(const sass::SassOptReport& report, const std::string& kernel, const std::string& agent,
                  const std::string& evaluator) {
  std::printf("kernel %s: %zu instructions, %zu movable memory instructions\n", kernel.c_str(), report.instructions,
              report.movable);
  for (const auto& note : report.notes) std::printf("note: %s\n", note.c_str());
  const auto& s = report.search;
  std::printf("%s agent, %s evaluator: %d evaluations, %.3f us -> %.3f us in search (gain %+.2f%%)\n", agent.c_str(),
              evaluator.c_str(), s.evaluations, s.initial_time_us, s.best_time_us, 100.0 * s.gain());
  int paid = 0;
  for (const auto& m : s.path)
    if (m.gain > 0) {
      std::printf("  paid %+.3f%%: %s moved %s\n", 100.0 * m.gain, m.text.c_str(), m.move.direction < 0 ? "up" : "down");
      ++paid;
    }
  std::printf("%d of %zu moves on the path paid\n", paid, s.path.size());
}

int report_problems(const sass::SassOptReport& report) {
  for (const auto& p : report.problems) std::fprintf(stderr, "verification failed: %s\n", p.c_str());
  std::fprintf(stderr, "rlgemm: error: the optimized schedule did not verify; nothing was written\n");
  return 1;
}

int run_design(const measure::SassOptDesignOptions& o) {
  const auto r = measure::run_sass_opt_design(o);
  std::printf("design %s, shape %s, layout %s\n", r.design.c_str(), r.problem.shape.to_string().c_str(),
              std::string(to_string(r.problem.layout)).c_str());
  print_search(r.game, r.kernel, o.agent, r.evaluator);
  if (!r.game.problems.empty()) return report_problems(r.game);
  std::printf("%s: %.3f us -> %.3f us (gain %+.2f%%), bitwise equal: %s, %d moves\n",
              r.evaluator == "gpu" ? "re-measured side by side" : "synthetic model (not measured)", r.time_before_us,
              r.time_after_us, 100.0 * r.gain, r.bitwise_equal ? "yes" : "no", r.moves);
  if (r.rejected_after_us > 0) std::printf("the best schedule found: %.3f us (not kept)\n", r.rejected_after_us);
  std::printf("%s\n", r.verdict.c_str());
  if (r.written) std::printf("wrote %s\n", o.out_path.c_str());
  if (!o.db_path.empty())
    std::printf(r.stored ? "stored in %s\n" : "not stored in %s (%s)\n", o.db_path.c_str(),
                r.kept ? "a larger gain is recorded already" : "nothing faster to store");
  if (r.csv_written) std::printf("appended to %s\n", o.csv_path.c_str());
  return 0;
}

int run_cubin(const sass::SassOptOptions& o) {
  if (o.cubin_path.empty() || o.kernel.empty())
    fail("sass-opt needs either --design (with --shape and --layout) or --cubin with --kernel");
  if (o.evaluator == "gpu")
    fail("--evaluator gpu runs the kernel, so it needs the design and problem the cubin was compiled for: add "
         "--design, --shape and --layout");
  const auto report = sass::run_sass_opt(o);
  print_search(report, o.kernel, o.agent, o.evaluator);
  if (!report.problems.empty()) return report_problems(report);
  if (report.written) std::printf("wrote %s\n", o.out_path.c_str());
  return 0;
}

CommandRegistration sass_opt_registration("sass-opt", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand(
      "sass-opt", "Reorder a Hopper (sm_90) kernel's SASS with a learned agent; keep only verified, faster schedules");
  auto args = std::make_shared<SassOptArgs>();
  auto& c = args->cubin;
  auto& d = args->design;
  cmd->add_option("--design", d.design, "Design (text form) to compile and optimize for --shape and --layout");
  cmd->add_option("--shape", d.shape, "Problem shape M,N,K (with --design)");
  cmd->add_option("--layout", d.layout, "tn or nn (with --design)")->check(CLI::IsMember({"tn", "nn"}));
  cmd->add_option("--cubin", c.cubin_path,
                  "Cubin (ELF) compiled for sm_90; with --design, the design's cubin to start from instead of "
                  "compiling it");
  cmd->add_option("--kernel", c.kernel, "Kernel (function) name inside the cubin (default with --design: its name)");
  cmd->add_option("--out", c.out_path, "Where to write the optimized cubin (only if it verified and, measured, paid)");
  cmd->add_option("--db", d.db_path, "Tuning database to store the optimized cubin in (--design, --evaluator gpu)");
  cmd->add_option("--csv", d.csv_path, "CSV to append the result row to (--design, --evaluator gpu)");
  cmd->add_option("--evaluator", c.evaluator, "synthetic (CPU latency model) or gpu")
      ->check(CLI::IsMember({"synthetic", "gpu"}));
  cmd->add_option("--agent", c.agent, "ppo, anneal or greedy")->check(CLI::IsMember({"ppo", "anneal", "greedy"}));
  cmd->add_option("--steps", c.steps, "Evaluation budget")->check(CLI::PositiveNumber);
  cmd->add_option("--seed", c.seed, "Random seed");
  cmd->add_option("--final-batches", d.final_batches, "Offline batches of the final re-measure (--design)")
      ->check(CLI::Range(3, 100000));
  cmd->add_option("--min-gain", d.min_gain,
                  "Smallest re-measured gain (fraction) that keeps a schedule; below it is timing noise (--design)")
      ->check(CLI::Range(0.0, 1.0));
  return [args]() {
    auto& c = args->cubin;
    auto& d = args->design;
    if (d.design.empty()) {
      if (!d.shape.empty() || !d.db_path.empty() || !d.csv_path.empty())
        fail("--shape, --db and --csv go with --design");
      return run_cubin(c);
    }
    if (d.shape.empty()) fail("--design needs --shape M,N,K");
    d.cubin_path = c.cubin_path;
    d.kernel = c.kernel;
    d.out_path = c.out_path;
    d.evaluator = c.evaluator;
    d.agent = c.agent;
    d.steps = c.steps;
    d.seed = c.seed;
    return run_design(d);
  };
});

}  // namespace
}  // namespace rlgemm::cli
