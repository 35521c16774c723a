#include "search/rl_policy.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "rlgemm/error.h"

namespace rlgemm::search {

using Eigen::MatrixXd;
using Eigen::VectorXd;

namespace {

constexpr int kFileVersion = 1;

MatrixXd gaussian(int rows, int cols, double scale, std::mt19937_64& rng) {
  std::normal_distribution<double> normal(0.0, scale);
  MatrixXd m(rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) m(i, j) = normal(rng);
  return m;
}

VectorXd masked_softmax(const VectorXd& z, const std::vector<int>& valid) {
  VectorXd p(valid.size());
  double top = -1e300;
  for (size_t i = 0; i < valid.size(); ++i) top = std::max(top, z(valid[i]));
  for (size_t i = 0; i < valid.size(); ++i) p(i) = std::exp(z(valid[i]) - top);
  return p / p.sum();
}

}  // namespace

Policy::Policy(const DesignSpace& space, RlOptions options, uint64_t seed) : options_(options) {
  signature_ = space.signature();
  total_options_ = space.total_options();
  for (int f = 0; f < kFieldCount; ++f) offsets_.push_back(space.option_offset(f));
  std::mt19937_64 rng(seed);
  const int d = input_size(), h = options_.hidden;
  auto tensor = [](MatrixXd w) { return Tensor{w, MatrixXd::Zero(w.rows(), w.cols()), MatrixXd::Zero(w.rows(), w.cols())}; };
  w1_ = tensor(gaussian(h, d, 1.0 / std::sqrt(double(d)), rng));
  b1_ = tensor(MatrixXd::Zero(h, 1));
  w2_ = tensor(gaussian(h, h, 1.0 / std::sqrt(double(h)), rng));
  b2_ = tensor(MatrixXd::Zero(h, 1));
  // Small output weights: the first policy is close to uniform over the valid options.
  w3_ = tensor(gaussian(total_options_, h, 0.01, rng));
  b3_ = tensor(MatrixXd::Zero(total_options_, 1));
  v1_ = tensor(gaussian(32, kShapeFeatureCount, 1.0 / std::sqrt(double(kShapeFeatureCount)), rng));
  c1_ = tensor(MatrixXd::Zero(32, 1));
  v2_ = tensor(gaussian(1, 32, 0.05, rng));
  c2_ = tensor(MatrixXd::Zero(1, 1));
}

VectorXd Policy::logits(const VectorXd& x) const {
  const VectorXd h1 = (w1_.w * x + b1_.w).array().tanh().matrix();
  const VectorXd h2 = (w2_.w * h1 + b2_.w).array().tanh().matrix();
  return w3_.w * h2 + b3_.w;
}

double Policy::baseline(const std::vector<double>& features) const {
  const VectorXd f = Eigen::Map<const VectorXd>(features.data(), Eigen::Index(features.size()));
  const VectorXd h = (v1_.w * f + c1_.w).array().tanh().matrix();
  return (v2_.w * h + c2_.w)(0, 0);
}

Policy::Trajectory Policy::sample(const DesignSpace& space, const std::vector<double>& features,
                                  std::mt19937_64& rng, bool greedy, double temperature) const {
  return walk(space, features, &rng, greedy, nullptr, temperature);
}

Policy::Trajectory Policy::replay(const DesignSpace& space, const std::vector<double>& features,
                                  const Point& point) const {
  return walk(space, features, nullptr, false, &point, 1.0);
}

Policy::Trajectory Policy::walk(const DesignSpace& space, const std::vector<double>& features,
                                std::mt19937_64* rng, bool greedy, const Point* forced,
                                double temperature) const {
  if (space.signature() != signature_)
    fail("the policy was trained for another design space (its options differ); train a new policy for this one");
  Trajectory t;
  t.features = features;
  t.point.assign(kFieldCount, 0);
  VectorXd prefix = VectorXd::Zero(total_options_);
  auto range = space.full_range();
  for (int f = 0; f < kFieldCount; ++f) {
    std::vector<int> valid = space.valid_options(range, f);
    int option = valid[0];
    if (valid.size() > 1) {
      Step step;
      step.field = f;
      step.input = VectorXd::Zero(input_size());
      for (int i = 0; i < kShapeFeatureCount; ++i) step.input(i) = features[i];
      step.input.segment(kShapeFeatureCount, total_options_) = prefix;
      step.input(kShapeFeatureCount + total_options_ + f) = 1.0;
      const VectorXd z = logits(step.input).segment(offsets_[f], option_count(f));
      const VectorXd p = masked_softmax(z, valid);
      int chosen = 0;
      if (forced) {
        auto it = std::find(valid.begin(), valid.end(), int((*forced)[f]));
        if (it == valid.end()) fail("replayed design is not in the policy's design space");
        chosen = int(it - valid.begin());
      } else if (greedy) {
        p.maxCoeff(&chosen);
      } else if (temperature != 1.0) {
        const VectorXd hot = masked_softmax(z / temperature, valid);
        std::discrete_distribution<int> pick(hot.data(), hot.data() + hot.size());
        chosen = pick(*rng);
      } else {
        std::discrete_distribution<int> pick(p.data(), p.data() + p.size());
        chosen = pick(*rng);
      }
      step.valid = std::move(valid);
      step.chosen = chosen;
      step.log_prob = std::log(std::max(p(chosen), 1e-300));
      option = step.valid[chosen];
      t.steps.push_back(std::move(step));
    } else if (forced && (*forced)[f] != option) {
      fail("replayed design is not in the policy's design space");
    }
    t.point[f] = uint8_t(option);
    prefix(offsets_[f] + option) = 1.0;
    range = space.narrow(range, f, option);
  }
  return t;
}

void Policy::adam(std::vector<Tensor*> tensors, const std::vector<MatrixXd>& grads, double lr) {
  constexpr double b1 = 0.9, b2 = 0.999, eps = 1e-8;
  const bool value = tensors.front() == &v1_;
  const double t = double(value ? ++value_steps_ : ++adam_steps_);
  double norm2 = 0;
  for (auto& g : grads) norm2 += g.squaredNorm();
  const double scale = std::sqrt(norm2) > options_.max_grad_norm ? options_.max_grad_norm / std::sqrt(norm2) : 1.0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    Tensor& p = *tensors[i];
    const MatrixXd g = grads[i] * scale;
    p.m = b1 * p.m + (1 - b1) * g;
    p.v = b2 * p.v + (1 - b2) * g.cwiseProduct(g);
    const double c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t);
    p.w.array() -= lr * (p.m.array() / c1) / ((p.v.array() / c2).sqrt() + eps);
  }
}

