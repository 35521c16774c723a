#include "measure/sass_opt_foreign.h"

#include <algorithm>
#include <memory>

#include "measure/foreign_evaluator.h"
#include "measure/launch_spec.h"
#include "rlgemm/error.h"
#include "sass/cubin.h"

namespace rlgemm::measure {

ForeignRunName check_sass_opt_foreign(const SassOptForeignOptions& o) {
  if (o.cubin_path.empty() || o.kernel.empty()) fail("sass-opt on a cubin needs --cubin and --kernel");
  if (o.evaluator != "gpu" && o.evaluator != "synthetic")
    fail("unknown evaluator '" + o.evaluator + "': expected gpu or synthetic");
  if (o.evaluator == "gpu" && o.launch_path.empty())
    fail("--evaluator gpu runs the kernel, so it needs --launch SPEC (its grid, block, shared memory and "
         "parameters; or --design, --shape and --layout for one of rlgemm's designs)");
  if (o.evaluator != "gpu" && !o.csv_path.empty())
    fail("--csv records measured times, which need --evaluator gpu (the synthetic evaluator is a model)");
  if (o.final_batches < 3) fail("the final re-measure needs at least 3 batches");
  if (o.final_draws < 1 || o.search_draws < 1) fail("the bitwise checks need at least one input draw");
  if (!(o.min_gain >= 0)) fail("--min-gain must not be negative");
  const sass::Cubin cubin = sass::Cubin::load(o.cubin_path);  // an sm_90 image, or the error says which it is
  (void)cubin.kernel(o.kernel);                                // throws naming the kernels present
  ForeignRunName run{o.kernel, o.set, Problem{{0, 0, 0}}};
  if (!o.launch_path.empty()) {
    const LaunchSpec spec = load_launch_spec(o.launch_path);
    check_launch_spec(spec, cubin.kernel_params(o.kernel), o.kernel);
    if (!spec.name.empty()) run.name = spec.name;
    if (run.set.empty()) run.set = spec.set;
    if (spec.problem) run.problem = *spec.problem;
  }
  if (run.set.empty()) run.set = "foreign";
  if (run.set.find_first_of(",\"\n") != std::string::npos) fail("--set must not hold commas, quotes or line breaks");
  return run;
}

SassOptForeignReport run_sass_opt_foreign(const SassOptForeignOptions& o) {
  // Every rule first, on the CPU.
  const ForeignRunName run = check_sass_opt_foreign(o);
  const sass::Cubin cubin = sass::Cubin::load(o.cubin_path);
  SassOptForeignReport report;
  report.kernel = o.kernel;
  report.evaluator = o.evaluator;
  report.name = run.name;
  report.set = run.set;
  report.problem = run.problem;

  std::unique_ptr<ForeignSassEvaluator> gpu;
  std::unique_ptr<sass::Evaluator> synthetic;
  sass::Evaluator* evaluator = nullptr;
  if (o.evaluator == "gpu") {
    if (!o.start_worker) fail("--evaluator gpu needs a worker process to run the kernel in");
    ForeignTarget target{o.cubin_path, o.kernel, o.launch_path, o.seed, std::max(o.search_draws, o.final_draws)};
    ForeignEvaluatorOptions options;
    options.search_draws = o.search_draws;
    gpu = std::make_unique<ForeignSassEvaluator>(o.start_worker(), target, options);
    (void)gpu->reference_time_us();  // the original must run with the SPEC before anything is searched
    evaluator = gpu.get();
  } else {
    synthetic = std::make_unique<sass::SyntheticEvaluator>();
    evaluator = synthetic.get();
  }

  report.game = sass::optimize_kernel(cubin, o.kernel, *evaluator, o.agent, o.steps, o.seed, o.actions, o.confirm);
  if (gpu) report.faults = gpu->faults();
  if (!report.game.problems.empty()) {
    report.verdict = "the best schedule did not verify";
    return report;
  }
  final_check(report, gpu.get(), cubin.bytes(), {o.final_batches, o.final_draws, o.min_gain, o.seed});
  if (gpu) report.faults = gpu->faults();

  if (report.kept && !o.out_path.empty()) {
    sass::write_file_atomically(o.out_path, report.game.patched);
    report.written = true;
  }
  if (!o.csv_path.empty()) {
    append_sass_opt_csv(o.csv_path, csv_row(report, report.name, report.problem, o.actions));
    report.csv_written = true;
  }
  return report;
}

}  // namespace rlgemm::measure
