#include "bench/results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <string_view>
#include <iterator>
#include <tuple>

#include "bench/implementation.h"
#include "bench/torch_worker.h"

#include "rlgemm/error.h"

namespace rlgemm::bench {

const char* const kCsvHeader =
    "M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_best_vendor,speedup_vs_lt_auto,correct,time_min_us,"
    "time_max_us,samples,batch,detail,dtype,paired_vs_best_vendor,paired_low,paired_high,rounds_us";

namespace {

std::string number(double v, const char* format = "%.4f") {
  if (!std::isfinite(v)) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

double parse_number(const std::string& field) { return field.empty() ? NAN : std::stod(field); }

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream ss(line);
  std::string field;
  while (std::getline(ss, field, ',')) fields.push_back(field);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  return fields;
}

// Where each column stands in a file, from its header (-1: absent). Every results file starts with the
// identity columns; the rest came one by one, so they are looked up by name.
struct Columns {
  int m = -1, n = -1, k = -1, layout = -1, impl = -1, mode = -1, time_us = -1, speedup_vendor = -1, speedup = -1,
      correct = -1, min_us = -1, max_us = -1, samples = -1, batch = -1, detail = -1, dtype = -1, paired = -1,
      paired_low = -1, paired_high = -1, rounds = -1;
  size_t count = 0;
};

Columns columns_of(const std::string& header, const std::string& path) {
  const auto names = split(header);
  Columns c;
  c.count = names.size();
  const std::pair<const char*, int*> known[] = {
      {"M", &c.m}, {"N", &c.n}, {"K", &c.k}, {"layout", &c.layout}, {"impl", &c.impl}, {"mode", &c.mode},
      {"time_us", &c.time_us}, {"speedup_vs_best_vendor", &c.speedup_vendor}, {"speedup_vs_lt_auto", &c.speedup},
      {"correct", &c.correct}, {"time_min_us", &c.min_us}, {"time_max_us", &c.max_us}, {"samples", &c.samples},
      {"batch", &c.batch}, {"detail", &c.detail}, {"dtype", &c.dtype}, {"paired_vs_best_vendor", &c.paired},
      {"paired_low", &c.paired_low}, {"paired_high", &c.paired_high}, {"rounds_us", &c.rounds}};
  for (size_t i = 0; i < names.size(); ++i)
    for (auto& [name, slot] : known)
      if (names[i] == name) *slot = int(i);
  if (header.rfind("M,N,K,layout,impl,mode,time_us,tflops,", 0) != 0 || c.speedup < 0 || c.correct < 0)
    fail(path + ":1: not a results CSV (the header must start M,N,K,layout,impl,mode,time_us,tflops, and name "
                "speedup_vs_lt_auto and correct)");
  return c;
}

Row parse_row(const std::vector<std::string>& f, const Columns& c) {
  // The identity, time, speedups and correctness must be there; the timing details and the detail after
  // them may be missing (rows written before they existed).
  const int required = std::max({c.m, c.n, c.k, c.layout, c.impl, c.mode, c.time_us, c.speedup_vendor, c.speedup, c.correct});
  if (int(f.size()) <= required) throw std::invalid_argument("too few columns");
  auto at = [&](int i) -> const std::string& {
    static const std::string empty;
    return i >= 0 && size_t(i) < f.size() ? f[size_t(i)] : empty;
  };
  Row r;
  r.shape = {std::stoll(at(c.m)), std::stoll(at(c.n)), std::stoll(at(c.k))};
  r.layout = parse_layout(at(c.layout));
  r.impl = at(c.impl);
  r.mode = parse_mode(at(c.mode));
  r.time_us = parse_number(at(c.time_us));
  r.speedup = parse_number(at(c.speedup));
  r.speedup_vendor = parse_number(at(c.speedup_vendor));
  r.correct = at(c.correct) == "1";
  if (c.min_us >= 0) r.timing.min_us = parse_number(at(c.min_us));
  if (c.max_us >= 0) r.timing.max_us = parse_number(at(c.max_us));
  if (c.samples >= 0 && !at(c.samples).empty()) r.timing.samples = std::stoi(at(c.samples));
  if (c.batch >= 0 && !at(c.batch).empty()) r.timing.batch = std::stoi(at(c.batch));
  r.detail = at(c.detail);
  if (!at(c.dtype).empty()) r.dtype = parse_dtype(at(c.dtype));
  r.timing.time_us = r.time_us;
  if (!at(c.rounds).empty()) {
    std::stringstream rounds(at(c.rounds));
    std::string v;
    while (std::getline(rounds, v, ';')) r.timing.rounds_us.push_back(std::stod(v));
  }
  if (!at(c.paired).empty()) {
    r.paired_vendor.rounds = int(r.timing.rounds_us.size());
    r.paired_vendor.gain = parse_number(at(c.paired)) - 1;
    r.paired_vendor.low = parse_number(at(c.paired_low)) - 1;
    r.paired_vendor.high = parse_number(at(c.paired_high)) - 1;
    if (!std::isfinite(r.paired_vendor.gain) || !std::isfinite(r.paired_vendor.low) ||
        !std::isfinite(r.paired_vendor.high) || r.paired_vendor.rounds < 2)
      throw std::invalid_argument("a paired speedup without its interval or its rounds");
  }
  return r;
}

}  // namespace

void write_csv_row(std::ostream& out, const Row& r) {
  std::string detail = r.detail;
  std::replace(detail.begin(), detail.end(), ',', ';');
  std::replace(detail.begin(), detail.end(), '\n', ' ');
  out << r.shape.m << ',' << r.shape.n << ',' << r.shape.k << ',' << to_string(r.layout) << ',' << r.impl << ','
      << to_string(r.mode) << ',' << number(r.time_us, "%.3f") << ',' << number(r.tflops(), "%.2f") << ','
      << number(r.speedup_vendor, "%.4f") << ',' << number(r.speedup, "%.4f") << ',' << (r.correct ? 1 : 0) << ','
      << number(r.timing.min_us, "%.3f") << ',' << number(r.timing.max_us, "%.3f") << ',' << r.timing.samples << ','
      << r.timing.batch << ',' << detail << ',' << to_string(r.dtype) << ',';
  const GainInterval& g = r.paired_vendor;
  if (g.rounds >= 2) out << number(1 + g.gain) << ',' << number(1 + g.low) << ',' << number(1 + g.high);
  else out << ",,";
  out << ',';
  for (size_t i = 0; i < r.timing.rounds_us.size(); ++i) out << (i ? ";" : "") << number(r.timing.rounds_us[i], "%.4g");
  out << '\n';
}

namespace {

// A results file parsed: its text, its rows, where each row's line starts, and (when `allow_torn`) where a
// last line without its newline starts (left unparsed; npos when there is none).
struct ParsedCsv {
  std::string text;
  std::vector<Row> rows;
  std::vector<size_t> starts;  // byte offset of each row's line
  size_t torn_at = std::string::npos;
};

ParsedCsv read_rows(const std::string& path, bool allow_torn) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open results file '" + path + "'");
  ParsedCsv out;
  out.text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  const std::string& text = out.text;
  size_t pos = text.find('\n');
  if (pos == std::string::npos) fail(path + ":1: not a results CSV (no complete header line)");
  const Columns columns = columns_of(text.substr(0, pos), path);
  int line_no = 1;
  for (size_t start = pos + 1; start < text.size();) {
    ++line_no;
    size_t end = text.find('\n', start);
    if (end == std::string::npos && allow_torn) {
      out.torn_at = start;
      break;
    }
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    const size_t line_start = start;
    start = end + 1;
    if (line.empty()) continue;
    try {
      out.rows.push_back(parse_row(split(line), columns));
      out.starts.push_back(line_start);
    } catch (const std::exception& e) {
      fail(path + ":" + std::to_string(line_no) + ": malformed row (" + e.what() + ")");
    }
  }
  if (columns.speedup_vendor < 0) assign_best_vendor(out.rows);
  return out;
}

}  // namespace

