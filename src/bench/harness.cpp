#include "bench/harness.h"

#include <algorithm>

#include <cublasLt.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>
#include <nlohmann/json.hpp>
#include <nvtx3/nvtx3.hpp>

#include "bench/correctness.h"
#include "bench/device_data.h"
#include "core/cuda_util.h"
#include "rlgemm/error.h"

namespace rlgemm::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::string now_iso8601() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::filesystem::path json_path_for(const std::string& csv) {
  std::filesystem::path p(csv);
  return p.replace_extension(".json");
}

// For cold mode: enough input sets of one problem to exceed twice the L2.
class ColdSets {
 public:
  std::vector<half*> cold_sets;  // a, b, c pointers, three per set
  size_t cold_set_elems[3] = {0, 0, 0};

  ~ColdSets() { release_cold(); }
  void release_cold() {
    if (!device_hung())
      for (half* p : cold_sets) cudaFree(p);
    cold_sets.clear();
  }
  void prepare_cold(const Problem& p, const DeviceInfo& dev, cudaStream_t stream, uint64_t seed) {
    release_cold();
    const size_t set_bytes = size_t(p.a_elems() + p.b_elems() + p.c_elems()) * sizeof(half);
    const size_t sets = std::max<size_t>(2, (2 * size_t(dev.l2_bytes) + set_bytes - 1) / set_bytes + 1);
    const int64_t elems[3] = {p.a_elems(), p.b_elems(), p.c_elems()};
    for (size_t s = 0; s < sets; ++s)
      for (int t = 0; t < 3; ++t) {
        half* ptr = nullptr;
        RLGEMM_CUDA_CHECK(cudaMalloc(&ptr, size_t(elems[t]) * sizeof(half)));
        cold_sets.push_back(ptr);
        fill_random(ptr, size_t(elems[t]), Fill::kNormal, seed + s * 3 + t, stream, p.dtype);
      }
  }
};

class ProgressLine {
 public:
  ProgressLine(size_t total, bool enabled) : total_(total), enabled_(enabled), tty_(isatty(2)), start_(Clock::now()) {}
  void update(size_t done, const std::string& current) {
    if (!enabled_) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    const double eta = done ? elapsed / double(done) * double(total_ - done) : 0;
    const int pct = total_ ? int(100 * done / total_) : 100;
    if (!tty_) {  // logs: a line every 5%
      if (pct < next_pct_ && done != total_) return;
      next_pct_ = pct + 5;
    }
    const int width = 30, filled = total_ ? int(width * done / total_) : width;
    std::fprintf(stderr, "%s[%s%s] %zu/%zu  %3d%%  elapsed %s  left %s  %s%s", tty_ ? "\r" : "",
                 std::string(size_t(filled), '=').c_str(), std::string(size_t(width - filled), ' ').c_str(), done,
                 total_, pct, clock_text(elapsed).c_str(), done ? clock_text(eta).c_str() : "?", current.c_str(),
                 tty_ ? "\033[K" : "\n");
    std::fflush(stderr);
  }
  void finish() {
    if (enabled_ && tty_) std::fprintf(stderr, "\n");
  }

 private:
  static std::string clock_text(double s) {
    char buf[32];
    const int t = int(s + 0.5);
    std::snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
    return buf;
  }
  size_t total_;
  bool enabled_, tty_;
  Clock::time_point start_;
  int next_pct_ = 0;
};

