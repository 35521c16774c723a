#include "search/tuner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <future>
#include <optional>
#include <utility>

#include "rlgemm/error.h"
#include "search/wave_fit.h"

namespace rlgemm::search {

Budget Budget::parse(const std::string& text) {
  Budget b;
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = text.substr(used);
  if (used == 0 || value <= 0 || !(unit.empty() || unit == "min" || unit == "m"))
    fail("budget '" + text + "': use a number of evaluations per problem (e.g. 200) or minutes (e.g. 30min)");
  if (unit.empty()) {
    if (value != std::floor(value)) fail("budget '" + text + "': a number of evaluations is a whole number");
    b.evaluations = int(value);
  } else {
    b.minutes = value;
  }
  return b;
}

Tuner::Tuner(Store& store, Measurer& measurer, Strategy& strategy, SpaceSpec spec)
    : store_(store), measurer_(measurer), strategy_(&strategy), spec_(std::move(spec)) {}

Tuner::Tuner(Store& store, Measurer& measurer, StrategyFactory factory, SpaceSpec spec)
    : store_(store), measurer_(measurer), factory_(std::move(factory)), spec_(std::move(spec)) {
  if (!factory_) fail("a tuner of independent problems needs a strategy factory");
}

Tuner::Tuner(Store& store, Measurer& measurer, Strategy& strategy, std::shared_ptr<DesignSpaces> spaces)
    : Tuner(store, measurer, strategy, spaces->spec()) {
  spaces_ = std::move(spaces);
}

Tuner::Tuner(Store& store, Measurer& measurer, StrategyFactory factory, std::shared_ptr<DesignSpaces> spaces)
    : Tuner(store, measurer, std::move(factory), spaces->spec()) {
  spaces_ = std::move(spaces);
}

const DesignSpace& Tuner::space(Layout layout) {
  if (!spaces_)
    spaces_ = std::make_shared<DesignSpaces>(spec_, smem_limit_or_hopper(measurer_.gpu().smem_per_block_optin));
  return spaces_->of(layout);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = long(seconds + 0.5);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lds", s);
  return buf;
}

std::string progress_line(size_t index, size_t count, const ProblemOutcome& outcome, size_t cap,
                          bool evaluation_budget, double seconds_left) {
  char line[512];
  std::snprintf(line, sizeof line, "[%zu/%zu] %s %s  evals %zu/%s  best %s  %s left", index + 1, count,
                std::string(to_string(outcome.problem.layout)).c_str(), outcome.problem.shape.to_string().c_str(),
                outcome.evaluations.size(), evaluation_budget ? std::to_string(cap).c_str() : "-",
                outcome.best_design.empty() ? "-" : gain_text(outcome.best).c_str(),
                format_duration(seconds_left).c_str());
  return line;
}

std::string gain_text(const PairedGain& g) {
  char text[96];
  std::snprintf(text, sizeof text, "%.3fx (95%% CI %.3f .. %.3f)", g.speedup(), 1 + g.low, 1 + g.high);
  return text;
}

int effective_batch(const TuneOptions& options, int parallelism) { return std::max({options.batch, parallelism, 1}); }

// ---- one problem ----

namespace {

// The first round with the predictor's guesses (and their fitted widths), or without them (null).
FirstRound seeds_round(Store& store, int64_t gpu_id, const GpuIdentity& gpu, const TuneOptions& options,
                       const Problem& problem, size_t cap, const std::vector<Design>* guesses) {
  // Seeds first, as one batch: the table's design for the problem, the handle's route for it, the nearest rows'
  // designs, the common ones, then the problem's own guesses, those this problem can run and the store does not
  // hold yet.
  // Seed designs and guesses name tiles and schedules; they run in the problem's element type.
  FirstRound round;
  auto consider = [&](const Design& seed, const char* label) {
    if (round.designs.size() >= cap) return;
    const Design d = with_dtype(seed, problem.dtype);
    if (why_invalid(d, problem.layout, smem_limit_or_hopper(gpu.smem_per_block_optin)) || why_unfit(d, problem))
      return;
    std::string text = to_string(d);
    if (std::find(round.texts.begin(), round.texts.end(), text) != round.texts.end() ||
        store.measured(gpu_id, problem, text, options.mode))
      return;
    round.designs.push_back(d);
    round.texts.push_back(std::move(text));
    round.labels.push_back(label);
  };
  if (options.table_seeds_for)
    for (const Design& d : options.table_seeds_for(problem)) consider(d, "table");
  if (options.route_seeds_for)
    for (const Design& d : options.route_seeds_for(problem)) consider(d, "route");
  if (options.neighbor_seeds_for && options.neighbors > 0) {
    const size_t first = round.designs.size();
    for (const Design& d : options.neighbor_seeds_for(problem)) {
      if (round.designs.size() - first >= size_t(options.neighbors)) break;
      consider(d, "neighbor");
    }
  }
  for (const Design& d : options.seed_designs) consider(d, "seed");
  if (guesses)
    for (const Design& d : *guesses) consider(d, "predicted");
  if (gpu.sm_count > 0 && options.wave_fit > 0) {
    const size_t first = round.designs.size();
    for (const Design& fitted : fitted_alternatives(round.designs, problem, gpu.sm_count,
                                                    smem_limit_or_hopper(gpu.smem_per_block_optin))) {
      if (int(round.designs.size() - first) >= options.wave_fit) break;
      consider(fitted, "wave-fit");
    }
  }
  return round;
}

// Whether the store holds the problem's whole evaluation budget already (a run going on after a stop).
bool budget_spent(Store& store, int64_t gpu_id, const TuneOptions& options, const Problem& problem, size_t cap) {
  return !options.own_evaluations_only && options.budget.evaluations > 0 &&
         size_t(store.count_measurements(gpu_id, problem, options.mode)) >= cap;
}

}  // namespace

// A problem whose budget the store holds already is not guessed for again: the predictor's guesses are most of
// the tuner's own time per problem, and the budget they would be measured under is spent. Seeds named by the
// table, the handle's route or the command line that it has not measured still go.
bool asks_guesses(Store& store, int64_t gpu_id, const GpuIdentity& gpu, const TuneOptions& options,
                  const Problem& problem, size_t cap) {
  if (!options.seeds_for) return false;
  return !budget_spent(store, gpu_id, options, problem, cap) ||
         !seeds_round(store, gpu_id, gpu, options, problem, cap, nullptr).designs.empty();
}

FirstRound first_round(Store& store, int64_t gpu_id, const GpuIdentity& gpu, const TuneOptions& options,
                       const Problem& problem, size_t cap, std::optional<std::vector<Design>> guesses) {
  if (!options.seeds_for) return seeds_round(store, gpu_id, gpu, options, problem, cap, nullptr);
  // Guesses asked for ahead were asked because asks_guesses said so; otherwise it is decided here, with the
  // round without guesses worked out once (it is the answer where the budget is spent and no seed is missing).
  if (!guesses) {
    if (budget_spent(store, gpu_id, options, problem, cap)) {
      FirstRound seeds = seeds_round(store, gpu_id, gpu, options, problem, cap, nullptr);
      if (seeds.designs.empty()) return seeds;
    }
    guesses = options.seeds_for(problem);
  }
  return seeds_round(store, gpu_id, gpu, options, problem, cap, &*guesses);
}

size_t ProblemTuning::cap_for(const TuneOptions& options, const DesignSpace& space) {
  return options.budget.evaluations > 0 ? size_t(options.budget.evaluations) : space.size();
}

ProblemTuning::ProblemTuning(Store& store, int64_t gpu_id, const GpuIdentity& gpu, const DesignSpace& space,
                             Strategy& strategy, const TuneOptions& options, const Problem& problem, int batch,
                             Clock::time_point deadline, std::optional<FirstRound> first)
    : store_(store), gpu_id_(gpu_id), gpu_(gpu), space_(space), strategy_(strategy), options_(options),
      batch_(batch), deadline_(deadline) {
  outcome_.problem = problem;
  cap_ = cap_for(options, space);
  FirstRound round = first ? std::move(*first) : first_round(store, gpu_id, gpu, options, problem, cap_);
  for (size_t i = 0; i < round.designs.size(); ++i) {
    // Worked out ahead, the round may hold a design measured since (the same shape listed twice in a row).
    if (first && store_.measured(gpu_id_, problem, round.texts[i], options.mode)) continue;
    pending_.push_back(round.designs[i]);
    pending_text_.push_back(std::move(round.texts[i]));
    pending_label_.push_back(std::move(round.labels[i]));
  }
  if (pending_.empty()) begin_search();
}

double ProblemTuning::reward_of(const Measurement& m) const {
  if (m.status != MeasureStatus::kOk) return options_.penalty;
  if (!m.paired)
    fail("tuning " + outcome_.problem.shape.to_string() + ": the backend timed a candidate without the reference "
         "beside it; the tuner learns only from paired measurements");
  return m.paired->log_ratio;
}

void ProblemTuning::take_if_best(const Evaluation& e) {
  if (e.status != MeasureStatus::kOk || !e.paired) return;
  if (!outcome_.best_design.empty() && e.reward <= outcome_.best.log_ratio) return;  // the first of equals stays
  outcome_.best_us = e.time_us;
  outcome_.best_design = e.design;
  outcome_.best = *e.paired;
}

void ProblemTuning::add(Evaluation e) {
  take_if_best(e);
  known_[e.design] = outcome_.evaluations.size();
  outcome_.measured_now += e.measured_now ? 1 : 0;
  outcome_.evaluations.push_back(std::move(e));
}

void ProblemTuning::record(const std::vector<Design>& designs, const std::vector<std::string>& texts,
                           const std::vector<Measurement>& results, const std::string& strategy_name) {
  if (results.size() != designs.size())
    fail("tuning " + outcome_.problem.shape.to_string() + ": " + std::to_string(results.size()) +
         " measurements came back for a batch of " + std::to_string(designs.size()));
  for (size_t i = 0; i < results.size(); ++i) {
    MeasurementRecord r;
    r.gpu_id = gpu_id_;
    r.problem = outcome_.problem;
    r.design = texts[i];
    r.mode = options_.mode;
    r.measurement = results[i];
    r.reward = reward_of(results[i]);
    r.strategy = strategy_name;
    store_.record(r);
  }
}

void ProblemTuning::begin_search() {
  std::vector<Scored> history = seeded_;
  if (!options_.own_evaluations_only) {
    for (auto& r : store_.measurements(gpu_id_, outcome_.problem, options_.mode)) {
      Evaluation e{r.design, r.measurement.status, r.measurement.timing.median_us, reward_of(r.measurement),
                   seeded_now_.count(r.design) > 0, r.measurement.paired};
      try {
        Point p = space_.encode(parse_design(r.design));
        if (!p.empty()) history.push_back({std::move(p), e.reward});
      } catch (const Error&) {
        // A row written by another rlgemm with designs this one cannot read: counted, not learned from.
      }
      add(std::move(e));
    }
  }
  strategy_.begin_problem({outcome_.problem, &space_, gpu_.sm_count}, history);
  phase_ = Phase::kSearch;
}

std::vector<Design> ProblemTuning::next_batch() {
  if (phase_ == Phase::kSeeds) return pending_;
  if (phase_ == Phase::kConfirm) {
    if (!pending_.empty() || start_confirmation()) return pending_;
    phase_ = Phase::kDone;
    return {};
  }
  while (phase_ == Phase::kSearch) {
    if (!pending_.empty()) return pending_;
    if (outcome_.evaluations.size() >= cap_ || Clock::now() >= deadline_) break;
    proposals_ = strategy_.propose(batch_);
    if (proposals_.empty()) break;
    // Score what is known; collect the new designs the budget still allows.
    round_start_ = outcome_.evaluations.size();
    std::unordered_set<std::string> queued;
    for (const Point& p : proposals_) {
      const Design d = with_dtype(space_.design(p), outcome_.problem.dtype);
      std::string text = to_string(d);
      if (known_.count(text) || queued.count(text)) continue;
      if (outcome_.evaluations.size() + queued.size() >= cap_) continue;
      if (auto row = store_.find(gpu_id_, outcome_.problem, text, options_.mode)) {
        add({text, row->measurement.status, row->measurement.timing.median_us, reward_of(row->measurement), false,
             row->measurement.paired});
        continue;
      }
      queued.insert(text);
      pending_.push_back(d);
      pending_text_.push_back(std::move(text));
    }
    if (pending_.empty()) end_round();
  }
  if (phase_ == Phase::kSearch && start_confirmation()) return pending_;
  phase_ = Phase::kDone;
  return {};
}

bool ProblemTuning::start_confirmation() {
  if (!options_.confirm || outcome_.confirmations >= TuneOptions::kMaxConfirmations) return false;
  if (outcome_.best_design.empty() || !outcome_.best.better() || Clock::now() >= deadline_) return false;
  // Confirmed already, by this run or one before it (the stored row says so).
  const auto row = store_.find(gpu_id_, outcome_.problem, outcome_.best_design, options_.mode);
  if (!row || row->strategy.ends_with(Store::kConfirmedSuffix)) return false;
  pending_ = {parse_design(outcome_.best_design)};
  pending_text_ = {outcome_.best_design};
  pending_label_.clear();
  phase_ = Phase::kConfirm;
  ++outcome_.confirmations;
  return true;
}

void ProblemTuning::confirmed(const Measurement& again) {
  const std::string text = pending_text_.front();
  MeasurementRecord r;
  r.gpu_id = gpu_id_;
  r.problem = outcome_.problem;
  r.design = text;
  r.mode = options_.mode;
  r.measurement = again;
  r.reward = reward_of(again);
  r.strategy = "confirm";
  const MeasurementRecord kept = store_.confirm(r);
  Evaluation& e = outcome_.evaluations[known_.at(text)];
  e.status = kept.measurement.status;
  e.time_us = kept.measurement.timing.median_us;
  e.reward = kept.reward;
  e.paired = kept.measurement.paired;
  refresh_best();
}

void ProblemTuning::refresh_best() {
  outcome_.best_design.clear();
  outcome_.best = PairedGain{};
  outcome_.best_us = 0;
  for (const Evaluation& e : outcome_.evaluations) take_if_best(e);
}

void ProblemTuning::complete(const std::vector<Measurement>& results) {
  if (pending_.empty()) fail("tuning " + outcome_.problem.shape.to_string() + ": measurements for no batch");
  for (const Measurement& m : results) {
    outcome_.seconds += m.seconds;
    outcome_.compile_seconds += m.compile_seconds;
  }
  if (phase_ == Phase::kConfirm) {
    if (results.size() != 1)
      fail("tuning " + outcome_.problem.shape.to_string() + ": " + std::to_string(results.size()) +
           " measurements came back for a confirmation of one design");
    confirmed(results.front());
    pending_.clear();
    pending_text_.clear();
    return;
  }
  const bool seeds = phase_ == Phase::kSeeds;
  if (seeds && results.size() == pending_.size()) {
    for (size_t i = 0; i < results.size(); ++i) record({pending_[i]}, {pending_text_[i]}, {results[i]}, pending_label_[i]);
  } else {
    record(pending_, pending_text_, results, seeds ? "seed" : strategy_.name());
  }
  for (size_t i = 0; i < results.size(); ++i) {
    const double reward = reward_of(results[i]);
    if (seeds) {
      seeded_now_.insert(pending_text_[i]);
      if (!options_.own_evaluations_only) continue;  // read back from the store by begin_search
      Point p = space_.encode(pending_[i]);
      if (!p.empty()) seeded_.push_back({std::move(p), reward});
    }
    add({pending_text_[i], results[i].status, results[i].timing.median_us, reward, true, results[i].paired});
  }
  pending_.clear();
  pending_text_.clear();
  pending_label_.clear();
  if (seeds) begin_search();
  else end_round();
}

void ProblemTuning::end_round() {
  std::vector<Point> observed;
  std::vector<double> rewards;
  for (const Point& p : proposals_) {
    auto it = known_.find(to_string(with_dtype(space_.design(p), outcome_.problem.dtype)));
    if (it == known_.end()) continue;
    observed.push_back(p);
    rewards.push_back(outcome_.evaluations[it->second].reward);
  }
  strategy_.observe(observed, rewards);
  proposals_.clear();
  stalled_ = outcome_.evaluations.size() == round_start_ ? stalled_ + 1 : 0;
  if (stalled_ >= options_.max_stalled_batches) phase_ = Phase::kDone;
}

void ProblemTuning::cut_short() {
  if (!pending_.empty()) fail("tuning " + outcome_.problem.shape.to_string() + ": cut short with a batch in flight");
  phase_ = Phase::kDone;
  outcome_.cut_short = outcome_.evaluations.size() < cap_;
}

ProblemOutcome ProblemTuning::finish() {
  if (phase_ != Phase::kDone) fail("tuning " + outcome_.problem.shape.to_string() + " ended before it was done");
  strategy_.end_problem();
  return std::move(outcome_);
}

// ---- the sequential loop ----

std::vector<ProblemOutcome> Tuner::run(const TuneOptions& options) {
  using Clock = ProblemTuning::Clock;
  if (options.budget.evaluations <= 0 && options.budget.minutes <= 0)
    fail("the tuning budget must be a positive number of evaluations or minutes");
  const GpuIdentity gpu = measurer_.gpu();
  const int64_t gpu_id = store_.gpu_id(gpu);
  const int batch = effective_batch(options, measurer_.parallelism());
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(options.budget.minutes * 60.0));
  const bool tty = options.progress && ::isatty(::fileno(options.progress));
  int64_t measured_total = 0;  // for the time-left estimate
  std::vector<ProblemOutcome> outcomes;
  // The next problem's first round, worked out while this one is measured; its kernels are built meanwhile.
  std::optional<FirstRound> next_first;
  // The predictor's guesses for the problem after the next one (TuneOptions::seeds_for), asked for meanwhile.
  std::future<std::vector<Design>> guessing;