std::vector<Row> read_csv(const std::string& path) { return read_rows(path, false).rows; }

ResumableCsv read_csv_for_resume(const std::string& path) {
  ParsedCsv parsed = read_rows(path, true);
  ResumableCsv out;
  out.keep_bytes = parsed.text.size();
  if (parsed.torn_at != std::string::npos) {
    // The torn line belongs to the problem being written when the run died: its complete rows go too.
    const auto torn_fields = split(parsed.text.substr(parsed.torn_at));
    size_t cut = parsed.torn_at;
    if (torn_fields.size() >= 4) {
      const std::string key = torn_fields[0] + "," + torn_fields[1] + "," + torn_fields[2] + "," + torn_fields[3];
      while (!parsed.rows.empty() &&
             parsed.rows.back().shape.to_string() + "," + std::string(to_string(parsed.rows.back().layout)) == key) {
        cut = parsed.starts.back();
        parsed.rows.pop_back();
        parsed.starts.pop_back();
      }
    }
    out.dropped = parsed.text.substr(cut);
    out.keep_bytes = cut;
  }
  out.rows = std::move(parsed.rows);
  return out;
}

void assign_best_vendor(std::vector<Row>& rows) {
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int, int>, size_t> best;  // problem and mode -> row
  auto key = [](const Row& r) {
    return std::make_tuple(r.shape.m, r.shape.n, r.shape.k, int(r.layout), int(r.dtype), int(r.mode));
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (r.correct && std::isfinite(r.time_us) && is_vendor_implementation(r.impl)) {
      auto [it, inserted] = best.emplace(key(r), i);
      if (!inserted && r.time_us < rows[it->second].time_us) it->second = i;
    }
  }
  // Only speedup_vendor and paired_vendor are written below: the best rows' times and rounds stay as read.
  for (Row& r : rows) {
    auto it = best.find(key(r));
    r.speedup_vendor = it == best.end() || !r.correct ? NAN : rows[it->second].time_us / r.time_us;
    r.paired_vendor = GainInterval{};
    if (it == best.end() || !r.correct || r.impl == kTorchImplementation) continue;
    const std::vector<double>& vendor = rows[it->second].timing.rounds_us;
    if (vendor.size() < 2 || vendor.size() != r.timing.rounds_us.size()) continue;
    r.paired_vendor = gain_interval(vendor, r.timing.rounds_us);
  }
}

