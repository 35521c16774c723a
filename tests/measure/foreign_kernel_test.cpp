// sass-opt on kernels rlgemm did not write (--cubin, --kernel, --launch).
// CPU: every bad input is refused with exit code 2 before any GPU work (a cubin of another architecture, a
// kernel the cubin does not have, a SPEC that does not parse or does not match the kernel's parameters), on
// cubins NVRTC compiles here; the parameter block is printed for writing a SPEC; and a candidate that crashes
// or hangs its worker is contained there: it fails, the worker restarts and the next candidate is judged.
// GPU (Hopper): the same through the real worker with a kernel compiled here, a faulting schedule included,
// and a whole run that records its CSV row.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "measure/foreign_evaluator.h"
#include "measure_test_util.h"
#include "measure/sass_opt_foreign.h"
#include "rlgemm/error.h"
#include "sass/cubin.h"
#include "sass/nvdisasm.h"
#include "sass/sass_fixture.h"
#include "search/worker.h"
#include "support/cli.h"
#include "support/gpu.h"

namespace rlgemm::measure {
namespace {

namespace fs = std::filesystem;

fs::path scratch(const std::string& name) { return testing::scratch_file("foreign", name); }

void write_bytes(const fs::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

void write_text(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

// y[i] = a * x[i] + y0[i] over n floats, a grid-stride loop: loads and stores the game can move.
constexpr const char* kSaxpy = R"(
extern "C" __global__ void saxpy(const float* x, const float* y0, float* y, int n, float a) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) y[i] = a * x[i] + y0[i];
}
)";
// The same signature, wrong in two ways: a different result, and (with a < 0) a store far outside y.
constexpr const char* kSaxpyWrong = R"(
extern "C" __global__ void saxpy(const float* x, const float* y0, float* y, int n, float a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (a < 0.0f && i == 0) *(volatile float*)(y + (1ll << 38)) = 1.0f;
  for (; i < n; i += gridDim.x * blockDim.x) y[i] = a * x[i] - y0[i];
}
)";

constexpr int kN = 1 << 20;

std::string saxpy_spec(float a = 2.0f, const std::string& extra = "") {
  const std::string bytes = std::to_string(kN * 4);
  return R"({"name": "saxpy_test", "set": "test", "grid": [264], "block": [256], "params": [
    {"name": "x", "kind": "buffer", "bytes": )" + bytes + R"(, "role": "input", "fill": {"rule": "random", "type": "f32", "min": -1, "max": 1}},
    {"name": "y0", "kind": "buffer", "bytes": )" + bytes + R"(, "role": "input", "fill": {"rule": "random", "type": "f32", "min": -4, "max": 4}},
    {"name": "y", "kind": "buffer", "bytes": )" + bytes + R"(, "role": "output", "fill": {"rule": "nan", "type": "f32"}},
    {"name": "n", "kind": "scalar", "type": "i32", "value": )" + std::to_string(kN) + R"(},
    {"name": "a", "kind": "scalar", "type": "f32", "value": )" + std::to_string(a) + "}" + extra + "]}";
}

struct Files {
  fs::path cubin, wrong, ampere, spec;
};

const Files& files() {
  static const Files f = [] {
    Files f{scratch("saxpy.cubin"), scratch("saxpy-wrong.cubin"), scratch("saxpy-sm80.cubin"), scratch("saxpy.json")};
    write_bytes(f.cubin, sass::testing::nvrtc_cubin(kSaxpy, "saxpy", "sm_90a"));
    write_bytes(f.wrong, sass::testing::nvrtc_cubin(kSaxpyWrong, "saxpy", "sm_90a"));
    write_bytes(f.ampere, sass::testing::nvrtc_cubin(kSaxpy, "saxpy", "sm_80"));
    write_text(f.spec, saxpy_spec());
    return f;
  }();
  return f;
}

std::string foreign(const fs::path& cubin, const std::string& kernel, const fs::path& spec) {
  return "sass-opt --cubin " + cubin.string() + " --kernel " + kernel + " --launch " + spec.string() + " --evaluator gpu";
}

// ---- CPU -----------------------------------------------------------------------------------------

