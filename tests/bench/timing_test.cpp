#include "bench/timing.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "core/cuda_util.h"
#include "rlgemm/error.h"
#include "support/gpu.h"

namespace rlgemm::bench {
namespace {

TEST(Timing, Median) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
}

TEST(Timing, ModesParseAndRejectUnknown) {
  EXPECT_EQ(parse_mode("server"), Mode::kServer);
  EXPECT_EQ(parse_modes({"offline", "cold", "offline"}).size(), 2u);
  EXPECT_THROW(parse_mode("fast"), Error);
  EXPECT_THROW(parse_modes({}), Error);
  for (Mode m : {Mode::kOffline, Mode::kServer, Mode::kCold, Mode::kCudal2, Mode::kGraph, Mode::kGraphCold})
    EXPECT_EQ(parse_mode(to_string(m)), m);
  EXPECT_EQ(parse_mode("graph-cold"), Mode::kGraphCold);
  try {
    parse_mode("graphcold");
    ADD_FAILURE() << "graphcold accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("graph-cold"), std::string::npos) << e.what();
  }
}

// Graph-cold replays rotate among a subject's input sets: a subject without them is refused before anything runs.
TEST(Timing, GraphColdNeedsRotatingInputSets) {
  const std::vector<Subject> subjects{{[](cudaStream_t) {}, {}, "no sets"}};
  try {
    time_side_by_side(Mode::kGraphCold, subjects, nullptr, nullptr, TimingOptions{});
    ADD_FAILURE() << "graph-cold without input sets accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rotating input sets"), std::string::npos) << e.what();
  }
}

// Every round's order is a fresh permutation, the same seed gives the same orders, and over many rounds every
// subject runs in every position (and after every other subject) about equally often.
TEST(RoundOrder, ShuffledEveryRoundReproducibleAndBalanced) {
  constexpr size_t kSubjects = 4, kRounds = 4000;
  RoundOrder a(kSubjects, 42), b(kSubjects, 42), c(kSubjects, 43);
  std::vector<std::vector<size_t>> seen_a, seen_c;
  size_t position_count[kSubjects][kSubjects] = {};
  std::map<std::pair<size_t, size_t>, size_t> follows;  // (previous, next) within a round
  std::set<std::vector<size_t>> distinct;
  for (size_t r = 0; r < kRounds; ++r) {
    const std::vector<size_t> order = a.next();
    EXPECT_EQ(order, b.next()) << "round " << r;
    seen_a.push_back(order);
    seen_c.push_back(c.next());
    distinct.insert(order);
    std::vector<size_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted, (std::vector<size_t>{0, 1, 2, 3}));
    for (size_t p = 0; p < kSubjects; ++p) ++position_count[order[p]][p];
    for (size_t p = 1; p < kSubjects; ++p) ++follows[{order[p - 1], order[p]}];
  }
  EXPECT_NE(seen_a, seen_c) << "another seed, other orders";
  EXPECT_EQ(distinct.size(), 24u) << "every permutation of 4 appears";
  for (size_t s = 0; s < kSubjects; ++s)
    for (size_t p = 0; p < kSubjects; ++p)
      EXPECT_NEAR(double(position_count[s][p]) / kRounds, 0.25, 0.03) << "subject " << s << " position " << p;
  for (const auto& [pair, n] : follows) EXPECT_NEAR(double(n) / kRounds, 0.25, 0.03) << pair.first << "->" << pair.second;
}

TEST(ProblemSeed, TheSameProblemDrawsTheSameInputsInAnyRunWithTheSeed) {
  const Problem p{{4096, 512, 8192}, Layout::kTN};
  EXPECT_EQ(problem_seed(7, p), problem_seed(7, p));
  EXPECT_NE(problem_seed(7, p), problem_seed(8, p));
  EXPECT_NE(problem_seed(7, p), problem_seed(7, {{4096, 512, 8192}, Layout::kNN}));
  EXPECT_NE(problem_seed(7, p), problem_seed(7, {{512, 4096, 8192}, Layout::kTN}));
}

