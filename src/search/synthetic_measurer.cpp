#include "search/synthetic_measurer.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "core/gain_interval.h"
#include "rlgemm/error.h"

namespace rlgemm::search {

namespace {

// FNV-1a of a text.
uint64_t text_hash(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string hex_hash(std::string_view text) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(text_hash(text)));
  return buf;
}

// The per-round times of one side: `t` with a deterministic noise of spread kSyntheticNoise drawn from `seed`.
std::vector<double> noisy_rounds(double t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, kSyntheticNoise);
  std::vector<double> rounds(kSyntheticRounds);
  for (double& r : rounds) r = t * std::exp(noise(rng));
  return rounds;
}

double mode_factor(TimingMode mode) { return mode == TimingMode::kServer ? kSyntheticServerSlowdown : 1.0; }

// What NVRTC with a precompiled header costs for one kernel.
double estimated_compile_seconds(const Design& design) { return 0.35 + 0.05 * design.stages; }

}  // namespace

SyntheticMeasurer::SyntheticMeasurer(BackendOptions options, CostModel model)
    : options_(std::move(options)), model_(model) {}

double SyntheticMeasurer::next_moment_speed() {
  const int64_t moment = moments_.fetch_add(1);
  return 1.0 + options_.drift * double(moment);
}

TimingStats SyntheticMeasurer::reference(const Problem& problem, TimingMode mode) {
  validate(problem.shape);
  const double t = model_.reference_us(problem) * mode_factor(mode) / next_moment_speed();
  return {t, t * 0.99, t * 1.06, 50};
}

double SyntheticMeasurer::build_ahead(const std::vector<Design>& designs, const Problem& problem) {
  builds_asked_ += int64_t(designs.size());
  std::lock_guard lock(mutex_);
  double longest = 0;
  for (const Design& d : designs)
    if (d.family != Family::kTest && !compiled_.count(compile_key(d, problem)))
      longest = std::max(longest, estimated_compile_seconds(d));
  return longest;
}

void SyntheticMeasurer::prefetch(const std::vector<Design>& designs, const Problem& problem) {
  (void)problem;
  prefetches_asked_ += int64_t(designs.size());
}

Measurement SyntheticMeasurer::measure(const Design& design, const Problem& problem, TimingMode mode) {
  ++measure_calls_;
  Measurement out;
  if (options_.delay_ms > 0) {
    // The simulated GPU's pace: all of it in the timed rounds.
    std::this_thread::sleep_for(std::chrono::microseconds(int64_t(options_.delay_ms * 1000)));
    out.seconds.rounds = options_.delay_ms / 1000;
  }
  const std::string text = to_string(design);
  if (design.family == Family::kTest) {
    if (!options_.simulate_faults) {
      out.status = MeasureStatus::kFailed;
      out.error = "fault-injection design " + text + " runs only in an isolated worker";
      return out;
    }
    switch (design.test) {
      case TestBehavior::kFault:
        // What an illegal memory access does to the process that owns the CUDA context.
        std::fflush(nullptr);
        ::raise(SIGSEGV);
        break;
      case TestBehavior::kHang:
        for (;;) ::pause();
      case TestBehavior::kWrong:
        out.status = MeasureStatus::kWrong;
        out.error = "correctness gate: 4096 of 4096 sampled elements differ from the reference";
        out.source_hash = hex_hash(text);
        return out;
    }
  }
  auto why = why_invalid(design, problem.layout, int(model_.gpu().identity.smem_per_block_optin));
  if (!why) why = why_unfit(design, problem);
  if (why) {
    out.status = MeasureStatus::kFailed;
    out.error = "invalid design " + text + ": " + *why;
    return out;
  }
  const std::string key = compile_key(design, problem);
  out.source_hash = hex_hash(key);
  {
    std::lock_guard lock(mutex_);
    if (compiled_.insert(key).second) {
      ++compilations_;
      out.compile_seconds = estimated_compile_seconds(design);
    }
  }
  // The candidate and the reference in the same rounds, on a GPU whose speed is this moment's.
  const double speed = next_moment_speed();
  // The noise depends on what is measured only, so that the same candidate measures the same in any order; a
  // candidate measured again (a confirmation) draws afresh.
  const std::string what = key + "|" + problem.shape.to_string() + "|" + std::string(to_string(mode));
  int repeat = 0;
  {
    std::lock_guard lock(mutex_);
    repeat = repeats_[what]++;
  }
  const uint64_t seed = text_hash(what) ^ (uint64_t(repeat) * 0x9e3779b97f4a7c15ull);
  // The reference's state for this measurement (BackendOptions::reference_states): slow in a third of them.
  const double state = options_.reference_states > 0 && (seed >> 17) % 3 == 0 ? 1 + options_.reference_states : 1;
  const std::vector<double> candidate =
      noisy_rounds(model_.time_us(design, problem) * mode_factor(mode) / speed, seed);
  const std::vector<double> reference =
      noisy_rounds(model_.reference_us(problem) * state * mode_factor(mode) / speed, seed ^ 0x5eed5eed5eed5eedull);
  const GainInterval g = gain_interval(reference, candidate);
  out.status = MeasureStatus::kOk;
  out.timing = {median(candidate), *std::min_element(candidate.begin(), candidate.end()),
                *std::max_element(candidate.begin(), candidate.end()), kSyntheticRounds};
  out.paired = PairedGain{median(reference), std::log1p(g.gain), g.low, g.high, g.rounds};
  return out;
}

}  // namespace rlgemm::search
