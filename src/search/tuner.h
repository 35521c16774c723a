// The tuning loop: for each problem, ask the strategy for candidates, measure the new ones (in a batch,
// through the Measurer), record every result in the store, reward the strategy with the paired log ratio: the
// mean over interleaved rounds of ln(t_reference / t_candidate), the candidate timed side by side with the
// reference in one process (Measurement::paired), in the mode being tuned (graph by default: the kernel's own
// speed). A fixed penalty goes to wrong, failed, timed-out or crashed candidates. No reward divides times taken
// at different moments: between two such moments the same cuBLASLt kernel drifted by 11% on an H200, which a
// reference timed once per problem would have credited to the candidates measured after it.
//
// A tuned table's design for the problem (TuneOptions::table_seeds_for) is measured first and recorded with
// strategy "table", then what a default handle would check for it (TuneOptions::route_seeds_for) with strategy
// "route", then the designs of the nearest tuned shapes (TuneOptions::neighbor_seeds_for) with strategy
// "neighbor", then the seed designs (TuneOptions::seed_designs) with strategy "seed", then the problem's
// own first guesses (TuneOptions::seeds_for), recorded with strategy "predicted", then the first of those
// designs with their widths fitted to the problem's waves (TuneOptions::wave_fit), recorded with "wave-fit".
//
// Resume: what the store already holds for (GPU, problem, mode) counts against the budget and is never
// measured again; a candidate found in the store (another tuner's, or this one's before a kill) is scored
// from the stored row. Killing the tuner at any moment loses at most the batch being measured.
//
// Independent problems: a Tuner made with a StrategyFactory gives every problem a strategy of its own (seeded
// with problem_seed), so a problem's candidates depend only on the problem, the seed, the strategy's
// starting state and what the store holds, never on the problems tuned before it. That is what lets the
// distributed tuner (distributed.h) hand problems out in any order and still record what one process would.
//
// ProblemTuning is one problem's tuning as a sequence of batches; Tuner::run drives one at a time, the
// distributed tuner several at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "search/design_space.h"
#include "search/measurer.h"
#include "search/strategy.h"
#include "store/store.h"

