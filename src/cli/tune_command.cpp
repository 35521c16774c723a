// `rlgemm tune`: learns kernel designs for a list of shapes, or for the linear layers of models
// (--model config.json --batch 1,8,...), recording every measurement in the tuning database; each shape
// starts from the speed predictor's best guesses, then the strategy searches. `rlgemm tune-compare`: the
// sample efficiency of the strategies as a CSV.
//
// The measuring backend is the GPU unless another is named; a run on the synthetic cost model says so at its
// start and at its end.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "cli/command.h"
#include "core/seed.h"
#include "core/stop_signal.h"
#include "core/model_shapes.h"
#include "predict/predictor.h"
#include "rlgemm/error.h"
#include "rlgemm/shapes.h"
#include "search/compare.h"
#include "search/distributed.h"
#include "search/pretrain.h"
#include "search/rl_policy.h"
#include "search/tuner.h"
#include "search/worker.h"
#include "store/store.h"
#ifdef RLGEMM_HAVE_DISPATCH
#include "dispatch/dispatcher.h"
#include "dispatch/tuned_table.h"
#endif
#ifdef RLGEMM_HAVE_MPI
#include "search/mpi_tuner.h"
#endif

namespace rlgemm::cli {
namespace {

// "cudal2", a CSV file of M,N,K rows, or one "M,N,K".
std::vector<Shape> shapes_from(const std::string& spec) {
  if (spec != "cudal2" && spec.find(',') != std::string::npos && !std::filesystem::exists(spec))
    return {parse_shape(spec)};
  return resolve_shapes(spec);
}

struct CommonArgs {
  std::string shapes;
  std::string layout = "tn";
  std::string dtype = "fp16";
  std::string budget;
  std::string db = "rlgemm-tune.db";
  std::string backend;  // "": the GPU where there is one (backend_of)
  std::string gpus = "1";
  std::string mode = "graph";
  int round = 8;
  uint64_t seed = 1;
  double timeout_s = 0;
  double delay_ms = 0;
  bool in_process = false;
};

void add_common(CLI::App* cmd, CommonArgs& a) {
  cmd->add_option("--layout", a.layout, "tn, nn or both")->default_val("tn");
  cmd->add_option("--dtype", a.dtype, "Element type of A, B and C: fp16, bf16 or both (the designs are tuned for it)")
      ->default_val("fp16");
  cmd->add_option("--db", a.db, "Tuning database (SQLite; created if missing)")->default_val("rlgemm-tune.db");
  cmd->add_option("--backend", a.backend,
                  "Measuring backend: gpu (the default, where a GPU is present) or synthetic (the CPU cost model: "
                  "estimates, not measurements)");
  cmd->add_option("--gpus", a.gpus, "all, a count, or ordinals (0,2): one worker per GPU")->default_val("1");
  cmd->add_option("--mode", a.mode,
                  "Timing method of the paired reward: graph (the GPU's time alone, calls captured in a CUDA graph), "
                  "offline (back to back, host launch cost included) or server (each call after an idle gap)")
      ->default_val("graph");
  cmd->add_option("--round", a.round, "Candidates per strategy round")->default_val(8);
  cmd->add_option("--seed", a.seed, "Seed of the strategies")->default_val(1);
  cmd->add_option("--timeout", a.timeout_s, "Watchdog per candidate, seconds (default 300 gpu, 30 synthetic)");
  cmd->add_option("--delay-ms", a.delay_ms, "Synthetic backend: sleep per measurement (simulates a GPU's pace)");
  cmd->add_flag("--in-process", a.in_process, "Measure in this process instead of isolated workers");
}

// The backend asked for by name, else the GPU. Without a GPU the cost model must be asked for by name: a tuner
// that quietly simulated would hand out estimates as if they were measurements.
std::string backend_of(const CommonArgs& a) {
  if (!a.backend.empty()) return a.backend;
  search::BackendOptions gpu;
  gpu.backend = "gpu";
  int devices = 0;
  try {
    devices = search::backend_device_count(gpu);
  } catch (const Error&) {
    devices = 0;  // a build without the GPU backend
  }
  if (devices > 0) return "gpu";
  throw Error(ErrorKind::kNoDevice,
              "no GPU found for the tuner's default backend (gpu); to tune on the CPU cost model instead, ask for it "
              "by name: --backend synthetic (its times are estimates, not measurements)");
}

// The arguments with the backend resolved.
CommonArgs resolved(CommonArgs a) {
  a.backend = backend_of(a);
  return a;
}

void warn_if_synthetic(const CommonArgs& a, const char* when) {
  if (a.backend != "synthetic") return;
  std::fprintf(stderr,
               "\n*** rlgemm tune: SYNTHETIC BACKEND (%s) ***\n"
               "*** Every time and speedup of this run is the CPU cost model's estimate, not a GPU measurement. ***\n"
               "*** Leave out --backend (or give --backend gpu) on a GPU machine to measure.                    ***\n\n",
               when);
}

search::MeasurerSetup measurer_setup(const CommonArgs& a) {
  search::MeasurerSetup setup;
  setup.backend.backend = a.backend;
  setup.backend.delay_ms = a.delay_ms;
  setup.gpus = a.gpus;
  setup.isolated = !a.in_process;
  setup.timeout_s = a.timeout_s > 0 ? a.timeout_s : a.backend == "synthetic" ? 30 : 300;
  if (setup.isolated) setup.worker_exe = self_exe();
  return setup;
}

search::MeasurerPtr measurer_for(const CommonArgs& a) { return search::make_measurer(measurer_setup(a)); }

std::vector<Problem> problems_of(const std::vector<Shape>& shapes, const CommonArgs& a) {
  std::vector<Problem> problems;
  // Layout by layout (and element type by type): a compiled design serves every shape of its layout and type,
  // so its compile is paid once.
  for (DType dtype : parse_dtypes(a.dtype))
    for (Layout layout : parse_layouts(a.layout))
      for (const Shape& s : shapes) problems.push_back({s, layout, dtype});
  return problems;
}

std::vector<Problem> problems_for(const CommonArgs& a) { return problems_of(shapes_from(a.shapes), a); }

struct TuneArgs {
  CommonArgs common;
  std::string strategy = "rl";
  std::string policy;
  std::string seed_designs;  // a designs file measured first on every shape
  std::vector<std::string> seed_tables;  // tuned tables whose rows for a shape (this GPU's) are measured first on it
  std::vector<std::string> seed_neighbors;  // tuned tables whose rows nearest to a shape give its next designs
  int neighbors = 3;                        // how many of those designs a shape measures
  bool route_seeds = true;                  // each shape measures first what a default handle would check for it
  bool confirm = true;                      // each shape's claimed best measured again (TuneOptions::confirm)
  bool independent = false;  // every shape's candidates depend only on it, the seed and the starting policy
  bool mpi = false;
  std::vector<std::string> models;  // config.json files
  std::string batch;                // token counts for --model
  std::string predictor;            // "": the built-in predictor for the GPU
  int guesses = 4;                  // the predictor's best guesses measured first on each shape
  int wave_fit = 2;                 // of the first designs, how many again with a width fitted to the waves
  bool clusters_any_raster = false; // --clusters-any-raster: clusters across the raster's direction too
  std::string summary;              // per-model summary CSV
  std::string shard;                // --shapes: "I/N", this run's part of the list (runs on several GPUs)
};

// One tuner run: a model's shapes, or the --shapes list.
struct Job {
  std::string label;
  std::vector<Problem> problems;
};

std::vector<Job> jobs_of(const TuneArgs& args) {
  const auto& a = args.common;
  if (args.models.empty() == a.shapes.empty())
    fail("give --shapes (a shape list) or --model (config.json files), one of them");
  if (!args.batch.empty() && args.models.empty())
    fail("--batch gives the token counts of --model; the candidates per strategy round are --round");
  if (args.models.empty()) {
    if (args.shard.empty()) return {{a.shapes, problems_for(a)}};
    const Shard shard = parse_shard(args.shard);
    const std::vector<Shape> all = shapes_from(a.shapes);
    const std::vector<Shape> part = shard_of(all, shard);
    if (part.empty())
      fail("--shard " + args.shard + " holds no shape: " + a.shapes + " has " + std::to_string(all.size()));
    return {{a.shapes + " (shard " + args.shard + ")", problems_of(part, a)}};
  }
  if (!args.shard.empty()) fail("--shard splits a --shapes list; a model's layers are tuned whole");
  std::vector<Job> jobs;
  const std::vector<int64_t> tokens = parse_token_counts(args.batch.empty() ? "1,8,32,128,512,2048" : args.batch);
  for (const std::string& path : args.models) {
    const ModelConfig model = load_model_config(path);
    std::vector<Shape> shapes;
    for (const ModelGemm& g : model_gemms(model, tokens)) shapes.push_back(g.shape);
    jobs.push_back({model.name, problems_of(shapes, a)});
  }
  return jobs;
}

// Every job's problems, each once, in order.
std::vector<Problem> all_problems(const std::vector<Job>& jobs) {
  std::vector<Problem> all;
  for (const Job& job : jobs)
    for (const Problem& p : job.problems)
      if (std::find(all.begin(), all.end(), p) == all.end()) all.push_back(p);
  return all;
}

struct JobSummary {
  std::string label;
  size_t problems = 0;
  size_t tuned = 0;   // problems with a correct design
  size_t faster = 0;  // ... faster than lt_auto beyond the interval (its lower bound above 0)
  int64_t evaluations = 0;
  double wall_s = 0;
  double geomean_kernel = 0;      // the best design's paired gain over lt_auto
  double geomean_with_floor = 0;  // that where it is faster beyond its interval, else 1 (cuBLASLt serves)
};

JobSummary summarize_job(const Job& job, const std::vector<search::ProblemOutcome>& outcomes, double wall_s) {
  JobSummary s;
  s.label = job.label;
  s.problems = job.problems.size();
  s.wall_s = wall_s;
  double log_kernel = 0, log_floor = 0;
  for (const auto& o : outcomes) {
    if (std::find(job.problems.begin(), job.problems.end(), o.problem) == job.problems.end()) continue;
    s.evaluations += int64_t(o.evaluations.size());
    if (o.best_design.empty()) continue;
    ++s.tuned;
    s.faster += o.faster() ? 1 : 0;
    log_kernel += o.best.log_ratio;
    log_floor += o.faster() ? o.best.log_ratio : 0.0;
  }
  if (s.tuned) {
    s.geomean_kernel = std::exp(log_kernel / double(s.tuned));
    s.geomean_with_floor = std::exp(log_floor / double(s.tuned));
  }
  return s;
}

void report_jobs(const TuneArgs& args, const CommonArgs& a, const GpuIdentity& gpu,
                 const std::vector<JobSummary>& summaries) {
  std::fprintf(stderr,
               "\nrlgemm tune: summary%s, %s mode (gain = lt_auto time / best design time in the same interleaved "
               "rounds, geometric mean; a kernel counts as faster where the 95%% interval of its gain lies above 1)\n",
               a.backend == "synthetic" ? " of SYNTHETIC estimates" : "", a.mode.c_str());
  for (const JobSummary& s : summaries)
    std::fprintf(stderr,
                 "  %-32s %4zu shapes  %6lld evaluations  wall %8.1f s  gain %.4f (kernel), %.4f (with the cuBLASLt "
                 "floor)  kernel faster on %zu of %zu\n",
                 s.label.c_str(), s.problems, static_cast<long long>(s.evaluations), s.wall_s, s.geomean_kernel,
                 s.geomean_with_floor, s.faster, s.tuned);
  if (args.summary.empty()) return;
  std::ofstream out(args.summary);
  if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + args.summary);
  out << "model,backend,gpu,shapes,tuned,kernel_faster,evaluations,wall_s,geomean_gain_kernel,geomean_gain_with_floor\n";
  char buf[512];
  for (const JobSummary& s : summaries) {
    std::snprintf(buf, sizeof buf, "%s,%s,%s,%zu,%zu,%zu,%lld,%.1f,%.4f,%.4f\n", s.label.c_str(), a.backend.c_str(),
                  gpu.name.c_str(), s.problems, s.tuned, s.faster, static_cast<long long>(s.evaluations), s.wall_s,
                  s.geomean_kernel, s.geomean_with_floor);
    out << buf;
  }
}

// The design space a tune searches: the GPU's default, with clusters across the raster when asked for.
search::SpaceSpec space_spec(const TuneArgs& args, int cc_major) {
  search::SpaceSpec spec = search::SpaceSpec::for_gpu(cc_major);
  spec.clusters_along_raster = !args.clusters_any_raster;
  return spec;
}

// What tunes the problems: one strategy for all of them in turn, or (independent problems) a strategy per
// problem seeded from it, rl ones each on a copy of the starting policy.
struct Strategies {
  std::unique_ptr<search::Policy> policy;  // rl: shared, or the starting point of every problem
  std::unique_ptr<search::Policy> learned; // rl, independent, with --policy: what the problems taught
  search::StrategyPtr shared;
  search::StrategyFactory factory;
};

Strategies make_strategies(const TuneArgs& args, search::DesignSpaces& spaces, Layout first_layout, bool independent) {
  const uint64_t seed = args.common.seed;
  Strategies s;
  if (args.strategy == "rl") {
    const search::DesignSpace& first = spaces.of(first_layout);
    if (!args.policy.empty() && std::filesystem::exists(args.policy)) {
      search::Policy loaded = search::Policy::load(args.policy);
      const bool other_space = loaded.space_signature() != first.signature();
      s.policy = std::make_unique<search::Policy>(loaded.adapted_to(first));
      std::fprintf(stderr, "rlgemm tune: warm start from %s (%lld updates)%s\n", args.policy.c_str(),
                   static_cast<long long>(s.policy->updates()),
                   other_space ? ", trained on another design space: its options matched by name to this GPU's, "
                                 "the new ones starting at their field's average"
                               : "");
    } else {
      s.policy = std::make_unique<search::Policy>(first, search::RlOptions{}, seed);
    }
  }
  if (!independent) {
    if (args.strategy == "rl") s.shared = search::make_rl_strategy(*s.policy, seed);
    else if (args.strategy == "evo") s.shared = search::make_evo_strategy(seed);
    else s.shared = search::make_random_strategy(seed);
    return s;
  }
  if (args.strategy == "rl" && !args.policy.empty()) s.learned = std::make_unique<search::Policy>(*s.policy);
  const search::Policy* start = s.policy.get();
  const std::string name = args.strategy;
  s.factory = [start, name, seed](const Problem& p) {
    const uint64_t own = problem_seed(seed, p);
    if (name == "rl") return search::make_rl_strategy_from(*start, own);
    return name == "evo" ? search::make_evo_strategy(own) : search::make_random_strategy(own);
  };
  return s;
}

// Each shape starts from the speed predictor's best guesses: --predictor FILE, else the built-in predictor
// for the GPU (or one of its architecture).
void set_first_guesses(const TuneArgs& args, const GpuIdentity& gpu, search::TuneOptions& options) {
  if (args.guesses <= 0) return;
  std::shared_ptr<const predict::Predictor> loaded;
  if (!args.predictor.empty()) loaded = std::make_shared<predict::Predictor>(predict::Predictor::load(args.predictor));
  const predict::GpuTraits traits = predict::traits_of(gpu);
  // The built-in predictor learned in the mode being tuned, where there is one: a kernel's rank in GPU time is not
  // its rank offline, where the launch's host cost counts.
  const predict::Predictor* predictor = loaded ? loaded.get() : predict::builtin_predictor(traits, args.common.mode);
  if (!predictor) {
    std::fprintf(stderr, "rlgemm tune: no predictor for %s; the strategy starts alone\n", gpu.name.c_str());
    return;
  }
  options.seeds_for = [loaded, predictor, traits, k = args.guesses](const Problem& problem) {
    // The predictors learned fp16 kernels: their guesses for the fp16 problem of the same shape start a
    // problem of another element type too (the tuner runs them in the problem's type, then measures).
    Problem as_fp16 = problem;
    as_fp16.dtype = DType::kF16;
    std::vector<Design> designs;
    for (const predict::Candidate& c : predictor->best_guesses(traits, as_fp16, k)) designs.push_back(c.design);
    return designs;
  };
  std::fprintf(stderr, "rlgemm tune: each shape starts from the predictor's %d best guesses (%s, learned in %s mode%s)\n",
               args.guesses, loaded ? args.predictor.c_str() : "built in", predictor->mode().c_str(),
               predictor->trained_on_gpu(gpu.name) ? "" : ", trained on another GPU of this architecture");
}

// --seed-table: each problem starts from its own row of the table, the row of the GPU being tuned (the same
// shape, layout and element type), so that `tune --seed-table T --budget 1 --guesses 0` measures exactly what
// the table claims, paired with the reference (scripts/verify-tuned-table). Given several times, a problem starts
// from its row of each table, in the order given, a design two tables share measured once (a new GPU or element
// type seeded from this GPU's other table and another GPU's table of the same element type). A table without a
// row for this GPU is refused: every shape would start from nothing, and the budget would go to the strategy
// instead.
#ifdef RLGEMM_HAVE_DISPATCH
// This GPU's rows of each table, refused where a table has none: every shape would start from nothing, and the
// budget would go to the strategy instead.
std::vector<std::vector<dispatch::TunedRow>> gpu_rows_of(const std::vector<std::string>& paths,
                                                          const GpuIdentity& gpu, const char* option) {
  std::vector<std::vector<dispatch::TunedRow>> loaded;
  for (const std::string& path : paths) {
    std::vector<dispatch::TunedRow> rows = dispatch::rows_for_gpu(dispatch::load_tuned_table(path), gpu.name);
    if (rows.empty())
      fail(std::string(option) + " " + path + " has no row for this GPU ('" + gpu.name +
           "'): a table's rows are keyed by the device name in its gpu column");
    loaded.push_back(std::move(rows));
  }
  return loaded;
}

std::string joined(const std::vector<std::string>& paths) {
  std::string names;
  for (const std::string& path : paths) names += (names.empty() ? "" : ", ") + path;
  return names;
}
#endif

void set_table_seeds(const TuneArgs& args, const GpuIdentity& gpu, search::TuneOptions& options) {
  if (args.seed_tables.empty()) return;
#ifdef RLGEMM_HAVE_DISPATCH
  // A table holds one row per (GPU, problem) (parse_tuned_table refuses duplicates).
  auto tables = std::make_shared<const std::vector<std::vector<dispatch::TunedRow>>>(
      gpu_rows_of(args.seed_tables, gpu, "--seed-table"));
  auto design_of = [tables, gpu = gpu.name](const Problem& problem) {
    std::vector<Design> designs;
    for (const std::vector<dispatch::TunedRow>& table : *tables) {
      const size_t at = dispatch::row_index(table, gpu, problem);
      if (at != table.size() && std::find(designs.begin(), designs.end(), table[at].design) == designs.end())
        designs.push_back(table[at].design);
    }
    return designs;
  };
  const size_t covered = static_cast<size_t>(std::count_if(
      options.problems.begin(), options.problems.end(), [&](const Problem& p) { return !design_of(p).empty(); }));
  std::fprintf(stderr, "rlgemm tune: %zu of %zu problems start from their rows of %s\n", covered,
               options.problems.size(), joined(args.seed_tables).c_str());
  options.table_seeds_for = design_of;
#else
  (void)gpu;
  (void)options;
  fail("--seed-table: this rlgemm was built without the dispatch stage, which reads tuned tables "
       "(configure with RLGEMM_STAGES including dispatch)");
#endif
}

// --seed-neighbors: each problem measures next the designs of the table rows nearest to it (this GPU's rows of its
// layout, either element type, its own row left out: dispatch::nearest_designs), the first --neighbors that it can
// run. What the tune found on nearby shapes, and on the same shape in the other element type, is tried on every
// shape: a tune of a few evaluations a shape leaves most of them untried (the grid's bf16 winners, measured as fp16
// on their shapes, held on 153 of 168 where the fp16 tune had found less).
void set_neighbor_seeds(const TuneArgs& args, const GpuIdentity& gpu, search::TuneOptions& options) {
  if (args.seed_neighbors.empty()) return;
#ifdef RLGEMM_HAVE_DISPATCH
  std::vector<dispatch::TunedRow> rows;
  for (auto& table : gpu_rows_of(args.seed_neighbors, gpu, "--seed-neighbors"))
    rows.insert(rows.end(), table.begin(), table.end());
  std::fprintf(stderr, "rlgemm tune: each problem measures the designs of its %d nearest rows of %s (%zu rows)\n",
               args.neighbors, joined(args.seed_neighbors).c_str(), rows.size());
  options.neighbor_seeds_for = [rows = std::make_shared<const std::vector<dispatch::TunedRow>>(std::move(rows))](
                                   const Problem& problem) { return dispatch::nearest_designs(*rows, problem); };
  options.neighbors = args.neighbors;
#else
  (void)gpu;
  (void)options;
  fail("--seed-neighbors: this rlgemm was built without the dispatch stage, which reads tuned tables "
       "(configure with RLGEMM_STAGES including dispatch)");
#endif
}

// Each problem measures, right after its --seed-table rows, what a default handle (no tune, no options) would check
// for it at its first use: the built-in table's row for this GPU where there is one, else the designs of the
// handle's predicted route (predict::route_guess: the built-in predictor's best guess where its gain clears the
// checked-route rule, and its design fitted to the waves) and the design of the table's row nearest to it
// (HandleOptions::nearest_kernels). A tuned database's row replaces the handle's
// prediction: without them a tune of six evaluations a shape kept, on some held-out shapes, a design slower than
// the one the default handle serves there (16x2048x4608 in graphs: a tuned design at 1.02 of the best vendor call
// against the predicted one's 1.23; bench/results/h200/llm-tuned-fp16-vs-zero-shot.txt).
void set_route_seeds(const TuneArgs& args, const GpuIdentity& gpu, search::TuneOptions& options) {
  if (!args.route_seeds) return;
  const predict::GpuTraits traits = predict::traits_of(gpu);
  const predict::Predictor* predictor = predict::builtin_predictor(traits);
  std::function<std::optional<Design>(const Problem&)> table_row = [](const Problem&) { return std::nullopt; };
  // HandleOptions::nearest_kernels (on by default): the nearest row's design, checked beside the prediction.
  std::function<std::vector<Design>(const Problem&, const std::vector<Design>&)> nearest_row =
      [](const Problem&, const std::vector<Design>&) { return std::vector<Design>{}; };
  bool have_table = false;
#ifdef RLGEMM_HAVE_DISPATCH
  auto rows = std::make_shared<const std::vector<dispatch::TunedRow>>(
      dispatch::rows_for_gpu(dispatch::embedded_tuned_rows(), gpu.name));
  have_table = !rows->empty();
  table_row = [rows, name = gpu.name](const Problem& problem) -> std::optional<Design> {
    const size_t at = dispatch::row_index(*rows, name, problem);
    if (at == rows->size()) return std::nullopt;
    return (*rows)[at].design;
  };
  const dispatch::Target target{gpu.name, gpu.cc_major, gpu.cc_minor, smem_limit_or_hopper(gpu.smem_per_block_optin)};
  nearest_row = [rows, target](const Problem& problem, const std::vector<Design>& taken) {
    return dispatch::runnable_nearest_designs(*rows, problem, target, 1, taken);
  };
#endif
  if (!predictor && !have_table) {
    std::fprintf(stderr, "rlgemm tune: no built-in table or predictor for %s: no shape starts from a handle's route\n",
                 gpu.name.c_str());
    return;
  }
  const int smem = smem_limit_or_hopper(gpu.smem_per_block_optin);
  // A problem's first round is worked out more than once (ahead of its turn, and to see whether a resumed run
  // still lacks a seed), and the predictor's scan is the costly part: each problem's route is kept.
  struct Known {
    std::mutex mutex;
    std::map<std::tuple<int64_t, int64_t, int64_t, int, int>, std::vector<Design>> routes;
  };
  auto known = std::make_shared<Known>();
  options.route_seeds_for = [predictor, traits, table_row, nearest_row, sm_count = gpu.sm_count, smem,
                             known](const Problem& problem) {
    if (const auto row = table_row(problem)) return std::vector<Design>{*row};
    const auto key = std::make_tuple(problem.shape.m, problem.shape.n, problem.shape.k, int(problem.layout),
                                     int(problem.dtype));
    {
      std::lock_guard<std::mutex> lock(known->mutex);
      if (const auto it = known->routes.find(key); it != known->routes.end()) return it->second;
    }
    std::vector<Design> designs;
    if (predictor) {
      const auto route = predict::route_guess(
          *predictor, traits, problem, sm_count, smem, predict::kCheckedRouteZ,
          [&](const Design& d) { return !why_invalid(d, problem.layout, smem) && !why_unfit(d, problem); });
      if (route) designs = route->designs(problem.dtype);
    }
    for (const Design& d : nearest_row(problem, designs)) designs.push_back(d);
    std::lock_guard<std::mutex> lock(known->mutex);
    known->routes.emplace(key, designs);
    return designs;
  };
  std::fprintf(stderr, "rlgemm tune: each shape measures first what a default handle would check for it (%s)\n",
               have_table ? "its built-in table row, else the built-in predictor's route and the nearest row's design"
                          : "the built-in predictor's route");
}

// The options every way of tuning shares; after each problem the policy file is saved (rl with --policy).
search::TuneOptions tune_options(const TuneArgs& args, const std::vector<Problem>& problems, Strategies& strategies,
                                 const GpuIdentity& gpu, std::shared_ptr<search::DesignSpaces> spaces) {
  const auto& a = args.common;
  search::TuneOptions options;
  options.problems = problems;
  options.budget = search::Budget::parse(a.budget);
  if (!args.seed_designs.empty()) options.seed_designs = read_designs(args.seed_designs);
  options.mode = parse_timing_mode(a.mode);
  options.batch = a.round;
  options.progress = stderr;
  options.wave_fit = args.wave_fit;
  set_table_seeds(args, gpu, options);
  set_route_seeds(args, gpu, options);
  options.confirm = args.confirm;
  set_neighbor_seeds(args, gpu, options);
  set_first_guesses(args, gpu, options);
  if (args.policy.empty() || !strategies.policy) return options;
  if (!strategies.learned) {
    search::Policy* policy = strategies.policy.get();
    options.after_problem = [policy, file = args.policy](const search::ProblemOutcome&) { policy->save(file); };
    return options;
  }
  // Independent problems trained copies; the policy file learns from each problem's measurements instead.
  search::Policy* learned = strategies.learned.get();
  const int batch = std::max(a.round, 1);
  options.after_problem = [learned, spaces, sm = gpu.sm_count, batch,
                           file = args.policy](const search::ProblemOutcome& o) {
    const int rounds = int((o.evaluations.size() + size_t(batch) - 1) / size_t(batch));
    if (search::learn_from_outcome(*learned, *spaces, o, sm, rounds)) learned->save(file);
  };
  return options;
}

// Where the measuring took its time, summed over the problems (the measuring side's clock), then, where the
// tuner kept its own (Tuner::run), how much of its wall time was waiting for measurements and how much its own work.
std::string phase_summary(const std::vector<search::ProblemOutcome>& outcomes) {
  PhaseSeconds s;
  double compile = 0;
  int measured = 0, confirmations = 0;
  for (const auto& o : outcomes) {
    s += o.seconds;
    compile += o.compile_seconds;
    measured += o.measured_now;
    confirmations += o.confirmations;
  }
  char text[640];
  std::snprintf(text, sizeof text,
                "measuring time by phase over %d measurements and %d second measurements of a best design: operands "
                "and fp64 references %.1f s, the reference's "
                "choice %.1f s, correctness checks %.1f s, timed rounds %.1f s, compiles %.1f s (each kernel's own; "
                "%.1f s of wall time building batches ahead), kernel loads %.1f s; these phases %.1f s in all",
                measured, confirmations, s.operands, s.reference, s.check, s.rounds, compile, s.build, s.load,
                s.total());
  std::string out = text;
  double wall = 0, waiting = 0;
  for (const auto& o : outcomes) {
    wall += o.wall_seconds;
    waiting += o.waiting_seconds;
  }
  if (wall > 0) {
    std::snprintf(text, sizeof text,
                  "; of %.1f s tuning the problems, %.1f s waiting for measurements, %.1f s the tuner's own work "
                  "(proposals, the predictor's guesses, the database, teaching the policy)",
                  wall, waiting, wall - waiting);
    out += text;
  }
  return out;
}

// One CSV row per problem on stdout: the best design's paired gain over lt_auto with its 95% interval (as
// ratios), the rounds it rests on, and whether it is faster beyond the interval.
void print_outcomes(const std::vector<search::ProblemOutcome>& outcomes, const CommonArgs& a) {
  std::printf("layout,dtype,m,n,k,mode,evaluations,measured_now,reference_us,best_us,speedup,speedup_low,speedup_high,"
              "rounds,faster,design\n");
  double log_sum = 0;
  int counted = 0, faster = 0;
  for (const auto& o : outcomes) {
    const bool tuned = !o.best_design.empty();
    std::printf("%s,%s,%lld,%lld,%lld,%s,%zu,%d,%.4f,%.4f,%.4f,%.4f,%.4f,%d,%d,%s\n",
                std::string(to_string(o.problem.layout)).c_str(), std::string(to_string(o.problem.dtype)).c_str(),
                static_cast<long long>(o.problem.shape.m), static_cast<long long>(o.problem.shape.n),
                static_cast<long long>(o.problem.shape.k), a.mode.c_str(), o.evaluations.size(), o.measured_now,
                o.reference_us(), o.best_us, o.speedup(), tuned ? 1 + o.best.low : 0.0, tuned ? 1 + o.best.high : 0.0,
                o.best.rounds, o.faster() ? 1 : 0, o.best_design.c_str());
    if (tuned) {
      log_sum += o.best.log_ratio;
      ++counted;
      faster += o.faster() ? 1 : 0;
    }
  }
  std::fflush(stdout);
  if (counted)
    std::fprintf(stderr,
                 "rlgemm tune: geometric mean paired gain over lt_auto %.4f on %d problems (%s mode); faster beyond "
                 "the 95%% interval on %d\n",
                 std::exp(log_sum / counted), counted, a.mode.c_str(), faster);
  std::fprintf(stderr, "rlgemm tune: %s\n", phase_summary(outcomes).c_str());
}

void check_tune_args(const TuneArgs& args) {
  if (args.strategy != "rl" && args.strategy != "evo" && args.strategy != "random")
    fail("unknown strategy '" + args.strategy + "': use rl, evo or random");
  if (!args.policy.empty() && args.strategy != "rl") fail("--policy goes with --strategy rl");
  if (args.guesses < 0) fail("--guesses must be >= 0");
  if (args.wave_fit < 0) fail("--wave-fit must be >= 0");
  if (args.neighbors < 1) fail("--neighbors must be >= 1");
  search::Budget::parse(args.common.budget);
}

#ifdef RLGEMM_HAVE_MPI
// Every rank runs this: rank 0 coordinates and measures, the others measure (search/mpi_tuner.h).
int run_tune_mpi(const TuneArgs& args) {
  search::mpi::World world;
  try {
    check_tune_args(args);
    const std::vector<Job> jobs = jobs_of(args);
    const auto problems = all_problems(jobs);
    const CommonArgs a = resolved(args.common);
    search::MeasurerSetup setup = measurer_setup(a);
    if (world.local_size() > 1) {
      // Ranks sharing a machine take consecutive GPUs: rank L of the machine the L-th group of the count.
      const int per_rank = int(search::parse_gpu_selection(a.gpus, setup.backend).size());
      search::parse_gpu_selection(a.gpus, setup.backend, per_rank);  // refuses "all" and lists of ordinals
      setup.first_gpu = world.local_rank() * per_rank;
    }
    search::MeasurerPtr measurer;
    search::LaneHello hello;
    try {
      measurer = search::make_measurer(setup);
      hello = search::hello_of(*measurer);
    } catch (const Error& e) {
      if (e.kind() == ErrorKind::kInvalidInput) throw;
      hello.error = e.what();
      hello.error_kind = int(e.kind());
    }
    if (world.rank() != 0) {
      search::mpi::serve_rank(world, measurer.get(), hello);
      return 0;
    }
    warn_if_synthetic(a, "start");
    Store store(a.db);
    std::vector<search::ProblemOutcome> outcomes;
    GpuIdentity gpu_used;
    const auto start = std::chrono::steady_clock::now();
    {
      search::mpi::RankLanes lanes(world, measurer.get(), hello);
      std::optional<GpuIdentity> gpu;
      for (int lane = 0; lane < lanes.lanes() && !gpu; ++lane)
        if (lanes.hello(lane).error.empty()) gpu = lanes.hello(lane).gpu;
      if (!gpu) throw Error(ErrorKind::kNoDevice, "no rank can measure: rank 0: " + lanes.hello(0).error);
      gpu_used = *gpu;
      auto spaces = std::make_shared<search::DesignSpaces>(space_spec(args, gpu->cc_major),
                                                           smem_limit_or_hopper(gpu->smem_per_block_optin));
      Strategies strategies = make_strategies(args, *spaces, problems.front().layout, true);
      const search::TuneOptions options = tune_options(args, problems, strategies, *gpu, spaces);
      std::fprintf(stderr, "rlgemm tune: %zu problems on %d rank%s (%s), strategy %s, database %s\n",
                   problems.size(), world.size(), world.size() == 1 ? "" : "s", gpu->name.c_str(),
                   args.strategy.c_str(), a.db.c_str());
      outcomes = search::tune_distributed(store, lanes, strategies.factory, spaces->spec(), options);
    }
    print_outcomes(outcomes, a);
    if (!args.models.empty()) {
      // The ranks tune every model's shapes at once: the wall time is the whole run's, on every line.
      const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::vector<JobSummary> summaries;
      for (const Job& job : jobs) summaries.push_back(summarize_job(job, outcomes, wall_s));
      report_jobs(args, a, gpu_used, summaries);
    }
    warn_if_synthetic(a, "end");
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "rlgemm: error (rank %d of %d): %s\n", world.rank(), world.size(), e.what());
    world.abort(exit_code(e.kind()));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlgemm: error (rank %d of %d): %s\n", world.rank(), world.size(), e.what());
    world.abort(1);
  }
}
#endif

