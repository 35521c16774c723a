// `rlgemm bench`: every implementation through the correctness gate, then timed in each mode, one CSV row
// per (shape, layout, implementation, mode), a JSON of the run's identity beside it, a summary at the end.
#pragma once

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/implementation.h"
#include "bench/results.h"
#include "bench/timing.h"
#include "bench/torch_worker.h"
#include "core/seed.h"
#include "rlgemm/problem.h"

namespace rlgemm::bench {

struct BenchConfig {
  std::vector<Shape> shapes;
  std::vector<Layout> layouts;
  std::vector<DType> dtypes{DType::kF16};  // each shape is measured in each element type, then each layout
  std::vector<Mode> modes;
  // Measured in this order; lt_auto is always measured (it is every speedup's denominator) but its rows are
  // written only when `write_lt_auto` is set.
  std::vector<ImplementationPtr> implementations;
  bool write_lt_auto = true;
  // torch.matmul, measured in its own process after the implementations above; none when null.
  std::unique_ptr<TorchWorker> torch;
  TimingOptions timing;
  std::string out_csv;       // the JSON goes beside it, same stem
  std::string command_line;  // recorded in the JSON
  nlohmann::json extra;      // more facts for the JSON (e.g. the designs' compile times), merged in
  int device = 0;
  int shard_index = 0;       // measure shapes i with i % shard_count == shard_index
  int shard_count = 1;
  bool progress = true;
  // Continue a run that stopped (a hang, Ctrl-C, a crash): problems already in out_csv are kept and not
  // measured again; the new rows are appended. A row torn by a kill is dropped with its problem's other rows.
  bool resume = false;
  // The run's seed: each problem's inputs (problem_seed) and every round's order of the subjects derive from
  // it, so that a run (or one problem of it, measured alone) can be replayed. Recorded in the JSON.
  uint64_t seed = 1;
  // The fairness control: lt_twin, lt_auto's own algorithm under another name, measured beside the rest.
  bool control = false;
};


enum class RunStatus { kComplete, kInterrupted, kFailed };

struct BenchOutcome {
  RunStatus status = RunStatus::kComplete;
  std::string message;  // why it failed, when it did
  std::vector<Row> rows;
};

// Before any GPU work: whether the run `config.out_csv` holds may be resumed by this build with config.modes and
// config.timing. Throws Error(kInvalidInput) where its JSON says that its offline and graph rows were timed in
// rounds of another make than this run's (shared_rounds(config.timing): kSharedRounds, or kModesApart) and this
// run times both modes: a resumed file would hold problems
// timed two ways, and a figure over all of them would be neither. No JSON beside it: nothing to say.
void check_resumable_timing(const BenchConfig& config);

// Runs the benchmark; stops cleanly (keeping every row measured so far, in the CSV and the outcome) when
// `stop` becomes true (Ctrl-C) or when the device fails (out of memory, a lost context).
BenchOutcome run_bench(BenchConfig& config, const std::atomic<bool>& stop);

}  // namespace rlgemm::bench
