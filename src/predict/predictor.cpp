#include "predict/predictor.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <span>
#include <sstream>

#include "core/parallel.h"
#include "rlgemm/error.h"
#include "search/design_space.h"
#include "search/wave_fit.h"

namespace rlgemm::predict {

namespace {

constexpr const char* kFormat = "rlgemm-predictor";
// Designs per chunk of best_guesses' first pass: a few milliseconds of work each, so that a thread pays.
constexpr size_t kGuessChunk = 8192;

}  // namespace

GpuTraits traits_of(const GpuIdentity& gpu) {
  return {gpu.name, gpu.sm_count > 0 ? gpu.sm_count : 132, gpu.cc_major, gpu.cc_minor,
          smem_limit_or_hopper(gpu.smem_per_block_optin)};
}

bool take_kernel_route(const Gain& gain, double z, double margin) {
  return gain.log_mean - z * gain.log_sd > std::log(margin);
}

std::optional<Candidate> fitted_guess(const Candidate& guess, const Problem& problem, int sm_count,
                                      int smem_limit_bytes) {
  if (sm_count < 1) return std::nullopt;
  const auto fitted = search::fitted_alternatives(std::span(&guess.design, 1), problem, sm_count, smem_limit_bytes);
  if (fitted.empty()) return std::nullopt;
  const double ratio = double(search::fit_cost(guess.design, problem, sm_count)) /
                       double(search::fit_cost(fitted.front(), problem, sm_count));
  Candidate c = guess;
  c.design = fitted.front();
  c.time.mean_us /= ratio;
  c.time.sd_us /= ratio;
  c.time.log_mean -= std::log(ratio);
  c.gain.speedup *= ratio;
  c.gain.log_mean += std::log(ratio);
  return c;
}

Design RouteGuess::served(DType dtype) const {
  return with_dtype(take_guess ? guess.design : fitted->design, dtype);
}

std::optional<Design> RouteGuess::beside(DType dtype) const {
  if (take_guess && fitted) return with_dtype(fitted->design, dtype);
  return std::nullopt;
}

std::vector<Design> RouteGuess::designs(DType dtype) const {
  std::vector<Design> out{served(dtype)};
  if (auto also = beside(dtype)) out.push_back(*also);
  return out;
}

std::optional<RouteGuess> route_guess(const Predictor& predictor, const GpuTraits& gpu, const Problem& problem,
                                      int sm_count, int smem_limit_bytes, double z,
                                      const std::function<bool(const Design&)>& runnable) {
  // The built-in predictors learned fp16 kernels against fp16 cuBLASLt; a bf16 problem takes its fp16 twin's guess
  // in bf16 (wgmma and mma.sync run bf16 at fp16's rate with the same tiles).
  Problem twin = problem;
  twin.dtype = DType::kF16;
  const auto guesses = predictor.best_guesses(gpu, twin, 1);
  if (guesses.empty()) return std::nullopt;
  RouteGuess route;
  route.guess = guesses.front();
  route.fitted = fitted_guess(route.guess, twin, sm_count, smem_limit_bytes);
  if (route.fitted && !runnable(with_dtype(route.fitted->design, problem.dtype))) route.fitted.reset();
  route.take_guess = take_kernel_route(route.guess.gain, z);
  if (!route.take_guess && !(route.fitted && take_kernel_route(route.fitted->gain, z))) return std::nullopt;
  return route;
}

std::pair<double, double> Ensemble::estimate(const double* x) const {
  if (members.empty()) fail("the predictor has an empty model");
  double sum = 0, sum2 = 0;
  for (const auto& m : members) {
    const double v = m.predict(x);
    sum += v;
    sum2 += v * v;
  }
  const double k = double(members.size());
  const double mean = sum / k;
  const double var = members.size() > 1 ? std::max(0.0, (sum2 - k * mean * mean) / (k - 1)) : 0.0;
  return {mean, scale * std::sqrt(var + noise_sd * noise_sd)};
}

nlohmann::json Ensemble::to_json(const std::vector<std::string>& feature_names) const {
  nlohmann::json m = nlohmann::json::array();
  for (const auto& member : members) m.push_back(member.to_json());
  return {{"features", feature_names}, {"noise_sd", noise_sd}, {"scale", scale}, {"members", std::move(m)}};
}

Ensemble Ensemble::from_json(const nlohmann::json& j, const std::vector<std::string>& feature_names,
                             const std::string& source) {
  if (!j.is_object()) fail(source + ": a model is a JSON object");
  if (!j.contains("features") || j["features"] != nlohmann::json(feature_names))
    fail(source + ": the model was trained on other features than this build computes; train it again "
                  "(rlgemm predictor-train)");
  Ensemble e;
  if (!j.contains("noise_sd") || !j["noise_sd"].is_number() || !j.contains("scale") || !j["scale"].is_number())
    fail(source + ": a model needs numbers 'noise_sd' and 'scale'");
  e.noise_sd = j["noise_sd"].get<double>();
  e.scale = j["scale"].get<double>();
  if (!(e.noise_sd >= 0) || !(e.scale > 0)) fail(source + ": noise_sd must be >= 0 and scale > 0");
  if (!j.contains("members") || !j["members"].is_array() || j["members"].empty())
    fail(source + ": a model needs a non-empty array 'members'");
  for (const auto& m : j["members"]) e.members.push_back(BoostedTrees::from_json(m, feature_names.size(), source));
  return e;
}

Predictor::Predictor(const Predictor& o)
    : gpus_(o.gpus_), mode_(o.mode_), extrapolation_(o.extrapolation_), shapes_(o.shapes_), ln_shapes_(o.ln_shapes_),
      tile_widths_(o.tile_widths_), trained_on_(o.trained_on_), lt_(o.lt_), design_(o.design_) {}

Predictor& Predictor::operator=(const Predictor& o) {
  if (this == &o) return *this;
  gpus_ = o.gpus_;
  mode_ = o.mode_;
  extrapolation_ = o.extrapolation_;
  shapes_ = o.shapes_;
  ln_shapes_ = o.ln_shapes_;
  tile_widths_ = o.tile_widths_;
  trained_on_ = o.trained_on_;
  lt_ = o.lt_;
  design_ = o.design_;
  std::lock_guard lock(spaces_mutex_);
  spaces_.clear();
  return *this;
}

namespace {

using LnShape = std::array<double, 3>;

LnShape ln_of(const Shape& s) { return {std::log(double(s.m)), std::log(double(s.n)), std::log(double(s.k))}; }

double distance(const LnShape& a, const LnShape& b) {
  const double dm = a[0] - b[0], dn = a[1] - b[1], dk = a[2] - b[2];
  return std::sqrt(dm * dm + dn * dn + dk * dk);
}

// The median over the shapes of the distance to their nearest other shape.
double median_spacing(const std::vector<LnShape>& shapes) {
  if (shapes.size() < 2) return 0;
  std::vector<double> nearest;
  for (size_t i = 0; i < shapes.size(); ++i) {
    double best = HUGE_VAL;
    for (size_t j = 0; j < shapes.size(); ++j)
      if (j != i) best = std::min(best, distance(shapes[i], shapes[j]));
    nearest.push_back(best);
  }
  std::nth_element(nearest.begin(), nearest.begin() + long(nearest.size() / 2), nearest.end());
  return nearest[nearest.size() / 2];
}

// Sorted, each value once.
template <class T>
void sort_unique(std::vector<T>& values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
}

}  // namespace

Predictor make_predictor(std::vector<GpuTraits> gpus, std::string mode, Extrapolation extrapolation,
                         std::vector<Shape> shapes, std::vector<int> tile_widths, nlohmann::json trained_on,
                         Ensemble cublaslt, Ensemble design) {
  Predictor p;
  sort_unique(tile_widths);
  p.tile_widths_ = std::move(tile_widths);
  p.gpus_ = std::move(gpus);
  p.mode_ = std::move(mode);
  sort_unique(shapes);
  for (const Shape& s : shapes) p.ln_shapes_.push_back(ln_of(s));
  extrapolation.spacing = median_spacing(p.ln_shapes_);
  p.extrapolation_ = extrapolation;
  p.shapes_ = std::move(shapes);
  p.trained_on_ = std::move(trained_on);
  p.lt_ = std::move(cublaslt);
  p.design_ = std::move(design);
  return p;
}

nlohmann::json Predictor::to_json() const {
  nlohmann::json shapes = nlohmann::json::array();
  for (const Shape& x : shapes_) shapes.push_back({x.m, x.n, x.k});
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : gpus_)
    gpus.push_back({{"name", g.name}, {"sm_count", g.sm_count}, {"cc_major", g.cc_major}, {"cc_minor", g.cc_minor},
                    {"smem_per_block_optin", g.smem_per_block_optin}});
  return {{"format", kFormat},
          {"version", kVersion},
          {"mode", mode_},
          {"gpus", std::move(gpus)},
          {"extrapolation",
           {{"unseen_gpu_sd", extrapolation_.unseen_gpu_sd},
            {"sd_per_ln_beyond", extrapolation_.sd_per_ln_beyond},
            {"spacing", extrapolation_.spacing}}},
          {"shapes", std::move(shapes)},
          {"tile_widths", tile_widths_},
          {"trained_on", trained_on_},
          {"cublaslt", lt_.to_json(shape_feature_names())},
          {"design", design_.to_json(design_feature_names())}};
}

