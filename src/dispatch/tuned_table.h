// Tuned tables: the measured-best kernel design per (GPU, shape, layout, element type), as the dispatcher reads
// them.
//
// A tuned table is a CSV file, data/tuned/<gpu-key>.csv in the repository (every file there is built into
// the library), with the header
//   gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto,cublaslt_candidate,dtype
// gpu is the device name as the CUDA runtime reports it ("NVIDIA H100 80GB HBM3"); design is the canonical
// text form (include/rlgemm/design.h); time_us the design's measured time; speedup_vs_lt_auto the lt_auto
// time divided by time_us, empty when no reference was measured; cublaslt_candidate, possibly empty, the
// index of the cuBLASLt algorithm lt_auto measured fastest for the problem among the heuristic's candidates
// (asked for by bench::LtProblem, in the harness and in the cuBLASLt route alike), which the cuBLASLt route
// then launches; dtype the element type of the problem (fp16 or bf16), which the design's must be. Tables
// without the last column (rows of fp16) or the last two (the header up to speedup_vs_lt_auto) are read too.
// Blank
// lines and lines starting with '#' are skipped. The same rows can also come from a tuning database (the
// store's best_designs view): the shapes whose best design measured faster than lt_auto beyond the 95% interval
// of its paired gain (load_tuning_database).
#pragma once

#include <cstdint>
#include <filesystem>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "rlgemm/design.h"
#include "rlgemm/problem.h"
#include "store/measurement.h"

namespace rlgemm::dispatch {

struct TunedRow {
  std::string gpu;
  Problem problem;
  Design design;
  double time_us = 0;
  std::optional<double> speedup_vs_lt_auto;  // lt_auto time / time_us
  std::optional<int> cublaslt_candidate;     // the cuBLASLt heuristic candidate lt_auto measured fastest
  std::string source;                        // "file:line", for messages
};

inline constexpr const char* kTunedTableHeader =
    "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto,cublaslt_candidate,dtype";
// The header of tables written before the element type was recorded (fp16 rows).
inline constexpr const char* kTunedTableHeaderWithoutDtype =
    "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto,cublaslt_candidate";
// The header of tables written before the cuBLASLt candidate was recorded.
inline constexpr const char* kTunedTableHeaderWithoutCandidate = "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto";

// Parses a tuned table. Throws Error(kInvalidInput) naming `source`, the line number and the broken rule
// (header, column count, number, shape rules, layout, design syntax, element type, duplicate row).
std::vector<TunedRow> parse_tuned_table(std::istream& in, const std::string& source);
std::vector<TunedRow> load_tuned_table(const std::filesystem::path& path);

// Writes `rows` as a tuned table (header, then one line per row: time_us with 3 decimals, the speedup with 4
// or empty), atomically: a temporary file renamed over `path`. Throws Error(kRuntime) when it cannot.
void save_tuned_table(const std::filesystem::path& path, const std::vector<TunedRow>& rows);

// Every table built into the library (data/tuned/*.csv at build time), concatenated.
std::vector<TunedRow> embedded_tuned_rows();
// The names of the built-in tables ("h100.csv", ...).
std::vector<std::string> embedded_table_names();

// The best correct design per (GPU, shape, layout, dtype) recorded in a tuning database in `mode`
// ("offline" | "server" | "graph"), where it measured faster than the reference beyond the 95% interval of its
// paired gain. Throws Error(kInvalidInput) when the file does not exist or is not a database.
std::vector<TunedRow> load_tuning_database(const std::filesystem::path& path, const std::string& mode);

// The same over several modes, in order of preference: per (GPU, shape, layout, dtype), the best design of the
// first of `modes` in which one measured faster beyond its interval (its time and paired speedup are that
// mode's). A table of these rows claims only what was measured side by side with the reference (`rlgemm
// tuned-table`); the handle then checks each way of calling again at a shape's first use.
std::vector<TunedRow> load_tuning_database(const std::filesystem::path& path, const std::vector<TimingMode>& modes);

// The same over several databases taken as one body of evidence: per (GPU, shape, layout, dtype), the first of
// `modes` in which any of them holds a design faster beyond its interval, and among those the largest paired gain
// over lt_auto. Each gain was measured side by side with lt_auto in its own run, so gains from different runs
// are compared as ratios; the handle checks the row again at the shape's first use. This lets a new tune (say,
// in graph mode) add to the evidence behind an earlier table (its verification database) without losing the
// rows only the earlier one holds. `held_in_several`, where given, gets how many of the rows were held (in a listed
// mode) in more than one of the databases.
std::vector<TunedRow> load_tuning_databases(const std::vector<std::filesystem::path>& paths,
                                            const std::vector<TimingMode>& modes, size_t* held_in_several = nullptr);

// The rows of one GPU.
std::vector<TunedRow> rows_for_gpu(const std::vector<TunedRow>& rows, const std::string& gpu);

// The index of the row of (gpu, problem) in `rows`, or rows.size() when there is none.
size_t row_index(const std::vector<TunedRow>& rows, const std::string& gpu, const Problem& problem);

}  // namespace rlgemm::dispatch