void Policy::train(const std::vector<Trajectory>& batch, const std::vector<double>& rewards) {
  if (batch.size() != rewards.size()) fail("policy training needs one reward per trajectory");
  if (batch.empty()) return;
  // Advantages: reward over the learned baseline (which tracks each shape's level of reward), centred on
  // the batch (the baseline lags behind a policy that improves) and scaled by the batch's spread, so that
  // the step size does not depend on how far apart rewards happen to be on this shape.
  const double n = double(batch.size());
  std::vector<double> advantage(batch.size());
  double mean = 0, var = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    advantage[i] = rewards[i] - baseline(batch[i].features);
    mean += advantage[i] / n;
  }
  for (double a : advantage) var += (a - mean) * (a - mean) / n;
  const double scale = std::max(std::sqrt(var), 0.02);
  for (double& a : advantage) a = (a - mean) / scale;

  struct Column { const Step* step; double advantage; };
  std::vector<Column> columns;
  for (size_t i = 0; i < batch.size(); ++i)
    for (auto& s : batch[i].steps) columns.push_back({&s, advantage[i]});
  const int steps = int(columns.size());
  for (int epoch = 0; steps > 0 && epoch < options_.ppo_epochs; ++epoch) {
    descend(batch, [&](const MatrixXd& z, MatrixXd& gz) {
      for (int c = 0; c < steps; ++c) {
        const Step& s = *columns[c].step;
        const double a = columns[c].advantage;
        const VectorXd p = masked_softmax(z.col(c).segment(offsets_[s.field], option_count(s.field)), s.valid);
        const double log_p = std::log(std::max(p(s.chosen), 1e-300));
        const double ratio = std::exp(log_p - s.log_prob);
        // Clipped surrogate: no gradient once the ratio left the trust region in the advantage's direction.
        const bool clipped = (a > 0 && ratio > 1 + options_.clip) || (a < 0 && ratio < 1 - options_.clip);
        double entropy = 0;
        for (int i = 0; i < p.size(); ++i) entropy -= p(i) * std::log(std::max(p(i), 1e-300));
        for (int i = 0; i < p.size(); ++i) {
          double g = 0;
          if (!clipped) g += a * ratio * (p(i) - (i == s.chosen ? 1.0 : 0.0));
          g += options_.entropy * p(i) * (std::log(std::max(p(i), 1e-300)) + entropy);
          gz(offsets_[s.field] + s.valid[i], c) = g / steps;
        }
      }
    });
  }
  fit_baseline(batch, rewards);
  ++updates_;
}

