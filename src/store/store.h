// The tuning database: one SQLite file holding every measurement the tuner made, the lt_auto reference
// time per problem, and the GPUs they were taken on.
//
// Several tuners may share one file at once (one per machine or per GPU): the file runs in WAL mode with a
// busy timeout, every write is one short IMMEDIATE transaction, and a measurement's key
// (gpu, M, N, K, layout, design, mode) is UNIQUE, so a race between two tuners keeps exactly one row.
//
// Schema (version kSchemaVersion, recorded in schema_version):
//   gpus(id, name, sm_count, cc_major, cc_minor, sm_clock_khz, mem_clock_khz, driver_version, smem_optin)
//   measurements(id, gpu_id, m, n, k, layout, design, mode, status, error, source_hash, compile_seconds,
//                correct, median_us, min_us, max_us, samples, reward, strategy, created_at, dtype)
//   reference_times(gpu_id, m, n, k, layout, dtype, mode, median_us, min_us, max_us, samples, created_at)
//   view best_designs: per (gpu, M, N, K, layout, dtype, mode) the correct design of the highest paired gain
//                      over the reference, with that gain and its interval (see version 5).
//   (dtype, fp16 or bf16, since version 3: the rows of older files are fp16)
//   optimized_cubins(gpu_id, m, n, k, layout, design, kernel, source_key, cubin, time_before_us, time_after_us,
//                    gain, moves, created_at, dtype)                                  (since version 2)
//     a design's cubin with its SASS rescheduled by `rlgemm sass-opt`, verified bitwise identical in output
//     and re-measured faster than the compiled one on this GPU and problem. source_key is the compile-cache
//     key of the cubin it was derived from: a user loads it only while compiling the design still gives
//     that key (the generator or NVRTC changed otherwise, and the rescheduled cubin is stale).
//   evaluations(id, gpu_id, m, n, k, layout, kind, submission, submission_sha256, verdict, reason, time_us,
//               speedup, record, created_at)                                            (since version 4)
//     every submission the evaluation service (`rlgemm serve`) judged, with its JSON record; gpu_id is NULL
//     for one rejected before reaching a GPU (a compile error).
//   (since version 5) mode may be graph, and measurements gain paired, reference_us, log_ratio, gain_low,
//     gain_high, rounds: whether the row was timed side by side with the reference in the same interleaved
//     rounds, and what those rounds gave (PairedGain). Older rows are unpaired: their failures still count, their
//     times are trusted by nothing (measured, find, measurements and best_designs leave them out, and a paired
//     measurement of the same key replaces them). best_designs ranks by the paired log ratio, not by time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rlgemm/problem.h"
#include "store/measurement.h"

struct sqlite3;

namespace rlgemm {

struct MeasurementRecord {
  int64_t gpu_id = 0;
  Problem problem;
  std::string design;  // canonical text form
  TimingMode mode = TimingMode::kOffline;
  Measurement measurement;
  double reward = 0;
  std::string strategy;
  std::string created_at;  // UTC, ISO 8601; filled by the store
};

// One rescheduled cubin (see optimized_cubins above).
struct OptimizedCubin {
  int64_t gpu_id = 0;
  Problem problem;
  std::string design;      // canonical text form
  std::string kernel;      // the kernel (function) name inside the cubin
  std::string source_key;  // compile-cache key of the cubin that was rescheduled
  std::vector<uint8_t> cubin;
  double time_before_us = 0;  // the compiled cubin, re-measured side by side with the rescheduled one
  double time_after_us = 0;
  double gain = 0;            // time_before / time_after - 1
  // The same two re-timed in CUDA graphs (the GPU's own time): the gain and its 95% interval's lower bound.
  // Empty for cubins recorded before schedules were re-timed in graphs; a handle serves a cubin only where
  // graph_gain_low > 0.
  std::optional<double> graph_gain;
  std::optional<double> graph_gain_low;
  std::string moves;          // the moves from the compiled schedule, one per line
  std::string created_at;     // UTC, ISO 8601; filled by the store
};

// One evaluation of the service (see evaluations above).
struct EvaluationRecord {
  int64_t id = 0;                 // filled by the store
  std::optional<int64_t> gpu_id;
  Problem problem;
  std::string kind;               // "source" | "design"
  std::string submission;
  std::string submission_sha256;
  std::string verdict;            // "accepted" | "rejected"
  std::string reason;             // the rejection's reason, "" when accepted
  std::optional<double> time_us;
  std::optional<double> speedup;  // over the best vendor call
  std::string record;             // the JSON record as returned to the submitter
  std::string created_at;         // UTC, ISO 8601; filled by the store
};

struct BestDesign {
  int64_t gpu_id = 0;
  std::string gpu_name;
  Problem problem;
  TimingMode mode = TimingMode::kOffline;
  std::string design;
  double median_us = 0;
  std::optional<double> reference_us;  // the reference's time in the design's own rounds
  std::optional<double> speedup;       // the paired ratio exp(log_ratio)
  PairedGain paired;                   // the comparison with the reference (better(): beyond its interval)
  int64_t measurements = 0;            // rows of this (gpu, problem, mode), every status
};

class Store {
 public:
  static constexpr int kSchemaVersion = 6;