// Two kernels of known length on the GPU: one spins for 20 us on the GPU's timer, the other does nothing.
std::vector<Subject> spin_subjects() {
  return {{[](cudaStream_t s) { gpu_spin(s, 20); }, {}, "spin 20 us"},
          {[](cudaStream_t s) { gpu_spin(s, 0); }, {}, "spin 0 us"}};
}

// Several modes at once: a mode asked for twice is refused before anything runs; no subjects time nothing.
TEST(Timing, ModesSideBySideRefusesAModeTwice) {
  try {
    time_modes_side_by_side({Mode::kOffline, Mode::kGraph, Mode::kOffline}, {}, nullptr, nullptr, TimingOptions{});
    ADD_FAILURE() << "offline twice accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
  }
  const auto none = time_modes_side_by_side({Mode::kGraph, Mode::kOffline}, {}, nullptr, nullptr, TimingOptions{});
  ASSERT_EQ(none.size(), 2u);
  EXPECT_TRUE(none[0].empty() && none[1].empty());
}

// Offline and graph in the same rounds give each mode's own times, in the order the modes were asked for: a
// 20 us kernel takes 20 us in both, an empty one less in a graph than its eager launch costs; every mode has its
// batches; a mode that cannot share the rounds (server) is timed after them.
TEST(TimingGpu, OfflineAndGraphShareRoundsAndKeepTheirOwnTimes) {
  RLGEMM_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const std::vector<Subject> subjects = spin_subjects();
  TimingOptions o;
  o.seed = 4;
  o.samples = 3;
  o.gap_mean_ms = 0.1;
  const auto t = time_modes_side_by_side({Mode::kGraph, Mode::kServer, Mode::kOffline}, subjects, nullptr, stream, o);
  ASSERT_EQ(t.size(), 3u);
  const auto& graph = t[0];
  const auto& server = t[1];
  const auto& offline = t[2];
  ASSERT_EQ(graph.size(), 2u);
  ASSERT_EQ(offline.size(), 2u);
  ASSERT_EQ(server.size(), 2u);
  EXPECT_GE(graph[0].time_us, 20.0);
  EXPECT_LE(graph[0].time_us, 21.5);
  EXPECT_GE(offline[0].time_us, 20.0);
  EXPECT_LE(offline[0].time_us, 23.0);
  EXPECT_GE(graph[0].batch, 45);  // 1000 us of 20 us calls, captured
  EXPECT_LT(graph[1].time_us, offline[1].time_us) << "graph " << graph[1].time_us << " us, offline "
                                                  << offline[1].time_us << " us";
  for (const auto* mode : {&graph, &offline})
    for (const Timing& timing : *mode) EXPECT_EQ(int(timing.rounds_us.size()), o.batches);
  for (const Timing& timing : server) EXPECT_EQ(timing.samples, o.samples);
  cudaStreamDestroy(stream);
}

// A round of two modes: each mode's turns together, every subject once, opened by an untimed lead-in turn of the
// same mode and subject as the first; the modes' order turns round by round; one mode alone has no lead-in and
// is the shuffled order of RoundOrder itself. The same seed gives the same rounds.
TEST(Timing, ModesRoundKeepsEachModesTurnsTogether) {
  constexpr size_t n = 5, modes = 2;
  RoundOrder order(n, 11);
  std::vector<std::vector<size_t>> rounds;
  for (size_t r = 0; r < 4; ++r) {
    const std::vector<size_t> turns = modes_round(n, modes, r, order);
    rounds.push_back(turns);
    ASSERT_EQ(turns.size(), modes * (n + 1));
    for (size_t k = 0; k < modes; ++k) {
      const size_t m = (r + k) % modes;  // round r opens with mode r mod 2
      const size_t lead = turns[k * (n + 1)];
      ASSERT_GE(lead, modes * n) << "round " << r;
      std::set<size_t> subjects;
      for (size_t j = 1; j <= n; ++j) {
        const size_t t = turns[k * (n + 1) + j];
        ASSERT_LT(t, modes * n);
        EXPECT_EQ(t / n, m) << "round " << r << ": a turn of another mode amid mode " << m << "'s";
        subjects.insert(t % n);
      }
      EXPECT_EQ(subjects.size(), n);
      // The lead-in is the mode's first subject's turn, untimed.
      EXPECT_EQ(lead - modes * n, turns[k * (n + 1) + 1]);
    }
  }
  RoundOrder again(n, 11);
  for (size_t r = 0; r < rounds.size(); ++r) EXPECT_EQ(modes_round(n, modes, r, again), rounds[r]);
  RoundOrder one(n, 11), plain(n, 11);
  EXPECT_EQ(modes_round(n, 1, 0, one), plain.next());
}

