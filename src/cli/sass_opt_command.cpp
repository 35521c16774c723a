// rlgemm sass-opt: reschedules a compiled Hopper kernel's SASS (the assembly game) and writes the faster
// schedule only after it verified.
//
//   rlgemm sass-opt --design TEXT --shape M,N,K --layout tn --evaluator gpu  one of rlgemm's designs, measured
//                   [--out FILE] [--db FILE] [--csv FILE [--resume]]
//   rlgemm sass-opt --tuned TABLE --count N --evaluator gpu --db FILE --csv FILE
//                   N tuned kernels of a tuned table (data/tuned format), one after another; rows the CSV
//                   holds already are skipped, so a run that stopped continues where it was
//   rlgemm sass-opt --cubin FILE --kernel NAME --launch SPEC --evaluator gpu [--out F] [--csv F [--resume]]
//                   a kernel rlgemm did not write, run in an isolated worker as SPEC describes
//                   (measure/launch_spec.h); without --launch, --evaluator synthetic (the CPU model) only
//   rlgemm sass-opt --cubin FILE --kernel NAME --params   prints the kernel's parameter block (for a SPEC)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>

#include "cli/command.h"
#include "measure/foreign_evaluator.h"
#include "measure/sass_opt_design.h"
#include "measure/sass_opt_foreign.h"
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
  std::string launch;                  // --launch: a foreign kernel's launch SPEC
  std::string tuned;                   // the --tuned path: a tuned table
  int count = 20;
  std::string actions = "moves";       // --actions: the game's action space
  bool resume = false;                 // --resume: skip a run whose row --csv holds
  bool params = false;                 // --params: print the kernel's parameter block
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

// What every run prints after its search: the final check and what became of the schedule.
int print_outcome(const measure::SassOptOutcome& r, const std::string& agent, const std::string& out_path,
                  const std::string& csv_path) {
  print_search(r.game, r.kernel, agent, r.evaluator);
  if (!r.game.problems.empty()) return report_problems(r.game);
  std::printf("%s: %.3f us -> %.3f us (gain %+.2f%%), bitwise equal: %s, %d actions\n",
              r.evaluator == "gpu" ? "re-measured side by side" : "synthetic model (not measured)", r.time_before_us,
              r.time_after_us, 100.0 * r.gain, r.bitwise_equal ? "yes" : "no", r.moves);
  if (r.interval) std::printf("the best schedule's gain: %s\n", r.interval->to_string().c_str());
  if (r.rejected_after_us > 0) std::printf("the best schedule found: %.3f us (not kept)\n", r.rejected_after_us);
  std::printf("%s\n", r.verdict.c_str());
  if (r.kept) std::printf("changed: %s\n", r.game.changes.to_string().c_str());
  if (r.written) std::printf("wrote %s\n", out_path.c_str());
  if (r.csv_written) std::printf("appended to %s (set %s)\n", csv_path.c_str(), r.set.c_str());
  return 0;
}

// --resume: whether --csv holds this run's row already (then it is skipped).
bool done_already(bool resume, const std::string& csv, const std::string& key) {
  if (!resume || csv.empty() || !measure::sass_opt_rows_done(csv).count(key)) return false;
  std::printf("in %s already: skipped\n", csv.c_str());
  return true;
}

int run_design(const measure::SassOptDesignOptions& o, bool resume = false) {
  if (resume) {
    // The key as the run will record it: the canonical design, its set and the problem.
    const std::string design = to_string(parse_design(o.design));
    const Problem problem{parse_shape(o.shape), parse_layout(o.layout)};
    const std::string set = o.set.empty() ? measure::default_sass_opt_set(design) : o.set;
    if (done_already(resume, o.csv_path, measure::sass_opt_row_key(set, design, problem, sass::to_string(o.actions))))
      return 0;
  }
  const auto r = measure::run_sass_opt_design(o);
  std::printf("design %s, shape %s, layout %s\n", r.design.c_str(), r.problem.shape.to_string().c_str(),
              std::string(to_string(r.problem.layout)).c_str());
  const int code = print_outcome(r, o.agent, o.out_path, o.csv_path);
  if (code == 0 && !o.db_path.empty())
    std::printf(r.stored ? "stored in %s\n" : "not stored in %s (%s)\n", o.db_path.c_str(),
                r.kept ? "a larger gain is recorded already" : "nothing faster to store");
  return code;
}