nlohmann::json identity(const BenchConfig& config, const DeviceInfo& dev) {
  nlohmann::json j;
  j["gpu"] = {{"name", dev.name},
              {"sm_count", dev.sm_count},
              {"compute_capability", std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor)},
              {"sm_clock_mhz", dev.sm_clock_khz / 1000},
              {"mem_clock_mhz", dev.mem_clock_khz / 1000},
              {"l2_bytes", dev.l2_bytes},
              {"memory_bytes", dev.global_mem_bytes}};
  j["driver_version"] = dev.driver_version;
  j["cuda_runtime_version"] = dev.runtime_version;
  j["cublaslt_version"] = cublasLtGetVersion();
  j["rlgemm_version"] = version();
  j["commit"] = build_commit();
  j["date"] = now_iso8601();
  j["command"] = config.command_line;
  nlohmann::json impls = nlohmann::json::array();
  for (const auto& impl : config.implementations) impls.push_back(impl->name());
  if (config.torch) {
    impls.push_back(kTorchImplementation);
    j["torch"] = {{"version", config.torch->torch_version()},
                  {"cuda", config.torch->cuda_version()},
                  {"device", config.torch->device_name()},
                  {"call", "torch.matmul(a, b, out=c), allow_fp16_reduced_precision_reduction = False, "
                           "allow_bf16_reduced_precision_reduction = False"}};
  }
  j["implementations"] = impls;
  nlohmann::json modes = nlohmann::json::array();
  for (Mode m : config.modes) modes.push_back(std::string(to_string(m)));
  j["modes"] = modes;
  j["timing"] = {{"batch_target_us", config.timing.batch_target_us},
                 {"batches", config.timing.batches},
                 {"samples", config.timing.samples},
                 {"server_gap_mean_ms", config.timing.gap_mean_ms},
                 {"shared_rounds", shared_rounds(config.timing)}};
  nlohmann::json dtypes = nlohmann::json::array();
  for (DType d : config.dtypes) dtypes.push_back(std::string(to_string(d)));
  j["dtypes"] = dtypes;
  j["correctness"] = {{"reference", "fp64, all of C"},
                      {"reference_method", "cublasDgemm on operands widened exactly from fp16 or bf16, every element of C compared"},
                      {"tolerance", "|c-ref| <= r |ref| + 2^-16 sum|a*b|, r = 2^-10 for fp16, 2^-7 for bf16"},
                      {"checks", "standard-normal inputs, then uniform-positive inputs (and a 128x128x8192 positive probe "
                                 "for kernels with run-time shapes); C poisoned with NaN; guard bands around A, B, C and "
                                 "the harness's workspaces; after the timed calls, " +
                                     std::to_string(Gate::kRecheckRepeats) +
                                     " calls back to back and all of C checked again"}};
  j["seed"] = std::to_string(config.seed);
  j["order"] = "subjects shuffled in every round (offline batches, server and cudal2 calls), from the seed";
  j["control"] = config.control;
  j["best_vendor"] = "fastest correct of cublas_nn, cublas_tn, lt_heuristic, lt_auto (and lt_auto_graph where asked for) in "
                     "the same run, per problem and mode";
  j["shard"] = std::to_string(config.shard_index) + "/" + std::to_string(config.shard_count);
  if (config.extra.is_object()) j.update(config.extra);
  return j;
}

// The (element type, layout) pairs measured for each shape, in that order.
std::vector<std::pair<DType, Layout>> problem_kinds(const BenchConfig& config) {
  std::vector<std::pair<DType, Layout>> kinds;
  for (DType dtype : config.dtypes)
    for (Layout layout : config.layouts) kinds.emplace_back(dtype, layout);
  return kinds;
}

void write_json(const std::filesystem::path& path, nlohmann::json j) {
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << j.dump(2) << '\n';
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

}  // namespace

void check_resumable_timing(const BenchConfig& config) {
  const auto both = [](const std::vector<std::string>& modes) {
    return std::find(modes.begin(), modes.end(), "offline") != modes.end() &&
           std::find(modes.begin(), modes.end(), "graph") != modes.end();
  };
  std::vector<std::string> now;
  for (Mode m : config.modes) now.emplace_back(to_string(m));
  const auto json_path = json_path_for(config.out_csv);
  if (!both(now) || !std::filesystem::exists(json_path)) return;
  std::ifstream in(json_path);
  const nlohmann::json before = nlohmann::json::parse(in, nullptr, false);
  if (!before.is_object() || !before.contains("modes") || !before["modes"].is_array()) return;
  std::vector<std::string> then;
  for (const auto& m : before["modes"])
    if (m.is_string()) then.push_back(m.get<std::string>());
  if (!both(then)) return;
  std::string rounds = kSharedRoundsBefore;
  if (before.contains("timing") && before["timing"].is_object() && before["timing"].contains("shared_rounds") &&
      before["timing"]["shared_rounds"].is_string())
    rounds = before["timing"]["shared_rounds"].get<std::string>();
  const std::string now_rounds = shared_rounds(config.timing);
  if (rounds != now_rounds)
    throw Error(ErrorKind::kInvalidInput,
                config.out_csv + " was timed with " + rounds + " in the rounds of offline and graph (" +
                    json_path.string() + "), and this run times " + now_rounds +
                    ": resumed, the file would hold problems timed two ways. Write the run to a new --out" +
                    (now_rounds == kSharedRounds && rounds == kModesApart ? " (or resume it with --modes-apart)" : ""));
}