// Offline and graph in one round: a mode's turns together, each mode's opened by an untimed turn of its own, so
// that no timed turn follows one of the other mode (an offline batch slowed the graph replay after it). Each call
// leaves a host function in its stream's order, captured into the graph in graph mode, tagged with its mode and
// subject: the log is the order in which the GPU ran the turns, and every stretch of one mode's calls in it holds
// every subject's (turn by turn shuffled modes would leave stretches of one or two subjects).
struct TurnLog {
  std::mutex mutex;
  std::vector<std::pair<bool, int>> calls;  // (graph, subject)
};
struct TurnTag {
  TurnLog* log;
  bool graph;
  int subject;
};
void CUDART_CB log_turn(void* p) {
  const auto* tag = static_cast<const TurnTag*>(p);
  std::lock_guard lock(tag->log->mutex);
  tag->log->calls.emplace_back(tag->graph, tag->subject);
}

// Times six logged subjects offline and in graphs (time_modes_side_by_side, the modes in the order `modes` gives)
// under `o`; returns, in the order the GPU ran them, the stretches of one mode's calls: (graph, how many subjects the
// stretch holds).
std::vector<std::pair<bool, int>> logged_stretches(const TimingOptions& o, int subjects_count,
                                                   const std::vector<Mode>& modes = {Mode::kOffline, Mode::kGraph}) {
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  TurnLog log;
  std::vector<TurnTag> tags;
  for (int graph = 0; graph < 2; ++graph)
    for (int i = 0; i < subjects_count; ++i) tags.push_back({&log, graph == 1, i});
  std::vector<Subject> subjects;
  for (int i = 0; i < subjects_count; ++i)
    subjects.push_back({[&tags, i, subjects_count](cudaStream_t s) {
                          cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
                          RLGEMM_CUDA_CHECK(cudaStreamIsCapturing(s, &status));
                          gpu_spin(s, 0);
                          const bool graph = status == cudaStreamCaptureStatusActive;
                          RLGEMM_CUDA_CHECK(
                              cudaLaunchHostFunc(s, log_turn, &tags[size_t(graph) * size_t(subjects_count) + size_t(i)]));
                        },
                        {}, "subject " + std::to_string(i)});
  const auto t = time_modes_side_by_side(modes, subjects, nullptr, stream, o);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(t.size(), 2u);
  for (const auto& mode : t)
    for (const Timing& timing : mode) EXPECT_EQ(int(timing.rounds_us.size()), o.batches);
  cudaStreamDestroy(stream);
  std::lock_guard lock(log.mutex);
  std::vector<std::pair<bool, int>> stretches;
  for (size_t start = 0; start < log.calls.size();) {
    size_t end = start;
    std::set<int> seen;
    while (end < log.calls.size() && log.calls[end].first == log.calls[start].first) seen.insert(log.calls[end++].second);
    stretches.emplace_back(log.calls[start].first, int(seen.size()));
    start = end;
  }
  return stretches;
}

// Short rounds for logged_stretches: one warm-up round, six timed; the modes shared or apart.
TimingOptions logged_options(bool modes_apart) {
  TimingOptions o;
  o.seed = 7;
  o.batch_target_us = 100;
  o.batches = 6;
  o.max_warmup_batches = 1;
  o.modes_apart = modes_apart;
  return o;
}

