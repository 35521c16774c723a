#include "bench/results.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>
#include <tuple>

#include "rlgemm/error.h"

namespace rlgemm::bench {

const char* const kCsvHeader =
    "M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_lt_auto,correct,time_min_us,time_max_us,samples,batch,detail";

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

}  // namespace

void write_csv_row(std::ostream& out, const Row& r) {
  std::string detail = r.detail;
  std::replace(detail.begin(), detail.end(), ',', ';');
  std::replace(detail.begin(), detail.end(), '\n', ' ');
  out << r.shape.m << ',' << r.shape.n << ',' << r.shape.k << ',' << to_string(r.layout) << ',' << r.impl << ','
      << to_string(r.mode) << ',' << number(r.time_us, "%.3f") << ',' << number(r.tflops(), "%.2f") << ','
      << number(r.speedup, "%.4f") << ',' << (r.correct ? 1 : 0) << ',' << number(r.timing.min_us, "%.3f") << ','
      << number(r.timing.max_us, "%.3f") << ',' << r.timing.samples << ',' << r.timing.batch << ',' << detail << '\n';
}

std::vector<Row> read_csv(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open results file '" + path + "'");
  std::string line;
  if (!std::getline(in, line) || line.rfind("M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_lt_auto,correct", 0) != 0)
    fail(path + ":1: not a results CSV (the header must start M,N,K,layout,impl,mode,...)");
  std::vector<Row> rows;
  int line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    auto f = split(line);
    try {
      if (f.size() < 10) throw std::invalid_argument("too few columns");
      Row r;
      r.shape = {std::stoll(f[0]), std::stoll(f[1]), std::stoll(f[2])};
      r.layout = parse_layout(f[3]);
      r.impl = f[4];
      r.mode = parse_mode(f[5]);
      r.time_us = parse_number(f[6]);
      r.speedup = parse_number(f[8]);
      r.correct = f[9] == "1";
      if (f.size() > 13) {
        r.timing.min_us = parse_number(f[10]);
        r.timing.max_us = parse_number(f[11]);
        r.timing.samples = std::stoi(f[12]);
        r.timing.batch = std::stoi(f[13]);
      }
      if (f.size() > 14) r.detail = f[14];
      r.timing.time_us = r.time_us;
      rows.push_back(r);
    } catch (const std::exception& e) {
      fail(path + ":" + std::to_string(line_no) + ": malformed row (" + e.what() + ")");
    }
  }
  return rows;
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
  std::map<std::tuple<int64_t, int64_t, int64_t, int, int>, size_t> best;  // problem and mode -> index in out
  for (const Row& row : rows) {
    if (!is_design_row(row)) {
      out.push_back(row);
      continue;
    }
    const auto key = std::make_tuple(row.shape.m, row.shape.n, row.shape.k, int(row.layout), int(row.mode));
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

std::vector<SummaryGroup> summarize(const std::vector<Row>& rows) {
  struct Acc {
    SummaryGroup group;
    std::vector<double> all, bucket[3];
    std::vector<Row> ranked;
  };
  std::vector<Acc> accs;
  std::map<std::tuple<int, int, std::string>, size_t> index;
  for (const auto& r : rows) {
    auto key = std::make_tuple(int(r.mode), int(r.layout), r.impl);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, accs.size()).first;
      accs.push_back({});
      accs.back().group.mode = r.mode;
      accs.back().group.layout = r.layout;
      accs.back().group.impl = r.impl;
    }
    Acc& a = accs[it->second];
    if (!r.correct) {
      ++a.group.incorrect;
      continue;
    }
    if (!std::isfinite(r.speedup) || r.speedup <= 0) continue;
    a.all.push_back(r.speedup);
    a.bucket[int(bucket_of(r.shape))].push_back(r.speedup);
    a.ranked.push_back(r);
  }
  std::vector<SummaryGroup> out;
  for (auto& a : accs) {
    a.group.all = speedup_stats(a.all);
    for (int b = 0; b < 3; ++b) a.group.by_bucket[b] = speedup_stats(a.bucket[b]);
    std::sort(a.ranked.begin(), a.ranked.end(), [](const Row& x, const Row& y) { return x.speedup < y.speedup; });
    if (a.ranked.size() > 5) a.ranked.resize(5);
    a.group.worst = a.ranked;
    out.push_back(a.group);
  }
  return out;
}

void print_summary(std::ostream& out, const std::vector<SummaryGroup>& groups) {
  char buf[512];
  out << "\nSpeedup vs lt_auto (arithmetic mean / geometric mean, shapes counted):\n";
  std::snprintf(buf, sizeof buf, "%-8s %-3s %-14s | %-22s | %-22s | %-22s | %-22s | %s\n", "mode", "lay", "impl",
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
    std::snprintf(buf, sizeof buf, "%-8s %-3s %-14s | %s | %s | %s | %s | %d\n", std::string(to_string(g.mode)).c_str(),
                  std::string(to_string(g.layout)).c_str(), g.impl.c_str(), cell(g.all).c_str(),
                  cell(g.by_bucket[0]).c_str(), cell(g.by_bucket[1]).c_str(), cell(g.by_bucket[2]).c_str(),
                  g.incorrect);
    out << buf;
  }
  out << "\nWorst shapes (speedup vs lt_auto):\n";
  for (const auto& g : groups) {
    if (g.worst.empty()) continue;
    out << "  " << to_string(g.mode) << ' ' << to_string(g.layout) << ' ' << g.impl << ':';
    for (const auto& r : g.worst) {
      std::snprintf(buf, sizeof buf, " %s=%.3f", r.shape.to_string().c_str(), r.speedup);
      out << buf;
    }
    out << '\n';
  }
}

nlohmann::json summary_json(const std::vector<SummaryGroup>& groups) {
  auto stats = [](const Stats& st) {
    return nlohmann::json{{"count", st.count}, {"arith_mean", st.arith_mean}, {"geo_mean", st.geo_mean}};
  };
  nlohmann::json summary = nlohmann::json::array();
  for (const auto& g : groups) {
    nlohmann::json s = {{"mode", to_string(g.mode)}, {"layout", to_string(g.layout)}, {"impl", g.impl},
                        {"incorrect", g.incorrect}, {"all", stats(g.all)}};
    for (int b = 0; b < 3; ++b) s[bucket_name(Bucket(b))] = stats(g.by_bucket[b]);
    nlohmann::json worst = nlohmann::json::array();
    for (const auto& r : g.worst) worst.push_back({{"shape", r.shape.to_string()}, {"speedup", r.speedup}});
    s["worst"] = worst;
    summary.push_back(s);
  }
  return summary;
}

}  // namespace rlgemm::bench