void Policy::imitate(const std::vector<Trajectory>& batch, const std::vector<double>& weights) {
  if (batch.size() != weights.size()) fail("imitation needs one weight per trajectory");
  double total = 0;
  for (double w : weights) total += w;
  if (batch.empty() || !(total > 0)) return;
  // Weighted cross-entropy of every decision of the trajectories: the policy moves towards the designs in
  // proportion to their weights.
  std::vector<std::pair<const Step*, double>> columns;
  for (size_t i = 0; i < batch.size(); ++i)
    for (auto& s : batch[i].steps) columns.push_back({&s, weights[i] / total});
  if (columns.empty()) return;
  descend(batch, [&](const MatrixXd& z, MatrixXd& gz) {
    for (size_t c = 0; c < columns.size(); ++c) {
      const auto& [s, w] = columns[c];
      const VectorXd p = masked_softmax(z.col(Eigen::Index(c)).segment(offsets_[s->field], option_count(s->field)), s->valid);
      for (int i = 0; i < p.size(); ++i)
        gz(offsets_[s->field] + s->valid[i], Eigen::Index(c)) = w * (p(i) - (i == s->chosen ? 1.0 : 0.0));
    }
  });
  ++updates_;
}

void Policy::descend(const std::vector<Trajectory>& batch,
                     const std::function<void(const MatrixXd& logits, MatrixXd& grad)>& gradient_of_logits) {
  int steps = 0;
  for (const auto& t : batch) steps += int(t.steps.size());
  MatrixXd x(input_size(), steps);
  int c = 0;
  for (const auto& t : batch)
    for (const auto& s : t.steps) x.col(c++) = s.input;
  const MatrixXd h1 = ((w1_.w * x).colwise() + b1_.w.col(0)).array().tanh().matrix();
  const MatrixXd h2 = ((w2_.w * h1).colwise() + b2_.w.col(0)).array().tanh().matrix();
  const MatrixXd z = (w3_.w * h2).colwise() + b3_.w.col(0);
  MatrixXd gz = MatrixXd::Zero(z.rows(), steps);
  gradient_of_logits(z, gz);
  const MatrixXd gw3 = gz * h2.transpose();
  const MatrixXd gb3 = gz.rowwise().sum();
  const MatrixXd gh2 = (w3_.w.transpose() * gz).array() * (1 - h2.array().square());
  const MatrixXd gw2 = gh2 * h1.transpose();
  const MatrixXd gb2 = gh2.rowwise().sum();
  const MatrixXd gh1 = (w2_.w.transpose() * gh2).array() * (1 - h1.array().square());
  const MatrixXd gw1 = gh1 * x.transpose();
  const MatrixXd gb1 = gh1.rowwise().sum();
  adam({&w1_, &b1_, &w2_, &b2_, &w3_, &b3_}, {gw1, gb1, gw2, gb2, gw3, gb3}, options_.learning_rate);
}

void Policy::fit_baseline(const std::vector<Trajectory>& batch, const std::vector<double>& rewards) {
  const double n = double(batch.size());
  // Baseline: a few steps of squared error towards the observed rewards.
  MatrixXd f(kShapeFeatureCount, batch.size());
  VectorXd r(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    for (int j = 0; j < kShapeFeatureCount; ++j) f(j, Eigen::Index(i)) = batch[i].features[j];
    r(Eigen::Index(i)) = rewards[i];
  }
  for (int step = 0; step < 5; ++step) {
    const MatrixXd h = ((v1_.w * f).colwise() + c1_.w.col(0)).array().tanh().matrix();
    const MatrixXd out = (v2_.w * h).colwise() + c2_.w.col(0);
    const MatrixXd g = (out - r.transpose()) / n;  // 1 x B
    const MatrixXd gv2 = g * h.transpose();
    const MatrixXd gc2 = g.rowwise().sum();
    const MatrixXd gh = (v2_.w.transpose() * g).array() * (1 - h.array().square());
    adam({&v1_, &c1_, &v2_, &c2_}, {gh * f.transpose(), gh.rowwise().sum(), gv2, gc2}, options_.value_learning_rate);
  }
}

// ---- files ----