TEST(TimingGpu, ARoundTimesEachModesTurnsTogether) {
  RLGEMM_REQUIRE_GPU();
  constexpr int kSubjects = 6;
  const TimingOptions o = logged_options(false);
  const auto stretches = logged_stretches(o, kSubjects);
  ASSERT_FALSE(stretches.empty());
  for (size_t k = 0; k < stretches.size(); ++k)
    EXPECT_EQ(stretches[k].second, kSubjects) << "stretch " << k << " of " << (stretches[k].first ? "graph" : "offline")
                                              << " calls";
  // Each round's two stretches (fewer where rounds meet in the same mode), and the set-up's.
  EXPECT_LE(int(stretches.size()), 2 * (o.batches + 1) + 2);
  EXPECT_GE(int(stretches.size()), o.batches);  // the modes take turns within the rounds
}

// With TimingOptions::modes_apart, every round of the first mode given comes before every round of the second:
// after the set-up, one stretch of offline calls, then one of graph replays, each holding every subject, or the
// other way round where graph is given first; shared_rounds names the make.
TEST(TimingGpu, ModesApartTimeEveryRoundOfOneModeBeforeTheOthers) {
  RLGEMM_REQUIRE_GPU();
  constexpr int kSubjects = 6;
  TimingOptions o = logged_options(true);
  const auto stretches = logged_stretches(o, kSubjects);
  // Offline (its set-up and rounds), then graph (its set-up's replays and rounds; a capture runs nothing).
  ASSERT_EQ(stretches.size(), 2u);
  EXPECT_FALSE(stretches.front().first);
  EXPECT_TRUE(stretches.back().first);
  for (const auto& stretch : stretches) EXPECT_EQ(stretch.second, kSubjects);
  const auto graph_first = logged_stretches(o, kSubjects, {Mode::kGraph, Mode::kOffline});
  ASSERT_EQ(graph_first.size(), 2u);
  EXPECT_TRUE(graph_first.front().first);
  EXPECT_FALSE(graph_first.back().first);
  for (const auto& stretch : graph_first) EXPECT_EQ(stretch.second, kSubjects);
  EXPECT_STREQ(shared_rounds(o), kModesApart);
  o.modes_apart = false;
  EXPECT_STREQ(shared_rounds(o), kSharedRounds);
}

// Through the timing loop itself: the subjects take their turns in the orders the seed gives, in every mode.
TEST(TimingGpu, SubjectsTakeTheirTurnsInTheSeededShuffledOrder) {
  RLGEMM_REQUIRE_GPU();
  for (Mode mode : {Mode::kOffline, Mode::kServer, Mode::kCudal2}) {
    auto calls_with_seed = [&](uint64_t seed) {
      std::vector<int> calls;
      std::vector<Subject> subjects;
      for (int i = 0; i < 3; ++i) subjects.push_back({[&calls, i](cudaStream_t) { calls.push_back(i); }, {}, "s"});
      TimingOptions o;
      o.batch_target_us = 0.1;  // one call a batch, whatever a call takes
      o.batches = 6;
      o.max_warmup_batches = 1;  // no warm-up rounds: their number depends on the times
      o.samples = 6;
      o.gap_mean_ms = 0.01;
      o.seed = seed;
      time_side_by_side(mode, subjects, nullptr, nullptr, o);
      return calls;
    };
    const auto first = calls_with_seed(5);
    EXPECT_EQ(first, calls_with_seed(5)) << to_string(mode);
    EXPECT_NE(first, calls_with_seed(6)) << to_string(mode);
  }
}

// Graph mode against kernels of known length: a kernel that spins for 20 us on the GPU's timer takes 20 us a
// call in a graph (the graph's launch gaps are a fraction of a microsecond), and a graph holds enough of them
// for a replay of at least the batch target. A kernel that does nothing takes less GPU time than its eager
// launch costs the host, so graph mode times it below offline mode.
TEST(TimingGpu, GraphModeTimesAKnownKernel) {
  RLGEMM_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const std::vector<Subject> subjects = spin_subjects();
  TimingOptions o;
  o.seed = 3;
  const auto graph = time_side_by_side(Mode::kGraph, subjects, nullptr, stream, o);
  const auto offline = time_side_by_side(Mode::kOffline, subjects, nullptr, stream, o);
  EXPECT_GE(graph[0].time_us, 20.0);
  EXPECT_LE(graph[0].time_us, 21.5);
  EXPECT_GE(graph[0].batch, 45);  // 1000 us of 20 us calls
  EXPECT_GE(graph[0].batch * graph[0].time_us, o.batch_target_us * 0.9);
  EXPECT_EQ(int(graph[0].rounds_us.size()), o.batches);
  EXPECT_LT(graph[1].time_us, offline[1].time_us) << "graph " << graph[1].time_us << " us, offline "
                                                  << offline[1].time_us << " us";
  // The legacy default stream, which cannot capture, replays graphs captured on a stream of their own.
  const auto legacy = time_side_by_side(Mode::kGraph, {subjects[0]}, nullptr, nullptr, o);
  EXPECT_NEAR(legacy[0].time_us, graph[0].time_us, 1.0);
  cudaStreamDestroy(stream);
}

