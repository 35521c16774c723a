#include "search/synthetic_measurer.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "rlgemm/error.h"

namespace rlgemm::search {

namespace {

std::string hex_hash(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

SyntheticMeasurer::SyntheticMeasurer(BackendOptions options, CostModel model)
    : options_(std::move(options)), model_(model) {}

TimingStats SyntheticMeasurer::reference(const Problem& problem, TimingMode mode) {
  validate(problem.shape);
  const double t = model_.reference_us(problem) * (mode == TimingMode::kServer ? kSyntheticServerSlowdown : 1.0);
  return {t, t * 0.99, t * 1.06, 50};
}

Measurement SyntheticMeasurer::measure(const Design& design, const Problem& problem, TimingMode mode) {
  ++measure_calls_;
  if (options_.delay_ms > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(int64_t(options_.delay_ms * 1000)));
  Measurement out;
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
  // The compiled kernel depends on the design and B's layout, and on the shape only when it is baked in.
  std::string key = text + "|" + std::string(to_string(problem.layout));
  if (design.static_shape) key += "|" + problem.shape.to_string();
  out.source_hash = hex_hash(key);
  {
    std::lock_guard lock(mutex_);
    if (compiled_.insert(key).second) {
      ++compilations_;
      out.compile_seconds = 0.35 + 0.05 * design.stages;  // what NVRTC with a precompiled header costs
    }
  }
  const double t = model_.time_us(design, problem) * (mode == TimingMode::kServer ? kSyntheticServerSlowdown : 1.0);
  out.status = MeasureStatus::kOk;
  out.timing = {t, t * 0.995, t * 1.04, 50};
  return out;
}

}  // namespace rlgemm::search