void Policy::save(const std::filesystem::path& file) const {
  const auto tmp = file.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write policy file " + tmp);
    out << "rlgemm-policy " << kFileVersion << "\n";
    out << "space " << signature_ << "\n";
    out << "sm_count " << sm_count_ << "\n";
    out << "updates " << updates_ << "\n";
    const std::pair<const char*, const Tensor*> tensors[] = {{"w1", &w1_}, {"b1", &b1_}, {"w2", &w2_},
                                                             {"b2", &b2_}, {"w3", &w3_}, {"b3", &b3_},
                                                             {"v1", &v1_}, {"c1", &c1_}, {"v2", &v2_},
                                                             {"c2", &c2_}};
    char buf[32];
    for (auto [name, t] : tensors) {
      out << "tensor " << name << ' ' << t->w.rows() << ' ' << t->w.cols() << "\n";
      for (Eigen::Index i = 0; i < t->w.rows(); ++i) {
        for (Eigen::Index j = 0; j < t->w.cols(); ++j) {
          std::snprintf(buf, sizeof buf, "%.9g", t->w(i, j));
          out << (j ? " " : "") << buf;
        }
        out << "\n";
      }
    }
    out.flush();
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write policy file " + tmp);
  }
  std::filesystem::rename(tmp, file);
}

Policy Policy::load(const std::filesystem::path& file, RlOptions options) {
  std::ifstream in(file);
  if (!in) fail("cannot read policy file " + file.string());
  auto bad = [&](const std::string& why) -> Error {
    return Error(ErrorKind::kInvalidInput, "policy file " + file.string() + ": " + why);
  };
  std::string word, line;
  int version = 0;
  if (!(in >> word >> version) || word != "rlgemm-policy") throw bad("does not start with 'rlgemm-policy <version>'");
  if (version != kFileVersion)
    throw bad("version " + std::to_string(version) + ", this rlgemm reads version " + std::to_string(kFileVersion));
  Policy p;
  p.options_ = options;
  if (!(in >> word) || word != "space") throw bad("expected the 'space' line");
  std::getline(in, line);
  p.signature_ = line.substr(line.find_first_not_of(' '));
  if (!(in >> word >> p.sm_count_) || word != "sm_count") throw bad("expected the 'sm_count' line");
  if (!(in >> word >> p.updates_) || word != "updates") throw bad("expected the 'updates' line");
  // Offsets and option counts follow from the signature.
  const SpaceSpec spec = spec_from_signature(p.signature_);
  (void)spec;
  // A policy from before the pdl field chose in the same space with pdl off: the field joins its signature
  // with that one option, and the network the inputs and outputs of the field, with zero weights (below).
  const bool before_pdl = p.signature_.find(std::string(";") + field_name(Field::kPdl) + ":") == std::string::npos;
  if (before_pdl) p.signature_ += std::string(";") + field_name(Field::kPdl) + ":off";
  for (const auto& labels : p.option_labels()) {
    p.offsets_.push_back(p.total_options_);
    p.total_options_ += int(labels.size());
  }
  if (int(p.offsets_.size()) != kFieldCount) throw bad("the space signature does not list every field");
  const int d = p.input_size();
  // Without the pdl field: one option less (decisions so far, outputs) and one field less (step indicator).
  const int options_in_file = p.total_options_ - (before_pdl ? 1 : 0);
  const std::tuple<const char*, Tensor*, int, int> tensors[] = {
      {"w1", &p.w1_, -1, d - (before_pdl ? 2 : 0)}, {"b1", &p.b1_, -1, 1}, {"w2", &p.w2_, -1, -1}, {"b2", &p.b2_, -1, 1},
      {"w3", &p.w3_, options_in_file, -1}, {"b3", &p.b3_, options_in_file, 1},
      {"v1", &p.v1_, -1, kShapeFeatureCount}, {"c1", &p.c1_, -1, 1}, {"v2", &p.v2_, 1, -1}, {"c2", &p.c2_, 1, 1}};
  for (auto [name, t, want_rows, want_cols] : tensors) {
    std::string tag, got_name;
    Eigen::Index rows = 0, cols = 0;
    if (!(in >> tag >> got_name >> rows >> cols) || tag != "tensor" || got_name != name)
      throw bad(std::string("expected tensor ") + name);
    if (rows <= 0 || cols <= 0 || rows > 100000 || cols > 100000 || (want_rows > 0 && rows != want_rows) ||
        (want_cols > 0 && cols != want_cols))
      throw bad(std::string("tensor ") + name + " has the wrong size " + std::to_string(rows) + "x" +
                std::to_string(cols));
    t->w.resize(rows, cols);
    for (Eigen::Index i = 0; i < rows; ++i)
      for (Eigen::Index j = 0; j < cols; ++j)
        if (!(in >> t->w(i, j))) throw bad(std::string("tensor ") + name + " is truncated");
    t->m = MatrixXd::Zero(rows, cols);
    t->v = MatrixXd::Zero(rows, cols);
  }
  if (before_pdl) {
    // The pdl option is the last of the decisions so far and of the outputs, its step indicator the last
    // input. They carry no weight: pdl is decided last and, with one option, never a step, so every decision
    // is the one the file's policy made.
    const Eigen::Index h = p.w1_.w.rows(), prefix_end = kShapeFeatureCount + options_in_file;
    MatrixXd w1 = MatrixXd::Zero(h, d);
    w1.leftCols(prefix_end) = p.w1_.w.leftCols(prefix_end);
    w1.block(0, prefix_end + 1, h, kFieldCount - 1) = p.w1_.w.rightCols(kFieldCount - 1);
    p.w1_.w = std::move(w1);
    for (Tensor* t : {&p.w3_, &p.b3_}) {
      t->w.conservativeResize(p.total_options_, Eigen::NoChange);
      t->w.row(p.total_options_ - 1).setZero();
    }
    for (Tensor* t : {&p.w1_, &p.w3_, &p.b3_}) {
      t->m = MatrixXd::Zero(t->w.rows(), t->w.cols());
      t->v = MatrixXd::Zero(t->w.rows(), t->w.cols());
    }
  }
  p.options_.hidden = int(p.w1_.w.rows());
  if (p.w2_.w.rows() != p.options_.hidden || p.w2_.w.cols() != p.options_.hidden ||
      p.w3_.w.cols() != p.options_.hidden || p.b1_.w.rows() != p.options_.hidden ||
      p.b2_.w.rows() != p.options_.hidden || p.v2_.w.cols() != p.v1_.w.rows() || p.c1_.w.rows() != p.v1_.w.rows())
    throw bad("tensor sizes do not agree with each other");
  return p;
}

