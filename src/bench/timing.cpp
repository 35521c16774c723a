#include "bench/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "core/cuda_util.h"
#include "rlgemm/error.h"

namespace rlgemm::bench {
namespace {

// A pair of events, created once per measurement.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    RLGEMM_CUDA_CHECK(cudaEventCreate(&start));
    RLGEMM_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
  }
  // Milliseconds spent by the GPU on `n` calls of `next` (each call picks its own operands).
  double time_ms(int n, const std::function<void(int)>& next, cudaStream_t stream) {
    RLGEMM_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < n; ++i) next(i);
    RLGEMM_CUDA_CHECK(cudaEventRecord(stop, stream));
    RLGEMM_CUDA_CHECK(cudaEventSynchronize(stop));
    RLGEMM_CHECK_LAUNCH();
    float ms = 0;
    RLGEMM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  }
};

Timing summarize(std::vector<double> per_call_us, int batch, bool use_mean) {
  Timing t;
  t.samples = int(per_call_us.size());
  t.batch = batch;
  t.min_us = *std::min_element(per_call_us.begin(), per_call_us.end());
  t.max_us = *std::max_element(per_call_us.begin(), per_call_us.end());
  if (use_mean) {
    double sum = 0;
    for (double v : per_call_us) sum += v;
    t.time_us = sum / double(per_call_us.size());
  } else {
    t.time_us = median(std::move(per_call_us));
  }
  return t;
}

// Back-to-back batches over `next`; shared by offline (one operand set) and cold (rotating sets).
Timing time_batches(const std::function<void(int)>& next, cudaStream_t stream, const TimingOptions& o) {
  EventPair ev;
  next(0);  // the first call after a change of operands can pay for first touches; keep it out
  const double single_us = ev.time_ms(1, next, stream) * 1e3;
  const int batch = int(std::clamp(std::ceil(o.batch_target_us / std::max(single_us, 0.5)), 1.0, 100000.0));
  int counter = 0;
  auto run_batch = [&] {
    const int base = counter;
    counter += batch;
    return ev.time_ms(batch, [&](int i) { next(base + i); }, stream) * 1e3 / batch;
  };
  double previous = run_batch();
  for (int w = 1; w < o.max_warmup_batches; ++w) {
    const double now = run_batch();
    const bool stable = std::fabs(now - previous) <= 0.02 * previous;
    previous = now;
    if (stable) break;
  }
  std::vector<double> per_call;
  for (int b = 0; b < o.batches; ++b) per_call.push_back(run_batch());
  return summarize(std::move(per_call), batch, false);
}

}  // namespace

std::string_view to_string(Mode mode) {
  switch (mode) {
    case Mode::kOffline: return "offline";
    case Mode::kServer: return "server";
    case Mode::kCold: return "cold";
    case Mode::kCudal2: return "cudal2";
  }
  return "?";
}

Mode parse_mode(std::string_view text) {
  for (Mode m : {Mode::kOffline, Mode::kServer, Mode::kCold, Mode::kCudal2})
    if (text == to_string(m)) return m;
  fail("unknown mode '" + std::string(text) + "': use offline, server, cold or cudal2");
}

std::vector<Mode> parse_modes(const std::vector<std::string>& names) {
  std::vector<Mode> modes;
  for (const auto& name : names) {
    Mode m = parse_mode(name);
    if (std::find(modes.begin(), modes.end(), m) == modes.end()) modes.push_back(m);
  }
  if (modes.empty()) fail("no timing mode given");
  return modes;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Timing time_offline(const Call& call, cudaStream_t stream, const TimingOptions& o) {
  return time_batches([&](int) { call(stream); }, stream, o);
}

Timing time_cold(const std::vector<Call>& calls, cudaStream_t stream, const TimingOptions& o) {
  return time_batches([&](int i) { calls[size_t(i) % calls.size()](stream); }, stream, o);
}

Timing time_server(const Call& call, cudaStream_t stream, const TimingOptions& o) {
  EventPair ev;
  std::mt19937_64 rng(o.seed);
  std::exponential_distribution<double> gap(1.0 / o.gap_mean_ms);
  std::vector<double> per_call;
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int s = 0; s < o.samples; ++s) {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap(rng)));
    per_call.push_back(ev.time_ms(1, [&](int) { call(stream); }, stream) * 1e3);
  }
  return summarize(std::move(per_call), 1, false);
}

Timing time_cudal2(const Call& call, const Call& refresh, cudaStream_t stream, const TimingOptions& o) {
  std::vector<double> per_call;
  for (int s = 0; s < o.samples + 1; ++s) {
    refresh(stream);
    RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
    const auto t0 = std::chrono::steady_clock::now();
    call(stream);
    RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
    const auto t1 = std::chrono::steady_clock::now();
    if (s > 0) per_call.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());  // first: warm-up
  }
  return summarize(std::move(per_call), 1, true);
}

double screen_time_us(const Call& call, cudaStream_t stream) {
  TimingOptions quick;
  quick.batch_target_us = 300;
  quick.batches = 3;
  quick.max_warmup_batches = 2;
  return time_offline(call, stream, quick).time_us;
}

}  // namespace rlgemm::bench
