#include "dispatch/tuned_table.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>

#include "core/embedded_text.h"
#include "rlgemm/error.h"
#include "store/store.h"

namespace rlgemm::dispatch {

// Generated at build time from data/tuned/*.csv (rlgemm_embed_folder in src/dispatch/CMakeLists.txt).
extern const EmbeddedText kEmbeddedTunedTables[];
extern const size_t kEmbeddedTunedTableCount;

namespace {

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  const auto last = s.find_last_not_of(" \t");
  return s.substr(first, last - first + 1);
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::vector<std::string> split_columns(const std::string& line) {
  std::vector<std::string> columns;
  std::string column;
  std::istringstream in(line);
  while (std::getline(in, column, ',')) columns.push_back(trim(column));
  if (!line.empty() && line.back() == ',') columns.push_back("");
  return columns;
}

double parse_positive(const std::string& text, const char* column) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(value) || value <= 0)
    fail(std::string(column) + " must be a positive number, got '" + text + "'");
  return value;
}

int parse_index(const std::string& text, const char* column) {
  const bool digits = !text.empty() && text.size() <= 6 &&
                      std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
  if (!digits) fail(std::string(column) + " must be an index (0, 1, 2, ...), got '" + text + "'");
  return std::stoi(text);
}

std::string problem_key(const TunedRow& row) {
  return row.gpu + "|" + row.problem.shape.to_string() + "|" + std::string(to_string(row.problem.layout)) + "|" +
         std::string(to_string(row.problem.dtype));
}

}  // namespace

std::vector<TunedRow> parse_tuned_table(std::istream& in, const std::string& source) {
  std::vector<TunedRow> rows;
  std::map<std::string, std::string> seen;  // problem key -> where it was first given
  std::string line;
  int line_no = 0;
  bool header_seen = false;
  size_t column_count = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string text = trim(line);
    if (text.empty() || text[0] == '#') continue;
    const std::string where = source + ":" + std::to_string(line_no);
    if (!header_seen) {
      std::string compact;
      for (char c : lowercase(text))
        if (c != ' ' && c != '\t') compact += c;
      if (compact == lowercase(kTunedTableHeader)) column_count = 10;
      else if (compact == lowercase(kTunedTableHeaderWithoutDtype)) column_count = 9;
      else if (compact == lowercase(kTunedTableHeaderWithoutCandidate)) column_count = 8;
      else fail(where + ": a tuned table starts with the header '" + kTunedTableHeader + "', got '" + text + "'");
      header_seen = true;
      continue;
    }
    try {
      const std::vector<std::string> columns = split_columns(text);
      if (columns.size() != column_count)
        fail("expected " + std::to_string(column_count) + " columns, as the header says, got " +
             std::to_string(columns.size()));
      TunedRow row;
      row.gpu = columns[0];
      if (row.gpu.empty()) fail("the gpu column is empty (expected the CUDA device name)");
      row.problem.shape = parse_shape(columns[1] + "," + columns[2] + "," + columns[3]);
      row.problem.layout = parse_layout(columns[4]);
      row.design = parse_design(columns[5]);
      if (row.design.family == Family::kTest) fail("test designs (" + columns[5] + ") cannot be dispatched");
      row.time_us = parse_positive(columns[6], "time_us");
      if (!columns[7].empty()) row.speedup_vs_lt_auto = parse_positive(columns[7], "speedup_vs_lt_auto");
      if (column_count >= 9 && !columns[8].empty()) row.cublaslt_candidate = parse_index(columns[8], "cublaslt_candidate");
      if (column_count == 10) row.problem.dtype = parse_dtype(columns[9]);
      if (row.design.dtype != row.problem.dtype)
        fail("design " + columns[5] + " computes " + std::string(to_string(row.design.dtype)) + ", the row's dtype is " +
             std::string(to_string(row.problem.dtype)) + ": a design's element type must be its problem's");
      row.source = where;
      const auto [it, inserted] = seen.emplace(problem_key(row), where);
      if (!inserted)
        fail("duplicate row for " + row.gpu + " " + row.problem.shape.to_string() + " " +
             std::string(to_string(row.problem.layout)) + " " + std::string(to_string(row.problem.dtype)) +
             " (first given at " + it->second + ")");
      rows.push_back(std::move(row));
    } catch (const Error& e) {
      throw Error(ErrorKind::kInvalidInput, where + ": " + e.what());
    }
  }
  if (!header_seen) fail(source + ": empty tuned table (expected the header '" + kTunedTableHeader + "')");
  return rows;
}

std::vector<TunedRow> load_tuned_table(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open tuned table '" + path.string() + "'");
  return parse_tuned_table(in, path.string());
}