  // Opens or creates the database. Throws Error(kInvalidInput) when the file holds a schema this build does
  // not know (newer, or not an rlgemm database), Error(kRuntime) on I/O failures.
  explicit Store(const std::filesystem::path& file);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::filesystem::path& path() const { return path_; }
  int schema_version();
  std::string journal_mode();

  // The id of this GPU identity, inserting it on first use.
  int64_t gpu_id(const GpuIdentity& gpu);
  // Every GPU identity recorded, with its id, by id.
  std::vector<std::pair<int64_t, GpuIdentity>> gpus();

  std::optional<TimingStats> reference(int64_t gpu_id, const Problem& problem, TimingMode mode);
  void put_reference(int64_t gpu_id, const Problem& problem, TimingMode mode, const TimingStats& stats);

  // Resume: was this design measured already on this GPU, problem and mode (a paired time, or any failure)?
  bool measured(int64_t gpu_id, const Problem& problem, const std::string& design, TimingMode mode);
  std::optional<MeasurementRecord> find(int64_t gpu_id, const Problem& problem, const std::string& design,
                                        TimingMode mode);
  // Inserts the record; returns false (and changes nothing) when its key was recorded already, except that an
  // unpaired time of the key is replaced.
  bool record(const MeasurementRecord& record);
  // A second paired measurement of a recorded design (the tuner's confirmation of a claimed gain): the key keeps
  // the weaker of the two, the one whose gain has the lower bound of its interval, its strategy marked
  // kConfirmedSuffix, so that a gain stands only where it held in two measurements apart; a second measurement that
  // failed is kept as the weaker. Returns the record kept. Throws Error(kInvalidInput) when the key holds no paired
  // measurement or `again` is an unpaired time.
  MeasurementRecord confirm(const MeasurementRecord& again);
  static constexpr const char* kConfirmedSuffix = " (confirmed)";
  // Every measurement of a problem on a GPU in one mode that may be used (paired, or a failure), oldest first.
  std::vector<MeasurementRecord> measurements(int64_t gpu_id, const Problem& problem, TimingMode mode);
  int64_t count_measurements();
  int64_t count_measurements(int64_t gpu_id, const Problem& problem, TimingMode mode);

  std::optional<BestDesign> best(int64_t gpu_id, const Problem& problem, TimingMode mode);
  std::vector<BestDesign> best_designs();

  // Keeps the rescheduled cubin of (gpu, problem, design): inserts it, or replaces the one recorded only when
  // this one's gain is higher. Returns whether it was stored. Throws Error(kInvalidInput) for an empty cubin
  // or a gain that is not positive (an unimproved kernel has nothing to store).
  bool put_optimized_cubin(const OptimizedCubin& record);
  std::optional<OptimizedCubin> optimized_cubin(int64_t gpu_id, const Problem& problem, const std::string& design);
  // Every rescheduled cubin recorded for GPUs of this name (as the CUDA runtime reports it).
  std::vector<OptimizedCubin> optimized_cubins(const std::string& gpu_name);

  // Appends an evaluation; returns its id.
  int64_t record_evaluation(const EvaluationRecord& record);
  // The latest `limit` evaluations, newest first.
  std::vector<EvaluationRecord> evaluations(int64_t limit);

  // "ok" when SQLite's integrity check passes, its report otherwise.
  std::string integrity_check();

 private:
  void migrate();
  bool insert_measurement(const MeasurementRecord& record);  // record() inside a transaction of the caller's
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
};

// A tuning database opened for reading without changing its file: opening a Store switches the file to WAL and
// migrates its schema, and the databases a table, a predictor or a handle reads are often records (committed
// results) that must stay byte for byte as they are. This opens a private copy (with its -wal and -shm, where
// present) in a temporary folder, removed with the object. Throws Error(kInvalidInput) when `path` is not a file.
class StoreReadCopy {
 public:
  explicit StoreReadCopy(const std::filesystem::path& path);
  ~StoreReadCopy();
  StoreReadCopy(const StoreReadCopy&) = delete;
  StoreReadCopy& operator=(const StoreReadCopy&) = delete;
  Store& operator*() { return *store_; }
  Store* operator->() { return store_.get(); }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<Store> store_;
};

}  // namespace rlgemm