  for (size_t index = 0; index < options.problems.size(); ++index) {
    const auto problem_start = Clock::now();
    double waiting = 0;
    const Problem& problem = options.problems[index];
    validate(problem.shape);
    const DesignSpace& space = this->space(problem.layout);
    auto problem_deadline = Clock::time_point::max();
    if (options.budget.minutes > 0) {
      const auto left = deadline - Clock::now();
      problem_deadline = std::min(deadline, Clock::now() + left / int64_t(options.problems.size() - index));
    }
    StrategyPtr own;
    Strategy& strategy = strategy_ ? *strategy_ : *(own = factory_(problem));
    ProblemTuning tuning(store_, gpu_id, gpu, space, strategy, options, problem, batch, problem_deadline,
                         std::exchange(next_first, std::nullopt));
    // The next problem's first round depends on that problem, the options and the store only: its kernels are
    // built in the background while this problem is measured. The predictor's guesses, a large part of the
    // tuner's own time, are asked for one problem earlier still, on another thread: those of the problem after
    // the next while this one is measured, so that the next round and its kernels start as early as before.
    if (index + 1 < options.problems.size()) {
      const Problem& next = options.problems[index + 1];
      std::optional<std::vector<Design>> guesses;
      if (guessing.valid()) guesses = guessing.get();
      next_first = first_round(store_, gpu_id, gpu, options, next,
                               ProblemTuning::cap_for(options, this->space(next.layout)), std::move(guesses));
      if (next_first->designs.size() > 1) measurer_.prefetch(next_first->designs, next);
    }
    if (index + 2 < options.problems.size()) {
      const Problem& after = options.problems[index + 2];
      if (asks_guesses(store_, gpu_id, gpu, options, after, ProblemTuning::cap_for(options, this->space(after.layout))))
        guessing = std::async(std::launch::async, [&options, after] { return options.seeds_for(after); });
    }

    auto last_print = Clock::now();
    auto print = [&](const ProblemOutcome& outcome, bool final) {
      if (!options.progress) return;
      const auto now = Clock::now();
      if (!final && !tty && now - last_print < std::chrono::seconds(10)) return;
      last_print = now;
      const double elapsed = std::chrono::duration<double>(now - start).count();
      const int64_t measured = measured_total + outcome.measured_now;
      double left;
      if (options.budget.minutes > 0) {
        left = std::chrono::duration<double>(deadline - now).count();
      } else {
        const double per_eval = measured > 0 ? elapsed / double(measured) : NAN;
        const size_t cap = tuning.cap();
        const double remaining = double(cap - std::min(cap, outcome.evaluations.size())) +
                                 double(cap) * double(options.problems.size() - index - 1);
        left = per_eval * remaining;
      }
      const std::string line = progress_line(index, options.problems.size(), outcome, tuning.cap(),
                                             options.budget.evaluations > 0, left);
      std::fprintf(options.progress, tty ? "\r\033[K%s%s" : "%s%s", line.c_str(), final || !tty ? "\n" : "");
      std::fflush(options.progress);
    };

    const auto stopped = [&] { return options.stop && options.stop->load(); };
    for (auto designs = tuning.next_batch(); !designs.empty(); designs = tuning.next_batch()) {
      const auto asked = Clock::now();
      std::vector<Measurement> results = measurer_.measure_batch(designs, problem, options.mode);
      waiting += std::chrono::duration<double>(Clock::now() - asked).count();
      tuning.complete(results);
      print(tuning.outcome(), false);
      if (stopped()) {
        tuning.cut_short();
        break;
      }
    }
    ProblemOutcome outcome = tuning.finish();
    print(outcome, true);
    measured_total += outcome.measured_now;
    if (options.after_problem) options.after_problem(outcome);
    outcome.wall_seconds = std::chrono::duration<double>(Clock::now() - problem_start).count();
    outcome.waiting_seconds = waiting;
    outcomes.push_back(std::move(outcome));
    if (stopped()) break;
  }
  return outcomes;
}

}  // namespace rlgemm::search