int run_tune(const TuneArgs& args) {
  if (args.mpi) {
#ifdef RLGEMM_HAVE_MPI
    return run_tune_mpi(args);
#else
    fail("--mpi: this rlgemm was built without MPI; install OpenMPI (libopenmpi-dev) and build again "
         "(scripts/setup), or tune on one machine with --gpus");
#endif
  }
  // Everything the user typed is checked before a worker starts.
  check_tune_args(args);
  // Ctrl-C or SIGTERM (timeout(1)), from here on: the run ends once the batch in flight is recorded, and says what
  // it tuned.
  const StopSignal stop;
  const std::vector<Job> jobs = jobs_of(args);
  const CommonArgs a = resolved(args.common);
  warn_if_synthetic(a, "start");
  Store store(a.db);
  auto measurer = measurer_for(a);
  const GpuIdentity gpu = measurer->gpu();
  // The design spaces, built once for the policy, the tuner of every job and what the policy file learns.
  auto spaces = std::make_shared<search::DesignSpaces>(space_spec(args, gpu.cc_major),
                                                       smem_limit_or_hopper(gpu.smem_per_block_optin));
  Strategies strategies = make_strategies(args, *spaces, jobs.front().problems.front().layout, args.independent);
  search::TuneOptions options = tune_options(args, jobs.front().problems, strategies, gpu, spaces);
  options.stop = &stop.requested();
  std::vector<search::ProblemOutcome> outcomes;
  std::vector<JobSummary> summaries;
  size_t planned = 0;
  for (const Job& job : jobs) planned += job.problems.size();
  for (const Job& job : jobs) {
    if (stop.requested()) break;
    options.problems = job.problems;
    std::fprintf(stderr, "rlgemm tune: %s: %zu problems on %s, strategy %s, database %s\n", job.label.c_str(),
                 job.problems.size(), gpu.name.c_str(), args.strategy.c_str(), a.db.c_str());
    const auto start = std::chrono::steady_clock::now();
    std::vector<search::ProblemOutcome> part;
    if (args.independent) {
      search::Tuner tuner(store, *measurer, strategies.factory, spaces);
      part = tuner.run(options);
    } else {
      search::Tuner tuner(store, *measurer, *strategies.shared, spaces);
      part = tuner.run(options);
    }
    summaries.push_back(
        summarize_job(job, part, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()));
    outcomes.insert(outcomes.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  print_outcomes(outcomes, a);
  if (!args.models.empty()) report_jobs(args, a, gpu, summaries);
  if (stop.requested()) {
    const bool cut = !outcomes.empty() && outcomes.back().cut_short;
    std::fprintf(stderr,
                 "rlgemm tune: stopped by a signal after %zu of %zu problems%s; every measurement is in %s, and the "
                 "same command goes on from there\n",
                 outcomes.size() - (cut ? 1 : 0), planned, cut ? " (and part of the next)" : "", a.db.c_str());
  }
  warn_if_synthetic(a, "end");
  return stop.requested() ? 130 : 0;  // as rlgemm bench: a script sees that the run did not finish
}

struct CompareArgs {
  CommonArgs common;
  std::string strategies = "rl,evo,random";
  int sample = 0;
  int seeds = 1;
  double quality = 0.98;
  std::string out;
  std::string summary;
  std::string policy;
  std::string warm_policy;
};

int run_compare(const CompareArgs& args) {
  const auto& a = args.common;
  search::CompareOptions options;
  options.problems = problems_for(a);
  if (args.sample > 0 && size_t(args.sample) < options.problems.size()) {
    // A fixed subset, the same on every run and machine: entry (7 i mod block) of the i-th of `sample` equal
    // blocks of the list. The offset keeps a list ordered like the grid (K fastest) from giving one K only;
    // on the built-in grid, --sample 50 is bench/shapes/sample50.csv.
    std::vector<Problem> chosen;
    const double step = double(options.problems.size()) / args.sample;
    const size_t block = std::max<size_t>(1, size_t(step));
    for (int i = 0; i < args.sample; ++i)
      chosen.push_back(options.problems[std::min(options.problems.size() - 1, size_t(i * step) + size_t(i) * 7 % block)]);
    options.problems = std::move(chosen);
  }
  const search::Budget budget = search::Budget::parse(a.budget);
  if (budget.evaluations <= 0) fail("tune-compare needs its budget as a number of evaluations per problem");
  options.budget = budget.evaluations;
  options.strategies.clear();
  for (size_t start = 0; start <= args.strategies.size();) {
    const size_t comma = std::min(args.strategies.find(',', start), args.strategies.size());
    options.strategies.push_back(args.strategies.substr(start, comma - start));
    start = comma + 1;
  }
  options.seeds = args.seeds;
  options.first_seed = a.seed;
  options.batch = a.round;
  options.quality = args.quality;
  options.mode = parse_timing_mode(a.mode);
  options.progress = stderr;
  options.save_policy = args.policy;
  options.warm_policy = args.warm_policy;
  const CommonArgs r = resolved(a);
  warn_if_synthetic(r, "start");
  Store store(r.db);
  auto measurer = measurer_for(r);
  options.spec = search::SpaceSpec::for_gpu(measurer->gpu().cc_major);
  const auto result = search::compare_strategies(store, *measurer, options);
  if (args.out.empty() || args.out == "-") {
    search::write_compare_csv(result, std::cout);
  } else {
    std::ofstream out(args.out);
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + args.out);
    search::write_compare_csv(result, out);
  }
  if (!args.summary.empty()) {
    std::ofstream out(args.summary);
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + args.summary);
    search::write_compare_summary_csv(result, out);
  }
  search::write_compare_summary_csv(result, std::cerr);
  warn_if_synthetic(r, "end");
  return 0;
}