int print_params(const sass::SassOptOptions& o) {
  if (o.cubin_path.empty() || o.kernel.empty()) fail("--params needs --cubin and --kernel");
  const sass::KernelParams block = sass::Cubin::load(o.cubin_path).kernel_params(o.kernel);
  nlohmann::json params = nlohmann::json::array();
  for (const auto& p : block.params) params.push_back({{"ordinal", p.ordinal}, {"offset", p.offset}, {"size", p.size}});
  std::printf("%s\n", nlohmann::json{{"kernel", o.kernel}, {"block_bytes", block.block_bytes}, {"params", params}}
                           .dump(2)
                           .c_str());
  return 0;
}

int run_cubin(const SassOptArgs& args) {
  const auto& c = args.cubin;
  const auto& d = args.design;
  if (c.cubin_path.empty() || c.kernel.empty())
    fail("sass-opt needs either --design (with --shape and --layout) or --cubin with --kernel");
  measure::SassOptForeignOptions o;
  o.cubin_path = c.cubin_path;
  o.kernel = c.kernel;
  o.launch_path = args.launch;
  o.evaluator = c.evaluator;
  o.agent = c.agent;
  o.actions = c.actions;
  o.steps = c.steps;
  o.seed = c.seed;
  o.confirm = c.confirm;
  o.final_batches = d.final_batches;
  o.min_gain = d.min_gain;
  o.set = d.set;
  o.out_path = c.out_path;
  o.csv_path = d.csv_path;
  o.start_worker = [] { return measure::start_foreign_worker(self_exe()); };
  if (args.resume) {
    const auto run = measure::check_sass_opt_foreign(o);  // a bad input is refused whether or not its row is there
    if (done_already(true, o.csv_path, measure::sass_opt_row_key(run.set, run.name, run.problem, sass::to_string(o.actions))))
      return 0;
  }
  const auto r = measure::run_sass_opt_foreign(o);
  if (r.name != r.kernel) std::printf("%s (kernel %s)\n", r.name.c_str(), r.kernel.c_str());
  if (r.faults > 0)
    std::printf("%d candidate schedules crashed or hung their worker (each was contained and scored as a failure)\n",
                r.faults);
  return print_outcome(r, o.agent, o.out_path, o.csv_path);
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

int run_tuned(const SassOptArgs& args) {
  const auto& base = args.design;
  if (base.csv_path.empty()) fail("--tuned needs --csv (the record of every kernel, and what a rerun skips)");
  if (base.evaluator != "gpu")
    fail("--tuned records measured times in --csv, so it needs --evaluator gpu (the synthetic evaluator is a model)");
  const auto rows = pick_tuned(dispatch::load_tuned_table(args.tuned), args.count);
  if (rows.empty()) fail("tuned table " + args.tuned + " has no row whose kernel the library runs");
  const auto done = measure::sass_opt_rows_done(base.csv_path);
  int failures = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    measure::SassOptDesignOptions o = base;
    o.design = to_string(row.design);
    o.shape = row.problem.shape.to_string();
    o.layout = to_string(row.problem.layout);
    const std::string set = o.set.empty() ? measure::default_sass_opt_set(o.design) : o.set;
    const std::string key = measure::sass_opt_row_key(set, o.design, row.problem, sass::to_string(o.actions));
    std::printf("\n[%zu/%zu] %s %s %s\n", i + 1, rows.size(), o.design.c_str(), o.shape.c_str(), o.layout.c_str());
    if (done.count(key)) {
      std::printf("in %s already: skipped\n", base.csv_path.c_str());
      continue;
    }
    std::fflush(stdout);
    try {
      failures += run_design(o) != 0;
    } catch (const Error& e) {
      // A design that cannot be optimized is reported and the others go on; a lost device ends the run (its
      // row is recorded: the same command goes on with the next kernel).
      if (e.kind() != ErrorKind::kInvalidInput) throw;
      std::fprintf(stderr, "rlgemm: %s %s %s: %s\n", o.design.c_str(), o.shape.c_str(), o.layout.c_str(), e.what());
      ++failures;
    }
    std::fflush(stdout);
  }
  std::printf("\n%zu tuned kernels, %d not optimized because of an error\n", rows.size(), failures);
  return failures ? 1 : 0;
}
#endif