Bucket bucket_of(const Shape& s) {
  const double mnk = s.mnk();
  if (mnk < std::ldexp(1.0, 30)) return Bucket::kSmall;
  if (mnk < std::ldexp(1.0, 36)) return Bucket::kMedium;
  return Bucket::kLarge;
}

const char* bucket_name(Bucket b) {
  switch (b) {
    case Bucket::kSmall: return "MNK<2^30";
    case Bucket::kMedium: return "2^30<=MNK<2^36";
    case Bucket::kLarge: return "MNK>=2^36";
  }
  return "?";
}

Stats speedup_stats(const std::vector<double>& v) {
  Stats s;
  s.count = int(v.size());
  if (v.empty()) return s;
  double sum = 0, log_sum = 0;
  for (double x : v) {
    sum += x;
    log_sum += std::log(x);
  }
  s.arith_mean = sum / double(v.size());
  s.geo_mean = std::exp(log_sum / double(v.size()));
  return s;
}

bool is_design_row(const Row& row) { return row.impl.find('/') != std::string::npos; }

std::vector<Row> best_of_designs(const std::vector<Row>& rows, const std::string& name) {
  std::vector<Row> out;
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int, int>, size_t> best;  // problem and mode -> index in out
  for (const Row& row : rows) {
    if (!is_design_row(row)) {
      out.push_back(row);
      continue;
    }
    const auto key = std::make_tuple(row.shape.m, row.shape.n, row.shape.k, int(row.layout), int(row.dtype), int(row.mode));
    Row candidate = row;
    candidate.impl = name;
    candidate.detail = row.correct ? row.impl : "no design passed the gate";
    auto [it, inserted] = best.emplace(key, out.size());
    if (inserted) {
      out.push_back(candidate);
      continue;
    }
    Row& held = out[it->second];
    const bool better = row.correct && (!held.correct || row.time_us < held.time_us);
    if (better) held = candidate;
  }
  return out;
}

