#include "predict/train.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "core/cuda_util.h"
#include "rlgemm/error.h"

namespace rlgemm::predict {

bool is_cublaslt_sample(const Sample& s) { return s.impl == "lt_auto"; }

namespace {

using ProblemKey = std::tuple<std::string, Shape, Layout>;

struct Accumulator {
  GpuTraits gpu;
  Problem problem;
  double log_time = 0, log_ratio = 0;
  int count = 0, ratio_count = 0;
};

// Median of |err| / sqrt(spread^2 + noise^2).
double median_z(const std::vector<double>& abs_err, const std::vector<double>& spread, double noise) {
  std::vector<double> z(abs_err.size());
  for (size_t i = 0; i < z.size(); ++i) {
    const double sd = std::sqrt(spread[i] * spread[i] + noise * noise);
    z[i] = sd > 0 ? abs_err[i] / sd : HUGE_VAL;
  }
  std::nth_element(z.begin(), z.begin() + long(z.size() / 2), z.end());
  return z[z.size() / 2];
}

// The noise (added in quadrature) and scale that make the median |error| 0.674 standard deviations, the
// median of a normal error's size.
std::pair<double, double> calibrate(const std::vector<double>& abs_err, const std::vector<double>& spread) {
  constexpr double kMedianAbsNormal = 0.6744897501960817;
  if (abs_err.empty()) return {0.0, 1.0};
  const double at_zero = median_z(abs_err, spread, 0.0);
  if (at_zero <= kMedianAbsNormal) return {0.0, at_zero / kMedianAbsNormal};
  double lo = 0, hi = 1e-3;
  while (median_z(abs_err, spread, hi) > kMedianAbsNormal && hi < 1e3) hi *= 2;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    (median_z(abs_err, spread, mid) > kMedianAbsNormal ? lo : hi) = mid;
  }
  return {hi, 1.0};
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
  return v[v.size() / 2];
}

struct Table {
  Eigen::MatrixXd x;
  std::vector<double> y;
  std::vector<size_t> group;
};

}  // namespace

std::vector<MergedSample> merge_samples(const std::vector<Sample>& samples, const std::string& mode,
                                        TrainReport* report) {
  std::map<std::tuple<std::string, Shape, Layout, std::string>, Accumulator> rows;
  std::map<ProblemKey, Accumulator> implied_lt;  // lt_auto times read off design rows
  std::set<ProblemKey> measured_lt;
  for (const Sample& s : samples) {
    if (s.mode != mode) {
      if (report) ++report->other_mode_samples;
      continue;
    }
    if (!(s.time_us > 0) || !std::isfinite(s.time_us)) {
      if (report) ++report->unusable_samples;
      continue;
    }
    const ProblemKey pk{s.gpu.name, s.problem.shape, s.problem.layout};
    Accumulator& a = rows[{s.gpu.name, s.problem.shape, s.problem.layout, s.impl}];
    if (a.count == 0) a.gpu = s.gpu, a.problem = s.problem;
    a.log_time += std::log(s.time_us);
    ++a.count;
    if (is_cublaslt_sample(s)) {
      measured_lt.insert(pk);
      continue;
    }
    if (s.lt_us > 0 && std::isfinite(s.lt_us)) {
      a.log_ratio += std::log(s.time_us / s.lt_us);
      ++a.ratio_count;
      Accumulator& l = implied_lt[pk];
      if (l.count == 0) l.gpu = s.gpu, l.problem = s.problem;
      l.log_time += std::log(s.lt_us);
      ++l.count;
    }
  }
  std::vector<MergedSample> out;
  for (auto& [key, a] : rows)
    out.push_back({a.gpu, a.problem, std::get<3>(key), a.log_time / a.count,
                   a.ratio_count ? a.log_ratio / a.ratio_count : 0.0, a.ratio_count > 0, a.count});
  for (auto& [key, l] : implied_lt) {
    if (measured_lt.count(key)) continue;
    out.push_back({l.gpu, l.problem, "lt_auto", l.log_time / l.count, 0.0, false, l.count});
    if (report) ++report->lt_from_designs;
  }
  return out;
}

