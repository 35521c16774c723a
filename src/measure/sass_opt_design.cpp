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

// A candidate schedule faulted (a sticky error) or hung the GPU: nothing more runs in this process. The CSV
// records the run (the compiled cubin stays: no gain, nothing changed, the reason in `changes`), so that a rerun
// with --resume goes on with the next kernel; then Error(kHang) after a hang (the process must end without
// waiting for the device), Error(kRuntime) after a fault.
[[noreturn]] void stop_after_lost_context(const SassOptDesignReport& report, const SassOptDesignOptions& o,
                                          std::unique_ptr<GpuSassEvaluator> gpu) {
  const std::string reason = gpu->context_lost_reason();
  if (!o.csv_path.empty()) {
    SassOptCsvRow row;
    row.kernel = report.design;
    row.problem = report.problem;
    row.time_before_us = row.time_after_us = gpu->measured_reference_us();
    row.bitwise_equal = true;  // what is kept is the compiled cubin itself
    row.set = report.set;
    row.actions = sass::to_string(o.actions);
    row.changes = "stopped: " + reason;
    append_sass_opt_csv(o.csv_path, row);
  }
  const bool hung = device_hung();
  // After a hang the evaluator's buffers, stream and modules cannot be released behind the hung kernel: it is
  // left as it is, and the process ends.
  if (hung) (void)gpu.release();
  throw Error(hung ? ErrorKind::kHang : ErrorKind::kRuntime,
              "the search of " + report.design + " on " + report.problem.shape.to_string() +
                  " stopped: a candidate schedule " + (hung ? "hung the GPU" : "lost the CUDA context") + " (" +
                  reason + ")" + (o.csv_path.empty() ? "" : "; " + o.csv_path + " records the run") +
                  "; this process can run nothing more on the GPU");
}

}  // namespace

SassOptDesignReport run_sass_opt_design(const SassOptDesignOptions& o) {
  // Every input is checked before anything is compiled or run.
  const Design design = parse_design(o.design);
  SassOptDesignReport report;
  report.design = to_string(design);
  report.set = o.set.empty() ? default_sass_opt_set(report.design) : o.set;
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
  if (report.set.find_first_of(",\"\n") != std::string::npos) fail("--set must not hold commas, quotes or line breaks");

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
    original.cache_key = "sass-original:" + cubin_digest(bytes);
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

  try {
    report.game =
        sass::optimize_kernel(cubin, report.kernel, *evaluator, o.agent, o.steps, o.seed, o.actions, o.confirm);
    if (!report.game.problems.empty()) {
      report.verdict = "the best schedule did not verify";
      return report;
    }
    final_check(report, gpu.get(), original_bytes, {o.final_batches, o.final_draws, o.min_gain, o.seed});
  } catch (const Error&) {
    if (!gpu || !gpu->context_lost()) throw;
    stop_after_lost_context(report, o, std::move(gpu));
  }

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
    if (report.graph_interval)
      record.graph_gain = report.graph_interval->gain, record.graph_gain_low = report.graph_interval->low;
    record.moves = moves_text(report.game.search);
    report.stored = store.put_optimized_cubin(record);
  }
  if (!o.csv_path.empty()) {
    append_sass_opt_csv(o.csv_path, csv_row(report, report.design, problem, o.actions));
    report.csv_written = true;
  }
  return report;
}

}  // namespace rlgemm::measure