ServedBy served_by(const Row& row) {
  if (row.impl.rfind("rlgemm", 0) != 0 || is_design_row(row)) return ServedBy::kUnknown;
  const std::string& d = row.detail;
  auto verdict = [](std::string_view text) {
    if (text.rfind("sm", 0) == 0) return ServedBy::kKernel;  // a design's text: sm80/..., sm90....
    if (text.rfind("cuBLASLt", 0) == 0) return ServedBy::kCublasLt;
    return ServedBy::kUnknown;
  };
  const std::string marker = row.mode == Mode::kGraph ? "CUDA graphs: " : "eager calls: ";
  // The verdict is the marker's first occurrence in the first-use check: notes the check appends after its
  // verdicts use the same markers ("; CUDA graphs: the floor ran slower ..."), and so may a floor's own text
  // before it ("timed on first use in CUDA graphs: candidate ...").
  const size_t check = d.find("(measured on first use: ");
  const size_t at = check == std::string::npos ? check : d.find(marker, check);
  if (at != std::string::npos) return verdict(std::string_view(d).substr(at + marker.size()));
  if (d.rfind("cublaslt", 0) == 0) return ServedBy::kCublasLt;
  for (const char* kernel_route : {"tuned ", "predicted ", "autotuned ", "nearest ", "policy ", "default "})
    if (d.rfind(kernel_route, 0) == 0) return ServedBy::kKernel;
  return ServedBy::kUnknown;
}

std::vector<SummaryGroup> summarize(const std::vector<Row>& rows) {
  struct Acc {
    SummaryGroup group;
    std::vector<double> all[2], bucket[2][3];
    std::vector<Row> ranked[2];
    std::vector<double> paired;
    std::vector<Row> paired_ranked;
    std::vector<double> served[2], served_bucket[2][3];  // kernel, cuBLASLt
  };
  std::vector<Acc> accs;
  std::map<std::tuple<int, int, int, std::string>, size_t> index;
  for (const auto& r : rows) {
    auto key = std::make_tuple(int(r.mode), int(r.layout), int(r.dtype), r.impl);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, accs.size()).first;
      accs.push_back({});
      accs.back().group.mode = r.mode;
      accs.back().group.layout = r.layout;
      accs.back().group.dtype = r.dtype;
      accs.back().group.impl = r.impl;
    }
    Acc& a = accs[it->second];
    if (!r.correct) {
      ++a.group.incorrect;
      continue;
    }
    if (r.mode == Mode::kGraph && r.detail.find(kGraphMemoryNote) != std::string::npos)
      a.group.graph_memory.push_back(r.shape);
    if (r.paired_vendor.rounds >= 2) {
      a.paired.push_back(1 + r.paired_vendor.gain);
      a.paired_ranked.push_back(r);
      if (1 + r.paired_vendor.gain < kPairedFloor) ++a.group.paired.below;
      if (1 + r.paired_vendor.high < kPairedFloor) ++a.group.paired.credibly_below;
    }
    const double speedups[2] = {r.speedup_vendor, r.speedup};
    for (int ref = 0; ref < 2; ++ref) {
      if (!std::isfinite(speedups[ref]) || speedups[ref] <= 0) continue;
      a.all[ref].push_back(speedups[ref]);
      a.bucket[ref][int(bucket_of(r.shape))].push_back(speedups[ref]);
      a.ranked[ref].push_back(r);
    }
    const ServedBy by = served_by(r);
    if (by != ServedBy::kUnknown && std::isfinite(r.speedup_vendor) && r.speedup_vendor > 0) {
      const int side = by == ServedBy::kKernel ? 0 : 1;
      a.served[side].push_back(r.speedup_vendor);
      a.served_bucket[side][int(bucket_of(r.shape))].push_back(r.speedup_vendor);
    }
  }
  std::vector<SummaryGroup> out;
  for (auto& a : accs) {
    for (int ref = 0; ref < 2; ++ref) {
      SpeedupSummary& s = ref == 0 ? a.group.vendor : a.group.lt_auto;
      s.all = speedup_stats(a.all[ref]);
      for (int b = 0; b < 3; ++b) s.by_bucket[b] = speedup_stats(a.bucket[ref][b]);
      auto& ranked = a.ranked[ref];
      std::sort(ranked.begin(), ranked.end(), [ref](const Row& x, const Row& y) {
        return ref == 0 ? x.speedup_vendor < y.speedup_vendor : x.speedup < y.speedup;
      });
      if (ranked.size() > 5) ranked.resize(5);
      s.worst = ranked;
    }
    a.group.paired.all = speedup_stats(a.paired);
    std::sort(a.paired_ranked.begin(), a.paired_ranked.end(),
              [](const Row& x, const Row& y) { return x.paired_vendor.gain < y.paired_vendor.gain; });
    if (a.paired_ranked.size() > 5) a.paired_ranked.resize(5);
    a.group.paired.worst = std::move(a.paired_ranked);
    a.group.routes.kernel_all = speedup_stats(a.served[0]);
    a.group.routes.cublaslt_all = speedup_stats(a.served[1]);
    for (int b = 0; b < 3; ++b) {
      a.group.routes.kernel_by_bucket[b] = speedup_stats(a.served_bucket[0][b]);
      a.group.routes.cublaslt_by_bucket[b] = speedup_stats(a.served_bucket[1][b]);
    }
    out.push_back(a.group);
  }
  return out;
}

