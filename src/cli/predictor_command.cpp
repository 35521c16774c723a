// The speed predictor's commands:
//   rlgemm predictor-train --from RESULTS.csv|TUNE.db [--from ...] --out data/predictors/h100.json
//                          [--exclude HELD-OUT.csv ...]
//   rlgemm predictor-eval  --predictor P.json --from ... --shapes HELD-OUT.csv [--policy POLICY.txt]
//                          [--out picks.csv] [--summary evaluation.csv]
//   rlgemm predict         [--predictor P.json] [--gpu NAME] --shape M,N,K|--shapes S.csv [--design D ...]
//                          [--top K] [--designs-out FILE]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>

#include "cli/command.h"
#include "predict/evaluate.h"
#include "predict/sources.h"
#include "rlgemm/error.h"
#include "rlgemm/shapes.h"
#include "search/rl_policy.h"

namespace rlgemm::cli {
namespace {

std::optional<predict::GpuTraits> fallback_gpu(const std::string& name, int sm_count) {
  if (name.empty()) return std::nullopt;
  predict::GpuTraits g;
  g.name = name;
  g.sm_count = sm_count;
  return g;
}

std::vector<Shape> shapes_of(const std::vector<std::string>& files) {
  std::vector<Shape> shapes;
  for (const auto& f : files)
    for (const Shape& s : load_shapes_csv(f)) shapes.push_back(s);
  return shapes;
}

// ---- predictor-train ----

struct TrainArgs {
  std::vector<std::string> from;
  std::string out;
  std::vector<std::string> exclude;
  std::string mode = "offline";
  int members = 6;
  int trees = 0;
  int depth = 0;
  uint64_t seed = 1;
  int threads = 2;
  double unseen_gpu_sd = 0.1;
  double sd_per_ln_beyond = 0.05;
  std::string gpu;
  int sm_count = 132;
  std::string only_gpu;
};

int run_train(const TrainArgs& a) {
  predict::TrainOptions o;
  o.mode = a.mode;
  o.members = a.members;
  o.seed = a.seed;
  o.threads = a.threads;
  o.extrapolation.unseen_gpu_sd = a.unseen_gpu_sd;
  o.extrapolation.sd_per_ln_beyond = a.sd_per_ln_beyond;
  o.exclude = shapes_of(a.exclude);
  o.only_gpu = a.only_gpu;
  if (a.trees > 0) o.design_trees.trees = a.trees;
  if (a.depth > 0) o.design_trees.max_depth = a.depth;
  if (a.members < 1) fail("--members must be >= 1");
  if (!(a.unseen_gpu_sd >= 0)) fail("--unseen-gpu-sd must be >= 0");
  if (!(a.sd_per_ln_beyond >= 0)) fail("--sd-per-ln-beyond must be >= 0");
  o.progress = stderr;
  const auto samples = predict::load_samples(a.from, fallback_gpu(a.gpu, a.sm_count));
  predict::TrainReport report;
  const predict::Predictor predictor = predict::train_predictor(samples, o, &report);
  predictor.save(a.out);
  std::printf("trained on %zu shapes: %zu cuBLASLt rows (%zu from design rows' speedups), %zu design rows; left out "
              "%zu samples of %zu excluded shapes, %zu of other timing modes, %zu unusable\n",
              report.shapes, report.cublaslt_rows, report.lt_from_designs, report.design_rows, report.excluded_samples,
              std::set<Shape>(o.exclude.begin(), o.exclude.end()).size(), report.other_mode_samples,
              report.unusable_samples);
  std::printf("out of bag: cuBLASLt time median |ln error| %.4f (%.0f%% within 1 sd), design/cuBLASLt ratio %.4f "
              "(%.0f%% within 1 sd)\n",
              report.cublaslt_oob_median_abs, 100 * report.cublaslt_oob_within_1sd, report.design_oob_median_abs,
              100 * report.design_oob_within_1sd);
  std::printf("wrote %s\n", a.out.c_str());
  return 0;
}

// ---- predictor-eval ----

struct EvalArgs {
  std::string predictor;
  std::vector<std::string> from;
  std::vector<std::string> shapes;
  std::string policy;
  std::string mode = "offline";
  double z = predict::kRouteZ;
  std::string out;
  std::string summary;
  std::string gpu;
  int sm_count = 132;
};

int run_eval(const EvalArgs& a) {
  const predict::Predictor predictor = predict::Predictor::load(a.predictor);
  const std::vector<Shape> held = shapes_of(a.shapes);
  const std::set<Shape> held_set(held.begin(), held.end());
  std::optional<search::Policy> policy;
  if (!a.policy.empty()) policy = search::Policy::load(a.policy);
  const auto samples = predict::load_samples(a.from, fallback_gpu(a.gpu, a.sm_count));
  std::vector<predict::MergedSample> test, train;
  for (auto& m : predict::merge_samples(samples, a.mode)) (held_set.count(m.problem.shape) ? test : train).push_back(m);
  if (test.empty()) fail("no " + a.mode + " measurement of the --shapes shapes in the --from files");
  const predict::HeldOutAccuracy accuracy = predict::evaluate_accuracy(predictor, test);
  predict::PickOptions options;
  options.z = a.z;
  options.policy = policy ? &*policy : nullptr;
  const auto picks = predict::compare_picks(predictor, test, train, options);
  const auto methods = predict::summarize_picks(picks);
  if (!a.out.empty()) {
    std::ofstream out(a.out);
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + a.out);
    predict::write_picks_csv(out, picks);
  }
  if (!a.summary.empty()) {
    std::ofstream out(a.summary);
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + a.summary);
    out << "# " << command_line() << "\n";
    predict::write_evaluation_csv(out, accuracy, methods);
  }
  predict::write_evaluation_csv(std::cout, accuracy, methods);
  return 0;
}

