// How the harness turns calls into times. Each mode answers a different question:
//   offline  back-to-back calls, CUDA events: the throughput of a busy GPU with inputs hot in L2.
//   server   each call alone after an idle gap drawn from an exponential distribution: a request arriving
//            at a quiet GPU (Poisson arrivals, as CUDA-L2's server mode).
//   cold     back to back, but rotating among input sets totalling >= 2x L2: no call finds its inputs in L2.
//   cudal2   one call between device synchronizations, host wall clock, inputs freshly written: CUDA-L2's
//            published method, so that their figures can sit beside ours.
//   graph    the GPU's own time: N back-to-back calls captured in one CUDA graph (N chosen so that a replay
//            lasts at least batch_target_us), replays interleaved like offline batches, the median replay over
//            N. No host launch cost is in it: what a server that replays captured decode steps pays, and the
//            only mode in which a kernel can be called faster than another for its own sake.
//   graph-cold  graph, but the captured calls rotate among the cold mode's input sets (a replay holds every set
//            at least once, in order): the GPU's own time when no call finds its inputs in L2, as in a model whose
//            weights are read once per step. In graph mode the same inputs, replayed, stay in L2 when they fit.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "core/gain_interval.h"

namespace rlgemm::bench {

enum class Mode { kOffline, kServer, kCold, kCudal2, kGraph, kGraphCold };

std::string_view to_string(Mode mode);
Mode parse_mode(std::string_view text);                 // throws Error naming the accepted modes
std::vector<Mode> parse_modes(const std::vector<std::string>& names);

struct TimingOptions {
  double batch_target_us = 1000;  // offline/cold/graph: a batch (a replay) lasts at least this long
  int batches = 7;                // offline/cold/graph: timed batches; the median batch gives the time
  int max_warmup_batches = 30;    // offline/cold/graph: warm-up stops when two batches agree within 2%
  int samples = 15;               // server/cudal2: timed calls
  double gap_mean_ms = 10.0;      // server: mean idle gap before each call
  uint64_t seed = 1;              // every mode: the order of the subjects in each round; server: the gaps
  // offline and graph timed together (time_modes_side_by_side): each mode in rounds of its own, every round of the
  // first mode given, then every round of the second, instead of rounds that hold both (modes_round). The subjects
  // of a mode are compared side by side either way; apart, no turn of one mode falls among the other's rounds,
  // though the second mode's rounds start right after the first's (kModesApart).
  bool modes_apart = false;
};

struct Timing {
  double time_us = 0;  // per call: median (offline, cold, server) or mean (cudal2, as published)
  double min_us = 0;
  double max_us = 0;
  int samples = 0;     // batches or calls timed
  int batch = 1;       // calls per batch (graph: calls per captured graph)
  // Per call, of every timed batch (offline, cold) or call (server, cudal2), in round order: entry r of two
  // subjects' lists comes from the same round, for paired comparisons.
  std::vector<double> rounds_us;
};

using Call = std::function<void(cudaStream_t)>;

// One implementation to time: `call` runs it on the timed operands; for cold mode, `rotate[i]` runs it on
// input set i.
struct Subject {
  Call call;
  std::vector<Call> rotate;
  std::string name;  // for messages (a hang names the implementation)
};

// The order in which the subjects take their turns, shuffled afresh for every round from one seed. A call
// finds the GPU as the call before it left it (instruction and constant caches, TLBs, clocks after an idle
// gap), so in a fixed order one subject would always follow the same other one: two launches of the very
// same cuBLASLt algorithm measured 6-23% apart in server mode that way. Shuffled, every subject follows every
// other alike, and the same seed gives the same orders.
class RoundOrder {
 public:
  RoundOrder(size_t subjects, uint64_t seed);
  // The next round's order: a permutation of 0 .. subjects-1.
  const std::vector<size_t>& next();

