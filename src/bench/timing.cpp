#include "bench/timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
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
  double time_ms(int n, const std::function<void(int)>& next, cudaStream_t stream, const std::string& what) {
    RLGEMM_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < n; ++i) next(i);
    RLGEMM_CUDA_CHECK(cudaEventRecord(stop, stream));
    RLGEMM_CHECK_LAUNCH();
    wait_for(stop, what);
    float ms = 0;
    RLGEMM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    return ms;
  }
};

Timing summarize(std::vector<double> per_call_us, int batch, bool use_mean) {
  Timing t;
  t.rounds_us = per_call_us;
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

}  // namespace

std::string_view to_string(Mode mode) {
  switch (mode) {
    case Mode::kOffline: return "offline";
    case Mode::kServer: return "server";
    case Mode::kCold: return "cold";
    case Mode::kCudal2: return "cudal2";
    case Mode::kGraph: return "graph";
    case Mode::kGraphCold: return "graph-cold";
  }
  return "?";
}

Mode parse_mode(std::string_view text) {
  for (Mode m : {Mode::kOffline, Mode::kServer, Mode::kCold, Mode::kCudal2, Mode::kGraph, Mode::kGraphCold})
    if (text == to_string(m)) return m;
  fail("unknown mode '" + std::string(text) + "': use offline, server, cold, cudal2, graph or graph-cold");
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

RoundOrder::RoundOrder(size_t subjects, uint64_t seed) : rng_(seed), order_(subjects) {
  for (size_t i = 0; i < subjects; ++i) order_[i] = i;
}

const std::vector<size_t>& RoundOrder::next() {
  std::shuffle(order_.begin(), order_.end(), rng_);
  return order_;
}

std::vector<size_t> modes_round(size_t n, size_t modes, size_t round, RoundOrder& order) {
  std::vector<size_t> turns;
  turns.reserve(modes * (n + 1));
  for (size_t k = 0; k < modes; ++k) {
    const size_t m = (round + k) % modes;
    const std::vector<size_t>& subjects = order.next();
    if (modes > 1) turns.push_back(modes * n + m * n + subjects.front());  // the lead-in, untimed
    for (size_t i : subjects) turns.push_back(m * n + i);
  }
  return turns;
}

namespace {

// Warm-up rounds until every subject's last two batches agree within 2% (at most max_warmup_batches), then
// o.batches timed rounds; each round runs every subject once (`batch_us(i)`: one batch of subject i, its time
// per call) in the order `next_round` gives. An index of n or more in a round is an untimed turn: run, its time
// kept nowhere. Returns each subject's per-call times of the timed rounds, in round order.
std::vector<std::vector<double>> warm_then_time(size_t n, const std::function<double(size_t)>& batch_us,
                                                const std::function<std::vector<size_t>()>& next_round,
                                                const TimingOptions& o) {
  std::vector<double> previous(n);
  for (size_t i : next_round()) {
    const double now = batch_us(i);
    if (i < n) previous[i] = now;
  }
  for (int w = 1; w < o.max_warmup_batches; ++w) {
    bool stable = true;
    for (size_t i : next_round()) {
      const double now = batch_us(i);
      if (i >= n) continue;
      stable = stable && std::fabs(now - previous[i]) <= 0.02 * previous[i];
      previous[i] = now;
    }
    if (stable) break;
  }
  std::vector<std::vector<double>> per_call(n);
  for (int b = 0; b < o.batches; ++b)
    for (size_t i : next_round()) {
      const double now = batch_us(i);
      if (i < n) per_call[i].push_back(now);
    }
  return per_call;
}

// One timed turn of a subject in a round, per call: the prepared calls of one mode.
class Turns {
 public:
  virtual ~Turns() = default;
  virtual double run(size_t i) = 0;
  virtual int batch(size_t i) const = 0;  // calls per turn
};

// Offline and cold: each subject gets a batch size from a single timed call.
class BatchedTurns final : public Turns {
 public:
  BatchedTurns(std::vector<std::function<void(int)>> next, std::vector<std::string> what, cudaStream_t stream,
               const TimingOptions& o)
      : next_(std::move(next)), what_(std::move(what)), stream_(stream), batch_(next_.size()), counter_(next_.size()) {
    for (size_t i = 0; i < next_.size(); ++i) {
      next_[i](0);  // a first call after a change of operands may pay for first touches
      const double single_us = ev_.time_ms(1, next_[i], stream_, what_[i]) * 1e3;
      batch_[i] = int(std::clamp(std::ceil(o.batch_target_us / std::max(single_us, 0.5)), 1.0, 100000.0));
    }
  }
  double run(size_t i) override {
    const int base = counter_[i];
    counter_[i] += batch_[i];
    return ev_.time_ms(batch_[i], [&](int c) { next_[i](base + c); }, stream_, what_[i]) * 1e3 / batch_[i];
  }
  int batch(size_t i) const override { return batch_[i]; }

 private:
  EventPair ev_;
  std::vector<std::function<void(int)>> next_;
  std::vector<std::string> what_;
  cudaStream_t stream_;
  std::vector<int> batch_, counter_;
};

// Graph mode: one subject's calls captured back to back in a CUDA graph, instantiated once. The capture runs on
// a stream of its own (the legacy default stream cannot capture); replays go on the caller's stream.
class CapturedCalls {
 public:
  // `call(stream, i)` makes the i-th of `calls` calls.
  CapturedCalls(const std::function<void(cudaStream_t, int)>& call, int calls, const std::string& what)
      : calls_(calls) {
    cudaStream_t capture = nullptr;
    RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking));
    struct DestroyStream {
      cudaStream_t s;
      ~DestroyStream() { cudaStreamDestroy(s); }
    } destroy{capture};
    RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
    std::string broke;
    try {
      for (int i = 0; i < calls; ++i) call(capture, i);
    } catch (const std::exception& e) {
      broke = e.what();
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(capture, &graph);
    (void)cudaGetLastError();
    if (broke.empty() && ended != cudaSuccess) broke = cudaGetErrorString(ended);
    // A call that launches on another stream than the one it is given runs at once instead of being captured:
    // its graph would be empty, and its replays time nothing.
    size_t nodes = 0;
    if (broke.empty() && graph && cudaGraphGetNodes(graph, nullptr, &nodes) == cudaSuccess && nodes == 0)
      broke = "nothing was captured (does it launch on the stream it is given?)";
    if (!broke.empty()) {
      if (graph) cudaGraphDestroy(graph);
      throw Error(ErrorKind::kRuntime, what + " cannot be captured in a CUDA graph: " + broke);
    }
    const cudaError_t made = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    if (made == cudaErrorMemoryAllocation) throw Error(ErrorKind::kOutOfMemory, what + ": no memory to instantiate its graph");
    RLGEMM_CUDA_CHECK(made);
  }
  ~CapturedCalls() {
    if (exec_ && !device_hung()) cudaGraphExecDestroy(exec_);
  }
  CapturedCalls(const CapturedCalls&) = delete;
  CapturedCalls& operator=(const CapturedCalls&) = delete;
  int calls() const { return calls_; }
  void launch(cudaStream_t stream) const { RLGEMM_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  int calls_;
  cudaGraphExec_t exec_ = nullptr;
};

// The GPU is kept busy this long before each timed replay, so that its start event does not wait for the host
// to submit the graph.
constexpr double kSpinBeforeReplayUs = 30;
// A graph holds at most this many calls (a 1 us kernel then replays for 10 ms at least).
constexpr int kMaxGraphCalls = 10000;

// Graph mode: each subject's calls captured once, in a graph sized from a probe graph of a few calls (whose
// first replay pays for first touches); a turn is one replay. Graph-cold (`cold`): the calls rotate among the
// subject's input sets, and a graph holds a whole number of rotations (at least one), so that each call's inputs
// were last touched a whole rotation (at least twice the L2) before.
class GraphTurns final : public Turns {
 public:
  GraphTurns(const std::vector<Subject>& subjects, cudaStream_t stream, const TimingOptions& o, bool cold)
      : subjects_(subjects), stream_(stream), graphs_(subjects.size()) {
    constexpr int kProbeCalls = 8;
    for (size_t i = 0; i < subjects.size(); ++i) {
      const Subject& s = subjects[i];
      const std::string what = s.name.empty() ? std::string("an implementation") : s.name;
      const std::function<void(cudaStream_t, int)> call =
          cold ? std::function<void(cudaStream_t, int)>(
                     [&s](cudaStream_t st, int k) { s.rotate[size_t(k) % s.rotate.size()](st); })
               : std::function<void(cudaStream_t, int)>([&s](cudaStream_t st, int) { s.call(st); });
      const int rotation = cold ? int(s.rotate.size()) : 1;
      const int probe = cold ? rotation : kProbeCalls;
      // A replay's fixed cost, spread over the probe's few calls, makes a call look dearer than it is, and the
      // graph sized from it falls short of the target (a 7-call rotation of 4-us calls probed at 4.8 us a call
      // and ran 210 calls of 4.2 us: 882 of 1000 us). So the sized graph's own replay is checked, and a graph
      // that falls short of 90% of the target is sized once more from it.
      auto sized = [&](double per_call) {
        const int calls =
            int(std::clamp(std::ceil(o.batch_target_us / std::max(per_call, 0.1)), 1.0, double(kMaxGraphCalls)));
        return std::max(rotation, (calls + rotation - 1) / rotation * rotation);
      };
      graphs_[i] = std::make_unique<CapturedCalls>(call, probe, what);
      graphs_[i]->launch(stream);
      for (int pass = 0; pass < 2; ++pass) {
        const int now = graphs_[i]->calls();
        const double per_call = run(i);
        if (pass == 1 && now * per_call >= 0.9 * o.batch_target_us) break;
        const int calls = sized(per_call);
        if (calls == now) break;
        graphs_[i].reset();
        graphs_[i] = std::make_unique<CapturedCalls>(call, calls, what);
        graphs_[i]->launch(stream);
      }
    }
  }
  double run(size_t i) override {  // per call, of one replay
    const CapturedCalls& g = *graphs_[i];
    gpu_spin(stream_, kSpinBeforeReplayUs);
    return ev_.time_ms(1, [&](int) { g.launch(stream_); }, stream_, "a replay of " + subjects_[i].name) * 1e3 /
           g.calls();
  }
  int batch(size_t i) const override { return graphs_[i]->calls(); }

 private:
  EventPair ev_;
  const std::vector<Subject>& subjects_;
  cudaStream_t stream_;
  std::vector<std::unique_ptr<CapturedCalls>> graphs_;
};

bool batched(Mode mode) {
  return mode == Mode::kOffline || mode == Mode::kCold || mode == Mode::kGraph || mode == Mode::kGraphCold;
}

// The prepared turns of a batched mode (offline, cold, graph).
std::unique_ptr<Turns> turns_for(Mode mode, const std::vector<Subject>& subjects, cudaStream_t stream,
                                 const TimingOptions& o) {
  if (mode == Mode::kGraphCold)
    for (const auto& s : subjects)
      if (s.rotate.empty()) throw Error(ErrorKind::kRuntime, "graph-cold mode needs rotating input sets");
  if (mode == Mode::kGraph || mode == Mode::kGraphCold)
    return std::make_unique<GraphTurns>(subjects, stream, o, mode == Mode::kGraphCold);
  std::vector<std::function<void(int)>> next;
  std::vector<std::string> what;
  for (const auto& s : subjects) {
    what.push_back("a timed batch of " + (s.name.empty() ? std::string("an implementation") : s.name));
    if (mode == Mode::kCold) {
      if (s.rotate.empty()) throw Error(ErrorKind::kRuntime, "cold mode needs rotating input sets");
      next.push_back([&s, stream](int i) { s.rotate[size_t(i) % s.rotate.size()](stream); });
    } else {
      next.push_back([&s, stream](int) { s.call(stream); });
    }
  }
  return std::make_unique<BatchedTurns>(std::move(next), std::move(what), stream, o);
}

// Batched modes timed in the same rounds: turn m * n + i is subject i in modes[m].
std::vector<std::vector<Timing>> time_batched_modes(const std::vector<Mode>& modes,
                                                    const std::vector<Subject>& subjects, cudaStream_t stream,
                                                    const TimingOptions& o) {
  const size_t n = subjects.size(), count = n * modes.size();
  std::vector<std::unique_ptr<Turns>> turns;
  for (Mode mode : modes) turns.push_back(turns_for(mode, subjects, stream, o));
  // A round holds every mode's turns, a mode's together (its subjects in a shuffled order), the modes' order
  // turning from round to round; with more than one mode, each mode's turns open with an untimed turn of that
  // mode (the first subject's, again), so that no timed turn follows a turn of another mode. Offline batches
  // mixed turn by turn with graph replays slowed the replay after them, for some kernels only: on an H200,
  // cuBLASLt's 64x16 kernel in clusters of 4 at 16x14336x3584 replayed at 28.7 us a call amid offline turns and
  // at 26.3-26.7 in rounds of graph turns alone, where the heuristic's first ran 27.4 either way
  // (bench/results/h200/reversal/), so the harness's graph figures disagreed with every choice made in graphs.
  RoundOrder order(n, o.seed);
  size_t round = 0;
  const auto next_round = [&] { return modes_round(n, modes.size(), round++, order); };
  std::vector<std::vector<double>> per_call = warm_then_time(
      count, [&](size_t t) { const size_t u = t % count; return turns[u / n]->run(u % n); }, next_round, o);
  std::vector<std::vector<Timing>> out(modes.size());
  for (size_t t = 0; t < n * modes.size(); ++t)
    out[t / n].push_back(summarize(std::move(per_call[t]), turns[t / n]->batch(t % n), false));
  return out;
}

}  // namespace

std::vector<Timing> time_side_by_side(Mode mode, const std::vector<Subject>& subjects, const Call& refresh,
                                      cudaStream_t stream, const TimingOptions& o) {
  const size_t n = subjects.size();
  if (n == 0) return {};
  if (batched(mode)) return time_batched_modes({mode}, subjects, stream, o).front();
  std::vector<std::vector<double>> per_call(n);
  RoundOrder order(n, o.seed);
  if (mode == Mode::kServer) {
    // Every call waits its own idle gap, and in each round every subject waits a gap of the same length
    // (one exponential draw per round): how long a quiet GPU has slept decides much of a call's time (clocks
    // fall within milliseconds), so subjects that drew their gaps apart would differ by their luck. With
    // common gaps they are compared over the same set of sleeps.
    EventPair ev;
    std::mt19937_64 rng(o.seed ^ 0x5e7e5e7e5e7e5e7eull);
    std::exponential_distribution<double> gap(1.0 / std::max(o.gap_mean_ms, 1e-9));
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int s = 0; s < o.samples; ++s) {
      const double gap_ms = gap(rng);
      for (size_t i : order.next()) {
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap_ms));
        per_call[i].push_back(ev.time_ms(1, [&](int) { subjects[i].call(stream); }, stream, "a timed call of " + subjects[i].name) * 1e3);
      }
    }
  } else {  // cudal2: the first round is a warm-up
    for (int s = 0; s < o.samples + 1; ++s)
      for (size_t i : order.next()) {
        if (refresh) refresh(stream);
        RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
        const auto t0 = std::chrono::steady_clock::now();
        subjects[i].call(stream);
        RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
        const auto t1 = std::chrono::steady_clock::now();
        if (s > 0) per_call[i].push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
  }
  std::vector<Timing> out;
  for (size_t i = 0; i < n; ++i) out.push_back(summarize(std::move(per_call[i]), 1, mode == Mode::kCudal2));
  return out;
}