Predictor train_predictor(const std::vector<Sample>& all, const TrainOptions& o, TrainReport* report_out) {
  TrainReport report;
  if (o.members < 1) fail("the predictor needs at least one ensemble member");
  std::set<Shape> excluded(o.exclude.begin(), o.exclude.end());
  std::vector<Sample> samples;
  std::set<std::string> sources;
  std::set<std::string> gpu_names;
  for (const Sample& s : all)
    if (o.only_gpu.empty() || s.gpu.name == o.only_gpu) gpu_names.insert(s.gpu.name);
  if (gpu_names.size() > 1) {
    std::string names;
    for (const auto& n : gpu_names) names += (names.empty() ? "" : ", ") + n;
    fail("the measurements are of several GPUs (" + names + "); a predictor learns one GPU: choose it (--only-gpu)");
  }
  for (const Sample& s : all) {
    if (!o.only_gpu.empty() && s.gpu.name != o.only_gpu) continue;
    if (excluded.count(s.problem.shape)) {
      ++report.excluded_samples;
      continue;
    }
    samples.push_back(s);
    sources.insert(s.source);
  }
  const std::vector<MergedSample> merged = merge_samples(samples, o.mode, &report);

  // Groups: one per (GPU, shape, layout); bootstrap draws groups.
  std::map<ProblemKey, size_t> group_of;
  std::map<std::string, GpuTraits> gpus;
  auto group = [&](const MergedSample& m) {
    gpus.emplace(m.gpu.name, m.gpu);
    return group_of.emplace(ProblemKey{m.gpu.name, m.problem.shape, m.problem.layout}, group_of.size()).first->second;
  };
  std::vector<const MergedSample*> lt_rows, design_rows;
  std::vector<Design> designs;
  for (const MergedSample& m : merged) {
    if (m.impl == "lt_auto") {
      lt_rows.push_back(&m);
      continue;
    }
    if (!m.has_ratio) {
      ++report.unusable_samples;
      continue;
    }
    try {
      const Design d = parse_design(m.impl);
      if (d.family == Family::kTest) throw Error(ErrorKind::kInvalidInput, "test design");
      designs.push_back(d);
      design_rows.push_back(&m);
    } catch (const Error&) {
      ++report.unusable_samples;
    }
  }
  if (lt_rows.empty() || design_rows.empty())
    fail("no usable " + o.mode + " measurements to train on (" + std::to_string(lt_rows.size()) +
         " cuBLASLt rows, " + std::to_string(design_rows.size()) + " design rows)");

  Table lt, dt;
  lt.x.resize(Eigen::Index(lt_rows.size()), Eigen::Index(shape_feature_names().size()));
  for (size_t i = 0; i < lt_rows.size(); ++i) {
    const auto f = shape_features(lt_rows[i]->problem, lt_rows[i]->gpu);
    for (size_t c = 0; c < f.size(); ++c) lt.x(Eigen::Index(i), Eigen::Index(c)) = f[c];
    lt.y.push_back(lt_rows[i]->log_time);
    lt.group.push_back(group(*lt_rows[i]));
  }
  dt.x.resize(Eigen::Index(design_rows.size()), Eigen::Index(design_feature_names().size()));
  std::vector<double> f;
  for (size_t i = 0; i < design_rows.size(); ++i) {
    design_features(design_rows[i]->problem, designs[i], design_rows[i]->gpu, f);
    for (size_t c = 0; c < f.size(); ++c) dt.x(Eigen::Index(i), Eigen::Index(c)) = f[c];
    dt.y.push_back(design_rows[i]->log_ratio);
    dt.group.push_back(group(*design_rows[i]));
  }
  const size_t groups = group_of.size();
  report.cublaslt_rows = lt_rows.size();
  report.design_rows = design_rows.size();
  report.shapes = groups;
  if (o.progress)
    std::fprintf(o.progress, "predictor-train: %zu cuBLASLt rows, %zu design rows, %zu shapes; %d members\n",
                 lt_rows.size(), design_rows.size(), groups, o.members);

  // Bootstrap draws, fixed up front so the result does not depend on the thread count.
  std::vector<std::vector<double>> draws(size_t(o.members), std::vector<double>(groups, 0.0));
  for (int j = 0; j < o.members; ++j) {
    std::mt19937_64 rng(o.seed * 1000003 + uint64_t(j));
    std::uniform_int_distribution<size_t> pick(0, groups - 1);
    if (o.members == 1) std::fill(draws[0].begin(), draws[0].end(), 1.0);
    else for (size_t g = 0; g < groups; ++g) draws[size_t(j)][pick(rng)] += 1.0;
  }
  Ensemble lt_model, design_model;
  lt_model.members.resize(size_t(o.members));
  design_model.members.resize(size_t(o.members));
  std::atomic<int> next{0}, done{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto worker = [&] {
    for (int j; (j = next++) < o.members;) {
      try {
        auto weights_of = [&](const Table& t) {
          std::vector<double> w(t.y.size());
          for (size_t i = 0; i < w.size(); ++i) w[i] = draws[size_t(j)][t.group[i]];
          return w;
        };
        TreeOptions lo = o.cublaslt_trees, dopt = o.design_trees;
        lo.seed = o.seed * 7919 + uint64_t(j);
        dopt.seed = o.seed * 104729 + uint64_t(j);
        lt_model.members[size_t(j)] = BoostedTrees::fit(lt.x, lt.y, weights_of(lt), lo);
        design_model.members[size_t(j)] = BoostedTrees::fit(dt.x, dt.y, weights_of(dt), dopt);
        const int finished = ++done;
        if (o.progress) std::fprintf(o.progress, "predictor-train: member %d/%d trained\n", finished, o.members);
      } catch (...) {
        std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < std::max(1, std::min(o.threads, o.members)); ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);

  // Out-of-bag calibration: each row predicted by the members that never saw its shape.
  auto calibrate_rows = [&](Ensemble& model, const Table& t, double& median_abs, double& within) {
    const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> rows = t.x;  // predict() reads rows
    std::vector<double> abs_err, spread;
    for (size_t i = 0; i < t.y.size(); ++i) {
      std::vector<double> p;
      for (int j = 0; j < o.members; ++j)
        if (draws[size_t(j)][t.group[i]] == 0) p.push_back(model.members[size_t(j)].predict(rows.row(Eigen::Index(i)).data()));
      if (p.size() < 2) continue;
      double mean = 0;
      for (double v : p) mean += v;
      mean /= double(p.size());
      double var = 0;
      for (double v : p) var += (v - mean) * (v - mean);
      abs_err.push_back(std::abs(t.y[i] - mean));
      spread.push_back(std::sqrt(var / double(p.size() - 1)));
    }
    auto [noise, scale] = calibrate(abs_err, spread);
    model.noise_sd = noise;
    model.scale = scale;
    median_abs = median(abs_err);
    size_t in = 0;
    for (size_t i = 0; i < abs_err.size(); ++i)
      in += abs_err[i] <= scale * std::sqrt(spread[i] * spread[i] + noise * noise) ? 1 : 0;
    within = abs_err.empty() ? 0 : double(in) / double(abs_err.size());
  };
  calibrate_rows(lt_model, lt, report.cublaslt_oob_median_abs, report.cublaslt_oob_within_1sd);
  calibrate_rows(design_model, dt, report.design_oob_median_abs, report.design_oob_within_1sd);

  report.sources.assign(sources.begin(), sources.end());
  std::vector<GpuTraits> gpu_list;
  for (auto& [name, g] : gpus) gpu_list.push_back(g);
  nlohmann::json trained_on = {
      {"rlgemm", std::string(version()) + " (" + build_commit() + ")"},
      {"sources", report.sources},
      {"mode", o.mode},
      {"cublaslt_rows", report.cublaslt_rows},
      {"design_rows", report.design_rows},
      {"shapes", report.shapes},
      {"excluded_shapes", excluded.size()},
      {"members", o.members},
      {"seed", o.seed},
      {"cublaslt_trees", {{"trees", o.cublaslt_trees.trees}, {"depth", o.cublaslt_trees.max_depth}}},
      {"design_trees", {{"trees", o.design_trees.trees}, {"depth", o.design_trees.max_depth}}},
      {"oob_median_abs_ln_error", {{"cublaslt", report.cublaslt_oob_median_abs}, {"design", report.design_oob_median_abs}}}};
  if (report_out) *report_out = report;
  std::vector<Shape> shapes;
  for (const auto& [key, index] : group_of) shapes.push_back(std::get<1>(key));
  std::vector<int> widths;
  for (const Design& d : designs) widths.push_back(d.bn);
  return make_predictor(std::move(gpu_list), o.mode, o.extrapolation, std::move(shapes), std::move(widths),
                        std::move(trained_on), std::move(lt_model), std::move(design_model));
}

}  // namespace rlgemm::predict