TEST(ForeignKernelCli, BadInputExitsTwoBeforeAnyGpuWork) {
  const Files& f = files();
  const fs::path csv = scratch("never.csv");
  // A cubin for another architecture, read from its ELF header.
  auto r = testing::run_rlgemm(foreign(f.ampere, "saxpy", f.spec) + " --csv " + csv.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("sm_80"), std::string::npos) << r.output;
  // A kernel the cubin does not have: the ones it has are listed.
  r = testing::run_rlgemm(foreign(f.cubin, "matmul_kernel", f.spec));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("matmul_kernel"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kernels present: saxpy"), std::string::npos) << r.output;
  // Parameters that are not the kernel's: one too many, and an i64 where the kernel takes 4 bytes.
  const fs::path extra = scratch("extra.json"), wide = scratch("wide.json");
  write_text(extra, saxpy_spec(2.0f, R"(, {"name": "global_scratch", "kind": "null"})"));
  r = testing::run_rlgemm(foreign(f.cubin, "saxpy", extra));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("lists 6 parameters, kernel 'saxpy' takes 5"), std::string::npos) << r.output;
  std::string text = saxpy_spec();
  text.replace(text.find("\"type\": \"i32\""), 13, "\"type\": \"i64\"");
  write_text(wide, text);
  r = testing::run_rlgemm(foreign(f.cubin, "saxpy", wide));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("parameter 3 'n' (i64, 8 bytes) does not match the kernel's parameter 3 (4 bytes"),
            std::string::npos)
      << r.output;
  // Malformed SPECs: a missing field, a negative size, an unknown fill rule.
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> broken = {
      {{"\"grid\": [264], ", ""}, "'grid' is missing"},
      {{"\"bytes\": " + std::to_string(kN * 4) + ", \"role\": \"input\", \"fill\": {\"rule\": \"random\", \"type\": \"f32\", \"min\": -1",
        "\"bytes\": -4, \"role\": \"input\", \"fill\": {\"rule\": \"random\", \"type\": \"f32\", \"min\": -1"},
       "must not be negative"},
      {{"{\"rule\": \"nan\", \"type\": \"f32\"}", "{\"rule\": \"ones\"}"}, "unknown value 'ones'"},
  };
  for (const auto& [edit, needle] : broken) {
    std::string spec = saxpy_spec();
    ASSERT_NE(spec.find(edit.first), std::string::npos) << edit.first;
    spec.replace(spec.find(edit.first), edit.first.size(), edit.second);
    const fs::path file = scratch("broken.json");
    write_text(file, spec);
    r = testing::run_rlgemm(foreign(f.cubin, "saxpy", file) + " --csv " + csv.string());
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(file.string()), std::string::npos) << "names the SPEC: " << r.output;
  }
  write_text(scratch("not-json.json"), "{\"grid\": [1,");
  r = testing::run_rlgemm(foreign(f.cubin, "saxpy", scratch("not-json.json")));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("not valid JSON"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(csv)) << "nothing was recorded";

  // Options that do not fit together.
  r = testing::run_rlgemm("sass-opt --cubin " + f.cubin.string() + " --kernel saxpy --evaluator gpu");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--launch"), std::string::npos) << r.output;
  r = testing::run_rlgemm("sass-opt --design sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg --shape "
                          "64,64,64 --launch " + f.spec.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--launch describes a foreign kernel"), std::string::npos) << r.output;
  r = testing::run_rlgemm(foreign(f.cubin, "saxpy", f.spec) + " --resume");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("add --csv"), std::string::npos) << r.output;
  r = testing::run_rlgemm("sass-opt --cubin " + f.cubin.string() + " --kernel saxpy --launch " + f.spec.string() +
                          " --csv " + csv.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("need --evaluator gpu"), std::string::npos) << r.output;
}

TEST(ForeignKernelCli, PrintsTheParameterBlockAndRunsTheSyntheticModel) {
  const Files& f = files();
  auto r = testing::run_rlgemm("sass-opt --cubin " + f.cubin.string() + " --kernel saxpy --params");
  ASSERT_EQ(r.code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j.at("kernel"), "saxpy");
  EXPECT_EQ(j.at("block_bytes"), 32);
  ASSERT_EQ(j.at("params").size(), 5u);
  const int sizes[] = {8, 8, 8, 4, 4}, offsets[] = {0, 8, 16, 24, 28};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(j["params"][i]["size"], sizes[i]);
    EXPECT_EQ(j["params"][i]["offset"], offsets[i]);
  }
  std::string why;
  if (!sass::nvdisasm_available(&why)) GTEST_SKIP() << "the game needs nvdisasm: " << why;
  // The SPEC is checked with the synthetic evaluator too, though nothing runs.
  const fs::path out = scratch("synthetic.cubin");
  r = testing::run_rlgemm("sass-opt --cubin " + f.cubin.string() + " --kernel saxpy --launch " + f.spec.string() +
                          " --agent anneal --steps 40 --actions both --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("saxpy_test (kernel saxpy)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("synthetic model (not measured)"), std::string::npos) << r.output;
  if (fs::exists(out)) EXPECT_NO_THROW(sass::Cubin::load(out.string()).kernel("saxpy"));
}

