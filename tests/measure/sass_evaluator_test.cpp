// The SASS game on rlgemm's own designs.
// CPU: bad input refused before anything is compiled, the GPU evaluator refused clearly
// without a GPU, and a whole --design run with the synthetic evaluator on an sm90 and an sm80 design.
// GPU (Hopper): bitwise comparison, the compiled cubin judged against itself, a short search with the GPU
// evaluator, and a --design run that records its CSV row.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "generate/generate.h"
#include "measure/sass_bitwise.h"
#include "measure/sass_evaluator.h"
#include "measure/sass_opt_design.h"
#include "rlgemm/design.h"
#include "rlgemm/error.h"
#include "run/module_cache.h"
#include "sass/cubin.h"
#include "sass/nvdisasm.h"
#include "sass/optimize.h"
#include "support/cli.h"
#include "support/gpu.h"
#include "measure_test_util.h"

namespace rlgemm::measure {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSm90Design = "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg";
constexpr const char* kSm80Design = "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg";

fs::path scratch(const std::string& name) { return testing::scratch_file("sass-evaluator", name); }
using testing::lines_of;

ErrorKind kind_of(const SassOptDesignOptions& o, std::string* message = nullptr) {
  try {
    run_sass_opt_design(o);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no error for design '" << o.design << "' shape '" << o.shape << "'";
  return ErrorKind::kRuntime;
}

#define REQUIRE_NVDISASM()                                                                    \
  do {                                                                                        \
    std::string why_;                                                                         \
    if (!::rlgemm::sass::nvdisasm_available(&why_)) GTEST_SKIP() << "needs nvdisasm: " << why_; \
  } while (0)

// ---- CPU -----------------------------------------------------------------------------------------

TEST(SassOptDesign, RefusesBadInputBeforeCompiling) {
  SassOptDesignOptions o;
  o.evaluator = "synthetic";
  o.shape = "1024,1024,1024";
  std::string message;

  o.design = "sm90.ws.coop/128x128/s4";  // does not parse
  EXPECT_EQ(kind_of(o, &message), ErrorKind::kInvalidInput);
  EXPECT_NE(message.find("sm90.ws.coop/128x128/s4"), std::string::npos) << message;

  o.design = kSm90Design;
  o.shape = "1024,1004,1024";  // N not a multiple of 8
  EXPECT_EQ(kind_of(o, &message), ErrorKind::kInvalidInput);
  o.shape = "0,1024,1024";     // M < 1
  EXPECT_EQ(kind_of(o), ErrorKind::kInvalidInput);
  o.shape = "1024,1024";       // not three extents
  EXPECT_EQ(kind_of(o), ErrorKind::kInvalidInput);
  o.shape = "1024,1024,1024";

  o.layout = "tt";
  EXPECT_EQ(kind_of(o), ErrorKind::kInvalidInput);
  o.layout = "tn";

  o.design = "test.fault";
  EXPECT_EQ(kind_of(o, &message), ErrorKind::kInvalidInput);
  EXPECT_NE(message.find("fault-injection"), std::string::npos) << message;
  o.design = "sm90.ws.coop/256x256x128/s8/c1x1/raster_m.g8/splitk1/epi_reg";  // parses, cannot be built
  EXPECT_EQ(kind_of(o, &message), ErrorKind::kInvalidInput);
  EXPECT_NE(message.find("cannot be built"), std::string::npos) << message;
  o.design = kSm90Design;

  // Measured records need measured times.
  o.csv_path = scratch("never.csv").string();
  EXPECT_EQ(kind_of(o, &message), ErrorKind::kInvalidInput);
  EXPECT_NE(message.find("--evaluator gpu"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(o.csv_path));
  o.csv_path.clear();
  o.db_path = scratch("never.db").string();
  EXPECT_EQ(kind_of(o), ErrorKind::kInvalidInput);
  EXPECT_FALSE(fs::exists(o.db_path));
  o.db_path.clear();

  o.evaluator = "fpga";
  EXPECT_EQ(kind_of(o), ErrorKind::kInvalidInput);
  o.evaluator = "synthetic";
  o.final_batches = 1;
  EXPECT_EQ(kind_of(o), ErrorKind::kInvalidInput);
}

TEST(SassOptDesign, GpuEvaluatorWithoutAGpuFailsWithNoDevice) {
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a GPU is present: this checks the machine without one";
  SassOptDesignOptions o;
  o.design = kSm90Design;
  o.shape = "1024,1024,1024";
  o.evaluator = "gpu";
  std::string message;
  EXPECT_EQ(kind_of(o, &message), ErrorKind::kNoDevice);
  EXPECT_FALSE(message.empty());

  // The SASS stage's factory, once installed, still needs to know what to run.
  install_sass_gpu_evaluator();
  try {
    sass::make_evaluator("gpu", nullptr);
    ADD_FAILURE() << "a GPU evaluator without a design";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--design"), std::string::npos) << e.what();
  }

  // And through the CLI: exit code 3, nothing written.
  const fs::path out = scratch("nodevice.cubin");
  const auto r = testing::run_rlgemm(std::string("sass-opt --design ") + kSm90Design +
                                     " --shape 1024,1024,1024 --layout tn --evaluator gpu --out " + out.string());
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_FALSE(fs::exists(out));
}

TEST(SassOptCli, BadInputExitsTwoWithTheRule) {
  auto r = testing::run_rlgemm("sass-opt --design sm90.ws.coop/128x128/s4 --shape 64,64,64");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("sm90.ws.coop/128x128/s4"), std::string::npos) << r.output;
  r = testing::run_rlgemm(std::string("sass-opt --design ") + kSm90Design + " --shape 64,60,64");
  EXPECT_EQ(r.code, 2) << r.output;
  r = testing::run_rlgemm(std::string("sass-opt --design ") + kSm90Design);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--shape"), std::string::npos) << r.output;
  r = testing::run_rlgemm(std::string("sass-opt --design ") + kSm90Design +
                          " --shape 64,64,64 --csv " + scratch("x.csv").string());
  EXPECT_EQ(r.code, 2) << r.output;
  r = testing::run_rlgemm("sass-opt --cubin /nonexistent.cubin --kernel k --evaluator gpu");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--design"), std::string::npos) << r.output;
  r = testing::run_rlgemm("sass-opt --shape 64,64,64");
  EXPECT_EQ(r.code, 2) << r.output;
  r = testing::run_rlgemm(std::string("sass-opt --design ") + kSm90Design + " --shape 64,64,64 --actions stalls");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--actions"), std::string::npos) << r.output;
}

TEST(SassOptCli, TunedModeRefusesWhatItCannotRecord) {
  const std::string table = std::string(RLGEMM_SOURCE_DIR) + "/data/tuned/h100.csv";
  auto r = testing::run_rlgemm("sass-opt --tuned " + table + " --count 2 --evaluator gpu");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--csv"), std::string::npos) << r.output;
  r = testing::run_rlgemm("sass-opt --tuned " + table + " --evaluator synthetic --csv " + scratch("t.csv").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--evaluator gpu"), std::string::npos) << r.output;
  r = testing::run_rlgemm("sass-opt --tuned " + table + " --design " + kSm90Design + " --evaluator gpu --csv " +
                          scratch("t.csv").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_FALSE(fs::exists(scratch("t.csv")));
}

// A whole --design run on the CPU: compile (NVRTC), the game with the latency model, verification and
// --out. Both families: sm80 designs are compiled for sm_90 on Hopper, which the game reads.
void synthetic_design_run(const std::string& design, sass::ActionSpace actions = sass::ActionSpace::kMoves) {
  SassOptDesignOptions o;
  o.design = design;
  o.actions = actions;
  o.shape = "512,512,512";
  o.evaluator = "synthetic";
  o.agent = "anneal";
  o.steps = 60;
  const fs::path out = scratch("synthetic-" + std::to_string(std::hash<std::string>()(design)) + ".cubin");
  fs::remove(out);
  o.out_path = out.string();
  const auto r = run_sass_opt_design(o);
  EXPECT_TRUE(r.game.problems.empty());
  EXPECT_EQ(r.design, design);
  EXPECT_EQ(r.kernel, kernel_name(parse_design(design), r.problem));
  EXPECT_GT(r.game.movable, 0u);
  EXPECT_GT(r.time_before_us, 0);
  EXPECT_GT(r.time_after_us, 0);
  EXPECT_LE(r.time_after_us, r.time_before_us);
  EXPECT_TRUE(r.bitwise_equal);
  EXPECT_FALSE(r.csv_written);
  if (r.kept) {
    EXPECT_GT(r.gain, 0);
    EXPECT_EQ(r.moves, int(r.game.search.path.size()));
    ASSERT_TRUE(r.written);
    const sass::Cubin written = sass::Cubin::load(out.string());
    EXPECT_NO_THROW(written.kernel(r.kernel));
  } else {
    EXPECT_EQ(r.gain, 0);
    EXPECT_FALSE(fs::exists(out));
  }
}

TEST(SassOptDesign, Sm90DesignRunsWithTheSyntheticEvaluator) {
  REQUIRE_NVDISASM();
  synthetic_design_run(kSm90Design);
}

TEST(SassOptDesign, Sm80DesignRunsWithTheSyntheticEvaluator) {
  REQUIRE_NVDISASM();
  synthetic_design_run(kSm80Design);
}

TEST(SassOptDesign, Sm80DesignPlaysControlActionsWithTheSyntheticEvaluator) {
  REQUIRE_NVDISASM();
  synthetic_design_run(kSm80Design, sass::ActionSpace::kBoth);
}

// ---- GPU (Hopper) --------------------------------------------------------------------------------

TEST(SassGpu, CountsBitDifferencesExactly) {
  RLGEMM_REQUIRE_GPU();
  const size_t n = 1 << 20;
  std::vector<uint16_t> host(n);
  for (size_t i = 0; i < n; ++i) host[i] = uint16_t(i * 2654435761u >> 7);
  void *a = nullptr, *b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, n * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, n * 2), cudaSuccess);
  cudaMemcpy(a, host.data(), n * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(b, host.data(), n * 2, cudaMemcpyHostToDevice);
  EXPECT_EQ(count_bit_differences(a, b, n, nullptr), 0);
  // Two NaNs with different payloads, +0 and -0, and a last-element change all count.
  const uint16_t changes[][2] = {{0x7fff, 0x7e01}, {0x0000, 0x8000}};
  cudaMemcpy(static_cast<uint16_t*>(a) + 5, &changes[0][0], 2, cudaMemcpyHostToDevice);
  cudaMemcpy(static_cast<uint16_t*>(b) + 5, &changes[0][1], 2, cudaMemcpyHostToDevice);
  cudaMemcpy(static_cast<uint16_t*>(a) + 77, &changes[1][0], 2, cudaMemcpyHostToDevice);
  cudaMemcpy(static_cast<uint16_t*>(b) + 77, &changes[1][1], 2, cudaMemcpyHostToDevice);
  const uint16_t last = uint16_t(host[n - 1] ^ 1);
  cudaMemcpy(static_cast<uint16_t*>(b) + n - 1, &last, 2, cudaMemcpyHostToDevice);
  EXPECT_EQ(count_bit_differences(a, b, n, nullptr), 3);
  EXPECT_EQ(count_bit_differences(a, b, n - 1, nullptr), 2);
  cudaFree(a);
  cudaFree(b);
}

struct CompiledDesign {
  Design design;
  Problem problem;
  CompiledKernel kernel;
  std::vector<uint8_t> bytes;
};

CompiledDesign compile_for_hopper(const std::string& text, const Shape& shape) {
  CompiledDesign c{parse_design(text), {shape, Layout::kTN}, {}, {}};
  c.kernel = compile_kernel(generate_kernel(c.design, c.problem, arch_for_device(c.design, 9, 0)));
  c.bytes.assign(c.kernel.cubin.begin(), c.kernel.cubin.end());
  return c;
}

TEST(SassGpu, TheCompiledCubinIsBitwiseEqualToItselfAndTimesAlike) {
  REQUIRE_HOPPER();
  REQUIRE_NVDISASM();
  const CompiledDesign c = compile_for_hopper(kSm90Design, {1024, 1024, 1024});
  GpuSassEvaluator evaluator(c.design, c.problem, open_sass_device(), c.kernel);
  const double reference = evaluator.reference_time_us();
  EXPECT_GT(reference, 0);
  bench::TimingOptions timing;
  timing.batches = 9;
  const CubinComparison same = evaluator.compare(c.bytes, 4, timing, bench::Mode::kOffline);
  ASSERT_TRUE(same.ok) << same.failure;
  EXPECT_EQ(same.draws, 4);
  EXPECT_FALSE(same.context_lost);
  EXPECT_GT(same.original_us, 0);
  EXPECT_GT(same.candidate_us, 0);
  // The same bytes loaded twice run at the same speed, within timing noise.
  EXPECT_NEAR(same.candidate_us / same.original_us, 1.0, 0.1);
  // Not a cubin at all: a failed measurement, and the process can go on.
  const CubinComparison garbage = evaluator.compare(std::vector<uint8_t>(4096, 0x5a), 1, timing, bench::Mode::kOffline);
  EXPECT_FALSE(garbage.ok);
  EXPECT_FALSE(garbage.context_lost) << garbage.failure;
  EXPECT_NE(garbage.failure.find("does not load"), std::string::npos) << garbage.failure;
  EXPECT_TRUE(evaluator.compare(c.bytes, 1, timing, bench::Mode::kOffline).ok);
  // In CUDA graphs too (the final check's second re-time): the compiled schedule against itself.
  const CubinComparison in_graphs = evaluator.compare(c.bytes, 1, timing, bench::Mode::kGraph);
  EXPECT_TRUE(in_graphs.ok) << in_graphs.failure;
  EXPECT_EQ(in_graphs.original_rounds_us.size(), in_graphs.candidate_rounds_us.size());
}

TEST(SassGpu, ShortSearchWithTheGpuEvaluatorKeepsIdenticalOutput) {
  REQUIRE_HOPPER();
  REQUIRE_NVDISASM();
  const CompiledDesign c = compile_for_hopper(kSm90Design, {1024, 1024, 1024});
  const sass::Cubin cubin = sass::Cubin::parse(c.bytes, "compiled");
  GpuSassEvaluator evaluator(c.design, c.problem, open_sass_device(), c.kernel);
  const auto report = sass::optimize_kernel(cubin, c.kernel.name, evaluator, "anneal", 12, 3);
  ASSERT_TRUE(report.problems.empty()) << report.problems.front();
  EXPECT_FALSE(evaluator.context_lost()) << evaluator.context_lost_reason();
  EXPECT_GT(report.search.initial_time_us, 0);
  EXPECT_GT(report.search.best_time_us, 0);
  EXPECT_GE(evaluator.candidates_loaded(), report.search.evaluations);
  // Anneal proposes only legal moves: more than the compiled schedule is evaluated where the kernel has one
  // (FaultSchedules.EntryWindowsEndAtTheWaitForAnHgmma checks this design's, on the CPU).
  EXPECT_GT(report.search.evaluations, 1);
  // The best schedule, judged once more on fresh draws: identical bits, a positive time.
  bench::TimingOptions timing;
  timing.batches = 9;
  const CubinComparison best = evaluator.compare(report.patched, 4, timing, bench::Mode::kOffline);
  ASSERT_TRUE(best.ok) << best.failure;
  EXPECT_GT(best.candidate_us, 0);
}

TEST(SassGpu, DesignRunRecordsItsCsvRow) {
  REQUIRE_HOPPER();
  REQUIRE_NVDISASM();
  SassOptDesignOptions o;
  o.design = kSm90Design;
  o.shape = "1024,1024,1024";
  o.evaluator = "gpu";
  o.agent = "greedy";
  o.steps = 10;
  o.final_batches = 9;
  const fs::path csv = scratch("gpu-sass-opt.csv");
  fs::remove(csv);
  o.csv_path = csv.string();
  const auto r = run_sass_opt_design(o);
  ASSERT_TRUE(r.game.problems.empty());
  EXPECT_TRUE(r.bitwise_equal) << r.verdict;
  EXPECT_GT(r.time_before_us, 0);
  EXPECT_GT(r.time_after_us, 0);
  if (r.kept) EXPECT_LT(r.time_after_us, r.time_before_us);
  else EXPECT_EQ(r.gain, 0);
  const auto lines = lines_of(csv);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1].rfind(std::string(kSm90Design) + ",1024,1024,1024,tn,", 0), 0u) << lines[1];
  EXPECT_NE(lines[1].find(r.bitwise_equal ? ",true," : ",false,"), std::string::npos) << lines[1];
}

// `--tuned`: every picked kernel gets its CSV row; a rerun skips the rows the CSV holds.
TEST(SassGpu, TunedModeRecordsEveryKernelAndResumes) {
  REQUIRE_HOPPER();
  REQUIRE_NVDISASM();
  const fs::path table = scratch("tuned.csv");
  {
    std::ofstream out(table);
    out << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto\n";
    out << "any," << "512,512,512,tn," << kSm90Design << ",10,1.2\n";
    out << "any," << "1024,512,128,tn," << kSm90Design << ",10,1.1\n";
    out << "any," << "1024,1024,1024,tn," << kSm90Design << ",10,0.9\n";  // cuBLASLt serves it: not picked
  }
  const fs::path csv = scratch("tuned-sass-opt.csv");
  fs::remove(csv);
  const std::string command = "sass-opt --tuned " + table.string() + " --count 5 --evaluator gpu --agent greedy " +
                              "--steps 4 --final-batches 5 --csv " + csv.string();
  auto r = testing::run_rlgemm(command);
  ASSERT_EQ(r.code, 0) << r.output;
  auto lines = lines_of(csv);
  ASSERT_EQ(lines.size(), 3u) << r.output;
  EXPECT_EQ(lines[1].rfind(std::string(kSm90Design) + ",1024,512,128,tn,", 0), 0u) << lines[1];  // by M*N*K
  EXPECT_EQ(lines[2].rfind(std::string(kSm90Design) + ",512,512,512,tn,", 0), 0u) << lines[2];
  r = testing::run_rlgemm(command);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(lines_of(csv).size(), 3u) << r.output;
  EXPECT_NE(r.output.find("skipped"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rlgemm::measure