namespace {

void print_table(std::ostream& out, const std::vector<SummaryGroup>& groups, bool vendor) {
  char buf[512];
  out << (vendor ? "\nSpeedup vs the best vendor call of the same run (cublas_nn/tn, lt_heuristic, lt_auto[_graph]), "
                   "arithmetic mean / geometric mean, shapes counted:\n"
                 : "\nSpeedup vs lt_auto (arithmetic mean / geometric mean, shapes counted):\n");
  std::snprintf(buf, sizeof buf, "%-8s %-3s %-4s %-14s | %-22s | %-22s | %-22s | %-22s | %s\n", "mode", "lay", "type", "impl",
                "all", bucket_name(Bucket::kSmall), bucket_name(Bucket::kMedium), bucket_name(Bucket::kLarge),
                "wrong");
  out << buf;
  auto cell = [](const Stats& s) {
    char c[64];
    if (s.count == 0)
      std::snprintf(c, sizeof c, "%-22s", "-");
    else
      std::snprintf(c, sizeof c, "%6.3f / %6.3f (%4d)", s.arith_mean, s.geo_mean, s.count);
    return std::string(c);
  };
  for (const auto& g : groups) {
    const SpeedupSummary& s = vendor ? g.vendor : g.lt_auto;
    std::snprintf(buf, sizeof buf, "%-8s %-3s %-4s %-14s | %s | %s | %s | %s | %d\n", std::string(to_string(g.mode)).c_str(),
                  std::string(to_string(g.layout)).c_str(), std::string(to_string(g.dtype)).c_str(), g.impl.c_str(),
                  cell(s.all).c_str(),
                  cell(s.by_bucket[0]).c_str(), cell(s.by_bucket[1]).c_str(), cell(s.by_bucket[2]).c_str(),
                  g.incorrect);
    out << buf;
  }
}

}  // namespace