// A worker that plays the "sass-foreign" protocol with scripted answers: a candidate whose first byte is 0xde
// crashes it (abort), 0xad hangs it, anything else is judged a 5% gain in 12 rounds.
class ScriptedForeignBackend : public search::Measurer {
 public:
  GpuIdentity gpu() override {
    GpuIdentity g;
    g.name = "scripted";
    g.cc_major = 9;
    return g;
  }
  TimingStats reference(const Problem&, TimingMode) override { fail("not a tuning backend"); }
  Measurement measure(const Design&, const Problem&, TimingMode) override { fail("not a tuning backend"); }
  nlohmann::json evaluate(const nlohmann::json& request) override {
    if (request.at("task") == "time") return {{"ok", true}, {"time_us", 40.0}};
    std::ifstream in(request.at("candidate").get<std::string>(), std::ios::binary);
    const int first = in.get();
    if (first == 0xde) std::abort();
    if (first == 0xad) std::this_thread::sleep_for(std::chrono::hours(1));
    if (first == 0x0f) return {{"ok", false}, {"failure", "buffer 'y' differs"}};
    const int rounds = request.at("timing").at("batches").get<int>();
    std::vector<double> original, candidate;
    for (int i = 0; i < rounds; ++i) {
      original.push_back(40.0 * (i % 2 ? 1.01 : 0.99));
      candidate.push_back(40.0 / 1.05 * (i % 3 ? 1.01 : 0.99));
    }
    return {{"ok", true}, {"draws", request.at("draws")}, {"original_us", 40.0}, {"candidate_us", 40.0 / 1.05},
            {"samples", rounds}, {"original_rounds_us", original}, {"candidate_rounds_us", candidate}};
  }
};

TEST(ForeignKernelWorker, ACandidateThatCrashesOrHangsItsWorkerIsContainedAndTheRunGoesOn) {
  search::register_backend("sass-foreign-scripted", [](const search::BackendOptions&) -> search::MeasurerPtr {
    return std::make_unique<ScriptedForeignBackend>();
  });
  search::WorkerLaunch launch;
  launch.child = [] {
    search::BackendOptions o;
    o.backend = "sass-foreign-scripted";
    return search::serve_worker(o, 0, 1);
  };
  search::WorkerLimits limits;
  limits.request_timeout_s = 2;  // the watchdog ends a hung worker
  auto worker = std::make_unique<search::WorkerMeasurer>(launch, limits);
  search::WorkerMeasurer* raw = worker.get();
  ForeignSassEvaluator evaluator(std::move(worker), {"k.cubin", "k", "k.json", 1, 8});
  EXPECT_EQ(evaluator.reference_time_us(), 40.0);

  bench::TimingOptions timing;
  timing.batches = 12;
  const CubinComparison good = evaluator.compare({0x01, 0x02}, 3, timing, bench::Mode::kOffline);
  ASSERT_TRUE(good.ok) << good.failure;
  EXPECT_EQ(good.draws, 3);
  EXPECT_EQ(good.original_rounds_us.size(), 12u);
  EXPECT_GT(gain_interval(good.original_rounds_us, good.candidate_rounds_us).low, 0);

  const std::vector<uint8_t> crashing{0xde, 0x01, 0x02, 0x03};
  const CubinComparison crashed = evaluator.compare(crashing, 3, timing, bench::Mode::kOffline);
  EXPECT_FALSE(crashed.ok);
  EXPECT_FALSE(crashed.context_lost) << "the fault was the worker's, not this process's";
  EXPECT_NE(crashed.failure.find("crashed its worker"), std::string::npos) << crashed.failure;
  EXPECT_NE(crashed.failure.find("signal 6"), std::string::npos) << crashed.failure;
  const size_t saved_at = crashed.failure.find("saved as ");
  ASSERT_NE(saved_at, std::string::npos) << crashed.failure;
  const std::string saved = crashed.failure.substr(saved_at + 9);
  std::ifstream in(saved, std::ios::binary);
  EXPECT_EQ(std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {}), crashing);
  fs::remove(saved);
  EXPECT_EQ(evaluator.faults(), 1);

  // The next candidate is judged by a new worker.
  EXPECT_TRUE(evaluator.compare({0x01}, 3, timing, bench::Mode::kOffline).ok);
  EXPECT_EQ(raw->restarts(), 1);
  const CubinComparison hung = evaluator.compare({0xad}, 3, timing, bench::Mode::kOffline);
  EXPECT_FALSE(hung.ok);
  EXPECT_NE(hung.failure.find("hung its worker"), std::string::npos) << hung.failure;
  fs::remove(hung.failure.substr(hung.failure.find("saved as ") + 9));
  EXPECT_EQ(evaluator.faults(), 2);
  const CubinComparison wrong = evaluator.compare({0x0f}, 3, timing, bench::Mode::kOffline);
  EXPECT_FALSE(wrong.ok);
  EXPECT_EQ(wrong.failure, "buffer 'y' differs");
  EXPECT_EQ(evaluator.faults(), 2) << "a wrong output is not a fault";
  EXPECT_TRUE(evaluator.compare({0x02}, 3, timing, bench::Mode::kOffline).ok);
  EXPECT_EQ(raw->restarts(), 2);
}