std::vector<std::vector<Timing>> time_modes_side_by_side(const std::vector<Mode>& modes,
                                                         const std::vector<Subject>& subjects, const Call& refresh,
                                                         cudaStream_t stream, const TimingOptions& o) {
  for (size_t m = 0; m < modes.size(); ++m)
    if (std::find(modes.begin(), modes.begin() + std::ptrdiff_t(m), modes[m]) != modes.begin() + std::ptrdiff_t(m))
      throw Error(ErrorKind::kInvalidInput, "time_modes_side_by_side: mode " + std::string(to_string(modes[m])) +
                                                " asked for twice");
  std::vector<std::vector<Timing>> out(modes.size());
  if (subjects.empty()) return out;
  // Offline and graph share rounds; cold and graph-cold do not: their turns sweep the L2 that the others' inputs
  // sit in.
  const auto shared = [](Mode mode) { return mode == Mode::kOffline || mode == Mode::kGraph; };
  std::vector<Mode> together;
  for (Mode mode : modes)
    if (shared(mode)) together.push_back(mode);
  std::vector<std::vector<Timing>> timed;
  if (o.modes_apart) {
    for (Mode mode : together) timed.push_back(time_batched_modes({mode}, subjects, stream, o).front());
  } else if (!together.empty()) {
    timed = time_batched_modes(together, subjects, stream, o);
  }
  for (size_t m = 0, t = 0; m < modes.size(); ++m)
    out[m] = shared(modes[m]) ? std::move(timed[t++]) : time_side_by_side(modes[m], subjects, refresh, stream, o);
  return out;
}

const char* shared_rounds(const TimingOptions& o) { return o.modes_apart ? kModesApart : kSharedRounds; }

TimingOptions screen_options() {
  TimingOptions quick;
  quick.batch_target_us = 300;
  quick.batches = 5;
  // Warm-up until the rounds agree (at most 10; it was 2): with 2, the library's floor chose, run after run,
  // cuBLASLt candidates 4-8% slower on some shapes than a screen run on a busy GPU chose
  // (bench/results/h200/floor-choice-check.csv); choose_fastest also keeps the GPU busy before its screen.
  quick.max_warmup_batches = 10;
  return quick;
}

void launch_captured_once(const Call& call, cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    call(stream);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  struct Free {
    cudaGraph_t graph;
    cudaGraphExec_t exec = nullptr;
    ~Free() {
      if (exec) cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  } owned{graph};
  RLGEMM_CUDA_CHECK(cudaGraphInstantiate(&owned.exec, graph, 0));
  RLGEMM_CUDA_CHECK(cudaGraphLaunch(owned.exec, stream));
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace rlgemm::bench