// Graph-cold: a graph holds whole rotations of the input sets, in order, so that every set is called equally
// often and each call's inputs were last touched a rotation before. Seven sets that spin 1..7 us: a call takes
// their mean, 4 us, on the GPU.
TEST(TimingGpu, GraphColdReplaysWholeRotations) {
  RLGEMM_REQUIRE_GPU();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  constexpr int kSets = 7;
  std::vector<int> captured(kSets, 0);
  Subject subject{[](cudaStream_t s) { gpu_spin(s, 4); }, {}, "seven sets"};
  for (int k = 0; k < kSets; ++k)
    subject.rotate.push_back([k, &captured](cudaStream_t s) {
      ++captured[size_t(k)];
      gpu_spin(s, k + 1);
    });
  TimingOptions o;
  o.seed = 5;
  const auto t = time_side_by_side(Mode::kGraphCold, {subject}, nullptr, stream, o);
  EXPECT_EQ(t[0].batch % kSets, 0) << t[0].batch;
  EXPECT_GE(t[0].batch * t[0].time_us, o.batch_target_us * 0.9);
  for (int k = 1; k < kSets; ++k) EXPECT_EQ(captured[size_t(k)], captured[0]) << "set " << k;
  EXPECT_GE(t[0].time_us, 4.0);
  EXPECT_LE(t[0].time_us, 5.5);
  cudaStreamDestroy(stream);
}

// A subject whose call breaks a capture (a synchronization) is named, and the process goes on.
TEST(TimingGpu, GraphModeNamesASubjectThatCannotBeCaptured) {
  RLGEMM_REQUIRE_GPU();
  const std::vector<Subject> subjects = {{[](cudaStream_t s) { gpu_spin(s, 1); }, {}, "spin"},
                                         {[](cudaStream_t s) {
                                            gpu_spin(s, 1);
                                            RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
                                          },
                                          {},
                                          "a synchronizing call"}};
  try {
    time_side_by_side(Mode::kGraph, subjects, nullptr, nullptr, TimingOptions{});
    FAIL() << "a synchronizing call was captured";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a synchronizing call cannot be captured in a CUDA graph"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  const auto after = time_side_by_side(Mode::kGraph, {subjects[0]}, nullptr, nullptr, TimingOptions{});
  EXPECT_GT(after[0].time_us, 0);
}

// A subject that launches on a stream of its own instead of the one it is given runs at once, outside the
// capture: its graph would be empty and would time nothing. Graph mode refuses it by name. (The foreign-kernel
// worker once did this: its graph "gains" of 13-23% on kernels of 119-158 us were empty replays.)
TEST(TimingGpu, GraphModeRefusesASubjectThatCapturesNothing) {
  RLGEMM_REQUIRE_GPU();
  cudaStream_t own = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking), cudaSuccess);
  const std::vector<Subject> subjects = {{[](cudaStream_t s) { gpu_spin(s, 1); }, {}, "spin"},
                                         {[own](cudaStream_t) { gpu_spin(own, 1); }, {}, "a call on its own stream"}};
  try {
    time_side_by_side(Mode::kGraph, subjects, nullptr, nullptr, TimingOptions{});
    FAIL() << "a call that captured nothing was timed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a call on its own stream cannot be captured in a CUDA graph: nothing was "
                                         "captured"),
              std::string::npos)
        << e.what();
  }
  ASSERT_EQ(cudaStreamSynchronize(own), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  cudaStreamDestroy(own);
}

}  // namespace
}  // namespace rlgemm::bench
