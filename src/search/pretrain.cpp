#include "search/pretrain.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>

#include "rlgemm/design.h"
#include "rlgemm/error.h"

namespace rlgemm::search {
namespace {

struct Logged {
  Point point;
  double reward = 0;
};

struct ProblemData {
  Problem problem;
  std::vector<double> features;
  std::vector<Logged> logged;  // one per design
};

struct Quality {
  double top1 = 0;
  double quality = 0;
  size_t unlogged = 0;
};

Quality measure_quality(const Policy& policy, DesignSpaces& spaces, const std::vector<ProblemData>& data) {
  Quality q;
  double log_quality = 0;
  size_t logged = 0, top1 = 0;
  std::mt19937_64 rng(0);
  for (const auto& d : data) {
    const DesignSpace& space = spaces.of(d.problem.layout);
    const Point proposal = policy.sample(space, d.features, rng, true).point;
    const auto best = std::max_element(d.logged.begin(), d.logged.end(),
                                       [](const Logged& a, const Logged& b) { return a.reward < b.reward; });
    const auto found = std::find_if(d.logged.begin(), d.logged.end(), [&](const Logged& l) { return l.point == proposal; });
    if (found == d.logged.end()) {
      ++q.unlogged;
      continue;
    }
    ++logged;
    top1 += found == best;
    log_quality += found->reward - best->reward;
  }
  if (!data.empty()) q.top1 = double(top1) / double(data.size());
  q.quality = logged ? std::exp(log_quality / double(logged)) : 0;
  return q;
}

}  // namespace

PretrainReport pretrain(Policy& policy, DesignSpaces& spaces, const std::vector<LoggedResult>& results,
                        const PretrainOptions& options) {
  if (options.epochs <= 0) fail("pretraining needs a positive number of epochs");
  PretrainReport report;
  std::map<std::pair<Layout, Shape>, size_t> index;  // -> data
  std::set<Layout> checked;                           // layouts whose space the policy was compared with
  std::vector<ProblemData> data;
  for (const LoggedResult& r : results) {
    if (!(r.speedup > 0) || !std::isfinite(r.speedup))
      fail("a logged speedup must be a positive number (design " + r.design + " on " + r.problem.shape.to_string() +
           ")");
    if (std::find(options.exclude.begin(), options.exclude.end(), r.problem.shape) != options.exclude.end()) continue;
    const DesignSpace& space = spaces.of(r.problem.layout);
    if (checked.insert(r.problem.layout).second && space.signature() != policy.space_signature())
      fail("the policy was made for another design space than this GPU's (" + space.signature() + ")");
    const Point point = space.encode(parse_design(r.design));
    if (point.empty()) {
      ++report.outside_space;
      continue;
    }
    const auto key = std::pair{r.problem.layout, r.problem.shape};
    auto [it, inserted] = index.emplace(key, data.size());
    if (inserted) data.push_back({r.problem, shape_features(r.problem, options.sm_count), {}});
    auto& logged = data[it->second].logged;
    const auto same = std::find_if(logged.begin(), logged.end(), [&](const Logged& l) { return l.point == point; });
    if (same != logged.end())
      same->reward = std::log(r.speedup);  // a later result of the same design replaces the earlier one
    else
      logged.push_back({point, std::log(r.speedup)});
  }
  // A shape with one logged design teaches nothing about choosing (its advantage is zero).
  std::erase_if(data, [](const ProblemData& d) { return d.logged.size() < 2; });
  if (data.empty()) fail("no shape with at least two logged designs of this design space is left to pretrain on");
  for (const auto& d : data) report.samples += d.logged.size();
  report.problems = data.size();

  policy.set_sm_count(options.sm_count);
  std::mt19937_64 rng(options.seed);
  std::optional<Quality> last;  // of the final epoch, when the progress line measured it
  std::vector<size_t> order(data.size());
  std::iota(order.begin(), order.end(), 0);
  for (int epoch = 1; epoch <= options.epochs; ++epoch) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      const ProblemData& d = data[i];
      const DesignSpace& space = spaces.of(d.problem.layout);
      std::vector<Policy::Trajectory> batch;
      std::vector<double> rewards, weights;
      double best = -1e300;
      for (const Logged& l : d.logged) best = std::max(best, l.reward);
      for (const Logged& l : d.logged) {
        batch.push_back(policy.replay(space, d.features, l.point));
        rewards.push_back(l.reward);
        // Advantage-weighted imitation: the best design pulls with weight 1, one 5% slower with 1/e.
        weights.push_back(std::exp((l.reward - best) / options.temperature));
      }
      policy.imitate(batch, weights);
      policy.fit_baseline(batch, rewards);
    }
    if (options.progress && (epoch == options.epochs || epoch % 5 == 0 || epoch == 1)) {
      const Quality q = measure_quality(policy, spaces, data);
      if (epoch == options.epochs) last = q;
      std::fprintf(options.progress, "pretrain epoch %d/%d: greedy proposal is the best logged design on %.1f%% of "
                   "%zu shapes; logged speed of the proposals %.3f of the best (geometric), %zu proposals unlogged\n",
                   epoch, options.epochs, 100.0 * q.top1, data.size(), q.quality, q.unlogged);
    }
  }
  const Quality q = last ? *last : measure_quality(policy, spaces, data);
  report.top1 = q.top1;
  report.proposal_quality = q.quality;
  report.unlogged_proposals = q.unlogged;
  return report;
}

bool learn_from_outcome(Policy& policy, DesignSpaces& spaces, const ProblemOutcome& outcome, int sm_count,
                        int steps) {
  const DesignSpace& space = spaces.of(outcome.problem.layout);
  std::vector<LoggedResult> results;
  for (const Evaluation& e : outcome.evaluations) {
    if (e.status != MeasureStatus::kOk || !e.paired) continue;
    try {
      if (space.encode(parse_design(e.design)).empty()) continue;
    } catch (const Error&) {
      continue;  // a design text this rlgemm cannot read (another version's row)
    }
    results.push_back({outcome.problem, e.design, e.paired->speedup()});
  }
  if (results.size() < 2) return false;
  PretrainOptions options;
  options.epochs = std::max(steps, 1);
  options.sm_count = sm_count;
  pretrain(policy, spaces, results, options);
  return true;
}

}  // namespace rlgemm::search
