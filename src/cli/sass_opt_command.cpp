// rlgemm sass-opt: reorders a compiled Hopper kernel's memory instructions (the SASS assembly game) and
// writes the faster schedule only after it verified.
//
//   rlgemm sass-opt --cubin FILE --kernel NAME [--evaluator synthetic]       a cubin on its own (CPU model)
//   rlgemm sass-opt --design TEXT --shape M,N,K --layout tn --evaluator gpu  one of rlgemm's designs, measured
//                   [--out FILE] [--db FILE] [--csv FILE]
//   rlgemm sass-opt --tuned TABLE --count N --evaluator gpu --db FILE --csv FILE
//                   N tuned kernels of a tuned table (data/tuned format), one after another; rows the CSV
//                   holds already are skipped, so a run that stopped continues where it was
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include "cli/command.h"
#include "measure/sass_opt_design.h"
#include "rlgemm/error.h"
#include "sass/optimize.h"
#ifdef RLGEMM_HAVE_DISPATCH
#include "dispatch/tuned_table.h"
#endif

namespace rlgemm::cli {
namespace {

struct SassOptArgs {
  sass::SassOptOptions cubin;          // the --cubin path
  measure::SassOptDesignOptions design;  // the --design path
  std::string tuned;                   // the --tuned path: a tuned table
  int count = 20;
  std::string actions = "moves";       // --actions: the game's action space
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
      std::printf("  paid %+.3f%%: %s\n", 100.0 * m.gain, m.text.c_str());
      ++paid;
    }
  std::printf("%d of %zu actions on the path paid\n", paid, s.path.size());
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

#ifdef RLGEMM_HAVE_DISPATCH
// `count` rows of the table, evenly spaced in order of M*N*K, among the rows whose kernel the library runs
// (those where cuBLASLt measured faster are served by cuBLASLt, so rescheduling their kernel serves no one).
std::vector<dispatch::TunedRow> pick_tuned(std::vector<dispatch::TunedRow> rows, int count) {
  std::erase_if(rows, [](const dispatch::TunedRow& r) { return r.speedup_vs_lt_auto && *r.speedup_vs_lt_auto < 1.0; });
  std::stable_sort(rows.begin(), rows.end(), [](const dispatch::TunedRow& a, const dispatch::TunedRow& b) {
    return a.problem.shape.m * a.problem.shape.n * a.problem.shape.k <
           b.problem.shape.m * b.problem.shape.n * b.problem.shape.k;
  });
  if (rows.size() <= size_t(count)) return rows;
  std::vector<dispatch::TunedRow> picked;
  for (int i = 0; i < count; ++i) picked.push_back(rows[size_t((i + 0.5) * rows.size() / count)]);
  return picked;
}

// The (design, shape, layout) rows a sass-opt CSV already holds.
std::set<std::string> rows_done(const std::string& csv) {
  std::set<std::string> done;
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // header (append_sass_opt_csv checks it)
  while (std::getline(in, line)) {
    // kernel,M,N,K,layout,...: the key is the first five columns.
    size_t end = 0;
    for (int commas = 0; commas < 5 && end != std::string::npos; ++commas) end = line.find(',', end + (commas ? 1 : 0));
    if (end != std::string::npos) done.insert(line.substr(0, end));
  }
  return done;
}

int run_tuned(const SassOptArgs& args) {
  const auto& base = args.design;
  if (base.csv_path.empty()) fail("--tuned needs --csv (the record of every kernel, and what a rerun skips)");
  if (base.evaluator != "gpu")
    fail("--tuned records measured times in --csv, so it needs --evaluator gpu (the synthetic evaluator is a model)");
  const auto rows = pick_tuned(dispatch::load_tuned_table(args.tuned), args.count);
  if (rows.empty()) fail("tuned table " + args.tuned + " has no row whose kernel the library runs");
  const auto done = rows_done(base.csv_path);
  int failures = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    measure::SassOptDesignOptions o = base;
    o.design = to_string(row.design);
    o.shape = row.problem.shape.to_string();
    o.layout = to_string(row.problem.layout);
    const std::string key = o.design + "," + o.shape + "," + o.layout;
    std::printf("\n[%zu/%zu] %s %s %s\n", i + 1, rows.size(), o.design.c_str(), o.shape.c_str(), o.layout.c_str());
    if (done.count(key)) {
      std::printf("in %s already: skipped\n", base.csv_path.c_str());
      continue;
    }
    std::fflush(stdout);
    try {
      failures += run_design(o) != 0;
    } catch (const Error& e) {
      // A design that cannot be optimized is reported and the others go on; a lost device ends the run.
      if (e.kind() != ErrorKind::kInvalidInput) throw;
      std::fprintf(stderr, "rlgemm: %s: %s\n", key.c_str(), e.what());
      ++failures;
    }
    std::fflush(stdout);
  }
  std::printf("\n%zu tuned kernels, %d not optimized because of an error\n", rows.size(), failures);
  return failures ? 1 : 0;
}
#endif

CommandRegistration sass_opt_registration("sass-opt", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand(
      "sass-opt", "Reorder a Hopper (sm_90) kernel's SASS with a learned agent; keep only verified, faster schedules");
  auto args = std::make_shared<SassOptArgs>();
  auto& c = args->cubin;
  auto& d = args->design;
  cmd->add_option("--design", d.design, "Design (text form) to compile and optimize for --shape and --layout");
  cmd->add_option("--shape", d.shape, "Problem shape M,N,K (with --design)");
  cmd->add_option("--layout", d.layout, "tn or nn (with --design)")->check(CLI::IsMember({"tn", "nn"}));
  cmd->add_option("--tuned", args->tuned,
                  "A tuned table (data/tuned format): optimize --count of its kernels (evenly spaced by size)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--count", args->count, "With --tuned: how many kernels")->check(CLI::PositiveNumber);
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
  cmd->add_option("--actions", args->actions,
                  "The game's actions: moves (memory instructions one slot up or down), control (stall counts, "
                  "yield bits, operand-reuse flags) or both")
      ->check(CLI::IsMember({"moves", "control", "both"}));
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
    c.actions = sass::parse_action_space(args->actions);
    d.actions = c.actions;
    d.evaluator = c.evaluator;
    d.agent = c.agent;
    d.steps = c.steps;
    d.seed = c.seed;
    if (!args->tuned.empty()) {
      if (!d.design.empty() || !d.shape.empty() || !c.cubin_path.empty() || !c.out_path.empty())
        fail("--tuned chooses the designs and shapes itself: leave out --design, --shape, --cubin and --out");
#ifdef RLGEMM_HAVE_DISPATCH
      return run_tuned(*args);
#else
      fail("--tuned needs the dispatch stage, which this build leaves out");
#endif
    }
    if (d.design.empty()) {
      if (!d.shape.empty() || !d.db_path.empty() || !d.csv_path.empty())
        fail("--shape, --db and --csv go with --design");
      return run_cubin(c);
    }
    if (d.shape.empty()) fail("--design needs --shape M,N,K");
    d.cubin_path = c.cubin_path;
    d.kernel = c.kernel;
    d.out_path = c.out_path;
    return run_design(d);
  };
});

}  // namespace
}  // namespace rlgemm::cli