std::vector<std::vector<std::string>> Policy::option_labels() const {
  std::vector<std::vector<std::string>> labels;
  std::istringstream fields(signature_);
  std::string field;
  while (std::getline(fields, field, ';')) {
    if (is_filter_item(field)) continue;
    labels.emplace_back();
    std::istringstream options(field.substr(field.find(':') + 1));
    std::string label;
    while (options >> label) labels.back().push_back(label);
  }
  return labels;
}

Policy Policy::adapted_to(const DesignSpace& space) const {
  if (space.signature() == signature_) return *this;
  const std::vector<std::vector<std::string>> old_labels = option_labels();
  if (int(old_labels.size()) != kFieldCount) fail("policy space signature does not list every field");
  Policy p;
  p.options_ = options_;
  p.signature_ = space.signature();
  p.sm_count_ = sm_count_;
  p.updates_ = updates_;
  p.total_options_ = space.total_options();
  for (int f = 0; f < kFieldCount; ++f) p.offsets_.push_back(space.option_offset(f));
  // Where each new option was in this policy (-1: new to it).
  std::vector<int> from(size_t(p.total_options_), -1);
  for (int f = 0; f < kFieldCount; ++f) {
    int shared = 0;
    for (int o = 0; o < space.option_count(f); ++o) {
      const auto& old = old_labels[size_t(f)];
      const auto it = std::find(old.begin(), old.end(), space.option_label(f, o));
      if (it == old.end()) continue;
      from[size_t(p.offsets_[f] + o)] = offsets_[f] + int(it - old.begin());
      ++shared;
    }
    if (shared == 0)
      fail(std::string("the policy shares no option of field '") + field_name(Field(f)) +
           "' with this design space: train a new policy for it");
  }
  const Eigen::Index h = w1_.w.rows();
  // Inputs: shape features, decisions so far (one column per option), which field comes next.
  MatrixXd w1 = MatrixXd::Zero(h, p.input_size());
  w1.leftCols(kShapeFeatureCount) = w1_.w.leftCols(kShapeFeatureCount);
  w1.rightCols(kFieldCount) = w1_.w.rightCols(kFieldCount);
  MatrixXd w3(p.total_options_, w3_.w.cols());
  MatrixXd b3(p.total_options_, 1);
  for (int f = 0; f < kFieldCount; ++f) {
    // The field's mean output row, over the options both spaces hold: what a new option starts from.
    Eigen::RowVectorXd mean_w = Eigen::RowVectorXd::Zero(w3_.w.cols());
    double mean_b = 0;
    int shared = 0;
    for (int o = 0; o < space.option_count(f); ++o)
      if (const int old = from[size_t(p.offsets_[f] + o)]; old >= 0) {
        mean_w += w3_.w.row(old);
        mean_b += b3_.w(old, 0);
        ++shared;
      }
    mean_w /= shared;
    mean_b /= shared;
    for (int o = 0; o < space.option_count(f); ++o) {
      const int now = p.offsets_[f] + o, old = from[size_t(now)];
      if (old >= 0) {
        w1.col(kShapeFeatureCount + now) = w1_.w.col(kShapeFeatureCount + old);
        w3.row(now) = w3_.w.row(old);
        b3(now, 0) = b3_.w(old, 0);
      } else {
        w3.row(now) = mean_w;
        b3(now, 0) = mean_b;
      }
    }
  }
  auto fresh = [](const MatrixXd& w) {
    return Tensor{w, MatrixXd::Zero(w.rows(), w.cols()), MatrixXd::Zero(w.rows(), w.cols())};
  };
  p.w1_ = fresh(w1);
  p.b1_ = fresh(b1_.w);
  p.w2_ = fresh(w2_.w);
  p.b2_ = fresh(b2_.w);
  p.w3_ = fresh(w3);
  p.b3_ = fresh(b3);
  p.v1_ = fresh(v1_.w);
  p.c1_ = fresh(c1_.w);
  p.v2_ = fresh(v2_.w);
  p.c2_ = fresh(c2_.w);
  return p;
}