CommandRegistration tune_registration("tune", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand("tune", "Learn kernel designs for shapes or a model's layers, recording every "
                                         "measurement (resumable)");
  auto args = std::make_shared<TuneArgs>();
  cmd->add_option("--shapes", args->common.shapes, "cudal2, a CSV file of M,N,K rows, or one M,N,K");
  cmd->add_option("--model", args->models,
                  "a Hugging Face config.json (repeatable): tune the model's linear layers (q/k/v/o, gate/up/down, "
                  "fused qkv and gate_up, MoE experts, lm_head) at the --batch token counts")
      ->check(CLI::ExistingFile);
  cmd->add_option("--batch", args->batch, "--model: token counts, comma-separated (default 1,8,32,128,512,2048)");
  cmd->add_option("--shard", args->shard,
                  "I/N: tune every N-th shape of --shapes starting at I (N runs, e.g. one per GPU, each with its own "
                  "--db and --policy; tuned-table takes their databases together)");
  add_common(cmd, args->common);
  cmd->add_option("--budget", args->common.budget,
                  "Evaluations per shape (200) or minutes for the run, for each model (30min)")
      ->required();
  cmd->add_option("--strategy", args->strategy, "rl, evo or random")->default_val("rl");
  cmd->add_option("--policy", args->policy, "rl: policy file to warm-start from and save to after every shape");
  cmd->add_option("--seed-designs", args->seed_designs,
                  "a designs file (one per line, e.g. bench/designs/grid16.txt) measured first on every shape")
      ->check(CLI::ExistingFile);
  cmd->add_option("--seed-table", args->seed_tables,
                  "a tuned table (data/tuned/*.csv): each shape's row for this GPU is measured first on it; with "
                  "--budget 1 --guesses 0, the table's claims measured again with the paired reward. Repeatable: "
                  "each table's row, in the order given")
      ->check(CLI::ExistingFile);
  cmd->add_option("--seed-neighbors", args->seed_neighbors,
                  "a tuned table: each shape measures next the designs of its rows nearest to it (this GPU's, either "
                  "element type, the shape's own row left out), the first --neighbors it can run. Repeatable")
      ->check(CLI::ExistingFile);
  cmd->add_option("--neighbors", args->neighbors, "--seed-neighbors: how many of the nearest designs a shape measures")
      ->default_val(3);
  cmd->add_flag("!--no-route-seeds", args->route_seeds,
                "Do not measure first, on each shape, what a default handle would check for it (its built-in table "
                "row, else the built-in predictor's route and the nearest row's design): by default a tune's best is "
                "never a design slower than the one the handle would serve without it");
  cmd->add_flag("!--no-confirm", args->confirm,
                "Do not measure each shape's best design again once its search ends: by default a gain over the "
                "reference stands only as the weaker of two paired measurements apart (the reference has states "
                "that hold through one measurement's rounds)");
  cmd->add_flag("--independent-shapes", args->independent,
                "Each shape's candidates depend only on it, --seed and the starting policy, not on the shapes "
                "tuned before it (implied by --mpi)");
  cmd->add_flag("--mpi", args->mpi,
                "Under mpirun: rank 0 keeps the database and hands shapes out, every rank measures on its own "
                "--gpus (ranks of one machine take consecutive GPUs)");
  cmd->add_option("--predictor", args->predictor,
                  "speed predictor file whose best guesses start each shape (default: the built-in one for the GPU)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--guesses", args->guesses, "the predictor's best guesses measured first on each shape (0: none)")
      ->default_val(4);
  cmd->add_option("--wave-fit", args->wave_fit,
                  "of the designs measured first on a shape, how many again with the tile width whose waves fill the "
                  "GPU, where that costs at least 5% less (0: none)")
      ->default_val(2);
  cmd->add_flag("--clusters-any-raster", args->clusters_any_raster,
                "search clusters across the raster's direction too (c2x1 with raster_n, c1x2 with raster_m), which "
                "the default space leaves out");
  cmd->add_option("--summary", args->summary, "--model: write the per-model summary (wall time, gain) as CSV");
  return [args] { return run_tune(*args); };
});

