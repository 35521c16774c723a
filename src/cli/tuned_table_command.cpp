// `rlgemm tuned-table`: writes a tuned table (data/tuned/<gpu>.csv) from tuning databases, with only the designs
// that measured faster than the reference beyond the 95% interval of their paired gain. With --against, it says
// what became of each row of an earlier table: kept (the same design held), replaced (another design held), or
// back to the floor (nothing held). Several databases count as one body of evidence: a problem held in more than one
// takes the design with the larger paired gain in its most preferred mode, so that a new tune adds to the
// verification database behind an earlier table. scripts/verify-tuned-table measures a table's rows with
// `tune --seed-table` and rebuilds the table with this command.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "dispatch/tuned_table.h"
#include "rlgemm/error.h"

namespace rlgemm::cli {
namespace {

struct TunedTableArgs {
  std::vector<std::string> dbs;
  std::string modes = "graph,offline";
  std::string out;
  std::string against;
};

std::vector<TimingMode> parse_modes(const std::string& text) {
  std::vector<TimingMode> modes;
  for (size_t start = 0; start <= text.size();) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    const TimingMode mode = parse_timing_mode(name);
    if (std::find(modes.begin(), modes.end(), mode) != modes.end()) fail("--modes names '" + name + "' twice");
    modes.push_back(mode);
    start = comma + 1;
  }
  return modes;
}

// What the new rows say of each row of an earlier table (read before the new one is written: --against may name
// the table --out replaces).
void compare_with(const std::vector<dispatch::TunedRow>& rows, const std::vector<dispatch::TunedRow>& before,
                  const std::string& against) {
  std::map<std::string, int> kept, replaced, dropped;
  for (const dispatch::TunedRow& old : before) {
    const size_t now = dispatch::row_index(rows, old.gpu, old.problem);
    if (now == rows.size()) ++dropped[old.gpu];
    else if (rows[now].design == old.design) ++kept[old.gpu];
    else ++replaced[old.gpu];
  }
  std::map<std::string, int> gpus;
  for (const auto& row : before) ++gpus[row.gpu];
  for (const auto& [gpu, count] : gpus)
    std::fprintf(stderr,
                 "rlgemm tuned-table: %s: of the %d rows of %s, %d kept their design, %d took another, %d go back to "
                 "the floor\n",
                 gpu.c_str(), count, against.c_str(), kept[gpu], replaced[gpu], dropped[gpu]);
}

int run_tuned_table(const TunedTableArgs& args) {
  const std::vector<TimingMode> modes = parse_modes(args.modes);
  // The databases are read in the order given (it orders the table's rows); a sorted copy finds one named twice.
  const std::vector<std::filesystem::path> paths(args.dbs.begin(), args.dbs.end());
  std::vector<std::filesystem::path> sorted = paths;
  std::sort(sorted.begin(), sorted.end());
  if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
    fail("--db names '" + twice->string() + "' twice");
  size_t shared = 0;  // problems held in more than one database: the best of them serves
  const std::vector<dispatch::TunedRow> rows = dispatch::load_tuning_databases(paths, modes, &shared);
  if (shared > 0)
    std::fprintf(stderr,
                 "rlgemm tuned-table: %zu problem(s) held in more than one database: each takes the design with the "
                 "larger paired gain in its most preferred mode\n",
                 shared);
  const std::vector<dispatch::TunedRow> before =
      args.against.empty() ? std::vector<dispatch::TunedRow>{} : dispatch::load_tuned_table(args.against);
  dispatch::save_tuned_table(args.out, rows);
  std::map<std::string, int> per_gpu;
  for (const auto& row : rows) ++per_gpu[row.gpu];
  std::fprintf(stderr, "rlgemm tuned-table: wrote %zu rows to %s (modes %s, in order of preference)\n", rows.size(),
               args.out.c_str(), args.modes.c_str());
  for (const auto& [gpu, count] : per_gpu) std::fprintf(stderr, "  %s: %d rows\n", gpu.c_str(), count);
  if (!args.against.empty()) compare_with(rows, before, args.against);
  return 0;
}

CommandRegistration tuned_table_registration("tuned-table", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand("tuned-table",
                                 "Write a tuned table of the designs that measured faster than lt_auto beyond their "
                                 "paired interval in tuning databases");
  auto args = std::make_shared<TunedTableArgs>();
  cmd->add_option("--db", args->dbs,
                  "tuning database (repeatable; a problem held in several takes the larger paired gain)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--modes", args->modes,
                  "timing modes whose measurements count, in order of preference where a shape held in several")
      ->default_val("graph,offline");
  cmd->add_option("--out", args->out, "the table to write (replaced atomically)")->required();
  cmd->add_option("--against", args->against,
                  "an earlier table: say how many of its rows kept their design, took another, or go back to the floor")
      ->check(CLI::ExistingFile);
  return [args] { return run_tuned_table(*args); };
});

}  // namespace
}  // namespace rlgemm::cli