// ---- the strategy ----

namespace {

class RlStrategy : public Strategy {
 public:
  RlStrategy(Policy& policy, uint64_t seed) : policy_(policy), rng_(seed) {}
  RlStrategy(const Policy& start, uint64_t seed)
      : owned_(std::make_unique<Policy>(start)), policy_(*owned_), rng_(seed) {}
  std::string name() const override { return "rl"; }

  void begin_problem(const ProblemContext& context, const std::vector<Scored>& history) override {
    space_ = context.space;
    features_ = shape_features(context.problem, context.sm_count);
    policy_.set_sm_count(context.sm_count);
    pending_.clear();
    seen_.clear();
    scored_.clear();
    for (auto& h : history)
      if (seen_.insert(h.point).second) scored_.push_back(h);
  }

  std::vector<Point> propose(int count) override {
    // Sampling without replacement, approximately: draws that repeat a design already evaluated for this
    // problem (or already in the batch) are redrawn, since measuring is what costs; when the policy keeps
    // drawing known designs its distribution is flattened step by step, which explores around its mode
    // instead of stalling there.
    pending_.clear();
    std::vector<Point> out;
    std::vector<Policy::Trajectory> repeats;
    std::set<Point> in_batch;
    propose_neighbours(int(std::lround(policy_.options().neighbour_share * count)), in_batch);
    double temperature = 1.0;
    for (int round = 0; round < kTemperatureRounds && int(pending_.size()) < count; ++round, temperature *= 2) {
      for (int draw = 0; draw < count * kDrawsPerCandidate && int(pending_.size()) < count; ++draw) {
        Policy::Trajectory t = policy_.sample(*space_, features_, rng_, false, temperature);
        if (seen_.count(t.point) || in_batch.count(t.point)) {
          if (int(repeats.size()) < count) repeats.push_back(std::move(t));
          continue;
        }
        in_batch.insert(t.point);
        pending_.push_back(std::move(t));
      }
    }
    for (size_t i = 0; int(pending_.size()) < count && i < repeats.size(); ++i) pending_.push_back(std::move(repeats[i]));
    for (auto& t : pending_) out.push_back(t.point);
    return out;
  }

  void observe(const std::vector<Point>& points, const std::vector<double>& rewards) override {
    std::vector<Policy::Trajectory> batch;
    size_t next = 0;
    for (const auto& point : points) {
      while (next < pending_.size() && pending_[next].point != point) ++next;
      if (next == pending_.size()) fail("rl strategy: observed a design it did not propose");
      batch.push_back(std::move(pending_[next++]));
    }
    pending_.clear();
    for (size_t i = 0; i < points.size(); ++i) {
      if (seen_.insert(points[i]).second) scored_.push_back({points[i], rewards[i]});
    }
    // Self-imitation: the best designs found so far join the update with their rewards.
    std::vector<double> all_rewards = rewards;
    const size_t elite = std::min(scored_.size(), size_t(std::max(policy_.options().elite_replay, 0)));
    std::partial_sort(scored_.begin(), scored_.begin() + elite, scored_.end(),
                      [](const Scored& a, const Scored& b) { return a.reward > b.reward; });
    for (size_t i = 0; i < elite; ++i) {
      batch.push_back(policy_.replay(*space_, features_, scored_[i].point));
      all_rewards.push_back(scored_[i].reward);
    }
    // Measured designs are the expensive part: earlier ones are reused in later updates too.
    if (scored_.size() > elite) {
      std::uniform_int_distribution<size_t> pick(elite, scored_.size() - 1);
      for (int i = 0; i < policy_.options().history_replay; ++i) {
        const Scored& s = scored_[pick(rng_)];
        batch.push_back(policy_.replay(*space_, features_, s.point));
        all_rewards.push_back(s.reward);
      }
    }
    policy_.train(batch, all_rewards);
  }