Predictor Predictor::parse(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(source + ": not a predictor file (JSON: " + e.what() + ")");
  }
  if (!j.is_object() || j.value("format", "") != kFormat)
    fail(source + ": not a predictor file (format \"" + std::string(kFormat) + "\" expected)");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() != kVersion)
    fail(source + ": predictor version " + (j.contains("version") ? j["version"].dump() : "missing") +
         "; this build reads version " + std::to_string(kVersion));
  Predictor p;
  try {
    p.mode_ = j.at("mode").get<std::string>();
    const auto& x = j.at("extrapolation");
    p.extrapolation_ = {x.at("unseen_gpu_sd").get<double>(), x.at("sd_per_ln_beyond").get<double>(),
                        x.at("spacing").get<double>()};
    for (const auto& shape : j.at("shapes")) {
      const Shape s{shape.at(0).get<int64_t>(), shape.at(1).get<int64_t>(), shape.at(2).get<int64_t>()};
      validate(s);
      p.shapes_.push_back(s);
      p.ln_shapes_.push_back(ln_of(s));
    }
    for (const auto& g : j.at("gpus"))
      p.gpus_.push_back({g.at("name").get<std::string>(), g.at("sm_count").get<int>(), g.at("cc_major").get<int>(),
                         g.at("cc_minor").get<int>(), g.at("smem_per_block_optin").get<int>()});
    if (j.contains("trained_on")) p.trained_on_ = j["trained_on"];
    // Files written before the key was recorded were trained on the search's widths of that time, these.
    p.tile_widths_ = j.contains("tile_widths") ? j["tile_widths"].get<std::vector<int>>()
                                               : std::vector<int>{64, 128, 192, 256};
    sort_unique(p.tile_widths_);  // best_guesses searches them
  } catch (const nlohmann::json::exception& e) {
    fail(source + ": malformed predictor header (" + std::string(e.what()) + ")");
  } catch (const Error& e) {
    fail(source + ": a trained shape breaks the problem rules (" + std::string(e.what()) + ")");
  }
  if (p.gpus_.empty()) fail(source + ": a predictor names the GPUs it was trained on ('gpus' is empty)");
  if (!(p.extrapolation_.unseen_gpu_sd >= 0) || !(p.extrapolation_.sd_per_ln_beyond >= 0) ||
      !(p.extrapolation_.spacing >= 0))
    fail(source + ": the extrapolation terms must be >= 0");
  p.lt_ = Ensemble::from_json(j.value("cublaslt", nlohmann::json()), shape_feature_names(), source + " (cublaslt)");
  p.design_ = Ensemble::from_json(j.value("design", nlohmann::json()), design_feature_names(), source + " (design)");
  return p;
}