namespace rlgemm::search {

struct ProblemOutcome;

// "200" evaluations per problem, or "30min" / "30m" of wall time for the whole run.
struct Budget {
  int evaluations = 0;
  double minutes = 0;
  static Budget parse(const std::string& text);
};

struct TuneOptions {
  std::vector<Problem> problems;
  Budget budget;
  TimingMode mode = TimingMode::kGraph;
  int batch = 8;            // candidates per strategy round (at least the measurer's parallelism)
  double penalty = -1.0;    // reward of a candidate that is not correct and timed
  // Comparison runs: count only this run's evaluations (stored rows still spare re-measuring) and tell
  // the strategy nothing of earlier runs.
  bool own_evaluations_only = false;
  int max_stalled_batches = 40;  // rounds without a new evaluation before giving up on a problem
  std::FILE* progress = nullptr; // live progress lines, or none
  std::function<void(const ProblemOutcome&)> after_problem;  // e.g. save the policy
  // Set from outside (SIGINT or SIGTERM, core/stop_signal.h): the run ends once the batch in flight is measured
  // and recorded, with the problem it belongs to as its last outcome (cut short); run it again to go on. Read by
  // Tuner::run; the distributed tuner (MPI) does not read it.
  const std::atomic<bool>* stop = nullptr;
  // Designs measured first on every problem (those valid for it), before the strategy proposes: known-good
  // starting points (e.g. a hand-picked set). They count against the budget; the strategy sees their
  // rewards as history, as it sees an earlier run's.
  std::vector<Design> seed_designs;
  // Designs measured first on one problem, after seed_designs: e.g. the speed predictor's best guesses for it.
  // Recorded with strategy "predicted"; they count against the budget like seeds.
  std::function<std::vector<Design>(const Problem&)> seeds_for;
  // Designs measured before everything else on one problem: a tuned table's row for it, so that a table's
  // claims are measured again with the paired reward (`rlgemm tune --seed-table`). Recorded with strategy
  // "table"; they count against the budget like seeds.
  std::function<std::vector<Design>(const Problem&)> table_seeds_for;
  // Designs measured right after the table's row: what a default handle would check for the problem at its first
  // use without any tune (`rlgemm tune`'s default: the built-in table's row, else the offline predictor's route,
  // predict::route_guess, and the nearest row's design, HandleOptions::nearest_kernels), so that a tune's best for a
  // shape is never a design slower than the one the handle would have served it anyway. Recorded with strategy "route"; they count against the budget like seeds, and
  // a run going on after a stop still measures those it lacks.
  std::function<std::vector<Design>(const Problem&)> route_seeds_for;
  // Designs other shapes found fast, nearest first (`rlgemm tune --seed-neighbors`: a tuned table's rows nearest to
  // the problem): the first `neighbors` of them that the problem can run and the store does not hold are measured
  // after the table's row. Recorded with strategy "neighbor"; they count against the budget like seeds.
  std::function<std::vector<Design>(const Problem&)> neighbor_seeds_for;
  int neighbors = 0;
  // Up to this many of those first designs measured again with the tile width whose waves fill the GPU
  // (search/wave_fit.h), where that costs at least 5% less: a predictor or policy trained before the fitted
  // widths existed would not propose them. Recorded with strategy "wave-fit"; they count against the budget.
  int wave_fit = 0;
  // A claimed gain measured twice: once a problem's search ends, its best design, where it measured faster than
  // the reference beyond its interval, is measured again in a batch of its own, and the weaker of the two paired
  // measurements stands (Store::confirm; the row's strategy then ends in " (confirmed)"). The reference is the
  // same cuBLASLt kernel in every batch, but it has states that hold through a batch and change between batches
  // (on an H200 the floor's choice at 16x36864x4608 ran 79.5-88.4 us from batch to batch of one tune): a design
  // paired with it in a slow batch measured 1.066 [1.064, 1.068] there and ran 0.955 of the best vendor call in
  // the bench. If the best falls back, the next best is confirmed, up to kMaxConfirmations a problem. Outside the
  // evaluation budget; not after the deadline of a minutes budget (the row then stays unconfirmed).
  bool confirm = true;
  static constexpr int kMaxConfirmations = 3;
};

struct Evaluation {
  std::string design;
  MeasureStatus status = MeasureStatus::kOk;
  double time_us = 0;   // median, when ok
  double reward = 0;
  bool measured_now = false;  // false: taken from the store
  std::optional<PairedGain> paired;  // when ok
};

struct ProblemOutcome {
  Problem problem;
  std::vector<Evaluation> evaluations;  // distinct designs, in the order they were evaluated
  std::string best_design;              // the highest paired gain; "" when nothing correct was found
  double best_us = 0;
  PairedGain best;                      // the best design's comparison with the reference
  int measured_now = 0;
  // Where this run's measurements of the problem took their time, on the measuring side (PhaseSeconds), and
  // their compiles.
  PhaseSeconds seconds;
  double compile_seconds = 0;
  // The sequential tuner's clock: the problem's wall time (from its first proposal to after after_problem) and,
  // of it, the time spent waiting for measurements; the rest is the tuner's own work (proposals, the
  // predictor's guesses, the database, teaching the policy). 0 where problems are tuned side by side.
  double wall_seconds = 0;
  double waiting_seconds = 0;
  bool cut_short = false;  // ended by TuneOptions::stop before its budget
  int confirmations = 0;   // second measurements of a best design this run made (TuneOptions::confirm)
  double reference_us() const { return best.reference_us; }  // in the best design's own rounds
  double speedup() const { return best_design.empty() ? 0 : best.speedup(); }
  // The best design is faster than the reference beyond its interval.
  bool faster() const { return !best_design.empty() && best.better(); }
};

// "1.034x (95% CI 1.021 .. 1.047)": a paired gain as a ratio with its interval.
std::string gain_text(const PairedGain& gain);

// Makes the strategy of one problem (independent problems).
using StrategyFactory = std::function<StrategyPtr(const Problem&)>;

// Candidates per strategy round: the option, but at least what the measurer works on at once.
int effective_batch(const TuneOptions& options, int parallelism);

// A problem's first round: its seeds (the tuned table's row, the handle's route, the nearest rows' designs, the
// seed designs, the predictor's guesses, their widths fitted to the waves), those the problem can run and the store
// does not hold yet, at most `cap`, each with its label ("table", "route", "neighbor", "seed", "predicted" or
// "wave-fit"). It depends on the problem, the options and the store only, so that it can be known, and its kernels
// built, before the problem's turn (Tuner::run). Where the store holds the problem's whole evaluation budget
// already (a run going on after a stop), the predictor is asked again only where a seed of the table, the route or
// the command line is missing, and the round is then the first round less what the store holds.
struct FirstRound {
  std::vector<Design> designs;
  std::vector<std::string> texts;
  std::vector<std::string> labels;
};
// `guesses`: the predictor's guesses for the problem (options.seeds_for) where they were asked for ahead, on
// another thread; otherwise they are asked for here, where asks_guesses says so.
FirstRound first_round(Store& store, int64_t gpu_id, const GpuIdentity& gpu, const TuneOptions& options,
                       const Problem& problem, size_t cap,
                       std::optional<std::vector<Design>> guesses = std::nullopt);
// Whether the problem's first round takes the predictor's guesses: options.seeds_for is set, and the store does
// not hold the problem's whole budget yet, or lacks one of its table's or command line's seeds.
bool asks_guesses(Store& store, int64_t gpu_id, const GpuIdentity& gpu, const TuneOptions& options,
                  const Problem& problem, size_t cap);

// One problem's tuning: seeds first, then the strategy's rounds, each new design measured once and recorded
// in the store as soon as its batch is back. The caller measures what next_batch() asks for and hands the
// results to complete(), in order.
class ProblemTuning {
 public:
  using Clock = std::chrono::steady_clock;
  // The search stops at `deadline` (minutes budgets). `first`: the problem's first round where it was worked out
  // ahead (first_round with this problem and cap()); otherwise it is worked out here.
  ProblemTuning(Store& store, int64_t gpu_id, const GpuIdentity& gpu, const DesignSpace& space, Strategy& strategy,
                const TuneOptions& options, const Problem& problem, int batch,
                Clock::time_point deadline = Clock::time_point::max(), std::optional<FirstRound> first = std::nullopt);
  // The evaluations a problem gets under `options` in `space`.
  static size_t cap_for(const TuneOptions& options, const DesignSpace& space);
  ProblemTuning(const ProblemTuning&) = delete;
  ProblemTuning& operator=(const ProblemTuning&) = delete;