// One line per implementation with its geometric mean against the best vendor call in each mode of the run,
// side by side: a kernel is faster for its own sake only where it wins in graph mode (the GPU's time alone);
// what it gains only offline or in server mode is host launch cost.
void print_modes_side_by_side(std::ostream& out, const std::vector<SummaryGroup>& groups) {
  std::vector<Mode> modes;
  for (const auto& g : groups)
    if (std::find(modes.begin(), modes.end(), g.mode) == modes.end()) modes.push_back(g.mode);
  if (modes.size() < 2) return;
  std::map<std::tuple<int, int, std::string>, std::map<int, const SummaryGroup*>> by_impl;
  std::vector<std::tuple<int, int, std::string>> order;
  for (const auto& g : groups) {
    const auto key = std::make_tuple(int(g.layout), int(g.dtype), g.impl);
    if (!by_impl.count(key)) order.push_back(key);
    by_impl[key][int(g.mode)] = &g;
  }
  char buf[128];
  out << "\nGeometric mean vs the best vendor call, by mode (all shapes; " << bucket_name(Bucket::kSmall) << "):\n";
  std::snprintf(buf, sizeof buf, "%-3s %-4s %-14s", "lay", "type", "impl");
  out << buf;
  for (Mode m : modes) {
    std::snprintf(buf, sizeof buf, " | %-17s", std::string(to_string(m)).c_str());
    out << buf;
  }
  out << '\n';
  for (const auto& key : order) {
    std::snprintf(buf, sizeof buf, "%-3s %-4s %-14s", std::string(to_string(Layout(std::get<0>(key)))).c_str(),
                  std::string(to_string(DType(std::get<1>(key)))).c_str(), std::get<2>(key).c_str());
    out << buf;
    for (Mode m : modes) {
      const auto it = by_impl[key].find(int(m));
      if (it == by_impl[key].end() || it->second->vendor.all.count == 0) {
        std::snprintf(buf, sizeof buf, " | %-17s", "-");
      } else {
        const SpeedupSummary& v = it->second->vendor;
        if (v.by_bucket[0].count)
          std::snprintf(buf, sizeof buf, " | %6.3f; %6.3f   ", v.all.geo_mean, v.by_bucket[0].geo_mean);
        else
          std::snprintf(buf, sizeof buf, " | %6.3f; -        ", v.all.geo_mean);
      }
      out << buf;
    }
    out << '\n';
  }
}

// The paired speedups against the best vendor call, where the run has them: geometric mean, how many rows fall
// below kPairedFloor by the point estimate and by their whole interval, and the worst with their intervals.
void print_paired(std::ostream& out, const std::vector<SummaryGroup>& groups) {
  if (std::none_of(groups.begin(), groups.end(), [](const SummaryGroup& g) { return g.paired.all.count > 0; })) return;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "\nPaired with the best vendor call round by round (exp of the mean log ratio of each round's batches), "
                "geometric mean; rows below %.2f by the estimate / by the whole 95%% interval; the worst:\n",
                kPairedFloor);
  out << buf;
  for (const auto& g : groups) {
    if (g.paired.all.count == 0) continue;
    std::snprintf(buf, sizeof buf, "%-8s %-3s %-4s %-14s | %6.3f (%4d) | %3d / %3d |", std::string(to_string(g.mode)).c_str(),
                  std::string(to_string(g.layout)).c_str(), std::string(to_string(g.dtype)).c_str(), g.impl.c_str(),
                  g.paired.all.geo_mean, g.paired.all.count, g.paired.below, g.paired.credibly_below);
    out << buf;
    for (const auto& r : g.paired.worst) {
      std::snprintf(buf, sizeof buf, " %s=%.3f [%.3f,%.3f]", r.shape.to_string().c_str(), 1 + r.paired_vendor.gain,
                    1 + r.paired_vendor.low, 1 + r.paired_vendor.high);
      out << buf;
    }
    out << '\n';
  }
}

