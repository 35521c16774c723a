#include "measure/sass_opt_design.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "compile/compiler.h"
#include "compile/sha256.h"
#include "generate/generate.h"
#include "measure/sass_evaluator.h"
#include "rlgemm/design.h"
#include "rlgemm/error.h"
#include "store/store.h"

namespace rlgemm::measure {
namespace {

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

// The actions of the kept path ("move 12 up: LDS ...", "stall 40 -1: HMMA ..."), one per line, as the store
// keeps them.
std::string moves_text(const sass::SearchResult& search) {
  std::string text;
  for (const auto& m : search.path) text += m.text + "\n";
  return text;
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read cubin " + path);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

std::string format_sass_opt_csv_row(const SassOptCsvRow& r) {
  return csv_field(r.kernel) + "," + std::to_string(r.problem.shape.m) + "," + std::to_string(r.problem.shape.n) +
         "," + std::to_string(r.problem.shape.k) + "," + std::string(to_string(r.problem.layout)) + "," +
         number(r.time_before_us) + "," + number(r.time_after_us) + "," + number(r.gain) + "," +
         (r.bitwise_equal ? "true" : "false") + "," + std::to_string(r.moves);
}

void append_sass_opt_csv(const std::string& path, const SassOptCsvRow& row) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path file(path);
  bool fresh = !fs::exists(file, ec) || fs::file_size(file, ec) == 0;
  if (!fresh) {
    std::ifstream in(file);
    std::string header;
    std::getline(in, header);
    if (header != kSassOptCsvHeader)
      fail("CSV " + path + " starts with '" + header + "', not the sass-opt header '" + kSassOptCsvHeader +
           "': use another --csv file");
  }
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  std::ofstream out(file, std::ios::app);
  if (!out) throw Error(ErrorKind::kRuntime, "cannot open CSV " + path + " for appending");
  if (fresh) out << kSassOptCsvHeader << "\n";
  out << format_sass_opt_csv_row(row) << "\n";
  out.flush();
  if (!out) throw Error(ErrorKind::kRuntime, "writing CSV " + path + " failed");
}

SassOptDesignReport run_sass_opt_design(const SassOptDesignOptions& o) {
  // Every input is checked before anything is compiled or run.
  const Design design = parse_design(o.design);
  SassOptDesignReport report;
  report.design = to_string(design);
  report.evaluator = o.evaluator;
  report.problem.shape = parse_shape(o.shape);
  report.problem.layout = parse_layout(o.layout);
  const Problem& problem = report.problem;
  if (design.family == Family::kTest)
    fail("design " + report.design + " is a fault-injection design; the SASS game optimizes sm90 and sm80 designs");
  if (auto why = why_invalid(design, problem.layout))
    fail("design " + report.design + " cannot be built for layout " + std::string(to_string(problem.layout)) + ": " +
         *why);
  if (o.evaluator != "gpu" && o.evaluator != "synthetic")
    fail("unknown evaluator '" + o.evaluator + "': expected gpu or synthetic");
  if (o.evaluator != "gpu" && (!o.db_path.empty() || !o.csv_path.empty()))
    fail("--db and --csv record measured times, which need --evaluator gpu (the synthetic evaluator is a model)");
  if (!o.db_path.empty() && !o.cubin_path.empty())
    fail("--db stores cubins derived from the design as rlgemm compiles it; leave out --cubin");
  if (o.final_batches < 3) fail("the final re-measure needs at least 3 batches");
  if (o.final_draws < 1) fail("the final bitwise check needs at least one input draw");
  if (!(o.min_gain >= 0)) fail("--min-gain must not be negative");

  // The device first: without one, fail before a long compile.
  std::optional<DeviceInfo> device;
  if (o.evaluator == "gpu") device = open_sass_device();

  // The compiled schedule: Hopper code, as GemmKernel would build it on an sm_90 GPU.
  const std::string arch = arch_for_device(design, 9, 0);
  CompiledKernel original;
  if (o.cubin_path.empty()) {
    original = compile_kernel(generate_kernel(design, problem, arch));
  } else {
    const std::vector<uint8_t> bytes = read_file(o.cubin_path);
    original.name = kernel_name(design, problem);
    original.arch = arch;
    original.cubin.assign(bytes.begin(), bytes.end());
    original.cache_key = "sass-original:" + Sha256().update(bytes.data(), bytes.size()).hex_digest();
  }
  if (!o.kernel.empty()) original.name = o.kernel;
  report.kernel = original.name;
  const std::vector<uint8_t> original_bytes(original.cubin.begin(), original.cubin.end());
  const sass::Cubin cubin =
      sass::Cubin::parse(original_bytes, o.cubin_path.empty() ? "compiled " + report.kernel : o.cubin_path);
  (void)cubin.kernel(report.kernel);  // throws naming the kernels present

  std::unique_ptr<GpuSassEvaluator> gpu;
  std::unique_ptr<sass::Evaluator> synthetic;
  sass::Evaluator* evaluator = nullptr;
  if (device) {
    gpu = std::make_unique<GpuSassEvaluator>(design, problem, *device, original);
    evaluator = gpu.get();
  } else {
    synthetic = std::make_unique<sass::SyntheticEvaluator>();
    evaluator = synthetic.get();
  }

  report.game = sass::optimize_kernel(cubin, report.kernel, *evaluator, o.agent, o.steps, o.seed, o.actions);
  const auto& search = report.game.search;
  report.search_before_us = search.initial_time_us;
  report.search_after_us = search.best_time_us;
  if (!report.game.problems.empty()) {
    report.verdict = "the best schedule did not verify";
    return report;
  }

  // The final judgement, with many more batches than the search: the recorded gain is this one.
  const bool moved = !search.path.empty() && report.game.patched != original_bytes;
  if (gpu) {
    if (moved) {
      bench::TimingOptions timing;
      timing.batch_target_us = 1000;
      timing.batches = o.final_batches;
      timing.max_warmup_batches = 30;
      const CubinComparison c = gpu->compare(report.game.patched, o.final_draws, timing);
      if (c.context_lost)
        throw Error(ErrorKind::kRuntime, "the best schedule lost the CUDA context in its final check (" + c.failure +
                                             "); nothing was written");
      report.bitwise_equal = c.ok;
      if (c.ok) {
        report.time_before_us = c.original_us;
        report.rejected_after_us = c.candidate_us;
      } else {
        report.verdict = "the best schedule failed the final check: " + c.failure;
      }
    } else {
      report.bitwise_equal = true;  // the compiled schedule itself
      report.verdict = "no move paid during the search";
    }
    if (report.time_before_us <= 0) {
      bench::TimingOptions timing;
      timing.batches = o.final_batches;
      report.time_before_us = gpu->compare(original_bytes, 1, timing).original_us;
    }
  } else {
    report.bitwise_equal = true;  // the synthetic evaluator does not run code; verify_patch held
    report.time_before_us = search.initial_time_us;
    if (moved) report.rejected_after_us = search.best_time_us;
    else report.verdict = "no move paid during the search";
  }
  if (report.rejected_after_us > 0 && report.bitwise_equal) {
    const double gain = report.time_before_us / report.rejected_after_us - 1.0;
    if (gain >= o.min_gain && gain > 0) {
      report.kept = true;
      report.gain = gain;
      report.time_after_us = report.rejected_after_us;
      report.rejected_after_us = 0;
      report.moves = int(search.path.size());
      report.verdict = "kept: faster on re-measure";
    } else {
      char buf[160];
      std::snprintf(buf, sizeof buf, "not kept: re-measured gain %+.2f%% is below the %.2f%% threshold", 100.0 * gain,
                    100.0 * o.min_gain);
      report.verdict = buf;
    }
  }
  if (!report.kept) report.time_after_us = report.time_before_us;

  if (report.kept && !o.out_path.empty()) {
    sass::write_file_atomically(o.out_path, report.game.patched);
    report.written = true;
  }
  if (report.kept && !o.db_path.empty()) {
    Store store(o.db_path);
    OptimizedCubin record;
    record.gpu_id = store.gpu_id(identity_of(*device));
    record.problem = problem;
    record.design = report.design;
    record.kernel = report.kernel;
    record.source_key = original.cache_key;
    record.cubin = report.game.patched;
    record.time_before_us = report.time_before_us;
    record.time_after_us = report.time_after_us;
    record.gain = report.gain;
    record.moves = moves_text(search);
    report.stored = store.put_optimized_cubin(record);
  }
  if (!o.csv_path.empty()) {
    append_sass_opt_csv(o.csv_path, {report.design, problem, report.time_before_us, report.time_after_us, report.gain,
                                     report.bitwise_equal, report.moves});
    report.csv_written = true;
  }
  return report;
}

}  // namespace rlgemm::measure