Predictor Predictor::load(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open predictor file '" + path.string() + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path.string());
}

void Predictor::save(const std::filesystem::path& path) const {
  const auto tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + tmp);
    out << to_json().dump() << "\n";
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + tmp);
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp);
    throw Error(ErrorKind::kRuntime, "cannot rename " + tmp + " to " + path.string() + ": " + ec.message());
  }
}

bool Predictor::trained_on_gpu(const std::string& name) const {
  return std::any_of(gpus_.begin(), gpus_.end(), [&](const GpuTraits& g) { return g.name == name; });
}

double Predictor::distance_to_trained(const Shape& shape) const {
  const LnShape x = ln_of(shape);
  double best = HUGE_VAL;
  for (const LnShape& s : ln_shapes_) best = std::min(best, distance(s, x));
  return best;
}

double Predictor::extrapolation_sd(const GpuTraits& gpu, const Shape& shape) const {
  const double gpu_sd = trained_on_gpu(gpu.name) ? 0.0 : extrapolation_.unseen_gpu_sd;
  const double beyond = std::max(0.0, distance_to_trained(shape) - extrapolation_.spacing);
  const double shape_sd = extrapolation_.sd_per_ln_beyond * (std::isfinite(beyond) ? beyond : 0.0);
  return std::sqrt(gpu_sd * gpu_sd + shape_sd * shape_sd);
}