// The library's rows split by what served them: a kernel or cuBLASLt (served_by), geometric mean against the best
// vendor call with the shapes counted, over all shapes and per bucket.
void print_routes(std::ostream& out, const std::vector<SummaryGroup>& groups) {
  auto served = [](const SummaryGroup& g) { return g.routes.kernel_all.count + g.routes.cublaslt_all.count; };
  if (std::none_of(groups.begin(), groups.end(), [&](const SummaryGroup& g) { return served(g) > 0; })) return;
  char buf[512];
  auto cell = [](const Stats& st) {
    char c[32];
    if (st.count == 0) std::snprintf(c, sizeof c, "%-14s", "-");
    else std::snprintf(c, sizeof c, "%6.3f (%4d)  ", st.geo_mean, st.count);
    return std::string(c);
  };
  out << "\nThe library's rows by what served them in their way of calling, geometric mean vs the best vendor call "
         "(shapes): all | "
      << bucket_name(Bucket::kSmall) << " | " << bucket_name(Bucket::kMedium) << " | " << bucket_name(Bucket::kLarge) << ":\n";
  for (const auto& g : groups) {
    if (served(g) == 0) continue;
    const RouteSplit& r = g.routes;
    for (int side = 0; side < 2; ++side) {
      const Stats& all = side == 0 ? r.kernel_all : r.cublaslt_all;
      const Stats* by = side == 0 ? r.kernel_by_bucket : r.cublaslt_by_bucket;
      std::snprintf(buf, sizeof buf, "%-8s %-3s %-4s %-14s %-8s | %s | %s | %s | %s\n",
                    std::string(to_string(g.mode)).c_str(), std::string(to_string(g.layout)).c_str(),
                    std::string(to_string(g.dtype)).c_str(), g.impl.c_str(), side == 0 ? "kernel" : "cuBLASLt",
                    cell(all).c_str(), cell(by[0]).c_str(), cell(by[1]).c_str(), cell(by[2]).c_str());
      out << buf;
    }
  }
}

void print_summary(std::ostream& out, const std::vector<SummaryGroup>& groups) {
  print_table(out, groups, true);
  print_table(out, groups, false);
  print_modes_side_by_side(out, groups);
  print_paired(out, groups);
  print_routes(out, groups);
  for (const auto& g : groups) {
    if (g.graph_memory.empty()) continue;
    out << "\nWarning: " << g.graph_memory.size() << ' ' << to_string(g.layout) << ' ' << to_string(g.dtype) << ' '
        << g.impl << " graph rows timed calls whose workspace came from graph memory (an allocation in the graph at "
           "every call: every capture slot of the route was owned), not the kernel alone:";
    for (size_t i = 0; i < g.graph_memory.size() && i < 10; ++i) out << ' ' << g.graph_memory[i].to_string();
    out << (g.graph_memory.size() > 10 ? " ...\n" : "\n");
  }
  char buf[128];
  out << "\nWorst shapes (speedup vs the best vendor call):\n";
  for (const auto& g : groups) {
    if (g.vendor.worst.empty()) continue;
    out << "  " << to_string(g.mode) << ' ' << to_string(g.layout) << ' ' << to_string(g.dtype) << ' ' << g.impl << ':';
    for (const auto& r : g.vendor.worst) {
      std::snprintf(buf, sizeof buf, " %s=%.3f", r.shape.to_string().c_str(), r.speedup_vendor);
      out << buf;
    }
    out << '\n';
  }
}

