#include "measure/sass_opt_record.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "rlgemm/error.h"
#include "sass/cubin.h"

namespace rlgemm::measure {
namespace {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// The fields of one line as csv_field writes them (quoted fields may hold commas and doubled quotes).
std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') fields.back() += '"', ++i;
      else if (c == '"') quoted = false;
      else fields.back() += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else if (c != '\r') {
      fields.back() += c;
    }
  }
  return fields;
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

bool has_problem(const Problem& p) { return p.shape.m > 0; }

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string header;
  std::getline(in, header);
  if (!header.empty() && header.back() == '\r') header.pop_back();
  return header;
}

// Rewrites a file of an earlier format in the current one: a first-format row gets its design's family as its
// set and "moves" as its action space (the only one there was), and no interval or changes; rows of either
// earlier format get empty graph columns.
void migrate(const std::string& path, bool first_format) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  std::string text = std::string(kSassOptCsvHeader) + "\n";
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (first_format) line += "," + csv_field(default_sass_opt_set(csv_fields(line).front())) + ",moves,,,";
    text += line + ",,,\n";
  }
  if (in.bad()) throw Error(ErrorKind::kRuntime, "reading CSV " + path + " failed");
  sass::write_file_atomically(path, std::vector<uint8_t>(text.begin(), text.end()));
}

}  // namespace

namespace {

// M,N,K,layout as the CSV writes them ("" without a problem): how rows_done and a new run name a problem alike.
std::string problem_fields(const Problem& p) {
  if (!has_problem(p)) return ",,,";
  return std::to_string(p.shape.m) + "," + std::to_string(p.shape.n) + "," + std::to_string(p.shape.k) + "," +
         std::string(to_string(p.layout));
}

std::string row_key(const std::string& set, const std::string& kernel, const std::string& problem,
                    const std::string& actions) {
  return set + "|" + kernel + "|" + problem + "|" + actions;
}

}  // namespace

std::string format_sass_opt_csv_row(const SassOptCsvRow& r) {
  auto optional = [](const std::optional<double>& v) { return v ? number(*v) : std::string(); };
  return csv_field(r.kernel) + "," + problem_fields(r.problem) + "," + number(r.time_before_us) + "," +
         number(r.time_after_us) + "," + number(r.gain) + "," + (r.bitwise_equal ? "true" : "false") + "," +
         std::to_string(r.moves) + "," + csv_field(r.set) + "," + csv_field(r.actions) + "," + optional(r.ci_low) +
         "," + optional(r.ci_high) + "," + csv_field(r.changes) + "," + optional(r.graph_gain) + "," +
         optional(r.graph_ci_low) + "," + optional(r.graph_ci_high);
}

void append_sass_opt_csv(const std::string& path, const SassOptCsvRow& row) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path file(path);
  const bool fresh = !fs::exists(file, ec) || fs::file_size(file, ec) == 0;
  if (!fresh) {
    const std::string header = first_line(path);
    if (header == kSassOptCsvHeaderV1 || header == kSassOptCsvHeaderV2) {
      migrate(path, header == kSassOptCsvHeaderV1);
    } else if (header != kSassOptCsvHeader) {
      fail("CSV " + path + " starts with '" + header + "', not the sass-opt header '" + kSassOptCsvHeader +
           "': use another --csv file");
    }
  }
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  std::ofstream out(file, std::ios::app);
  if (!out) throw Error(ErrorKind::kRuntime, "cannot open CSV " + path + " for appending");
  if (fresh) out << kSassOptCsvHeader << "\n";
  out << format_sass_opt_csv_row(row) << "\n";
  out.flush();
  if (!out) throw Error(ErrorKind::kRuntime, "writing CSV " + path + " failed");
}

std::string default_sass_opt_set(const std::string& kernel) {
  if (kernel.rfind("sm80/", 0) == 0) return "sm80";
  if (kernel.rfind("sm90", 0) == 0) return "sm90";
  return "";
}


std::string sass_opt_row_key(const std::string& set, const std::string& kernel, const Problem& problem,
                             const std::string& actions) {
  return row_key(set, kernel, problem_fields(problem), actions);
}

std::set<std::string> sass_opt_rows_done(const std::string& path) {
  std::set<std::string> done;
  std::ifstream in(path);
  if (!in) return done;
  std::string line;
  if (!std::getline(in, line)) return done;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  std::map<std::string, size_t> column;
  const auto names = csv_fields(line);
  for (size_t i = 0; i < names.size(); ++i) column[names[i]] = i;
  for (const char* required : {"kernel", "M", "N", "K", "layout"})
    if (!column.count(required))
      fail("CSV " + path + " has no '" + required + "' column: it is not a sass-opt CSV");
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const auto f = csv_fields(line);
    auto get = [&](const char* name, const std::string& otherwise) {
      const auto it = column.find(name);
      return it != column.end() && it->second < f.size() ? f[it->second] : otherwise;
    };
    const std::string kernel = get("kernel", "");
    const std::string problem = get("M", "") + "," + get("N", "") + "," + get("K", "") + "," + get("layout", "");
    done.insert(row_key(get("set", default_sass_opt_set(kernel)), kernel, problem, get("actions", "moves")));
  }
  return done;
}

KeepDecision decide_keep(const GainInterval& g, double min_gain) {
  KeepDecision d;
  char buf[256];
  if (g.significant() && g.gain >= min_gain) {
    d.kept = true;
    std::snprintf(buf, sizeof buf, "kept: re-measured gain %s", g.to_string().c_str());
  } else if (!g.significant()) {
    std::snprintf(buf, sizeof buf, "not kept: re-measured gain %s does not exclude zero", g.to_string().c_str());
  } else {
    std::snprintf(buf, sizeof buf, "not kept: re-measured gain %s is below the %.2f%% floor", g.to_string().c_str(),
                  100.0 * min_gain);
  }
  d.verdict = buf;
  return d;
}

