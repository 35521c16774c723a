// The synthetic measuring backend: the cost model behind the Measurer interface. It behaves like the GPU
// backend where the tuner can tell: it keeps a compile cache (a design compiled once serves every shape,
// unless it bakes the shape in), reports source hashes and compile times, times every candidate side by side
// with the reference in rounds with a little noise (a PairedGain with its interval), lets the simulated GPU's
// speed drift between measurements when asked (BackendOptions::drift), and, inside a worker process, acts out
// the fault-injection designs (test.fault segfaults, test.hang loops forever, test.wrong fails the correctness
// gate).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "search/cost_model.h"
#include "search/measurer.h"

namespace rlgemm::search {

class SyntheticMeasurer : public Measurer {
 public:
  explicit SyntheticMeasurer(BackendOptions options = {}, CostModel model = CostModel{});

  GpuIdentity gpu() override { return model_.gpu().identity; }
  TimingStats reference(const Problem& problem, TimingMode mode) override;
  Measurement measure(const Design& design, const Problem& problem, TimingMode mode) override;
  // The wall time a batch's compiles would take at once: the longest estimated compile among the designs not
  // compiled yet (estimates, like every time of this backend; nothing is compiled, measure() still reports
  // each design's compile time at its first measurement). Counts the designs asked for (builds_asked()).
  double build_ahead(const std::vector<Design>& designs, const Problem& problem) override;
  // Counts the designs asked for (prefetches_asked()); nothing is compiled.
  void prefetch(const std::vector<Design>& designs, const Problem& problem) override;

  const CostModel& model() const { return model_; }
  int64_t measure_calls() const { return measure_calls_; }
  int64_t compilations() const { return compilations_; }
  int64_t builds_asked() const { return builds_asked_; }
  int64_t prefetches_asked() const { return prefetches_asked_; }

 private:
  BackendOptions options_;
  CostModel model_;
  std::mutex mutex_;
  std::set<std::string> compiled_;  // compile-cache keys
  std::atomic<int64_t> measure_calls_{0};
  std::atomic<int64_t> compilations_{0};
  std::atomic<int64_t> builds_asked_{0};
  std::atomic<int64_t> prefetches_asked_{0};
  std::atomic<int64_t> moments_{0};  // measurements and references taken: the drift's clock
  std::map<std::string, int> repeats_;  // measurements of each (design, problem, mode) so far, under mutex_
  // How fast the simulated GPU runs now (1 without drift), advancing its clock by one moment.
  double next_moment_speed();
};

// Rounds of a synthetic paired measurement, and the spread of each side's time within them.
inline constexpr int kSyntheticRounds = 15;
inline constexpr double kSyntheticNoise = 0.005;

// Server mode leaves the GPU idle between calls: clocks and caches are colder, the first instructions of
// each call pay more. The synthetic backend models that as a fixed slowdown.
inline constexpr double kSyntheticServerSlowdown = 1.12;

}  // namespace rlgemm::search