Prediction Predictor::predict_cublaslt(const GpuTraits& gpu, const Problem& problem) const {
  validate(problem.shape);
  const std::vector<double> x = shape_features(problem, gpu);
  auto [mean, sd] = lt_.estimate(x.data());
  const double extra = extrapolation_sd(gpu, problem.shape);
  sd = std::sqrt(sd * sd + extra * extra);
  return {std::exp(mean), std::exp(mean) * sd, mean, sd};
}

Gain Predictor::predict_gain(const GpuTraits& gpu, const Problem& problem, const Design& design) const {
  validate(problem.shape);
  const std::vector<double> x = design_features(problem, design, gpu);
  auto [ratio, sd] = design_.estimate(x.data());
  const double extra = extrapolation_sd(gpu, problem.shape);
  sd = std::sqrt(sd * sd + extra * extra);
  return {std::exp(-ratio), -ratio, sd};
}

Prediction Predictor::predict_design(const GpuTraits& gpu, const Problem& problem, const Design& design) const {
  const Prediction lt = predict_cublaslt(gpu, problem);
  const Gain gain = predict_gain(gpu, problem, design);
  const double mean = lt.log_mean - gain.log_mean;
  const double sd = std::sqrt(lt.log_sd * lt.log_sd + gain.log_sd * gain.log_sd);
  return {std::exp(mean), std::exp(mean) * sd, mean, sd};
}

const search::DesignSpace* Predictor::space(const GpuTraits& gpu, Layout layout, bool static_shape) const {
  std::lock_guard lock(spaces_mutex_);
  auto& slot = spaces_[{gpu.cc_major, gpu.smem_per_block_optin, layout, static_shape}];
  if (!slot) {
    // The search's space, less what the predictor never proposes: widths it was not trained on, and designs
    // baked for one shape unless asked for. The search's whole space is several times larger, and a handle
    // keeps this one for the life of the process.
    search::SpaceSpec spec = search::SpaceSpec::for_gpu(gpu.cc_major);
    std::erase_if(spec.tile_n,
                  [&](int bn) { return !std::binary_search(tile_widths_.begin(), tile_widths_.end(), bn); });
    if (!static_shape) spec.static_shape = {false};
    // The bulk tail is no feature of the predictor's: it would score a /bulktail design as its twin without.
    std::erase(spec.epilogues, search::EpilogueOption::kStagedBulkTail);
    if (spec.tile_n.empty()) return nullptr;
    slot = std::make_shared<const search::DesignSpace>(spec, layout, smem_limit_or_hopper(gpu.smem_per_block_optin));
  }
  return slot.get();
}