// One sass-opt command, its options read.
int run_sass_opt(SassOptArgs* args) {
  auto& c = args->cubin;
  auto& d = args->design;
  c.actions = sass::parse_action_space(args->actions);
  d.actions = c.actions;
  d.evaluator = c.evaluator;
  d.agent = c.agent;
  d.steps = c.steps;
  d.seed = c.seed;
  d.confirm = c.confirm;
  if (args->params) {
    if (!d.design.empty() || !args->tuned.empty()) fail("--params reads --cubin and --kernel only");
    return print_params(c);
  }
  if (!args->launch.empty() && (!d.design.empty() || !args->tuned.empty()))
    fail("--launch describes a foreign kernel (--cubin, --kernel); rlgemm's designs launch themselves");
  if (args->resume && d.csv_path.empty()) fail("--resume skips runs that --csv holds: add --csv");
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
    if (!d.shape.empty() || !d.db_path.empty()) fail("--shape and --db go with --design");
    return run_cubin(*args);
  }
  if (d.shape.empty()) fail("--design needs --shape M,N,K");
  d.cubin_path = c.cubin_path;
  d.kernel = c.kernel;
  d.out_path = c.out_path;
  return run_design(d, args->resume);
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
  cmd->add_option("--tuned", args->tuned,
                  "A tuned table (data/tuned format): optimize --count of its kernels (evenly spaced by size)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--count", args->count, "With --tuned: how many kernels")->check(CLI::PositiveNumber);
  cmd->add_option("--cubin", c.cubin_path,
                  "Cubin (ELF) compiled for sm_90; with --design, the design's cubin to start from instead of "
                  "compiling it");
  cmd->add_option("--kernel", c.kernel, "Kernel (function) name inside the cubin (default with --design: its name)");
  cmd->add_option("--launch", args->launch,
                  "With --cubin and --kernel: a JSON launch SPEC (grid, block, shared memory, parameters with their "
                  "fills) that --evaluator gpu runs the kernel with")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--params", args->params,
                "With --cubin and --kernel: print the kernel's parameter block (ordinal, offset, size) and exit");
  cmd->add_option("--set", d.set,
                  "The CSV's set column (default: sm80 or sm90 for a design's family, the SPEC's set or foreign for "
                  "a --cubin kernel)");
  cmd->add_flag("--resume", args->resume, "With --csv: skip the run when the CSV holds its row already");
  cmd->add_option("--out", c.out_path, "Where to write the optimized cubin (only if it verified and, measured, paid)");
  cmd->add_option("--db", d.db_path, "Tuning database to store the optimized cubin in (--design, --evaluator gpu)");
  cmd->add_option("--csv", d.csv_path, "CSV to append the result row to (--evaluator gpu)");
  cmd->add_option("--evaluator", c.evaluator, "synthetic (CPU latency model) or gpu")
      ->check(CLI::IsMember({"synthetic", "gpu"}));
  cmd->add_option("--agent", c.agent, "ppo, anneal or greedy")->check(CLI::IsMember({"ppo", "anneal", "greedy"}));
  cmd->add_option("--actions", args->actions,
                  "The game's actions: moves (memory instructions one slot up or down), control (stall counts, "
                  "yield bits, operand-reuse flags) or both")
      ->check(CLI::IsMember({"moves", "control", "both"}));
  cmd->add_option("--steps", c.steps, "Evaluation budget")->check(CLI::PositiveNumber);
  cmd->add_option("--confirm", c.confirm,
                  "Fresh measurements of a schedule that measured faster than the best so far, beyond --steps; it "
                  "becomes the best only where their mean and its 97.5% bound are faster still (default 0: at the "
                  "one measurement that found it)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--seed", c.seed, "Random seed");
  cmd->add_option("--final-batches", d.final_batches,
                  "Interleaved rounds of the final re-measure (each one offline batch of the original and of the "
                  "best schedule, in shuffled order); they give the gain its 95% confidence interval")
      ->check(CLI::Range(3, 100000));
  cmd->add_option("--min-gain", d.min_gain,
                  "A floor on the re-measured gain (fraction), besides its interval lying above zero (default 0)")
      ->check(CLI::Range(0.0, 1.0));
  return [args]() {
    try {
      return run_sass_opt(args.get());
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kHang) throw;
      // The hung kernel keeps the GPU: no orderly teardown (it would wait for the kernel for ever).
      std::fprintf(stderr, "rlgemm: error: %s\n", e.what());
      std::fflush(nullptr);
      std::_Exit(exit_code(ErrorKind::kHang));
    }
  };
});

}  // namespace
}  // namespace rlgemm::cli