void save_tuned_table(const std::filesystem::path& path, const std::vector<TunedRow>& rows) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << kTunedTableHeader << "\n";
    char buf[32];
    for (const auto& row : rows) {
      std::snprintf(buf, sizeof buf, "%.3f,", row.time_us);
      out << row.gpu << ',' << row.problem.shape.m << ',' << row.problem.shape.n << ',' << row.problem.shape.k << ','
          << to_string(row.problem.layout) << ',' << to_string(row.design) << ',' << buf;
      if (row.speedup_vs_lt_auto) {
        std::snprintf(buf, sizeof buf, "%.4f", *row.speedup_vs_lt_auto);
        out << buf;
      }
      out << ',';
      if (row.cublaslt_candidate) out << *row.cublaslt_candidate;
      out << ',' << to_string(row.problem.dtype) << '\n';
    }
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + tmp.string());
  }
  std::filesystem::rename(tmp, path);
}

std::vector<TunedRow> embedded_tuned_rows() {
  std::vector<TunedRow> rows;
  for (size_t i = 0; i < kEmbeddedTunedTableCount; ++i) {
    std::istringstream in(kEmbeddedTunedTables[i].text);
    auto table = parse_tuned_table(in, std::string("built-in data/tuned/") + kEmbeddedTunedTables[i].name);
    rows.insert(rows.end(), std::make_move_iterator(table.begin()), std::make_move_iterator(table.end()));
  }
  return rows;
}

std::vector<std::string> embedded_table_names() {
  std::vector<std::string> names;
  for (size_t i = 0; i < kEmbeddedTunedTableCount; ++i) names.push_back(kEmbeddedTunedTables[i].name);
  return names;
}

std::vector<TunedRow> load_tuning_database(const std::filesystem::path& path, const std::string& mode) {
  return load_tuning_database(path, std::vector<TimingMode>{parse_timing_mode(mode)});
}

std::vector<TunedRow> load_tuning_database(const std::filesystem::path& path, const std::vector<TimingMode>& modes) {
  return load_tuning_databases({path}, modes);
}

std::vector<TunedRow> load_tuning_databases(const std::vector<std::filesystem::path>& paths,
                                            const std::vector<TimingMode>& modes, size_t* held_in_several) {
  std::vector<TunedRow> rows;
  std::vector<size_t> preference;   // of each row: its mode's place in `modes`
  std::vector<size_t> last_holder;  // of each row: the last database (its place in `paths`) that held it
  std::vector<bool> several;        // of each row: held in more than one database
  for (size_t source = 0; source < paths.size(); ++source) {
    const std::filesystem::path& path = paths[source];
    // Read from a copy: a missing file is an error (a handle must never invent an empty database from a typo),
    // and the databases read here are often committed records that reading must leave as they are.
    StoreReadCopy store(path);
    for (const BestDesign& best : store->best_designs()) {
      // A design serves a shape only where it measured faster than lt_auto beyond the interval of its paired
      // gain; elsewhere the handle's floor (cuBLASLt with lt_auto's choice) serves it.
      const auto wanted = std::find(modes.begin(), modes.end(), best.mode);
      if (wanted == modes.end() || !best.paired.better()) continue;
      TunedRow row;
      row.gpu = best.gpu_name;
      row.problem = best.problem;
      try {
        row.design = parse_design(best.design);
      } catch (const Error& e) {
        throw Error(ErrorKind::kInvalidInput, path.string() + ": best design of " + best.problem.shape.to_string() +
                                                  " does not parse: " + e.what());
      }
      if (row.design.family == Family::kTest) continue;  // fault-injection runs of the tuner's own tests
      row.time_us = best.median_us;
      row.speedup_vs_lt_auto = best.speedup;
      row.source = path.string() + " (" + best.problem.shape.to_string() + " " +
                   std::string(to_string(best.problem.layout)) + " " + std::string(to_string(best.problem.dtype)) +
                   " " + std::string(to_string(best.mode)) + ")";
      const size_t rank = static_cast<size_t>(wanted - modes.begin());
      const size_t same = row_index(rows, row.gpu, row.problem);
      if (same == rows.size()) {
        rows.push_back(std::move(row));
        preference.push_back(rank);
        last_holder.push_back(source);
        several.push_back(false);
        continue;
      }
      if (last_holder[same] != source) several[same] = true;
      last_holder[same] = source;
      if (rank < preference[same] ||
                 (rank == preference[same] && row.speedup_vs_lt_auto.value_or(0) >
                                                  rows[same].speedup_vs_lt_auto.value_or(0))) {
        // A more preferred mode, or the same mode with a larger paired gain (another database's measurement).
        preference[same] = rank;
        rows[same] = std::move(row);
      }
    }
  }
  if (held_in_several) *held_in_several = static_cast<size_t>(std::count(several.begin(), several.end(), true));
  return rows;
}

size_t row_index(const std::vector<TunedRow>& rows, const std::string& gpu, const Problem& problem) {
  const auto it = std::find_if(rows.begin(), rows.end(),
                               [&](const TunedRow& r) { return r.gpu == gpu && r.problem == problem; });
  return static_cast<size_t>(it - rows.begin());
}

std::vector<TunedRow> rows_for_gpu(const std::vector<TunedRow>& rows, const std::string& gpu) {
  std::vector<TunedRow> out;
  std::copy_if(rows.begin(), rows.end(), std::back_inserter(out), [&](const TunedRow& r) { return r.gpu == gpu; });
  return out;
}

}  // namespace rlgemm::dispatch