std::vector<Candidate> Predictor::best_guesses(const GpuTraits& gpu, const Problem& problem, int k,
                                               const BestGuessOptions& options) const {
  validate(problem.shape);
  if (k <= 0) return {};
  const search::DesignSpace* space_of_guesses = space(gpu, problem.layout, options.static_shape);
  if (!space_of_guesses) return {};  // it was trained on no width the search offers
  const search::DesignSpace& designs = *space_of_guesses;
  const int smem = smem_limit_or_hopper(gpu.smem_per_block_optin);
  // First pass: the first trees of one member rank every design that can run the problem. A space holds
  // hundreds of thousands of designs: they are scored in chunks on the machine's cores, each into its own slot,
  // then gathered in index order, so the ranking is the same on any number of cores.
  struct Ranked {
    size_t index;
    double score;
  };
  const BoostedTrees& first = design_.members.front();
  const std::vector<double> shape = shape_features(problem, gpu);
  std::vector<double> scores(designs.size());
  std::vector<char> runs(designs.size(), 0);
  parallel_chunks(designs.size(), kGuessChunk, [&](size_t begin, size_t end) {
    std::vector<double> x;
    for (size_t i = begin; i < end; ++i) {
      const Design d = designs.design(i);
      // No feature tells a /pdl design from its plain twin (the launch mode pays only behind another kernel):
      // ranking both would only repeat each guess.
      if (d.pdl) continue;
      if (d.family == Family::kSm90 && !(gpu.cc_major == 9 && gpu.cc_minor == 0)) continue;  // wgmma: sm_90a only
      if (why_invalid(d, problem.layout, smem) || why_unfit(d, problem)) continue;
      design_features(shape, problem, d, gpu, x);
      scores[i] = -first.predict_first(x.data(), options.prefilter_trees);
      runs[i] = 1;
    }
  }, options.threads);
  std::vector<Ranked> ranked;
  for (size_t i = 0; i < designs.size(); ++i)
    if (runs[i]) ranked.push_back({i, scores[i]});
  std::vector<double> x;
  const size_t keep = std::min(ranked.size(), std::max(options.prefilter, size_t(k)));
  std::partial_sort(ranked.begin(), ranked.begin() + long(keep), ranked.end(),
                    [](const Ranked& a, const Ranked& b) { return a.score > b.score; });
  ranked.resize(keep);

  // Second pass: the whole ensemble, with its uncertainty.
  const double extra = extrapolation_sd(gpu, problem.shape);
  std::vector<std::pair<double, Candidate>> scored;
  for (const Ranked& r : ranked) {
    const Design d = designs.design(r.index);
    design_features(problem, d, gpu, x);
    auto [ratio, sd] = design_.estimate(x.data());
    sd = std::sqrt(sd * sd + extra * extra);
    Candidate c;
    c.design = d;
    c.gain = {std::exp(-ratio), -ratio, sd};
    scored.push_back({c.gain.log_mean - options.risk * sd, std::move(c)});
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });

  const Prediction lt = predict_cublaslt(gpu, problem);
  std::map<std::string, int> similar;
  std::vector<Candidate> out;
  for (auto& [score, c] : scored) {
    if (int(out.size()) >= k) break;
    Design skeleton = c.design;
    skeleton.stages = 0, skeleton.raster = Raster::kAlongM, skeleton.group = 0, skeleton.static_shape = false;
    skeleton.epilogue = Epilogue::kRegisters, skeleton.smem = SmemLayout::kSwizzle;
    skeleton.warp_m = skeleton.warp_n = 0;
    const std::string key = to_string(skeleton);
    if (options.max_similar > 0 && similar[key]++ >= options.max_similar) continue;
    const double mean = lt.log_mean - c.gain.log_mean;
    const double sd = std::sqrt(lt.log_sd * lt.log_sd + c.gain.log_sd * c.gain.log_sd);
    c.time = {std::exp(mean), std::exp(mean) * sd, mean, sd};
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace rlgemm::predict