BenchOutcome run_bench(BenchConfig& config, const std::atomic<bool>& stop) {
  BenchOutcome outcome;
  const DeviceInfo dev = open_device(config.device);
  cudaStream_t stream = nullptr;
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // lt_auto first: every speedup needs its time in the same (problem, mode).
  auto& impls = config.implementations;
  auto lt = std::find_if(impls.begin(), impls.end(), [](auto& i) { return i->name() == "lt_auto"; });
  if (lt == impls.end()) {
    impls.insert(impls.begin(), make_cublas_implementation("lt_auto"));
    config.write_lt_auto = false;
  } else {
    std::rotate(impls.begin(), lt, lt + 1);
  }
  if (config.control) impls.push_back(make_lt_twin(*impls.front()));  // prepared after lt_auto, which it copies

  const auto csv_path = std::filesystem::path(config.out_csv);
  if (csv_path.has_parent_path()) std::filesystem::create_directories(csv_path.parent_path());
  std::set<std::tuple<Shape, Layout, DType>> already;  // --resume: problems the CSV holds from an earlier run
  const bool resuming = config.resume && std::filesystem::exists(csv_path);
  if (resuming) {
    ResumableCsv kept = read_csv_for_resume(config.out_csv);
    if (!kept.dropped.empty()) {
      std::cerr << "rlgemm: warning: " << config.out_csv << " ends in a torn write (the run was killed while writing); "
                << "dropping it and the rows of its problem, which is measured again:\n  "
                << kept.dropped.substr(0, 400) << "\n";
      std::filesystem::resize_file(csv_path, kept.keep_bytes);
    }
    for (const Row& row : kept.rows) {
      already.insert({row.shape, row.layout, row.dtype});
      outcome.rows.push_back(row);
    }
  }
  std::ofstream csv(csv_path, resuming ? std::ios::app : std::ios::trunc);
  if (!csv) throw Error(ErrorKind::kInvalidInput, "cannot write results file '" + config.out_csv + "'");
  if (!resuming) csv << kCsvHeader << '\n' << std::flush;
  const auto json_path = json_path_for(config.out_csv);
  nlohmann::json previous_run;
  if (resuming && std::filesystem::exists(json_path)) {
    std::ifstream in(json_path);
    previous_run = nlohmann::json::parse(in, nullptr, false);
    if (previous_run.is_object()) {
      previous_run.erase("summary");
      previous_run.erase("resumed");
    }
  }
  nlohmann::json meta = identity(config, dev);
  meta["status"] = "running";
  write_json(json_path, meta);

  std::vector<Shape> shapes;
  for (size_t i = 0; i < config.shapes.size(); ++i)
    if (int(i % size_t(config.shard_count)) == config.shard_index) shapes.push_back(config.shapes[i]);
  const size_t total = shapes.size() * config.dtypes.size() * config.layouts.size();
  if (resuming)
    meta["resumed"] = {{"rows_kept", outcome.rows.size()}, {"problems_kept", already.size()}, {"previous_run", previous_run}};
  ProgressLine progress(total, config.progress);
  const auto started = Clock::now();
  const bool want_cold = std::any_of(config.modes.begin(), config.modes.end(),
                                     [](Mode m) { return m == Mode::kCold || m == Mode::kGraphCold; });
  Gate gate;
  ColdSets cold;
  size_t done = 0;
  // Where the run's wall time goes, for the JSON (seconds_by_phase): inputs and their fp64 references, each
  // implementation's prepare() and gate (its choices are made there), the timed rounds, the checks after them,
  // the torch worker. Each phase ends on a synchronization, so the host's clock holds its GPU work.
  std::map<std::string, double> phase_seconds;
  auto phase_start = Clock::now();
  const auto phase_end = [&](const std::string& name) {
    const auto now = Clock::now();
    phase_seconds[name] += std::chrono::duration<double>(now - phase_start).count();
    phase_start = now;
  };

  try {
    for (const Shape& shape : shapes) {
      for (const auto& [dtype, layout] : problem_kinds(config)) {
        if (stop) throw std::runtime_error("interrupted");
        if (already.count({shape, layout, dtype})) {
          ++done;
          continue;
        }
        phase_start = Clock::now();
        const Problem p{shape, layout, dtype};
        progress.update(done, shape.to_string() + " " + std::string(to_string(layout)) +
                                  (config.dtypes.size() > 1 ? " " + std::string(to_string(dtype)) : ""));
        // Fresh inputs for this problem: normal (set 0) and positive (set 1), with their references.
        const uint64_t seed = problem_seed(config.seed, p);
        gate.load(p, seed, stream);
        if (want_cold) cold.prepare_cold(p, dev, stream, seed ^ 0xc01dc01dull);
        const Operands x0 = gate.operands();
        RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
        phase_end("inputs and references");

        // Every implementation through the gate first; then the ones that passed are timed side by side.
        std::vector<Row> bases;
        std::vector<Implementation*> passed;
        for (auto& impl : impls) {
          if (!impl->supports(p)) continue;
          if (stop) throw std::runtime_error("interrupted");
          Row base;
          base.shape = shape;
          base.layout = layout;
          base.dtype = dtype;
          base.impl = impl->name();
          CheckResult check;
          try {
            impl->prepare(p, x0, stream);
            // The gate runs the implementation's chosen kernels: in a range of its own name, so that a profiler
            // can take exactly those (scripts/ncu-profile: `ncu --nvtx --nvtx-include gate_<name>/`), and not,
            // say, the candidates lt_auto times in prepare() before it.
            const nvtx3::scoped_range range{"gate_" + impl->name()};
            check = gate.check(*impl, stream);
          } catch (const Error& e) {
            if (e.kind() == ErrorKind::kOutOfMemory || e.kind() == ErrorKind::kHang) throw;
            if (cudaDeviceSynchronize() != cudaSuccess)
              throw Error(ErrorKind::kRuntime, impl->name() + " on " + shape.to_string() + " broke the CUDA context: " + e.what());
            check.ok = false;
            check.why = e.what();
          }
          base.correct = check.ok;
          base.detail = check.ok ? impl->detail() : check.why;
          base.time_us = NAN;
          bases.push_back(base);
          // rlgemm's designs (named by their text, which holds '/') are counted together.
          phase_end("prepare and gate: " + (impl->name().find('/') == std::string::npos ? impl->name() : std::string("designs")));
          if (check.ok) passed.push_back(impl.get());
        }
        // Implementations keep per-problem state from prepare(): all passed ones stay prepared for p.
        std::vector<Subject> subjects;
        for (Implementation* impl : passed) {
          Subject subject{[impl, p, x0](cudaStream_t s) { impl->run(p, x0, s); }, {}, impl->name() + " on " + shape.to_string()};
          for (size_t s = 0; s + 2 < cold.cold_sets.size(); s += 3) {
            const Operands xs{cold.cold_sets[s], cold.cold_sets[s + 1], cold.cold_sets[s + 2]};
            subject.rotate.push_back([impl, p, xs](cudaStream_t st) { impl->run(p, xs, st); });
          }
          subjects.push_back(std::move(subject));
        }
        std::vector<Row> rows;
        if (stop) throw std::runtime_error("interrupted");
        // Every mode of the shape at once: offline and graph in the same rounds, so that neither goes first.
        const Call refresh = [&](cudaStream_t s) { gate.rewrite_inputs(s); };
        TimingOptions timing = config.timing;
        timing.seed = seed ^ 0x9e3779b97f4a7c15ull;
        const auto timed = time_modes_side_by_side(config.modes, subjects, refresh, stream, timing);
        phase_end("timed rounds");
        for (size_t m = 0; m < config.modes.size(); ++m) {
          const Mode mode = config.modes[m];
          const std::vector<Timing>& timings = timed[m];
          double lt_auto_us = NAN;
          size_t next_timing = 0;
          std::vector<Row> mode_rows;
          for (const Row& base : bases) {
            Row row = base;
            row.mode = mode;
            if (row.correct) {
              row.timing = timings[next_timing++];
              row.time_us = row.timing.time_us;
            }
            if (row.impl == "lt_auto") lt_auto_us = row.time_us;
            mode_rows.push_back(row);
          }
          for (Row& row : mode_rows) {
            row.speedup = lt_auto_us / row.time_us;
            rows.push_back(row);
          }
        }
        for (Implementation* impl : passed)
          if (const std::string note = impl->graph_rounds_note(); !note.empty())
            for (Row& row : rows)
              if (row.impl == impl->name() && row.mode == Mode::kGraph) row.detail += " (" + note + ")";
        // Each implementation checked again after its timed calls; a mismatch marks its rows wrong, and the
        // run goes on.
        for (Implementation* impl : passed) {
          if (stop) throw std::runtime_error("interrupted");
          const CheckResult again = gate.recheck(*impl, stream);
          if (again.ok) continue;
          for (Row& row : rows)
            if (row.impl == impl->name()) {
              row.correct = false;
              row.detail = again.why;
            }
        }
        phase_end("checks after the rounds");
        if (config.torch) {
          if (stop) throw std::runtime_error("interrupted");
          // Its own process, its own inputs drawn from this seed, the same gate and timing rules.
          const TorchMeasurement t = config.torch->measure(p, config.modes, config.timing, seed);
          phase_end("torch");
          for (Mode mode : config.modes) {
            Row row;
            row.shape = shape;
            row.layout = layout;
            row.dtype = dtype;
            row.impl = kTorchImplementation;
            row.mode = mode;
            row.correct = t.correct;
            row.detail = t.detail;
            row.time_us = NAN;
            if (t.correct) {
              row.timing = t.timing.at(mode);
              row.time_us = row.timing.time_us;
            }
            auto lt = std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return r.impl == "lt_auto" && r.mode == mode; });
            row.speedup = (lt == rows.end() ? NAN : lt->time_us) / row.time_us;
            rows.push_back(row);
          }
          // Rows stay grouped by mode, in the order the modes were asked for.
          auto mode_rank = [&](const Row& r) { return std::find(config.modes.begin(), config.modes.end(), r.mode) - config.modes.begin(); };
          std::stable_sort(rows.begin(), rows.end(), [&](const Row& x, const Row& y) { return mode_rank(x) < mode_rank(y); });
        }
        assign_best_vendor(rows);
        std::ostringstream text;  // one write per problem: a kill tears at most its last line
        for (const auto& row : rows) {
          if (row.impl == "lt_auto" && !config.write_lt_auto) continue;
          write_csv_row(text, row);
          outcome.rows.push_back(row);
        }
        csv << text.str();
        csv.flush();
        ++done;
      }
    }
    progress.update(done, "done");
  } catch (const Error& e) {
    outcome.status = RunStatus::kFailed;
    outcome.message = e.what();
  } catch (const std::runtime_error& e) {
    if (std::string(e.what()) != "interrupted") throw;
    outcome.status = RunStatus::kInterrupted;
    outcome.message = "interrupted after " + std::to_string(done) + " of " + std::to_string(total) + " problems";
  }
  progress.finish();
  cold.release_cold();
  cudaStreamDestroy(stream);

  meta["status"] = outcome.status == RunStatus::kComplete ? "complete"
                   : outcome.status == RunStatus::kInterrupted ? "interrupted (partial results)"
                                                                : "failed (partial results): " + outcome.message;
  meta["problems_measured"] = done;
  meta["problems_planned"] = total;
  meta["rows"] = outcome.rows.size();
  meta["elapsed_s"] = std::chrono::duration<double>(Clock::now() - started).count();
  meta["seconds_by_phase"] = phase_seconds;
  // Inside "prepare and gate: NAME": where an implementation says, what its first uses did with that time.
  for (const auto& impl : impls)
    if (auto parts = impl->first_use_seconds(); !parts.empty()) meta["first_use_seconds"][impl->name()] = parts;
  meta["summary"] = summary_json(summarize(outcome.rows));
  write_json(json_path, meta);
  return outcome;
}

}  // namespace rlgemm::bench
