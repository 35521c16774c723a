// What one measurement of a kernel design on one problem produced, as the tuner records it: status, timing
// statistics, compile facts. Plain values shared by the measuring backends, the worker protocol and the store.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rlgemm {

// How samples were taken (the harness's methods): back to back (offline: the GPU's time and the host's launch
// cost), with idle gaps between calls (server), or as replays of calls captured in a CUDA graph (graph: the
// GPU's time alone, what a kernel is faster for its own sake in; the tuner's default).
enum class TimingMode { kOffline, kServer, kGraph };

std::string_view to_string(TimingMode mode);
TimingMode parse_timing_mode(std::string_view text);  // "offline" | "server" | "graph"

// The outcome of one candidate. Everything but kOk earns the tuner's fixed penalty.
enum class MeasureStatus {
  kOk,       // compiled, passed the correctness gate, timed
  kWrong,    // ran but failed the correctness gate
  kFailed,   // could not be built or launched (compiler error, invalid launch, compiler crash)
  kTimeout,  // the watchdog fired: a hang in the compiler or the kernel
  kCrashed,  // the worker died (illegal memory access, segfault, abort)
};

std::string_view to_string(MeasureStatus status);
MeasureStatus parse_measure_status(std::string_view text);

struct TimingStats {
  double median_us = 0;
  double min_us = 0;
  double max_us = 0;
  int samples = 0;
};

// A candidate timed side by side with the reference (the floor's cuBLASLt choice, lt_auto) in the same
// interleaved rounds of one process: the only comparison the tuner learns from. A ratio of two times taken at
// different moments measures the GPU's clocks and power state as much as the kernels (the same cuBLASLt kernel
// drifted 357 -> 397 us between such moments on an H200); within a round both sides see the same GPU.
struct PairedGain {
  double reference_us = 0;  // the reference's median over the rounds
  double log_ratio = 0;     // mean over the rounds of ln(t_reference / t_candidate): the tuner's reward
  double low = 0;           // the 95% interval of the gain exp(log_ratio) - 1 (core/gain_interval.h)
  double high = 0;
  int rounds = 0;
  double speedup() const;   // exp(log_ratio)
  // Faster than the reference beyond the interval: its lower bound is above zero.
  bool better() const { return rounds >= 2 && low > 0; }
};

// Where a measurement's time went on the measuring side, in seconds. The work done once per problem (its
// operands and their fp64 reference; the reference's choice among cuBLASLt's candidates) counts with the
// measurement that needed it first. Measurement::compile_seconds is each kernel's own compile time, summed over
// kernels that a batch compiles at once; `build` is the wall time those concurrent compiles took.
struct PhaseSeconds {
  double operands = 0;   // the problem's operands and their fp64 reference, the correctness gate's inputs
  double reference = 0;  // the reference chosen (lt_auto's candidates timed in the mode's way) and checked
  double check = 0;      // the candidate prepared and put through the correctness gate
  double rounds = 0;     // the interleaved timed rounds, the candidate beside the reference
  double build = 0;      // a batch's kernels generated and compiled ahead, concurrently (wall time; with the batch's first)
  double load = 0;       // the candidate's kernel loaded onto the device (compiled first when not built ahead)
  double total() const { return operands + reference + check + rounds + build + load; }
  PhaseSeconds& operator+=(const PhaseSeconds& other);
};

struct Measurement {
  MeasureStatus status = MeasureStatus::kFailed;
  std::string error;          // why, when status is not kOk
  std::string source_hash;    // content hash of the generated source ("" when nothing was generated)
  double compile_seconds = 0; // 0 when a compiled design was reused
  TimingStats timing;         // valid when status is kOk
  // When status is kOk: the comparison with the reference in the same rounds. A row of an older database,
  // whose reference was timed apart, has none: it is unpaired, and nothing trusts its time.
  std::optional<PairedGain> paired;
  PhaseSeconds seconds;       // where the measuring took its time (not stored in the database)
};

// The identity of the GPU a measurement was taken on; identical GPUs of one machine share one identity.
struct GpuIdentity {
  std::string name;
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_clock_khz = 0;
  int mem_clock_khz = 0;
  int driver_version = 0;
  int smem_per_block_optin = 0;

  friend bool operator==(const GpuIdentity&, const GpuIdentity&) = default;
};

struct DeviceInfo;  // core/cuda_util.h
// The identity of an opened device.
GpuIdentity identity_of(const DeviceInfo& device);

}  // namespace rlgemm
