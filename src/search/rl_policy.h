// The learned strategy: a policy network that writes a design one decision at a time.
//
// At each step the network (an MLP, Eigen) sees the shape features, the decisions taken so far (one-hot)
// and which field comes next; its output for that field is masked to the options that keep a valid design
// reachable (DesignSpace::valid_options), and one option is sampled (greedy when proposing without
// measurement). Fields left with one option are forced and cost no step. Training is PPO with a clipped
// ratio on the measured reward, with a learned baseline (a second MLP on the shape features); one policy
// serves every problem, so what it learns on one shape carries to the others. Each update also replays the
// best designs found so far for the problem (self-imitation), which keeps the policy near what measured
// well while its samples explore around it.
//
// File format (text, line oriented):
//   rlgemm-policy 1
//   space <DesignSpace::signature()>
//   sm_count <SM count of the last GPU trained on>
//   updates <number of training updates so far>
//   tensor <name> <rows> <cols>
//   <rows lines of cols numbers, %.9g>
//   ... (tensors w1 b1 w2 b2 w3 b3 v1 c1 v2 c2, in this order)
// The optimizer's moments are not saved: a warm start resumes from the weights with fresh moments.
#pragma once

#include <Eigen/Dense>

#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "search/strategy.h"

namespace rlgemm::search {

struct RlOptions {
  int hidden = 64;
  double learning_rate = 3e-3;
  double value_learning_rate = 1e-2;
  int ppo_epochs = 2;
  double clip = 0.2;
  double entropy = 0.05;
  double max_grad_norm = 1.0;
  int elite_replay = 4;     // best designs of the problem so far, replayed in every update (self-imitation)
  int history_replay = 0;   // further earlier designs of the problem, drawn at random, replayed too
  // Share of each batch drawn next to the problem's best designs (one decision changed, repaired into the
  // valid space) rather than from the policy: the policy learns where to look, these refine what it found.
  double neighbour_share = 0.375;
};

class Policy {
 public:
  // A fresh policy for a space with this signature; weights drawn from `seed`.
  Policy(const DesignSpace& space, RlOptions options, uint64_t seed);
  // Loads a saved policy; throws Error(kInvalidInput) naming the rule when the file is malformed or has an
  // unknown version.
  static Policy load(const std::filesystem::path& file, RlOptions options = {});
  // Writes atomically (a temporary file renamed over the target).
  void save(const std::filesystem::path& file) const;

  // This policy for another design space, matched option by option through their labels: an option both spaces
  // hold keeps its weights (its input column among the decisions so far, its output row); an option new to
  // `space` starts with no input weight and the mean output row of its field's shared options, so that its logit
  // is the average of theirs for every input and the learner finds it as likely as a typical old one; an option
  // `space` lacks is dropped. The hidden layers, the baseline and the training counts carry over; the
  // optimizer's moments start afresh. Throws Error(kInvalidInput) naming the field where the two spaces share no
  // option (nothing learned about it would carry over).
  Policy adapted_to(const DesignSpace& space) const;
  // The labels of this policy's options, field by field, read from its signature.
  std::vector<std::vector<std::string>> option_labels() const;

  const std::string& space_signature() const { return signature_; }
  int sm_count() const { return sm_count_; }
  void set_sm_count(int sm_count) { sm_count_ = sm_count; }
  int64_t updates() const { return updates_; }

  struct Step {
    int field = 0;
    std::vector<int> valid;  // options allowed at this step
    int chosen = 0;          // index into `valid`
    double log_prob = 0;     // at sampling time
    Eigen::VectorXd input;
  };
  struct Trajectory {
    Point point;
    std::vector<Step> steps;  // only steps with a choice
    std::vector<double> features;
  };

  // One design for `problem` in `space` (the space must have this policy's signature).
  // `temperature` > 1 flattens the distribution (exploration once the policy's likely designs are all
  // measured); log-probabilities are recorded for the policy itself.
  Trajectory sample(const DesignSpace& space, const std::vector<double>& features, std::mt19937_64& rng,
                    bool greedy, double temperature = 1.0) const;
  Trajectory walk(const DesignSpace& space, const std::vector<double>& features, std::mt19937_64* rng,
                  bool greedy, const Point* forced, double temperature) const;
  // The trajectory that leads to `point`, with the current policy's log-probabilities (for replaying
  // designs found earlier).
  Trajectory replay(const DesignSpace& space, const std::vector<double>& features, const Point& point) const;
  // One PPO update on trajectories with their rewards.
  void train(const std::vector<Trajectory>& batch, const std::vector<double>& rewards);
  // One step of weighted imitation (cross-entropy towards each trajectory's decisions, weight > 0 pulls):
  // learning from designs measured before, where no sampling probabilities exist to correct for.
  void imitate(const std::vector<Trajectory>& batch, const std::vector<double>& weights);
  // A few steps of the baseline (expected reward of a shape) towards these rewards.
  void fit_baseline(const std::vector<Trajectory>& batch, const std::vector<double>& rewards);
  double baseline(const std::vector<double>& features) const;

  const RlOptions& options() const { return options_; }

 private:
  struct Tensor {
    Eigen::MatrixXd w, m, v;  // value, Adam moments
  };
  Policy() = default;
  int input_size() const { return kShapeFeatureCount + total_options_ + kFieldCount; }
  int option_count(int field) const {
    return (field + 1 < kFieldCount ? offsets_[field + 1] : total_options_) - offsets_[field];
  }
  Eigen::VectorXd logits(const Eigen::VectorXd& input) const;
  // Forward pass over every step of `batch`, the logits' gradient from `gradient_of_logits`, backward, Adam.
  void descend(const std::vector<Trajectory>& batch,
               const std::function<void(const Eigen::MatrixXd& logits, Eigen::MatrixXd& grad)>& gradient_of_logits);
  void adam(std::vector<Tensor*> tensors, const std::vector<Eigen::MatrixXd>& grads, double lr);

  RlOptions options_;
  std::string signature_;
  int total_options_ = 0;
  std::vector<int> offsets_;  // per field
  int sm_count_ = 132;
  int64_t updates_ = 0;
  int64_t adam_steps_ = 0;
  int64_t value_steps_ = 0;
  Tensor w1_, b1_, w2_, b2_, w3_, b3_;  // policy
  Tensor v1_, c1_, v2_, c2_;            // baseline
};

// The rl strategy around a policy it shares with its caller (who saves it).
StrategyPtr make_rl_strategy(Policy& policy, uint64_t seed);
// The rl strategy on a copy of `start` of its own (independent problems: each starts from the same policy,
// whatever the others learn meanwhile).
StrategyPtr make_rl_strategy_from(const Policy& start, uint64_t seed);

// Greedy proposal for a shape with no measurement at all.
Design propose(const Policy& policy, const DesignSpace& space, const Problem& problem, int sm_count);

// The space a policy file was made for, rebuilt from its signature.
SpaceSpec spec_from_signature(const std::string& signature);

}  // namespace rlgemm::search
