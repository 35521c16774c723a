// rlgemm summarize: the summary of one or more results CSVs (shards of one run, or separate runs), and
// optionally their rows merged into one CSV with a JSON listing the runs it came from.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bench/implementation.h"
#include "bench/results.h"
#include "cli/command.h"
#include "rlgemm/error.h"
#ifdef RLGEMM_HAVE_DISPATCH
#include "dispatch/tuned_table.h"
#endif

namespace rlgemm::cli {
namespace {

struct SummarizeArgs {
  std::vector<std::string> inputs;
  std::string out;
  bool best_of_designs = false;
  std::string tuned_table;
  std::string update_tuned_table;
  std::string fairness;
};

// The GPU the runs were measured on, from their JSON files ("" when none names it).
std::string gpu_of(const nlohmann::json& sources) {
  std::string gpu;
  for (const auto& source : sources)
    if (source.contains("run") && source["run"].is_object() && source["run"].contains("gpu"))
      gpu = source["run"]["gpu"].value("name", "");
  return gpu;
}

#ifdef RLGEMM_HAVE_DISPATCH
// lt_auto's rows record, for each problem, which cuBLASLt heuristic candidate it measured fastest (the
// cuBLASLt route launches that one). Rows that name a design -- `bench --impl rlgemm` rows whose route was a
// tuned design (the handle made from a tuning database), and with --best-of-designs the fastest design of a
// `bench --design` sweep (rlgemm_best) -- replace the table's row of their problem where they ran faster than
// the row's time (the same GPU). Prints what changed.
//
// lt_auto is a noisy reference: it screens its candidates with short timings and now and then keeps a slower
// one, so one run's lt_auto can be 10-50% slower than another's on a small problem. Its time only errs
// upwards, so the table keeps the fastest lt_auto time any run has shown (time_us * speedup_vs_lt_auto) with
// that run's candidate: a row's speedup is that time over the design's, and a run's slow lt_auto can neither
// record its candidate nor lift a design's speedup (which decides the cuBLASLt route, dispatcher.h).
void update_tuned_table(const SummarizeArgs& a, const std::vector<bench::Row>& rows, const nlohmann::json& sources) {
  const std::string gpu = gpu_of(sources);
  if (gpu.empty()) fail("--update-tuned-table: the runs' JSON files do not name the GPU (they sit beside the CSVs)");
  auto table = dispatch::load_tuned_table(a.update_tuned_table);
  auto row_of = [&](const bench::Row& r) -> dispatch::TunedRow* {
    for (auto& row : table)
      if (row.gpu == gpu && row.problem == r.problem()) return &row;
    return nullptr;
  };
  // The fastest lt_auto time the table knows for its row, when it records one.
  auto lt_auto_us = [](const dispatch::TunedRow& row) -> std::optional<double> {
    if (!row.speedup_vs_lt_auto) return std::nullopt;
    return row.time_us * *row.speedup_vs_lt_auto;
  };
  int replaced = 0, considered = 0, candidates = 0;
  for (const auto& r : rows) {
    if (!r.correct || r.mode != bench::Mode::kOffline) continue;
    // lt_auto's choice ("candidate I of N timed"), for the cuBLASLt route of this problem.
    if (r.impl == "lt_auto") {
      const std::optional<int> index = bench::lt_auto_candidate(r.detail);
      dispatch::TunedRow* row = row_of(r);
      if (!index || !row) continue;
      const std::optional<double> known = lt_auto_us(*row);
      if (known && r.time_us > *known) continue;  // a slower lt_auto than the table has seen
      row->cublaslt_candidate = *index, ++candidates;
      if (known) row->speedup_vs_lt_auto = r.time_us / row->time_us;
      continue;
    }
    const std::string prefix = "tuned ";
    std::string text;
    if (r.impl == "rlgemm" && r.detail.rfind(prefix, 0) == 0)
      text = r.detail.substr(prefix.size(), r.detail.find(' ', prefix.size()) - prefix.size());
    else if (r.impl == "rlgemm_best")
      text = r.detail;
    else
      continue;
    ++considered;
    dispatch::TunedRow* row = row_of(r);
    if (!row || row->time_us <= r.time_us) continue;
    double lt_us = std::isfinite(r.speedup) ? r.time_us * r.speedup : INFINITY;  // this run's lt_auto
    if (const std::optional<double> known = lt_auto_us(*row); known && *known < lt_us) lt_us = *known;
    std::optional<double> speedup;
    if (std::isfinite(lt_us)) speedup = lt_us / r.time_us;
    std::printf("%s %s: %s %.3f us %.3fx -> %s %.3f us %.3fx\n", r.shape.to_string().c_str(),
                std::string(to_string(r.layout)).c_str(), to_string(row->design).c_str(), row->time_us,
                row->speedup_vs_lt_auto.value_or(0.0), text.c_str(), r.time_us, speedup.value_or(0.0));
    row->design = parse_design(text);
    row->time_us = r.time_us;
    row->speedup_vs_lt_auto = speedup;
    ++replaced;
  }
  dispatch::save_tuned_table(a.update_tuned_table, table);
  std::printf("%s: %d of %d tuned rows ran faster than the table's and replaced them; lt_auto's cuBLASLt "
              "candidate recorded for %d problems (where it ran at least as fast as the table's lt_auto)\n",
              a.update_tuned_table.c_str(), replaced, considered, candidates);
}
#endif

#ifdef RLGEMM_HAVE_DISPATCH
// The library's tuned table (data/tuned/README.md) from the best design per problem: offline rows of
// rlgemm_best, the GPU named by the runs' JSON.
void write_tuned_table(const SummarizeArgs& a, const std::vector<bench::Row>& rows, const nlohmann::json& sources) {
  if (!a.best_of_designs) fail("--tuned-table needs --best-of-designs");
  const std::string gpu = gpu_of(sources);
  if (gpu.empty()) fail("--tuned-table: the runs' JSON files do not name the GPU (they sit beside the CSVs)");
  std::vector<dispatch::TunedRow> table;
  for (const auto& r : rows) {
    if (r.impl != "rlgemm_best" || !r.correct || r.mode != bench::Mode::kOffline) continue;
    dispatch::TunedRow row{gpu, r.problem(), parse_design(r.detail), r.time_us, std::nullopt, std::nullopt, ""};
    if (std::isfinite(r.speedup)) row.speedup_vs_lt_auto = r.speedup;
    table.push_back(std::move(row));
  }
  dispatch::save_tuned_table(a.tuned_table, table);
}
#endif

// A file written here that is one of the inputs, or the JSON beside an input CSV (a run's GPU, commit and command),
// would overwrite the run being summarized: refused before anything is read or written.
void refuse_overwriting_inputs(const SummarizeArgs& a) {
  namespace fs = std::filesystem;
  std::vector<std::pair<std::string, fs::path>> outputs;
  if (!a.out.empty()) {
    outputs.emplace_back("--out", a.out);
    outputs.emplace_back("--out's JSON", fs::path(a.out).replace_extension(".json"));
  }
  if (!a.fairness.empty()) outputs.emplace_back("--fairness", a.fairness);
  if (!a.tuned_table.empty()) outputs.emplace_back("--tuned-table", a.tuned_table);
  for (const auto& input : a.inputs) {
    const fs::path csv = fs::weakly_canonical(input);
    const fs::path json = fs::weakly_canonical(fs::path(input).replace_extension(".json"));
    for (const auto& [flag, path] : outputs) {
      const fs::path target = fs::weakly_canonical(path);
      if (target == csv)
        fail(flag + " " + path.string() + " is the input " + input + ": name another file");
      if (target == json)
        fail(flag + " " + path.string() + " is the JSON of the input " + input +
             " (its run's GPU, commit and command): name another file");
    }
  }
}

int run(const SummarizeArgs& a) {
  using namespace bench;
  refuse_overwriting_inputs(a);
  std::vector<Row> rows;
  nlohmann::json sources = nlohmann::json::array();
  std::ostringstream fairness_rows;  // one line per input file and mode (each file is one run)
  for (const auto& path : a.inputs) {
    auto part = read_csv(path);
    for (const FairnessRow& f : fairness(part)) write_fairness_row(fairness_rows, f);
    rows.insert(rows.end(), part.begin(), part.end());
    const auto json = std::filesystem::path(path).replace_extension(".json");
    nlohmann::json source = {{"csv", path}, {"rows", part.size()}};
    if (std::filesystem::exists(json)) {
      std::ifstream in(json);
      source["run"] = nlohmann::json::parse(in, nullptr, false);
    }
    sources.push_back(source);
  }
  if (a.best_of_designs) rows = best_of_designs(rows);
  const auto groups = summarize(rows);
  if (!a.out.empty()) {
    const auto out = std::filesystem::path(a.out);
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    {
      std::ofstream csv(out.string() + ".tmp");
      csv << kCsvHeader << '\n';
      for (const auto& r : rows) write_csv_row(csv, r);
      if (!csv) throw Error(ErrorKind::kRuntime, "cannot write " + a.out);
    }
    std::filesystem::rename(out.string() + ".tmp", out);
    nlohmann::json meta = {{"merged_from", sources}, {"rows", rows.size()}, {"command", command_line()}};
    if (a.best_of_designs)
      meta["rows_of_designs"] = "for each problem and mode, the fastest correct design measured (rlgemm_best; the design in detail)";
    meta["summary"] = summary_json(groups);
    std::ofstream(std::filesystem::path(a.out).replace_extension(".json")) << meta.dump(2) << '\n';
  }
  if (!a.fairness.empty()) {
    if (fairness_rows.str().empty())
      fail("--fairness: no run among the files measured lt_twin beside lt_auto (bench --control)");
    const auto out = std::filesystem::path(a.fairness);
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    {
      std::ofstream csv(out.string() + ".tmp");
      csv << kFairnessHeader << '\n' << fairness_rows.str();
      if (!csv) throw Error(ErrorKind::kRuntime, "cannot write " + a.fairness);
    }
    std::filesystem::rename(out.string() + ".tmp", out);
    std::cout << "fairness control (lt_twin / lt_auto, geometric mean per run and mode) in " << a.fairness << ":\n"
              << kFairnessHeader << '\n' << fairness_rows.str();
  }
#ifdef RLGEMM_HAVE_DISPATCH
  if (!a.tuned_table.empty()) write_tuned_table(a, rows, sources);
  if (!a.update_tuned_table.empty()) update_tuned_table(a, rows, sources);
#else
  if (!a.tuned_table.empty() || !a.update_tuned_table.empty())
    fail("--tuned-table and --update-tuned-table write the dispatch stage's tables, which this build leaves out");
#endif
  print_summary(std::cout, groups);
  std::cout << '\n' << rows.size() << " rows from " << a.inputs.size() << " file(s)\n";
  return 0;
}

const CommandRegistration registration("summarize", [](CLI::App& app) -> std::function<int()> {
  auto args = std::make_shared<SummarizeArgs>();
  auto* cmd = app.add_subcommand("summarize", "Print the summary of results CSVs; --out merges them into one");
  cmd->add_option("files", args->inputs, "results CSVs written by rlgemm bench")->required()->check(CLI::ExistingFile);
  cmd->add_option("--out", args->out, "write the merged rows here (and a JSON beside it)");
  cmd->add_flag("--best-of-designs", args->best_of_designs,
                "reduce rlgemm designs' rows to the fastest correct design per problem (impl rlgemm_best)");
  cmd->add_option("--tuned-table", args->tuned_table,
                  "with --best-of-designs: write the library's tuned table (data/tuned/<gpu>.csv) from the offline rows");
  cmd->add_option("--update-tuned-table", args->update_tuned_table,
                  "a tuned table (data/tuned/<gpu>.csv) whose rows are replaced by the files' faster 'tuned' rows of "
                  "--impl rlgemm (a handle made from a tuning database: rlgemm bench --rlgemm-db) or, with "
                  "--best-of-designs, by the faster best designs of a --design sweep")
      ->check(CLI::ExistingFile);
  cmd->add_option("--fairness", args->fairness,
                  "write the fairness control of runs made with bench --control: per file and mode, the geometric "
                  "mean of lt_twin / lt_auto, the largest deviation and how many problems the two ran more than 3% apart (mode,with_rlgemm,shapes,geomean_twin_over_auto,max_abs_dev,apart_3pct)");
  return [args] { return run(*args); };
});

}  // namespace
}  // namespace rlgemm::cli