// ---- predict ----

struct PredictArgs {
  std::string predictor;
  std::string gpu;
  int sm_count = 0;
  std::vector<std::string> shape_list;
  std::string shapes;
  std::string layout = "tn";
  std::vector<std::string> designs;
  int top = 0;
  double z = predict::kRouteZ;
  std::string designs_out;
};

int run_predict(const PredictArgs& a) {
  std::vector<Shape> shapes;
  if (!a.shapes.empty()) shapes = resolve_shapes(a.shapes);
  for (const auto& s : a.shape_list) shapes.push_back(parse_shape(s));
  if (shapes.empty()) fail("no shapes: give --shape M,N,K or --shapes FILE.csv");
  std::vector<Design> designs;
  for (const auto& d : a.designs) designs.push_back(parse_design(d));
  if (designs.empty() && a.top <= 0) fail("give --design D (repeatable) or --top K");
  if (!a.designs_out.empty() && a.top <= 0) fail("--designs-out writes the --top designs; give --top K");

  std::optional<predict::Predictor> loaded;
  const predict::Predictor* predictor = nullptr;
  predict::GpuTraits gpu;
  if (!a.predictor.empty()) {
    loaded = predict::Predictor::load(a.predictor);
    predictor = &*loaded;
    gpu = predictor->gpus().front();
    if (!a.gpu.empty()) gpu.name = a.gpu;
  } else {
    gpu.name = a.gpu.empty() ? "NVIDIA H100 80GB HBM3" : a.gpu;
    predictor = predict::builtin_predictor(gpu);
    if (!predictor) fail("no built-in predictor for " + gpu.name + "; give --predictor FILE");
    if (predictor->trained_on_gpu(gpu.name))
      for (const auto& g : predictor->gpus())
        if (g.name == gpu.name) gpu = g;
  }
  if (a.sm_count > 0) gpu.sm_count = a.sm_count;
  const Layout layout = parse_layout(a.layout);

  std::printf("gpu,M,N,K,layout,what,design,predicted_us,sd_us,predicted_speedup,ln_sd,route\n");
  std::vector<Design> union_of_top;
  for (const Shape& s : shapes) {
    const Problem problem{s, layout};
    const predict::Prediction lt = predictor->predict_cublaslt(gpu, problem);
    std::printf("%s,%s,%s,cublaslt,,%.3f,%.3f,1.0000,%.4f,\n", gpu.name.c_str(), s.to_string().c_str(),
                std::string(to_string(layout)).c_str(), lt.mean_us, lt.sd_us, lt.log_sd);
    auto print = [&](const char* what, const Design& d, const predict::Prediction& t, const predict::Gain& g) {
      std::printf("%s,%s,%s,%s,%s,%.3f,%.3f,%.4f,%.4f,%s\n", gpu.name.c_str(), s.to_string().c_str(),
                  std::string(to_string(layout)).c_str(), what, to_string(d).c_str(), t.mean_us, t.sd_us, g.speedup,
                  g.log_sd, predict::take_kernel_route(g, a.z) ? "kernel" : "cublaslt");
    };
    for (const Design& d : designs) {
      if (auto why = why_invalid(d, layout)) fail("design " + to_string(d) + ": " + *why);
      if (auto why = why_unfit(d, problem)) fail("design " + to_string(d) + " cannot run " + s.to_string() + ": " + *why);
      print("design", d, predictor->predict_design(gpu, problem, d), predictor->predict_gain(gpu, problem, d));
    }
    if (a.top > 0) {
      for (const predict::Candidate& c : predictor->best_guesses(gpu, problem, a.top)) {
        print("guess", c.design, c.time, c.gain);
        if (std::find(union_of_top.begin(), union_of_top.end(), c.design) == union_of_top.end())
          union_of_top.push_back(c.design);
        // The guess at the width that fills the waves, as the handle's predicted route checks it beside the guess
        // (or alone, where only its estimate clears the rule).
        const int smem = smem_limit_or_hopper(gpu.smem_per_block_optin);
        if (const auto fitted = predict::fitted_guess(c, problem, gpu.sm_count, smem))
          print("fitted", fitted->design, fitted->time, fitted->gain);
      }
    }
  }
  if (!a.designs_out.empty()) {
    std::ofstream out(a.designs_out);
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + a.designs_out);
    out << "# " << command_line() << "\n";
    out << "# the union of the predictor's " << a.top << " best guesses on each of " << shapes.size() << " shapes\n";
    for (const Design& d : union_of_top) out << to_string(d) << "\n";
    std::fprintf(stderr, "rlgemm predict: %zu distinct designs written to %s\n", union_of_top.size(),
                 a.designs_out.c_str());
  }
  return 0;
}