namespace {

// The final check's re-measure: `check.rounds` interleaved rounds of the harness's 1 ms batches.
bench::TimingOptions final_timing(const FinalCheck& check, uint64_t seed) {
  bench::TimingOptions timing;
  timing.batch_target_us = 1000;
  timing.batches = check.rounds;
  timing.max_warmup_batches = 30;
  timing.seed = seed;
  return timing;
}

}  // namespace

void final_check(SassOptOutcome& r, CubinJudge* judge, const std::vector<uint8_t>& compiled, const FinalCheck& check) {
  const auto& search = r.game.search;
  r.search_before_us = search.initial_time_us;
  r.search_after_us = search.best_time_us;
  const bool changed = !search.path.empty() && !r.game.patched.empty() && r.game.patched != compiled;
  if (judge) {
    const bench::TimingOptions timing = final_timing(check, check.seed);
    if (changed) {
      const CubinComparison c = judge->compare(r.game.patched, check.draws, timing, bench::Mode::kOffline);
      if (c.context_lost)
        throw Error(ErrorKind::kRuntime, "the best schedule lost the CUDA context in its final check (" + c.failure +
                                             "); nothing was written");
      r.bitwise_equal = c.ok;
      if (c.ok) {
        r.time_before_us = c.original_us;
        r.rejected_after_us = c.candidate_us;
        r.interval = gain_interval(c.original_rounds_us, c.candidate_rounds_us);
      } else {
        r.verdict = "the best schedule failed the final check: " + c.failure;
      }
    } else {
      r.bitwise_equal = true;  // the compiled schedule itself
      r.verdict = "no action paid during the search";
    }
    if (r.time_before_us <= 0) {
      const CubinComparison c = judge->compare(compiled, 1, timing, bench::Mode::kOffline);
      if (!c.ok) throw Error(ErrorKind::kRuntime, "timing the compiled schedule failed: " + c.failure);
      r.time_before_us = c.original_us;
    }
  } else {
    r.bitwise_equal = true;  // the synthetic evaluator does not run code; verify_patch held
    r.time_before_us = search.initial_time_us;
    if (changed) r.rejected_after_us = search.best_time_us;
    else r.verdict = "no action paid during the search";
  }
  if (r.rejected_after_us > 0 && r.bitwise_equal) {
    KeepDecision decision;
    double gain = 0;
    if (r.interval) {
      decision = decide_keep(*r.interval, check.min_gain);
      gain = r.interval->gain;
    } else {
      // The synthetic model is deterministic: its gain has no interval.
      gain = r.time_before_us / r.rejected_after_us - 1.0;
      decision.kept = gain > 0 && gain >= check.min_gain;
      decision.verdict = decision.kept ? "kept: faster in the synthetic model" : "not kept: not faster in the synthetic model";
    }
    if (decision.kept && r.interval) {
      // Where users run it: the same schedule against the compiled one in CUDA graphs, by the same rule.
      const CubinComparison g = judge->compare(r.game.patched, 1, final_timing(check, check.seed + 1), bench::Mode::kGraph);
      if (g.context_lost)
        throw Error(ErrorKind::kRuntime, "the best schedule lost the CUDA context when re-timed in CUDA graphs (" +
                                             g.failure + "); nothing was written");
      // decide_keep's verdicts start with "kept: " or "not kept: ".
      auto reason = [](const std::string& verdict) { return verdict.substr(verdict.find(": ") + 2); };
      const std::string offline = "offline " + reason(decision.verdict);
      if (!g.ok) {
        decision.kept = false;
        decision.verdict = "not kept: held " + offline + ", then failed in CUDA graphs: " + g.failure;
      } else {
        r.graph_interval = gain_interval(g.original_rounds_us, g.candidate_rounds_us);
        const KeepDecision in_graphs = decide_keep(*r.graph_interval, check.min_gain);
        decision.kept = in_graphs.kept;
        decision.verdict = (in_graphs.kept ? "kept: " : "not kept: held ") + offline + "; in CUDA graphs " +
                           reason(in_graphs.verdict);
      }
    }
    r.verdict = decision.verdict;
    if (decision.kept) {
      r.kept = true;
      r.gain = gain;
      r.time_after_us = r.rejected_after_us;
      r.rejected_after_us = 0;
      r.moves = int(search.path.size());
    }
  }
  if (!r.kept) r.time_after_us = r.time_before_us;
}

SassOptCsvRow csv_row(const SassOptOutcome& r, const std::string& kernel_column, const Problem& problem,
                      sass::ActionSpace actions) {
  SassOptCsvRow row;
  row.kernel = kernel_column;
  row.problem = problem;
  row.time_before_us = r.time_before_us;
  row.time_after_us = r.time_after_us;
  row.gain = r.gain;
  row.bitwise_equal = r.bitwise_equal;
  row.moves = r.moves;
  row.set = r.set;
  row.actions = sass::to_string(actions);
  if (r.interval) row.ci_low = r.interval->low, row.ci_high = r.interval->high;
  if (r.graph_interval)
    row.graph_gain = r.graph_interval->gain, row.graph_ci_low = r.graph_interval->low,
    row.graph_ci_high = r.graph_interval->high;
  row.changes = r.kept ? r.game.changes.to_string() : "";
  return row;
}

}  // namespace rlgemm::measure