 private:
  // Up to `count` unseen designs one decision away from the best ones found for this problem (repaired
  // into the valid space), as replayed trajectories so that their rewards train the policy like its own.
  void propose_neighbours(int count, std::set<Point>& in_batch) {
    if (count <= 0 || scored_.empty()) return;
    std::vector<const Scored*> best;
    for (const auto& s : scored_) best.push_back(&s);
    const size_t top = std::min<size_t>(best.size(), 4);
    std::partial_sort(best.begin(), best.begin() + top, best.end(),
                      [](const Scored* a, const Scored* b) { return a->reward > b->reward; });
    std::uniform_int_distribution<size_t> pick_parent(0, top - 1);
    std::uniform_int_distribution<int> pick_field(0, kFieldCount - 1);
    int added = 0;
    for (int attempt = 0; attempt < 16 * count && added < count; ++attempt) {
      Point p = best[pick_parent(rng_)]->point;
      const int f = pick_field(rng_);
      if (space_->option_count(f) < 2) continue;
      std::uniform_int_distribution<int> pick_option(0, space_->option_count(f) - 1);
      p[size_t(f)] = uint8_t(pick_option(rng_));
      p = space_->project(p, rng_);
      if (seen_.count(p) || in_batch.count(p)) continue;
      in_batch.insert(p);
      pending_.push_back(policy_.replay(*space_, features_, p));
      ++added;
    }
  }

  std::unique_ptr<Policy> owned_;  // when the strategy works on a copy of its own
  Policy& policy_;
  std::mt19937_64 rng_;
  const DesignSpace* space_ = nullptr;
  std::vector<double> features_;
  std::vector<Policy::Trajectory> pending_;
  std::set<Point> seen_;
  std::vector<Scored> scored_;  // every design evaluated for this problem, with its reward
  static constexpr int kDrawsPerCandidate = 4;
  static constexpr int kTemperatureRounds = 4;  // 1, 2, 4, 8
};

}  // namespace

StrategyPtr make_rl_strategy(Policy& policy, uint64_t seed) { return std::make_unique<RlStrategy>(policy, seed); }
StrategyPtr make_rl_strategy_from(const Policy& start, uint64_t seed) {
  return std::make_unique<RlStrategy>(start, seed);
}

Design propose(const Policy& policy, const DesignSpace& space, const Problem& problem, int sm_count) {
  std::mt19937_64 rng(0);
  return space.design(policy.sample(space, shape_features(problem, sm_count), rng, true).point);
}

// ---- spaces from signatures ----