CommandRegistration train_registration("predictor-train", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand("predictor-train",
                                 "Train the speed predictor on measurements (harness CSVs, tuning databases)");
  auto a = std::make_shared<TrainArgs>();
  cmd->add_option("--from", a->from, "a harness CSV (its run JSON beside it names the GPU) or a tuning database "
                                     "(*.db); repeatable")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--out", a->out, "predictor file to write (JSON)")->required();
  cmd->add_option("--exclude", a->exclude, "a shapes CSV never trained on (held out; repeatable)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--mode", a->mode, "timing mode of the measurements to learn")->capture_default_str();
  cmd->add_option("--members", a->members, "bootstrap members of each ensemble")->capture_default_str();
  cmd->add_option("--trees", a->trees, "trees per member of the design model (default 150)");
  cmd->add_option("--depth", a->depth, "depth of the design model's trees (default 7)");
  cmd->add_option("--seed", a->seed, "seed of the bootstrap and the trees")->capture_default_str();
  cmd->add_option("--threads", a->threads, "members trained at once")->capture_default_str();
  cmd->add_option("--unseen-gpu-sd", a->unseen_gpu_sd,
                  "uncertainty (ln units) added for GPUs the measurements do not cover")->capture_default_str();
  cmd->add_option("--sd-per-ln-beyond", a->sd_per_ln_beyond,
                  "uncertainty (ln units) added per ln unit a shape lies beyond the trained shapes' spacing")
      ->capture_default_str();
  cmd->add_option("--gpu", a->gpu, "GPU name for CSVs without a run JSON beside them");
  cmd->add_option("--sm-count", a->sm_count, "its SM count")->capture_default_str();
  cmd->add_option("--only-gpu", a->only_gpu, "learn the measurements of this GPU only (by name); a predictor is "
                                              "trained per GPU model");
  return [a] { return run_train(*a); };
});

CommandRegistration eval_registration("predictor-eval", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand(
      "predictor-eval", "The predictor's accuracy and picks on held-out shapes, against the nearest rule and the policy");
  auto a = std::make_shared<EvalArgs>();
  cmd->add_option("--predictor", a->predictor, "predictor file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--from", a->from, "measurements (harness CSVs, tuning databases); repeatable")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--shapes", a->shapes, "the held-out shapes (CSV; repeatable): evaluated; the rest is what the "
                                         "nearest rule borrows from")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--policy", a->policy, "a zero-shot policy file to compare with")->check(CLI::ExistingFile);
  cmd->add_option("--mode", a->mode, "timing mode")->capture_default_str();
  cmd->add_option("--z", a->z, "route rule: standard deviations the predicted gain must clear")->capture_default_str();
  cmd->add_option("--out", a->out, "per-shape picks CSV");
  cmd->add_option("--summary", a->summary, "accuracy and per-method summary CSV");
  cmd->add_option("--gpu", a->gpu, "GPU name for CSVs without a run JSON beside them");
  cmd->add_option("--sm-count", a->sm_count, "its SM count")->capture_default_str();
  return [a] { return run_eval(*a); };
});

CommandRegistration predict_registration("predict", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand("predict", "Predicted times of designs and cuBLASLt, and the predictor's best guesses");
  auto a = std::make_shared<PredictArgs>();
  cmd->add_option("--predictor", a->predictor, "predictor file (default: the built-in one for --gpu)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--gpu", a->gpu, "GPU name as the CUDA runtime reports it (default: the predictor's)");
  cmd->add_option("--sm-count", a->sm_count, "SM count (default: the predictor's GPU's)");
  cmd->add_option("--shape", a->shape_list, "M,N,K (repeatable)");
  cmd->add_option("--shapes", a->shapes, "a shapes CSV or cudal2");
  cmd->add_option("--layout", a->layout, "tn or nn")->capture_default_str();
  cmd->add_option("--design", a->designs, "a design to predict (repeatable)");
  cmd->add_option("--top", a->top, "the K best guesses of the design space per shape");
  cmd->add_option("--z", a->z, "route rule: standard deviations the predicted gain must clear")->capture_default_str();
  cmd->add_option("--designs-out", a->designs_out, "write the union of the --top guesses as a designs file");
  return [a] { return run_predict(*a); };
});

}  // namespace
}  // namespace rlgemm::cli