 private:
  std::mt19937_64 rng_;
  std::vector<size_t> order_;
};

// One round of several modes' turns for `n` subjects (time_modes_side_by_side): turn m * n + i is subject i's
// turn in mode m. A mode's turns come together, in an order `order` (over n subjects) shuffles afresh, the modes'
// order turning with `round` (round r starts with mode r mod modes); with more than one mode, each mode's turns
// open with an untimed lead-in turn, numbered modes * n + (m * n + i) for subject i's turn in mode m (i: the
// mode's first subject this round), so that no timed turn follows one of another mode.
std::vector<size_t> modes_round(size_t n, size_t modes, size_t round, RoundOrder& order);
// How offline and graph share their rounds in this build, as a run's JSON records it ("timing":
// "shared_rounds"); a run recorded without it shuffled the two modes' turns together.
inline constexpr const char* kSharedRounds = "a mode's turns together";
inline constexpr const char* kSharedRoundsBefore = "turns of both modes shuffled together";
// The same with TimingOptions::modes_apart.
inline constexpr const char* kModesApart = "each mode in rounds of its own";
// How offline and graph share their rounds under `o`: kSharedRounds or kModesApart.
const char* shared_rounds(const TimingOptions& o);

// Times every subject in `mode`, side by side: rounds in which each subject takes its turn (one batch, or
// one sample) in a shuffled order (RoundOrder, from options.seed), so that a slow spell of the machine
// (clocks, host scheduling) falls on all of them alike rather than on whichever happened to be measured
// then, and no subject always runs after the same neighbour. In server mode every single call waits its own
// idle gap first, of one length for all subjects of a round (an exponential draw per round). `refresh`
// (cudal2 only) rewrites the inputs before each call, untimed. In graph mode every subject's calls must be
// capturable (no allocation but stream-ordered, no synchronization, nothing loaded): a call that breaks the
// capture throws Error(kRuntime) naming the subject.

std::vector<Timing> time_side_by_side(Mode mode, const std::vector<Subject>& subjects, const Call& refresh,
                                      cudaStream_t stream, const TimingOptions& options);

// Several modes at once: offline and graph, where both are among `modes`, timed in the same rounds (each round
// every subject's offline batch and graph replay: a mode's turns together, shuffled, each mode's opened by an
// untimed turn of its own and the modes' order turning round by round), so that neither mode is timed first
// (the mode timed first ran on a cooler GPU: up to 5% apart on an H200, bench/results/h200/agree-probe.txt) and
// no timed turn follows one of the other mode (an offline batch slowed the graph replay after it, for some
// cuBLASLt kernels by 7%: bench/results/h200/reversal/); with options.modes_apart, every round of the first of
// them, then every round of the second, each mode's subjects still side by side; the others after them, each on
// its own (cold's turns would sweep the L2 that offline's inputs sit in).
// Result m holds modes[m]'s timings, one per subject. Throws Error(kInvalidInput) for a mode asked for twice.
std::vector<std::vector<Timing>> time_modes_side_by_side(const std::vector<Mode>& modes,
                                                         const std::vector<Subject>& subjects, const Call& refresh,
                                                         cudaStream_t stream, const TimingOptions& options);

// A short measurement for screening candidates side by side (5 batches of 300 us, after a warm-up until the
// rounds agree, at most 10).
TimingOptions screen_options();

// Runs `call` once as a CUDA graph: captured on `stream` (thread-local mode), instantiated, launched there and
// waited for; the graph is freed however that ends. For a first launch that happens inside a capture.
void launch_captured_once(const Call& call, cudaStream_t stream);

// Keeps the GPU busy on `stream` for about `microseconds` (one thread spinning on the global timer): queued
// before a timed region, it lets the host finish submitting the region's work while the GPU is still busy,
// so that the region's first event does not time the host's launch.
void gpu_spin(cudaStream_t stream, double microseconds);

// Median of a non-empty list (core/gain_interval.h).
using rlgemm::median;

}  // namespace rlgemm::bench