SpaceSpec spec_from_signature(const std::string& signature) {
  SpaceSpec spec;
  auto bad = [&](const std::string& why) -> Error {
    return Error(ErrorKind::kInvalidInput, "design-space signature: " + why);
  };
  auto to_int = [&](const std::string& s) {
    try {
      size_t used = 0;
      const int v = std::stoi(s, &used);
      if (used != s.size()) throw bad("'" + s + "' is not a number");
      return v;
    } catch (const std::logic_error&) {
      throw bad("'" + s + "' is not a number");
    }
  };
  auto pair = [&](const std::string& s) {
    const auto x = s.find('x');
    if (x == std::string::npos) throw bad("'" + s + "' is not AxB");
    return std::pair{to_int(s.substr(0, x)), to_int(s.substr(x + 1))};
  };
  std::istringstream fields(signature);
  std::string field;
  int index = 0;
  while (std::getline(fields, field, ';')) {
    if (is_filter_item(field)) {
      const std::string v = field.substr(field.find(':') + 1);
      if (v != "any" && v != "along") throw bad("cluster_raster is 'any' or 'along', not '" + v + "'");
      spec.clusters_along_raster = v == "along";
      continue;
    }
    const auto colon = field.find(':');
    if (colon == std::string::npos || index >= kFieldCount || field.substr(0, colon) != field_name(Field(index)))
      throw bad("field " + std::to_string(index) + " should be '" +
                (index < kFieldCount ? field_name(Field(index)) : "nothing") + "'");
    std::vector<std::string> labels;
    std::istringstream in(field.substr(colon + 1));
    for (std::string l; in >> l;) labels.push_back(l);
    switch (Field(index)) {
      case Field::kFamily:
        spec.families.clear();
        for (auto& l : labels) {
          if (l != "sm90" && l != "sm80") throw bad("unknown family " + l);
          spec.families.push_back(l == "sm90" ? Family::kSm90 : Family::kSm80);
        }
        break;
      case Field::kSchedule:
        spec.schedules.clear();
        for (auto& l : labels) {
          if (l != "coop" && l != "coopn" && l != "pingpong") throw bad("unknown schedule " + l);
          spec.schedules.push_back(l == "coop"    ? Sm90Schedule::kCooperative
                                   : l == "coopn" ? Sm90Schedule::kCooperativeColumns
                                                  : Sm90Schedule::kPingpong);
        }
        break;
      case Field::kTileM: spec.tile_m.clear(); for (auto& l : labels) spec.tile_m.push_back(to_int(l)); break;
      case Field::kTileN: spec.tile_n.clear(); for (auto& l : labels) spec.tile_n.push_back(to_int(l)); break;
      case Field::kTileK: spec.tile_k.clear(); for (auto& l : labels) spec.tile_k.push_back(to_int(l)); break;
      case Field::kWarpTile: spec.warp_tiles.clear(); for (auto& l : labels) spec.warp_tiles.push_back(pair(l)); break;
      case Field::kStages: spec.stages.clear(); for (auto& l : labels) spec.stages.push_back(to_int(l)); break;
      case Field::kCluster: spec.clusters.clear(); for (auto& l : labels) spec.clusters.push_back(pair(l)); break;
      case Field::kSmemLayout:
        spec.smem_layouts.clear();
        for (auto& l : labels) spec.smem_layouts.push_back(l == "pad" ? SmemLayout::kPad : SmemLayout::kSwizzle);
        break;
      case Field::kRaster:
        spec.rasters.clear();
        for (auto& l : labels) spec.rasters.push_back(l == "n" ? Raster::kAlongN : Raster::kAlongM);
        break;
      case Field::kGroup: spec.groups.clear(); for (auto& l : labels) spec.groups.push_back(to_int(l)); break;
      case Field::kSplit:
        spec.splits.clear();
        for (auto& l : labels) {
          if (l == "splitk1") spec.splits.push_back({SplitK::kNone, 1});
          else if (l == "streamk") spec.splits.push_back({SplitK::kStreamK, 1});
          else if (l.rfind("splitk", 0) == 0 && l.find('.') != std::string::npos) {
            const auto dot = l.find('.');
            const int n = to_int(l.substr(6, dot - 6));
            const std::string kind = l.substr(dot + 1);
            if (kind != "serial" && kind != "parallel") throw bad("unknown split " + l);
            spec.splits.push_back({kind == "serial" ? SplitK::kSerial : SplitK::kParallel, n});
          } else {
            throw bad("unknown split " + l);
          }
        }
        break;
      case Field::kEpilogue:
        spec.epilogues.clear();
        for (auto& l : labels) {
          bool known = false;
          for (EpilogueOption o : {EpilogueOption::kRegisters, EpilogueOption::kStaged, EpilogueOption::kStagedBulkTail})
            if (std::string_view(epilogue_label(o)) == l) spec.epilogues.push_back(o), known = true;
          if (!known) throw bad("unknown epilogue " + l);
        }
        break;
      case Field::kSwap: spec.swap.clear(); for (auto& l : labels) spec.swap.push_back(l == "swap"); break;
      case Field::kStatic: spec.static_shape.clear(); for (auto& l : labels) spec.static_shape.push_back(l == "static"); break;
      case Field::kPdl: spec.pdl.clear(); for (auto& l : labels) spec.pdl.push_back(l == "on"); break;
    }
    ++index;
  }
  // Signatures written before the pdl field existed end at static: their spaces launched without it.
  if (index == int(Field::kPdl)) spec.pdl = {false}, ++index;
  if (index != kFieldCount) throw bad("lists " + std::to_string(index) + " fields, expected " + std::to_string(kFieldCount));
  return spec;
}

}  // namespace rlgemm::search
