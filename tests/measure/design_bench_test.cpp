// rlgemm's designs in the benchmark harness and as the tuner's GPU backend.
// CPU: bad --design input is refused before any GPU work. GPU: designs of both families pass the gate on
// every grid shape in both layouts and on shapes that are not tile multiples, and the GPU backend measures,
// rejects and recovers as the tuner expects.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "bench/correctness.h"
#include "bench/implementation.h"
#include "bench/timing.h"
#include "measure/design_implementation.h"
#include "measure/gpu_measurer.h"
#include "rlgemm/shapes.h"
#include "search/worker.h"
#include "support/cli.h"
#include "support/gpu.h"

namespace rlgemm::measure {
namespace {

using rlgemm::testing::run_rlgemm;

TEST(BenchDesignsCli, BadDesignsAreRejectedBeforeTheGpu) {
  auto r = run_rlgemm("bench --shape 64,64,64 --design sm90.ws.coop/128x256/s4");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("sm90.ws.coop/128x256/s4"), std::string::npos) << r.output;
  r = run_rlgemm("bench --shape 64,64,64 --design test.fault");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("fault-injection"), std::string::npos) << r.output;
  const auto file = std::filesystem::temp_directory_path() / "rlgemm_designs_bad.txt";
  std::ofstream(file) << "# hand-picked\nsm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg\n\nsm80/64x64/oops\n";
  r = run_rlgemm("bench --shape 64,64,64 --designs " + file.string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find(":4:"), std::string::npos) << "names the line\n" << r.output;
  // A design of another element type than the run's is refused with the rule.
  r = run_rlgemm("bench --shape 64,64,64 --dtype bf16 --design sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("a design runs only problems of its own element type"), std::string::npos) << r.output;
}

TEST(BenchDesignsCli, HelpNamesTheDesignOptions) {
  const auto r = run_rlgemm("bench --help");
  EXPECT_NE(r.output.find("--design"), std::string::npos);
  EXPECT_NE(r.output.find("--designs"), std::string::npos);
}

// One design per family and arrangement the grid check covers.
std::vector<Design> family_designs(const DeviceInfo& dev) {
  std::vector<Design> designs{parse_design("sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg"),
                              parse_design("sm80/64x64x32/w32x32/s4/pad/raster_n.g4/splitk2.parallel/epi_smem")};
  if (dev.cc_major == 9 && dev.cc_minor == 0) {
    designs.push_back(parse_design("sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma"));
    designs.push_back(parse_design("sm90.ws.pingpong/64x128x64/s5/c1x2/raster_n.g8/splitk1/epi_reg"));
    designs.push_back(parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk3.serial/epi_reg"));
  }
  return designs;
}

void expect_correct(DesignImplementation& impl, const std::vector<Shape>& shapes, Layout layout) {
  bench::Gate gate;
  uint64_t seed = 99;
  int failures = 0;
  for (const Shape& s : shapes) {
    const Problem p{s, layout};
    if (!impl.supports(p)) continue;
    gate.load(p, seed += 7, nullptr);
    impl.prepare(p, gate.operands(), nullptr);
    const auto r = gate.check(impl, nullptr);
    if (!r.ok && ++failures <= 5) ADD_FAILURE() << impl.name() << " " << to_string(layout) << " " << s.to_string() << ": " << r.why;
  }
  EXPECT_EQ(failures, 0) << impl.name() << " " << to_string(layout);
}

TEST(DesignsGpu, CorrectOnShapesThatAreNotTileMultiples) {
  RLGEMM_REQUIRE_GPU();
  const DeviceInfo dev = open_device();
  std::vector<Shape> shapes;
  for (int64_t m : {1, 7, 100, 1000})
    for (int64_t n : {72, 200})
      for (int64_t k : {24, 136, 1000}) shapes.push_back({m, n, k});
  for (const Design& d : family_designs(dev)) {
    DesignImplementation impl(d, dev);
    for (Layout layout : {Layout::kNN, Layout::kTN}) expect_correct(impl, shapes, layout);
  }
}

// The whole 1000-shape grid in both layouts: every RLGEMM_GRID_STRIDE-th shape (default 25; 1 = all).
TEST(DesignsGpu, CorrectOnTheGrid) {
  RLGEMM_REQUIRE_GPU();
  const DeviceInfo dev = open_device();
  const char* stride_env = std::getenv("RLGEMM_GRID_STRIDE");
  const size_t stride = stride_env ? std::max(1, std::atoi(stride_env)) : 25;
  std::vector<Shape> shapes;
  const auto& grid = cudal2_grid();
  for (size_t i = 0; i < grid.size(); i += stride) shapes.push_back(grid[i]);
  for (const Design& d : family_designs(dev)) {
    DesignImplementation impl(d, dev);
    for (Layout layout : {Layout::kNN, Layout::kTN}) expect_correct(impl, shapes, layout);
  }
}

// The reference of a graph-mode reward is cuBLASLt with its candidates timed in graph mode, as the library's
// floor chooses for captured calls, and it passes the gate.
TEST(GpuBackend, TheGraphReferenceIsChosenInGpuTime) {
  RLGEMM_REQUIRE_GPU();
  const Problem p{{64, 128, 4096}, Layout::kTN};
  bench::Gate gate;
  gate.load(p, 5, nullptr);
  for (bench::Mode mode : {bench::Mode::kGraph, bench::Mode::kOffline}) {
    auto lt = bench::make_lt_auto(mode);
    EXPECT_EQ(lt->name(), "lt_auto");
    lt->prepare(p, gate.operands(), nullptr);
    const auto r = gate.check(*lt, nullptr);
    EXPECT_TRUE(r.ok) << r.why;
    EXPECT_EQ(lt->detail().ends_with(" in graph mode"), mode == bench::Mode::kGraph) << lt->detail();
    EXPECT_TRUE(bench::lt_auto_candidate(lt->detail()).has_value()) << lt->detail();
  }
}

// The tuner's path on a GPU: an isolated worker gets each batch as a "build" request, compiles its kernels at once,
// then measures each design alone; a compile's time is reported once, with the design's first measurement.
class GpuBackendWorker : public test::GpuTestWithDir {};

TEST_F(GpuBackendWorker, BuildsEachBatchAtOnceThenMeasuresEachDesign) {
  const std::filesystem::path exe = std::filesystem::path(RLGEMM_BINARY_DIR) / "rlgemm";
  if (!std::filesystem::exists(exe)) GTEST_SKIP() << "the rlgemm executable is not built in " << RLGEMM_BINARY_DIR;
  // An empty cubin cache of its own (the test's folder), so that every kernel is compiled here; the worker
  // inherits it.
  const char* before = std::getenv("RLGEMM_CACHE_DIR");
  struct Restore {
    std::optional<std::string> saved;
    ~Restore() {
      if (saved) ::setenv("RLGEMM_CACHE_DIR", saved->c_str(), 1);
      else ::unsetenv("RLGEMM_CACHE_DIR");
    }
  } restore{before ? std::optional<std::string>(before) : std::nullopt};
  ::setenv("RLGEMM_CACHE_DIR", dir_.c_str(), 1);
  search::MeasurerSetup setup;
  setup.backend.backend = "gpu";
  setup.worker_exe = exe.string();
  setup.timeout_s = 300;
  auto worker = search::make_measurer(setup);
  const Problem p{{1000, 200, 136}, Layout::kTN};
  const std::vector<Design> designs = {parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg"),
                                       parse_design("sm80/128x64x32/w64x32/s3/swz/raster_m.g8/splitk1/epi_reg"),
                                       parse_design("sm80/64x128x32/w32x64/s3/swz/raster_n.g4/splitk1/epi_reg")};
  const auto results = worker->measure_batch(designs, p, TimingMode::kGraph);
  ASSERT_EQ(results.size(), designs.size());
  double compiles = 0;
  for (const Measurement& m : results) {
    EXPECT_EQ(m.status, MeasureStatus::kOk) << m.error;
    EXPECT_GT(m.compile_seconds, 0) << "each kernel was compiled for this batch";
    compiles += m.compile_seconds;
  }
  EXPECT_GT(results[0].seconds.build, 0);
  // At once: the batch's compiles together took less wall time than one after another.
  EXPECT_LT(results[0].seconds.build, compiles) << "build " << results[0].seconds.build << " s";
  // Built already: a second batch of the same designs compiles nothing and reports no compile time.
  const auto again = worker->measure_batch(designs, p, TimingMode::kGraph);
  for (const Measurement& m : again) {
    EXPECT_EQ(m.status, MeasureStatus::kOk) << m.error;
    EXPECT_EQ(m.compile_seconds, 0);
  }
  // The next problem's round built in the background (another layout: other kernels), then measured: each
  // kernel's compile time is the prefetch's, reported with its first measurement, and every result is correct.
  const Problem next{{300, 520, 264}, Layout::kNN};
  worker->prefetch(designs, next);
  const auto prefetched = worker->measure_batch(designs, next, TimingMode::kGraph);
  ASSERT_EQ(prefetched.size(), designs.size());
  for (const Measurement& m : prefetched) {
    EXPECT_EQ(m.status, MeasureStatus::kOk) << m.error;
    EXPECT_GT(m.compile_seconds, 0) << "compiled by the prefetch for this layout";
  }
}

TEST(GpuBackend, MeasuresRejectsAndReportsCompileTimeOnce) {
  RLGEMM_REQUIRE_GPU();
  search::BackendOptions options;
  options.backend = "gpu";
  GpuMeasurer gpu(options);
  const Problem p{{1000, 200, 136}, Layout::kTN};
  const TimingStats ref = gpu.reference(p, TimingMode::kOffline);
  EXPECT_GT(ref.median_us, 0);
  const Design good = parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg");
  const auto batch = gpu.measure_batch({good, parse_design("sm80/128x64x32/w64x32/s3/swz/raster_m.g8/splitk1/epi_reg")}, p,
                                       TimingMode::kOffline);
  ASSERT_EQ(batch.size(), 2u);
  for (const auto& m : batch) {
    EXPECT_EQ(m.status, MeasureStatus::kOk) << m.error;
    EXPECT_GT(m.timing.median_us, 0);
    EXPECT_FALSE(m.source_hash.empty());
  }
  const Measurement again = gpu.measure(good, {{64, 72, 24}, Layout::kTN}, TimingMode::kServer);
  EXPECT_EQ(again.status, MeasureStatus::kOk) << again.error;
  EXPECT_EQ(again.compile_seconds, 0) << "compile time is recorded once per kernel";
  const Measurement nn = gpu.measure(good, {{64, 64, 64}, Layout::kNN}, TimingMode::kOffline);
  EXPECT_EQ(nn.status, MeasureStatus::kOk) << nn.error;
  EXPECT_GT(nn.compile_seconds + 1, 0);
  const Measurement wrong = gpu.measure(parse_design("test.wrong"), p, TimingMode::kOffline);
  EXPECT_EQ(wrong.status, MeasureStatus::kWrong) << wrong.error;
  Design too_big = parse_design("sm80/256x256x64/w64x64/s8/swz/raster_m.g8/splitk1/epi_reg");
  const Measurement invalid = gpu.measure(too_big, p, TimingMode::kOffline);
  EXPECT_EQ(invalid.status, MeasureStatus::kFailed);
  EXPECT_NE(invalid.error.find("invalid design"), std::string::npos) << invalid.error;
}

}  // namespace
}  // namespace rlgemm::measure