CommandRegistration compare_registration("tune-compare", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand(
      "tune-compare", "Sample efficiency: evaluations each strategy needs to reach 98% of the best speed found (CSV)");
  auto args = std::make_shared<CompareArgs>();
  cmd->add_option("--shapes", args->common.shapes, "cudal2, a CSV file of M,N,K rows, or one M,N,K")->required();
  add_common(cmd, args->common);
  cmd->add_option("--budget", args->common.budget, "Evaluations per shape per run")->required();
  cmd->add_option("--strategies", args->strategies, "Comma-separated strategies: rl, rl-warm, evo, random")->default_val("rl,evo,random");
  cmd->add_option("--sample", args->sample, "Use this many evenly spaced shapes of the list (0: all)");
  cmd->add_option("--seeds", args->seeds, "Runs per strategy, seeds --seed, --seed+1, ...")->default_val(1);
  cmd->add_option("--quality", args->quality, "Target: this fraction of the best speed found")->default_val(0.98);
  cmd->add_option("--out", args->out, "Per-run CSV (default: standard output)");
  cmd->add_option("--summary", args->summary, "Per-strategy summary CSV");
  cmd->add_option("--policy", args->policy, "Save the policy of the first seed's rl-warm (else rl) run to this file");
  cmd->add_option("--warm-policy", args->warm_policy, "Policy file the rl-warm strategy starts from")
      ->check(CLI::ExistingFile);
  return [args] { return run_compare(*args); };
});

}  // namespace
}  // namespace rlgemm::cli