nlohmann::json summary_json(const std::vector<SummaryGroup>& groups) {
  auto stats = [](const Stats& st) {
    return nlohmann::json{{"count", st.count}, {"arith_mean", st.arith_mean}, {"geo_mean", st.geo_mean}};
  };
  auto speedups = [&](const SpeedupSummary& s, bool vendor) {
    nlohmann::json j = {{"all", stats(s.all)}};
    for (int b = 0; b < 3; ++b) j[bucket_name(Bucket(b))] = stats(s.by_bucket[b]);
    nlohmann::json worst = nlohmann::json::array();
    for (const auto& r : s.worst)
      worst.push_back({{"shape", r.shape.to_string()}, {"speedup", vendor ? r.speedup_vendor : r.speedup}});
    j["worst"] = worst;
    return j;
  };
  nlohmann::json summary = nlohmann::json::array();
  for (const auto& g : groups)
    summary.push_back({{"mode", to_string(g.mode)},
                       {"layout", to_string(g.layout)},
                       {"dtype", to_string(g.dtype)},
                       {"impl", g.impl},
                       {"incorrect", g.incorrect},
                       {"speedup_vs_best_vendor", speedups(g.vendor, true)},
                       {"speedup_vs_lt_auto", speedups(g.lt_auto, false)}});
  for (size_t i = 0; i < groups.size(); ++i) {
    const PairedSummary& p = groups[i].paired;
    if (p.all.count == 0) continue;
    nlohmann::json worst = nlohmann::json::array();
    for (const auto& r : p.worst)
      worst.push_back({{"shape", r.shape.to_string()},
                       {"speedup", 1 + r.paired_vendor.gain},
                       {"low", 1 + r.paired_vendor.low},
                       {"high", 1 + r.paired_vendor.high}});
    summary[i]["paired_vs_best_vendor"] = {{"all", stats(p.all)},
                                           {"floor", kPairedFloor},
                                           {"below", p.below},
                                           {"credibly_below", p.credibly_below},
                                           {"worst", worst}};
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    const RouteSplit& r = groups[i].routes;
    if (r.kernel_all.count + r.cublaslt_all.count == 0) continue;
    auto side = [&](const Stats& all, const Stats* by) {
      nlohmann::json j = {{"all", stats(all)}};
      for (int b = 0; b < 3; ++b) j[bucket_name(Bucket(b))] = stats(by[b]);
      return j;
    };
    summary[i]["served_by"] = {{"kernel", side(r.kernel_all, r.kernel_by_bucket)},
                               {"cublaslt", side(r.cublaslt_all, r.cublaslt_by_bucket)}};
  }
  return summary;
}

const char* const kFairnessHeader = "mode,with_rlgemm,shapes,geomean_twin_over_auto,max_abs_dev,apart_3pct";

std::vector<FairnessRow> fairness(const std::vector<Row>& rows) {
  const bool with_rlgemm = std::any_of(rows.begin(), rows.end(), [](const Row& r) {
    return r.impl == "rlgemm" || is_design_row(r);
  });
  std::map<int, std::map<std::tuple<int64_t, int64_t, int64_t, int, int>, std::pair<double, double>>> by_mode;
  for (const Row& r : rows) {
    if (!r.correct || !std::isfinite(r.time_us) || (r.impl != "lt_auto" && r.impl != kTwinImplementation)) continue;
    auto& pair = by_mode[int(r.mode)].try_emplace(std::make_tuple(r.shape.m, r.shape.n, r.shape.k, int(r.layout), int(r.dtype)),
                                                  NAN, NAN).first->second;
    (r.impl == "lt_auto" ? pair.first : pair.second) = r.time_us;
  }
  std::vector<FairnessRow> out;
  for (const auto& [mode, problems] : by_mode) {
    FairnessRow f;
    f.mode = Mode(mode);
    f.with_rlgemm = with_rlgemm;
    double log_sum = 0, max_dev = 0;
    for (const auto& [problem, times] : problems) {
      if (!std::isfinite(times.first) || !std::isfinite(times.second)) continue;
      const double ratio = times.second / times.first;
      log_sum += std::log(ratio);
      max_dev = std::max(max_dev, std::fabs(ratio - 1));
      if (std::fabs(ratio - 1) > kTwinApart) ++f.apart;
      ++f.shapes;
    }
    if (f.shapes) {
      f.geomean_twin_over_auto = std::exp(log_sum / f.shapes);
      f.max_abs_dev = max_dev;
    }
    out.push_back(f);
  }
  return out;
}

void write_fairness_row(std::ostream& out, const FairnessRow& f) {
  out << to_string(f.mode) << ',' << (f.with_rlgemm ? 1 : 0) << ',' << f.shapes << ','
      << number(f.geomean_twin_over_auto, "%.4f") << ',' << number(f.max_abs_dev, "%.4f") << ',' << f.apart << '\n';
}

}  // namespace rlgemm::bench