  // The designs to measure next; empty when the problem is done (budget spent, deadline passed, the
  // strategy has nothing new, or too many rounds added nothing).
  std::vector<Design> next_batch();
  // The measurements of the last next_batch(), in its order.
  void complete(const std::vector<Measurement>& results);
  const ProblemOutcome& outcome() const { return outcome_; }
  size_t cap() const { return cap_; }
  // Ends the problem for the strategy; the outcome, moved out.
  ProblemOutcome finish();
  // Ends the problem before its budget, between batches (a stop asked for from outside): finish() may follow.
  void cut_short();

 private:
  double reward_of(const Measurement& m) const;
  void add(Evaluation e);
  void record(const std::vector<Design>& designs, const std::vector<std::string>& texts,
              const std::vector<Measurement>& results, const std::string& strategy_name);
  void begin_search();
  void end_round();  // the strategy hears the round's rewards
  bool start_confirmation();  // the best design's second measurement as the next batch, where it is due
  void confirmed(const Measurement& again);
  void refresh_best();                     // the best again from the evaluations (one changed)
  void take_if_best(const Evaluation& e);  // `e` becomes the best where its paired gain is higher

  Store& store_;
  int64_t gpu_id_;
  const GpuIdentity gpu_;
  const DesignSpace& space_;
  Strategy& strategy_;
  const TuneOptions& options_;
  int batch_;
  Clock::time_point deadline_;
  ProblemOutcome outcome_;
  size_t cap_ = 0;
  std::unordered_map<std::string, size_t> known_;  // design text -> index in outcome_.evaluations
  std::unordered_set<std::string> seeded_now_;     // seeds measured by this run (read back from the store)
  std::vector<Scored> seeded_;                     // own_evaluations_only: the seeds' scores
  enum class Phase { kSeeds, kSearch, kConfirm, kDone } phase_ = Phase::kSeeds;
  std::vector<Design> pending_;                    // the batch being measured
  std::vector<std::string> pending_text_;
  std::vector<std::string> pending_label_;         // seeds: "table", "route", "neighbor", "seed", "predicted" or "wave-fit"
  std::vector<Point> proposals_;                   // the strategy's round the batch came from
  size_t round_start_ = 0;                         // evaluations before that round
  int stalled_ = 0;
};

class Tuner {
 public:
  // `spec` is the design space to search (SpaceSpec::for_gpu for the measurer's GPU by default), its spaces built
  // at first use with the measurer's GPU's shared memory; or `spaces`, built already and shared with the caller
  // (their limit must be that GPU's). One strategy for every problem, in turn (the rl policy carries what it
  // learns from one to the next).
  Tuner(Store& store, Measurer& measurer, Strategy& strategy, SpaceSpec spec);
  Tuner(Store& store, Measurer& measurer, Strategy& strategy, std::shared_ptr<DesignSpaces> spaces);
  // Independent problems: each gets a strategy of its own from `factory`.
  Tuner(Store& store, Measurer& measurer, StrategyFactory factory, SpaceSpec spec);
  Tuner(Store& store, Measurer& measurer, StrategyFactory factory, std::shared_ptr<DesignSpaces> spaces);
  std::vector<ProblemOutcome> run(const TuneOptions& options);
  const DesignSpace& space(Layout layout);

 private:
  Store& store_;
  Measurer& measurer_;
  Strategy* strategy_ = nullptr;
  StrategyFactory factory_;
  SpaceSpec spec_;
  std::shared_ptr<DesignSpaces> spaces_;  // of spec_, made at first use (the GPU's shared memory bounds them)
};

// The progress line of a problem: "[3/10] tn 1024,1024,1024  evals 40/40  best 1.234x  2m05s left".
std::string progress_line(size_t index, size_t count, const ProblemOutcome& outcome, size_t cap,
                          bool evaluation_budget, double seconds_left);
std::string format_duration(double seconds);

}  // namespace rlgemm::search
