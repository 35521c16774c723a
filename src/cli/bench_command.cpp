// rlgemm bench: measures fp16 or bf16 GEMM implementations side by side, through one correctness gate and one output format.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "bench/harness.h"
#include "cli/command.h"
#include "core/cuda_util.h"
#include "core/model_shapes.h"
#include "core/stop_signal.h"
#include "rlgemm/error.h"
#include "rlgemm/shapes.h"
#ifdef RLGEMM_HAVE_DISPATCH
#include "dispatch/bench_implementation.h"
#include "store/store.h"
#endif
#ifdef RLGEMM_HAVE_MEASURE
#include <chrono>
#include <fstream>

#include "measure/design_implementation.h"
#include "rlgemm/design.h"
#endif

namespace rlgemm::cli {
namespace {

struct BenchArgs {
  std::string shapes_spec;
  std::vector<std::string> shape_list;
  std::vector<std::string> models;  // config.json files: their linear layers at the --batch token counts
  std::string batch;
  std::string layout = "both";
  std::string dtype = "fp16";
  std::vector<std::string> impls;
  std::vector<std::string> designs;
  std::string designs_file;
  std::vector<std::string> modes{"offline"};
  std::string out = "rlgemm-bench.csv";
  bool quick = false;
  int samples = 0;
  int batches = 0;
  double gap_ms = 10.0;
  int device = 0;
  std::string shard = "0/1";
  bool no_progress = false;
  bool resume = false;
  std::string seed;  // empty: drawn from the clock (and recorded)
  bool control = false;
  bool modes_apart = false;
  // --impl rlgemm: where the library's handle takes its tuned rows, policy and rescheduled cubins from.
  std::string rlgemm_db;
  std::string rlgemm_table;
  std::string rlgemm_policy;
  std::string rlgemm_sass_db;
  bool rlgemm_floor_only = false;
  int rlgemm_autotune_neighbors = HandleOptions{}.autotune_neighbors;
  bool rlgemm_through_cublaslt = false;
  std::string command_line;
};

std::vector<std::string> split_list(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    std::stringstream ss(item);
    std::string part;
    while (std::getline(ss, part, ','))
      if (!part.empty()) out.push_back(part);
  }
  return out;
}

// The results file must be writable before any GPU work: its folder is made and a file is created beside it
// and removed again; a path that cannot be written fails here, naming it.
void check_writable(const std::string& out) {
  namespace fs = std::filesystem;
  const fs::path path(out);
  std::error_code ec;
  if (fs::is_directory(path, ec)) fail("--out '" + out + "' is a directory; give the results CSV's file name");
  if (path.has_parent_path()) fs::create_directories(path.parent_path(), ec);
  if (ec) fail("--out '" + out + "': cannot create its folder: " + ec.message());
  const fs::path probe = path.string() + ".probe";
  {
    std::ofstream test(probe, std::ios::app);
    if (!test) fail("--out '" + out + "' cannot be written (check the folder and its permissions)");
  }
  fs::remove(probe, ec);
  if (fs::exists(path) && !std::ofstream(path, std::ios::app))
    fail("--out '" + out + "' exists and cannot be written");
}

#ifdef RLGEMM_HAVE_MEASURE
// Designs from --design and --designs FILE, parsed before any GPU work so that a typo fails at once with
// the field (and line) that does not parse.
std::vector<Design> designs_of(const BenchArgs& a) {
  std::vector<Design> designs;
  for (const auto& t : a.designs) designs.push_back(parse_design(t));
  if (!a.designs_file.empty())
    for (const Design& d : read_designs(a.designs_file)) designs.push_back(d);
  std::vector<Design> out;
  for (const Design& d : designs) {
    if (d.family == Family::kTest) fail("design '" + to_string(d) + "' is a fault-injection design, not a kernel to benchmark");
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}
#endif

int run(BenchArgs& a) {
  using namespace bench;
  BenchConfig config;
  // Everything the user typed is checked before the GPU is touched.
  if (int(!a.shapes_spec.empty()) + int(!a.shape_list.empty()) + int(!a.models.empty()) > 1)
    fail("give one of --shapes, --shape and --model");
  if (a.shapes_spec.empty() && a.shape_list.empty() && a.models.empty())
    fail("no shapes: give --shapes cudal2|FILE.csv, --shape M,N,K or --model config.json");
  if (!a.batch.empty() && a.models.empty()) fail("--batch gives the token counts of --model");
  if (!a.shapes_spec.empty()) config.shapes = resolve_shapes(a.shapes_spec);
  for (const auto& s : a.shape_list) config.shapes.push_back(parse_shape(s));
  if (!a.models.empty())
    config.shapes = shapes_of_models(a.models, parse_token_counts(a.batch.empty() ? "1,8,32,128,512,2048" : a.batch));
  config.layouts = parse_layouts(a.layout);
  config.dtypes = parse_dtypes(a.dtype);
  config.modes = parse_modes(split_list(a.modes));
#ifdef RLGEMM_HAVE_MEASURE
  const std::vector<Design> designs = designs_of(a);
  for (const Design& d : designs)
    if (std::find(config.dtypes.begin(), config.dtypes.end(), d.dtype) == config.dtypes.end())
      fail("design '" + to_string(d) + "' computes " + std::string(to_string(d.dtype)) + " and --dtype asks for " +
           a.dtype + ": a design runs only problems of its own element type (add /bf16 to its text, or use --dtype both)");
#endif
  auto names = split_list(a.impls);
  const bool torch_asked = std::find(names.begin(), names.end(), kTorchImplementation) != names.end();
  auto known = cublas_implementation_names();
  known.push_back(kTorchImplementation);
  const bool default_list = names.empty();
  if (default_list) names = known;
  known.push_back(kLtAutoGraphImplementation);  // asked for by name only
#ifdef RLGEMM_HAVE_DISPATCH
  known.push_back(dispatch::kDispatchImplementation);  // asked for by name only
  known.push_back(dispatch::kFloorDispatchImplementation);
  known.push_back(dispatch::kAutotuneDispatchImplementation);
  known.push_back(dispatch::kNearestDispatchImplementation);
  known.push_back(dispatch::kNoNearestDispatchImplementation);
  known.push_back(dispatch::kZeroShotDispatchImplementation);
#endif
  for (const auto& name : names) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      fail("unknown implementation '" + name + "': known are " + list);
    }
  }
  {
    const Shard shard = parse_shard(a.shard);
    config.shard_index = shard.index;
    config.shard_count = shard.count;
  }
  if (a.quick) {
    config.timing.batches = 3;
    config.timing.batch_target_us = 300;
    config.timing.max_warmup_batches = 5;
    config.timing.samples = 7;
  }
  if (a.samples < 0 || a.batches < 0) fail("--samples and --batches must be positive");
  if (a.samples) config.timing.samples = a.samples;
  if (a.batches) config.timing.batches = a.batches;
  if (!(a.gap_ms >= 0)) fail("--gap-ms must be >= 0");
  config.timing.gap_mean_ms = a.gap_ms;
  config.timing.modes_apart = a.modes_apart;
  if (a.seed.empty()) {
    config.seed = uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
  } else {
    size_t used = 0;
    try {
      if (a.seed.find_first_not_of("0123456789") != std::string::npos) throw std::invalid_argument("");
      config.seed = std::stoull(a.seed, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != a.seed.size())
      fail("--seed takes a non-negative integer below 2^64 (the seed a run's JSON records), got '" + a.seed + "'");
  }
  config.control = a.control;
  if (a.control && std::find(names.begin(), names.end(), "lt_auto") == names.end())
    fail("--control measures lt_twin, lt_auto's own algorithm under another name, beside lt_auto: put lt_auto in --impl");
  check_writable(a.out);
  if (a.resume && std::filesystem::exists(a.out)) bench::read_csv_for_resume(a.out);  // a file it cannot resume fails here
  config.out_csv = a.out;
  if (a.resume) bench::check_resumable_timing(config);  // rows timed another way are not resumed
  config.command_line = a.command_line;
  config.device = a.device;
  config.progress = !a.no_progress;
  config.resume = a.resume;

  // torch runs in a Python worker: whether it can run at all is known before any GPU work here.
  if (torch_asked || default_list) {
    try {
      config.torch = TorchWorker::start(a.device);
    } catch (const Error& e) {
      if (torch_asked)
        fail(std::string("implementation 'torch' cannot run here: ") + e.what() +
             "\n(it needs python3 with PyTorch and CUDA; leave torch out of --impl to measure the others)");
      const std::string why = e.what();
      std::cerr << "rlgemm: note: torch left out: " << why.substr(0, why.find('\n')) << "\n";
    }
  }
  names.erase(std::remove(names.begin(), names.end(), kTorchImplementation), names.end());

#ifdef RLGEMM_HAVE_DISPATCH
  for (const std::string* db : {&a.rlgemm_db, &a.rlgemm_sass_db}) {
    if (db->empty()) continue;
    try {
      Store probe(*db);
    } catch (const Error& e) {
      fail("cannot use tuning database '" + *db + "': " + e.what());
    }
  }
#endif
  open_device(a.device);  // a clear "no GPU" error before any library touches the device
  for (const auto& name : names) {
#ifdef RLGEMM_HAVE_DISPATCH
    if (name == dispatch::kZeroShotDispatchImplementation) {
      HandleOptions options;  // the default handle, as an application makes it
      options.direct_cublaslt = !a.rlgemm_through_cublaslt;
      config.implementations.push_back(dispatch::make_dispatch_implementation(options, name));
      continue;
    }
    if (name == dispatch::kDispatchImplementation || name == dispatch::kFloorDispatchImplementation ||
        name == dispatch::kAutotuneDispatchImplementation || name == dispatch::kNearestDispatchImplementation ||
        name == dispatch::kNoNearestDispatchImplementation) {
      HandleOptions options;
      options.database = a.rlgemm_db;
      options.tuned_table = a.rlgemm_table;
      options.policy = a.rlgemm_policy;
      options.optimized_cubins = a.rlgemm_sass_db;
      options.predicted_kernels = !a.rlgemm_floor_only && name != dispatch::kFloorDispatchImplementation;
      options.autotune = name == dispatch::kAutotuneDispatchImplementation;
      options.autotune_neighbors = a.rlgemm_autotune_neighbors;
      // The floor's variants check no kernel on an untuned shape: neither the predicted nor the nearest row's.
      options.nearest_kernels = options.predicted_kernels && name != dispatch::kNoNearestDispatchImplementation;
      options.direct_cublaslt = !a.rlgemm_through_cublaslt;
      config.implementations.push_back(dispatch::make_dispatch_implementation(options, name));
      continue;
    }
#endif
    config.implementations.push_back(make_cublas_implementation(name));
  }
#ifdef RLGEMM_HAVE_MEASURE
  if (!designs.empty()) {
    // Every design is compiled (concurrently, into the cubin cache) before the first problem is measured;
    // a design that does not compile gets rows with correct = 0 and the compiler's reason.
    const DeviceInfo dev = open_device(a.device);
    const auto start = std::chrono::steady_clock::now();
    const auto report = measure::precompile(designs, config.layouts, dev);
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    nlohmann::json compile = nlohmann::json::array();
    for (const auto& [label, seconds] : report.compile_seconds) compile.push_back({{"kernel", label}, {"seconds", seconds}});
    config.extra["compile"] = {{"kernels", compile}, {"wall_s", wall}, {"failures", report.failures}};
    std::cerr << "rlgemm: " << report.compile_seconds.size() << " kernels ready in " << wall << " s";
    if (!report.failures.empty()) std::cerr << ", " << report.failures.size() << " failed to build";
    std::cerr << "\n";
    for (const auto& f : report.failures) std::cerr << "rlgemm: note: " << f.substr(0, f.find('\n')) << "\n";
    nlohmann::json texts = nlohmann::json::array();
    for (const Design& d : designs) {
      texts.push_back(to_string(d));
      config.implementations.push_back(std::make_unique<measure::DesignImplementation>(d, dev));
    }
    config.extra["designs"] = texts;
  }
#endif

  BenchOutcome outcome;
  {
    const StopSignal stop;  // Ctrl-C or SIGTERM: the run ends after the current problem, its results kept
    outcome = run_bench(config, stop.requested());
  }

  print_summary(std::cout, summarize(outcome.rows));
  std::cout << "\n" << outcome.rows.size() << " rows in " << config.out_csv << "\n";
  switch (outcome.status) {
    case RunStatus::kComplete: return 0;
    case RunStatus::kInterrupted:
      std::cerr << "rlgemm: " << outcome.message << "; the results so far are kept in " << config.out_csv
                << " and marked partial in its JSON\n";
      return 130;
    case RunStatus::kFailed:
      std::cerr << "rlgemm: error: " << outcome.message << "\nrlgemm: the run stopped; the " << outcome.rows.size()
                << " rows measured before are kept in " << config.out_csv << " and marked partial in its JSON\n";
      if (outcome.message.find("out of device memory") != std::string::npos) return exit_code(ErrorKind::kOutOfMemory);
      if (outcome.message.find("is hung") != std::string::npos) {
        std::fflush(nullptr);
        std::_Exit(exit_code(ErrorKind::kHang));  // the hung kernel keeps the context: no orderly teardown
      }
      return exit_code(ErrorKind::kRuntime);
  }
  return 1;
}

const CommandRegistration registration("bench", [](CLI::App& app) -> std::function<int()> {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Check and time HGEMM implementations side by side (CSV + JSON + summary)");
  cmd->add_option("--shapes", args->shapes_spec, "cudal2 (the built-in 1000-shape grid) or a CSV file of M,N,K rows");
  cmd->add_option("--shape", args->shape_list, "one shape M,N,K (repeatable)");
  cmd->add_option("--model", args->models, "a Hugging Face config.json (repeatable): the model's linear-layer GEMMs (tn) at the --batch token counts")->check(CLI::ExistingFile);
  cmd->add_option("--batch", args->batch, "--model: token counts, comma-separated (default 1,8,32,128,512,2048)");
  cmd->add_option("--layout", args->layout, "nn (B is K x N), tn (B stored N x K) or both")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "element type of A, B and C: fp16, bf16 or both (fp32 accumulation either way)")->capture_default_str();
  cmd->add_option("--impl", args->impls, "implementations, comma-separated: cublas_nn, cublas_tn, lt_heuristic, lt_auto, lt_auto_graph (lt_auto with its candidates timed in CUDA graphs; by name only), torch, rlgemm (the library's dispatch), rlgemm_floor (the same with --rlgemm-floor-only), rlgemm_autotune (the same with HandleOptions::autotune), rlgemm_nearest (the same: HandleOptions::nearest_kernels, the nearest tuned row's design checked too, is the default), rlgemm_no_nearest (the same without it), rlgemm_zero_shot (the default handle, without --rlgemm-db, --rlgemm-table and --rlgemm-policy: beside a database's handle, what the tune changed) (default: the cuBLAS ones and torch where PyTorch is installed); every row's speedup_vs_best_vendor is against the fastest of the cuBLAS ones in the run");
#ifdef RLGEMM_HAVE_MEASURE
  cmd->add_option("--design", args->designs, "an rlgemm kernel design to measure too, e.g. sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma (repeatable)");
  cmd->add_option("--designs", args->designs_file, "a file of designs, one per line ('#' comments)")->check(CLI::ExistingFile);
#endif
  cmd->add_option("--mode", args->modes, "timing modes, comma-separated: offline, server, cold, cudal2, graph, graph-cold")->capture_default_str();
  cmd->add_option("--out", args->out, "results CSV; the run's JSON is written beside it")->capture_default_str();
  cmd->add_flag("--quick", args->quick, "fewer batches and samples: faster, less precise");
  cmd->add_option("--samples", args->samples, "server/cudal2: timed calls per measurement (default 15, 7 with --quick)");
  cmd->add_option("--batches", args->batches, "offline/cold/graph/graph-cold: timed batches per measurement (default 7, 3 with --quick)");
  cmd->add_flag("--modes-apart", args->modes_apart, "offline and graph: each mode in rounds of its own (all of a problem's rounds in the mode --mode names first, then all its rounds in the other: --mode offline,graph times offline first), not both in every round; the subjects of a mode are still timed side by side (the run's JSON records it: timing.shared_rounds)");
  cmd->add_option("--gap-ms", args->gap_ms, "server: mean idle gap before each call, in ms")->capture_default_str();
  cmd->add_option("--device", args->device, "GPU ordinal")->capture_default_str();
  cmd->add_option("--shard", args->shard, "I/N: measure every N-th shape starting at I (split a long run)")->capture_default_str();
  cmd->add_flag("--no-progress", args->no_progress, "no progress bar");
  cmd->add_option("--rlgemm-db", args->rlgemm_db, "--impl rlgemm: a tuning database to take the best designs from (default: the built-in tuned table)")->check(CLI::ExistingFile);
  cmd->add_option("--rlgemm-table", args->rlgemm_table, "--impl rlgemm: a tuned-table CSV (data/tuned format) instead of the built-in one")->check(CLI::ExistingFile);
  cmd->add_option("--rlgemm-policy", args->rlgemm_policy, "--impl rlgemm: a policy file whose zero-shot designs serve the shapes that are not tuned")->check(CLI::ExistingFile);
  cmd->add_option("--rlgemm-sass-db", args->rlgemm_sass_db, "--impl rlgemm: a database whose SASS-rescheduled cubins (rlgemm sass-opt --db) the tuned kernels use (default: --rlgemm-db)")->check(CLI::ExistingFile);
  cmd->add_flag("--rlgemm-through-cublaslt", args->rlgemm_through_cublaslt, "--impl rlgemm: the library's cuBLASLt routes called through cublasLtMatmul, never their kernel launched directly (HandleOptions::direct_cublaslt = false)");
  cmd->add_option("--rlgemm-autotune-neighbors", args->rlgemm_autotune_neighbors,
                  "--impl rlgemm_autotune: how many of the nearest tuned rows' designs a shape also measures "
                  "(HandleOptions::autotune_neighbors, 0..8; autotune's choices are kept per cache directory, so "
                  "runs that differ in this want a RLGEMM_CACHE_DIR each)")
      ->check(CLI::Range(0, 8));
  cmd->add_flag("--rlgemm-floor-only", args->rlgemm_floor_only, "--impl rlgemm: no predicted route: every shape without a tuned row on the cuBLASLt floor (HandleOptions::predicted_kernels and nearest_kernels false)");
  cmd->add_flag("--resume", args->resume, "keep the problems --out already holds (a run that stopped) and measure the rest");
  cmd->add_option("--seed", args->seed, "the run's seed (inputs of every problem, order of the subjects in every round); a run's JSON records it, so --seed replays it (default: from the clock)");
  cmd->add_flag("--control", args->control, "fairness control: also measure lt_twin, lt_auto's own algorithm under another name (needs lt_auto in --impl)");
  return [args] {
    args->command_line = command_line();
    return run(*args);
  };
});

}  // namespace
}  // namespace rlgemm::cli