TEST(ForeignKernelWorker, WithoutAGpuTheWorkerFailsWithNoDevice) {
  // The cubins first: the compiler's processes are forked at the first compile, and forked after the probe below
  // has started the CUDA driver on a machine whose GPUs are hidden (CUDA_VISIBLE_DEVICES=""), NVRTC crashes in them.
  const Files& f = files();
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a GPU is present: this checks the machine without one";
  const auto r = testing::run_rlgemm(foreign(f.cubin, "saxpy", f.spec) + " --steps 5");
  EXPECT_EQ(r.code, 3) << r.output;
}

// ---- GPU (Hopper) --------------------------------------------------------------------------------

std::vector<uint8_t> read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

TEST(ForeignKernelGpu, TheRealWorkerJudgesContainsAFaultAndGoesOn) {
  REQUIRE_HOPPER();
  const Files& f = files();
  // The faulting variant runs with a < 0: a SPEC of its own, the same parameters.
  const fs::path negative = scratch("negative.json");
  write_text(negative, saxpy_spec(-1.0f));
  ForeignSassEvaluator evaluator(start_foreign_worker(testing::rlgemm_binary()),
                                 {f.cubin.string(), "saxpy", negative.string(), 5, 4});
  EXPECT_GT(evaluator.reference_time_us(), 0);
  bench::TimingOptions timing;
  timing.batches = 9;
  const CubinComparison same = evaluator.compare(read_all(f.cubin), 4, timing, bench::Mode::kOffline);
  ASSERT_TRUE(same.ok) << same.failure;
  EXPECT_EQ(same.draws, 4);
  EXPECT_EQ(same.original_rounds_us.size(), 9u);
  EXPECT_NEAR(same.candidate_us / same.original_us, 1.0, 0.1);

  const CubinComparison fault = evaluator.compare(read_all(f.wrong), 2, timing, bench::Mode::kOffline);
  EXPECT_FALSE(fault.ok);
  EXPECT_NE(fault.failure.find("crashed its worker"), std::string::npos) << fault.failure;
  EXPECT_EQ(evaluator.faults(), 1);
  if (const size_t at = fault.failure.find("saved as "); at != std::string::npos) fs::remove(fault.failure.substr(at + 9));
  EXPECT_TRUE(evaluator.compare(read_all(f.cubin), 2, timing, bench::Mode::kOffline).ok) << "the run goes on in a new worker";
  const CubinComparison in_graphs = evaluator.compare(read_all(f.cubin), 1, timing, bench::Mode::kGraph);
  EXPECT_TRUE(in_graphs.ok) << "the foreign kernel captured in CUDA graphs: " << in_graphs.failure;
  const CubinComparison garbage = evaluator.compare(std::vector<uint8_t>(4096, 0x5a), 1, timing, bench::Mode::kOffline);
  EXPECT_FALSE(garbage.ok);
  EXPECT_NE(garbage.failure.find("does not load"), std::string::npos) << garbage.failure;

  // With a > 0 the variant runs to the end and its output differs.
  ForeignSassEvaluator positive(start_foreign_worker(testing::rlgemm_binary()),
                                {f.cubin.string(), "saxpy", f.spec.string(), 5, 4});
  const CubinComparison wrong = positive.compare(read_all(f.wrong), 2, timing, bench::Mode::kOffline);
  EXPECT_FALSE(wrong.ok);
  EXPECT_NE(wrong.failure.find("buffer 'y' differs"), std::string::npos) << wrong.failure;
  EXPECT_EQ(positive.faults(), 0);
}

TEST(ForeignKernelGpu, ARunRecordsItsCsvRowAndResumes) {
  REQUIRE_HOPPER();
  std::string why;
  if (!sass::nvdisasm_available(&why)) GTEST_SKIP() << "the game needs nvdisasm: " << why;
  const Files& f = files();
  const fs::path csv = scratch("foreign-sass-opt.csv");
  fs::remove(csv);
  const std::string command =
      foreign(f.cubin, "saxpy", f.spec) + " --agent greedy --steps 10 --final-batches 9 --actions both --csv " +
      csv.string() + " --resume";
  auto r = testing::run_rlgemm(command);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream in(csv);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  EXPECT_EQ(header, kSassOptCsvHeader);
  EXPECT_EQ(row.rfind("saxpy_test,,,,,", 0), 0u) << row;
  EXPECT_NE(row.find(",true,"), std::string::npos) << row;  // bitwise equal
  EXPECT_NE(row.find(",test,both,"), std::string::npos) << row;
  r = testing::run_rlgemm(command);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("skipped"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rlgemm::measure
