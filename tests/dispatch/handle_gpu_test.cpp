// librlgemm on a GPU (skipped without one): every route (tuned, nearest, default, cuBLASLt) against a
// double-precision host reference on shapes that are not tile multiples, in both layouts; split-K
// workspaces (pooled per stream, the caller's, graph memory); CUDA-graph capture without prepare(); threads on
// their own streams and on cudaStreamPerThread; bad inputs through the C++ and C APIs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <regex>
#include <thread>

#include "rlgemm/rlgemm.h"
#include "rlgemm/rlgemm_c.h"
#include "support/bf16.h"
#include "support/cli.h"
#include "support/gpu.h"
#include "support/handle_case.h"

namespace rlgemm {
namespace {

using test::Case;
using test::DeviceMemory;

// `calls` captured on `stream` into a CUDA graph, C poisoned, the graph replayed once: what the check of C says.
std::string replayed(const Case& c, cudaStream_t stream, const std::function<void()>& calls,
                     cudaStreamCaptureMode mode = cudaStreamCaptureModeThreadLocal) {
  cudaGraph_t graph;
  RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream, mode));
  calls();
  RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  RLGEMM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  c.poison();
  RLGEMM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return c.check();
}

class HandleGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    RLGEMM_REQUIRE_GPU();
    device_ = open_device();
    dir_ = std::filesystem::temp_directory_path() / ("rlgemm-handle-test-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    hopper_ = device_.cc_major == 9 && device_.cc_minor == 0;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }

  // A tuned table of this GPU; rows are "M,N,K,layout,design,speedup".
  HandleOptions options_with(const std::vector<std::string>& rows) {
    const auto file = dir_ / "tuned.csv";
    std::ofstream out(file);
    out << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto\n";
    for (const auto& r : rows) {
      // r = "M,N,K,layout,design,speedup" -> insert time_us before speedup.
      const auto last = r.rfind(',');
      out << device_.name << "," << r.substr(0, last) << ",10" << r.substr(last) << "\n";
    }
    out.close();
    HandleOptions options;
    options.tuned_table = file.string();
    options.predicted_kernels = false;  // the routes these tests name; the predicted route has a test of its own
    options.nearest_kernels = false;  // nor the nearest row's design
    options.check_routes = false;       // the table's routes as written; the check has a test of its own
    // The default cubin cache (content-addressed, shared safely): each design compiles once per machine.
    return options;
  }

  // Split-K (workspace) and plain designs this GPU runs.
  std::string split_design() const {
    return hopper_ ? "sm90.ws.pingpong/128x128x64/s4/c1x1/raster_m.g8/splitk3.serial/epi_reg"
                   : "sm80/64x64x64/w32x32/s3/swz/raster_m.g8/splitk3.serial/epi_reg";
  }
  std::string big_design() const {
    return hopper_ ? "sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma"
                   : "sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg";
  }
  static constexpr const char* kSm80Swap = "sm80/64x128x32/w32x64/s5/swz/raster_m.g8/splitk1/epi_smem/swap";

  DeviceInfo device_;
  std::filesystem::path dir_;
  bool hopper_ = false;
};

// bf16 A, B and C through the handle: a tuned bf16 row (its design's text ends in /bf16), the borrowed and
// default routes in bf16, and the cuBLASLt floor with CUDA_R_16BF; against an fp64 reference with the bf16
// rounding (2^-8 relative) allowed. An fp16 row of the same shape serves fp16 calls only.

// A bf16 call of `shape` through `handle` on random inputs, against an fp64 reference with the bf16 rounding
// (2^-8 relative) allowed: "" or what is wrong.
std::string bf16_call_errors(Handle& handle, Shape s, Layout layout) {
  const int64_t M = s.m, N = s.n, K = s.k;
  std::mt19937_64 rng(M * 31 + N + int(layout));
  std::normal_distribution<float> normal;
  std::vector<uint16_t> a(M * K), b(K * N), c(M * N);
  for (auto& x : a) x = test::bf16_bits_of(normal(rng));
  for (auto& x : b) x = test::bf16_bits_of(normal(rng));
  std::vector<double> ref(M * N, 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const double x = test::bf16_float_of(a[m * K + k]);
      for (int64_t n = 0; n < N; ++n) ref[m * N + n] += x * test::bf16_float_of(layout == Layout::kNN ? b[k * N + n] : b[n * K + k]);
    }
  DeviceMemory da(a.size() * 2), db(b.size() * 2), dc(c.size() * 2);
  RLGEMM_CUDA_CHECK(cudaMemcpy(da.ptr, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  RLGEMM_CUDA_CHECK(cudaMemcpy(db.ptr, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  RLGEMM_CUDA_CHECK(cudaMemset(dc.ptr, 0xff, c.size() * 2));  // NaN
  handle.gemm(nullptr, M, N, K, da.ptr, db.ptr, layout, dc.ptr, DType::kBF16);
  handle.gemm(nullptr, M, N, K, da.ptr, db.ptr, layout, dc.ptr, DType::kBF16);  // split-K flags left zeroed
  RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
  RLGEMM_CUDA_CHECK(cudaMemcpy(c.data(), dc.ptr, c.size() * 2, cudaMemcpyDeviceToHost));
  const double atol = std::ldexp(1.0, -9) * std::sqrt(double(K)) * 4;
  int64_t bad = 0;
  for (int64_t i = 0; i < M * N; ++i) {
    const double got = test::bf16_float_of(c[i]);
    bad += !(std::isfinite(got) && std::abs(got - ref[i]) <= atol + std::ldexp(1.0, -6) * std::abs(ref[i]));
  }
  if (!bad) return "";
  return s.to_string() + " " + std::string(to_string(layout)) + " bf16: " + std::to_string(bad) + " wrong, route " +
         handle.describe(M, N, K, layout, DType::kBF16);
}

TEST_F(HandleGpu, Bf16CallsTakeBf16RoutesAndMatchTheReference) {
  const auto file = dir_ / "tuned-bf16.csv";
  {
    std::ofstream out(file);
    out << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto,cublaslt_candidate,dtype\n";
    out << device_.name << ",64,256,4096,tn," << split_design() << "/bf16,10,1.5,,bf16\n";
    out << device_.name << ",64,256,4096,tn," << big_design() << ",10,1.5,,fp16\n";
  }
  for (bool prefer_cublaslt : {false, true}) {
    HandleOptions options;
    options.tuned_table = file.string();
    options.prefer_cublaslt = prefer_cublaslt;
    options.predicted_kernels = false;  // the routes named here; the predicted route has a test of its own
    options.nearest_kernels = false;  // nor the nearest row's design
    options.check_routes = false;       // the table's routes as written; the check has a test of its own
    Handle handle(options);
    EXPECT_NE(handle.describe(64, 256, 4096, Layout::kTN, DType::kBF16).find(split_design() + "/bf16"),
              std::string::npos);
    EXPECT_NE(handle.describe(64, 256, 4096, Layout::kTN).find(big_design()), std::string::npos);
    EXPECT_EQ(handle.describe(64, 256, 4096, Layout::kTN).find("bf16"), std::string::npos);
    for (Layout layout : {Layout::kNN, Layout::kTN})
      for (Shape s : {Shape{64, 256, 4096}, Shape{1, 72, 24}, Shape{7, 200, 136}, Shape{1000, 72, 3000}})
        EXPECT_EQ(bf16_call_errors(handle, s, layout), "") << "prefer_cublaslt " << prefer_cublaslt;
    // The C API's dtype: RLGEMM_DTYPE_BF16 works, another value names the supported ones.
    rlgemm_handle_t h = nullptr;
    ASSERT_EQ(rlgemm_create_ex(&h, nullptr, file.c_str(), nullptr, prefer_cublaslt, nullptr), RLGEMM_OK);
    DeviceMemory x(64 * 64 * 2), y(64 * 64 * 2), z(64 * 64 * 2);
    EXPECT_EQ(rlgemm_hgemm_ex(h, nullptr, 64, 64, 64, x.ptr, y.ptr, RLGEMM_LAYOUT_TN, z.ptr, RLGEMM_DTYPE_BF16,
                              nullptr, 0),
              RLGEMM_OK)
        << rlgemm_last_error();
    EXPECT_EQ(rlgemm_hgemm_ex(h, nullptr, 64, 64, 64, x.ptr, y.ptr, RLGEMM_LAYOUT_TN, z.ptr, 7, nullptr, 0),
              RLGEMM_ERROR_INVALID_INPUT);
    EXPECT_NE(std::string(rlgemm_last_error()).find("supported are fp16, bf16"), std::string::npos);
    EXPECT_EQ(rlgemm_destroy(h), RLGEMM_OK);
  }
}

TEST_F(HandleGpu, EveryRouteMatchesTheReferenceInBothLayouts) {
  std::vector<std::string> rows;
  for (const char* layout : {"nn", "tn"}) {
    rows.push_back(std::string("512,1024,2048,") + layout + "," + big_design() + ",1.2");
    rows.push_back(std::string("64,256,4096,") + layout + "," + split_design() + ",1.5");
    rows.push_back(std::string("8,512,512,") + layout + "," + kSm80Swap + ",");
  }
  HandleOptions options = options_with(rows);
  options.prefer_cublaslt = false;  // kernels everywhere: the borrowed routes, not the cuBLASLt floor
  Handle handle(options);
  EXPECT_EQ(handle.tuned_shapes(), 6u);
  uint64_t tuned = 0, nearest = 0;
  const std::vector<Shape> shapes = {{512, 1024, 2048}, {64, 256, 4096}, {8, 512, 512},  // tuned
                                     {1, 72, 24},       {7, 200, 136},   {100, 1000, 1000},
                                     {1000, 72, 3000},  {33, 264, 520},  {77, 256, 4104}};  // borrowed
  for (Layout layout : {Layout::kNN, Layout::kTN})
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Case c(shapes[i], layout, 100 * i + int(layout));
      c.poison();
      c.run(handle);
      c.run(handle);  // twice: split-K flags must be left zeroed
      EXPECT_EQ(c.check(), "") << handle.describe(shapes[i].m, shapes[i].n, shapes[i].k, layout);
      (i < 3 ? tuned : nearest) += 2;
    }
  const Stats s = handle.stats();
  EXPECT_EQ(s.tuned, tuned);
  EXPECT_EQ(s.nearest, nearest);
  EXPECT_EQ(s.default_design + s.policy + s.cublaslt + s.predicted, 0u);
  EXPECT_EQ(s.total(), tuned + nearest);
  EXPECT_EQ(handle.describe(512, 1024, 2048, Layout::kTN), "tuned " + big_design());
  EXPECT_EQ(handle.describe(60, 256, 4096, Layout::kNN).rfind("nearest " + split_design() + " (from 64,256,4096)", 0),
            0u);
}

// A cuBLASLt route's plan with a bias is chosen once per machine, timed in CUDA graphs among the route's own
// algorithm with the epilogue and the heuristic's for it; a second handle on the same cache reads the choice.
// Both give C = A B + bias.
TEST_F(HandleGpu, CublasLtBiasPlansAreChosenOncePerMachine) {
  HandleOptions options = options_with({});
  options.cache_dir = (dir_ / "cache").string();
  const std::vector<Shape> shapes = {{32, 4096, 4096}, {77, 1000, 2056}};
  for (const char* expected : {"timed on first use in CUDA graphs", "(with a bias: chosen on this machine before"}) {
    SCOPED_TRACE(expected);
    Handle handle(options);
    for (size_t i = 0; i < shapes.size(); ++i) {
      Case c(shapes[i], Layout::kTN, 40 + i);
      c.add_bias(50 + i);
      c.poison();
      c.run_bias(handle);
      EXPECT_EQ(c.check(), "");
      const std::string route = handle.describe(shapes[i].m, shapes[i].n, shapes[i].k, Layout::kTN);
      ASSERT_EQ(route.rfind("cublaslt", 0), 0u) << route;
      const size_t note = route.find("(with a bias: ");
      ASSERT_NE(note, std::string::npos) << route;
      EXPECT_NE(route.find(expected, note), std::string::npos) << route;
      EXPECT_NE(route.find("; its kernel launched directly)", note), std::string::npos) << route;
    }
  }
  std::ifstream file(dir_ / "cache" / "cublaslt-bias-choices-7.csv");
  std::string line;
  int rows = 0;
  while (std::getline(file, line)) rows += line.rfind("gpu,", 0) != 0 && !line.empty();
  EXPECT_EQ(rows, int(shapes.size()));
}

// C = A B + bias on every route: kernels (tuned split-K and plain, borrowed, default) add it with a second
// launch, cuBLASLt (the floor) in its epilogue; calls without a bias on the same shapes stay without one; a
// bias first seen inside a capture plans cuBLASLt's epilogue there and replays correctly.
TEST_F(HandleGpu, BiasIsAddedOnEveryRoute) {
  const std::vector<Shape> shapes = {{64, 256, 4096}, {512, 1024, 2048}, {7, 200, 136}, {1000, 72, 3000}, {1, 4096, 512}};
  for (bool prefer_cublaslt : {false, true}) {
    HandleOptions options = options_with({"64,256,4096,tn," + split_design() + ",1.5",
                                          "512,1024,2048,nn," + big_design() + ",1.2"});
    options.prefer_cublaslt = prefer_cublaslt;
    Handle handle(options);
    for (Layout layout : {Layout::kNN, Layout::kTN})
      for (size_t i = 0; i < shapes.size(); ++i) {
        Case c(shapes[i], layout, 300 + 10 * i + int(layout));
        const std::string route = handle.describe(shapes[i].m, shapes[i].n, shapes[i].k, layout);
        c.poison();
        c.run(handle);
        EXPECT_EQ(c.check(), "") << "without a bias first, " << route;
        c.add_bias(7 + i);
        for (int repeat = 0; repeat < 2; ++repeat) {
          c.poison();
          c.run_bias(handle);
          EXPECT_EQ(c.check(), "") << "with a bias, call " << repeat << ", " << route;
        }
        // A kernel route with cuBLASLt preferred timed its bias both ways, and says which serves; a cuBLASLt
        // route launches its bias plan's kernel directly, and says so.
        const std::string after = handle.describe(shapes[i].m, shapes[i].n, shapes[i].k, layout);
        const bool kernel_route = route.rfind("cublaslt", 0) != 0;
        EXPECT_EQ(after.find("(with a bias: ") != std::string::npos, prefer_cublaslt) << after;
        if (!kernel_route) {
          const size_t bias_note = after.find("(with a bias: ");
          EXPECT_NE(bias_note, std::string::npos) << after;
          EXPECT_NE(after.find("; its kernel launched directly)", bias_note), std::string::npos) << after;
        }
        // Calls without a bias still take the route without one, after calls with one.
        const Case plain(shapes[i], layout, 300 + 10 * i + int(layout));
        plain.poison();
        plain.run(handle);
        EXPECT_EQ(plain.check(), "") << "without a bias, after calls with one, " << after;
      }
  }
  // A cuBLASLt route warmed up without a bias, then captured with one; on a cache of its own, which no other
  // test has given a bias choice for the shape (the default cache is shared by every test on the machine).
  HandleOptions options = options_with({});
  options.cache_dir = (dir_ / "capture-cache").string();
  Handle handle(options);
  Case c({256, 512, 1024}, Layout::kTN, 11);
  c.run(handle);
  ASSERT_EQ(handle.describe(256, 512, 1024, Layout::kTN).rfind("cublaslt", 0), 0u)
      << handle.describe(256, 512, 1024, Layout::kTN);
  c.add_bias(12);
  RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t stream;
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  EXPECT_EQ(replayed(c, stream, [&] { c.run_bias(handle, stream); }, cudaStreamCaptureModeGlobal), "")
      << "captured with a bias";
  EXPECT_NE(handle.describe(256, 512, 1024, Layout::kTN)
                .find("(with a bias: the algorithm without it: first seen where no timing can run; through "
                      "cublasLtMatmul: first planned during a capture)"),
            std::string::npos)
      << handle.describe(256, 512, 1024, Layout::kTN);
  cudaStreamDestroy(stream);

  // The C API, and the bias's rules.
  rlgemm_handle_t h = nullptr;
  ASSERT_EQ(rlgemm_create(&h, nullptr), RLGEMM_OK) << rlgemm_last_error();
  c.poison();
  EXPECT_EQ(rlgemm_gemm_bias_ex(h, nullptr, 256, 512, 1024, c.da->ptr, c.db->ptr, RLGEMM_LAYOUT_TN, c.dc->ptr,
                                RLGEMM_DTYPE_FP16, c.dbias->ptr, nullptr, 0),
            RLGEMM_OK)
      << rlgemm_last_error();
  EXPECT_EQ(c.check(), "");
  EXPECT_EQ(rlgemm_gemm_bias_ex(h, nullptr, 256, 512, 1024, c.da->ptr, c.db->ptr, RLGEMM_LAYOUT_TN, c.dc->ptr,
                                RLGEMM_DTYPE_FP16, nullptr, nullptr, 0),
            RLGEMM_ERROR_INVALID_INPUT);
  EXPECT_NE(std::string(rlgemm_last_error()).find("bias is a null pointer"), std::string::npos) << rlgemm_last_error();
  EXPECT_EQ(rlgemm_gemm_bias_ex(h, nullptr, 256, 512, 1024, c.da->ptr, c.db->ptr, RLGEMM_LAYOUT_TN, c.dc->ptr,
                                RLGEMM_DTYPE_FP16, static_cast<char*>(c.dbias->ptr) + 2, nullptr, 0),
            RLGEMM_ERROR_INVALID_INPUT);
  EXPECT_NE(std::string(rlgemm_last_error()).find("bias is not 16-byte aligned"), std::string::npos)
      << rlgemm_last_error();
  EXPECT_EQ(rlgemm_destroy(h), RLGEMM_OK);
}

TEST_F(HandleGpu, UntunedGpuWithoutCublasLtUsesTheDefaultDesign) {
  HandleOptions options = options_with({});
  options.prefer_cublaslt = false;
  Handle handle(options);
  for (Layout layout : {Layout::kNN, Layout::kTN})
    for (Shape shape : {Shape{1, 8, 8}, Shape{130, 136, 264}, Shape{257, 520, 1000}}) {
      const Case c(shape, layout, shape.m);
      c.poison();
      c.run(handle);
      EXPECT_EQ(c.check(), "");
    }
  EXPECT_EQ(handle.stats().default_design, 6u);
  EXPECT_EQ(handle.describe(1, 8, 8, Layout::kTN).rfind(hopper_ ? "default sm90" : "default sm80", 0), 0u);
}

TEST_F(HandleGpu, CublasLtServesTheShapesWhereItWasFaster) {
  const std::string row = "200,512,1024,tn," + big_design() + ",0.5";
  {
    Handle handle(options_with({row}));
    const Case c({200, 512, 1024}, Layout::kTN, 7);
    c.poison();
    c.run(handle);
    EXPECT_EQ(c.check(), "");
    EXPECT_EQ(handle.stats().cublaslt, 1u);
    // No candidate recorded: lt_auto's choice, made here (or on an earlier run on this machine).
    EXPECT_EQ(handle.describe(200, 512, 1024, Layout::kTN).rfind("cublaslt (", 0), 0u);
  }
  HandleOptions options = options_with({row});
  options.prefer_cublaslt = false;
  Handle handle(options);
  EXPECT_EQ(handle.describe(200, 512, 1024, Layout::kTN), "tuned " + big_design());
}

// A GPU without rows gets the floor: cuBLASLt with lt_auto's choice, timed on a shape's first use and kept in
// the cache, so that a second handle (another process) finds it; an unwritable cache costs a warning, once.
// Launched directly (the default), one choice timed in CUDA graphs serves eager and captured calls alike
// (cublaslt-graph-choices-6.csv) on these shapes, all short (a long kernel gets an eager choice too:
// LtDirectGpu.ALongFloorKernelGetsAnEagerChoiceOfItsOwn); through cublasLtMatmul, eager calls take a choice timed eagerly
// (cublaslt-choices-6.csv) and captured calls the graph choice. A shape first used by a call is timed on that
// call's operands too (and the call's C is still its product); one first used by prepare() on scratch only.
TEST_F(HandleGpu, UntunedShapesGetTheCublasLtFloorChosenOncePerMachine) {
  for (const bool direct : {true, false}) {
    SCOPED_TRACE(direct ? "direct launches" : "through cublasLtMatmul");
    HandleOptions options = options_with({});
    options.direct_cublaslt = direct;
    const std::string sub = direct ? "direct" : "through";
    options.cache_dir = (dir_ / sub / "cache").string();
    const std::string timed =
        std::string(direct ? "cublaslt floor (timed on first use in CUDA graphs" : "cublaslt floor (timed on first use") +
        ", on the caller's operands too: candidate ";
    const std::string eager_file = direct ? "cublaslt-graph-choices-6.csv" : "cublaslt-choices-6.csv";
    const std::vector<Shape> shapes = {{1, 4096, 4096}, {130, 136, 264}, {2000, 576, 1792}};
    {
      Handle handle(options);
      for (Layout layout : {Layout::kNN, Layout::kTN})
        for (Shape shape : shapes) {
          const Case c(shape, layout, shape.m + int(layout));
          c.poison();
          c.run(handle);
          EXPECT_EQ(c.check(), "");
          const std::string route = handle.describe(shape.m, shape.n, shape.k, layout);
          EXPECT_EQ(route.rfind(timed, 0), 0u) << route;
          // One algorithm for both ways of calling where launched directly; through cublasLtMatmul, captured calls
          // take another where the graph choice differs.
          if (direct) EXPECT_EQ(route.find("captured calls:"), std::string::npos) << route;
        }
      EXPECT_EQ(handle.stats().cublaslt, 6u);
      EXPECT_EQ(handle.stats().total(), 6u);
      handle.prepare(96, 520, 776, Layout::kTN);
      const std::string prepared = handle.describe(96, 520, 776, Layout::kTN);
      EXPECT_EQ(prepared.rfind(direct ? "cublaslt floor (timed on first use in CUDA graphs: candidate "
                                      : "cublaslt floor (timed on first use: candidate ", 0), 0u) << prepared;
      // The first uses chose floors and checked no kernel (there is none); a later call of a shape adds nothing.
      const Stats used = handle.stats();
      EXPECT_GT(used.first_use_floor_s, 0);
      EXPECT_EQ(used.first_use_check_s, 0);
      const Case again(shapes[1], Layout::kTN, 77);
      again.run(handle);
      EXPECT_EQ(again.check(), "");
      EXPECT_EQ(handle.stats().first_use_floor_s, used.first_use_floor_s);
    }
    const std::string kept = testing::read_text(dir_ / sub / "cache" / eager_file);
    EXPECT_EQ(kept.rfind("gpu,cublaslt_version,M,N,K,layout,candidate,candidates\n" + device_.name + ",", 0), 0u) << kept;
    EXPECT_NE(kept.find(",2000,576,1792,tn,"), std::string::npos) << kept;
    EXPECT_EQ(std::filesystem::exists(dir_ / sub / "cache" / "cublaslt-choices-6.csv"), !direct);
    {
      Handle again(options);
      const std::string route = again.describe(2000, 576, 1792, Layout::kTN);
      const std::string before = direct ? "cublaslt floor (chosen on this machine before in CUDA graphs)"
                                        : "cublaslt floor (chosen on this machine before)";
      EXPECT_EQ(route.rfind(before, 0), 0u) << route;
      const Case c({2000, 576, 1792}, Layout::kTN, 5);
      c.poison();
      c.run(again);
      EXPECT_EQ(c.check(), "");
    }
    std::filesystem::create_directories(dir_ / sub);
    std::ofstream(dir_ / sub / "plain-file") << "x";
    options.cache_dir = (dir_ / sub / "plain-file" / "cache").string();
    ::testing::internal::CaptureStderr();
    {
      Handle unwritable(options);
      for (Shape shape : shapes) {
        const Case c(shape, Layout::kTN, 9);
        c.poison();
        c.run(unwritable);
        EXPECT_EQ(c.check(), "");
      }
    }
    // One warning for each cache written (the choices timed in CUDA graphs; the eager choices too where calls go
    // through cublasLtMatmul), once.
    const std::string warnings = ::testing::internal::GetCapturedStderr();
    std::vector<std::string> files = {"cublaslt-graph-choices-6.csv: cannot write it"};
    if (!direct) files.push_back("cublaslt-choices-6.csv: cannot write it");
    for (const std::string& file : files) {
      EXPECT_NE(warnings.find(file), std::string::npos) << warnings;
      EXPECT_EQ(warnings.find(file), warnings.rfind(file)) << "once: " << warnings;
    }
  }
}

// With predicted_kernels, the built-in predictor may put a kernel on an untuned shape; every call is right
// either way, and the route says which it took and what was predicted.
TEST_F(HandleGpu, PredictedRoutesAreCorrectAndSaySo) {
  HandleOptions options = options_with({});
  options.predicted_kernels = true;
  Handle handle(options);
  const std::vector<Shape> shapes = {{1, 4096, 4096}, {300, 4608, 3584}, {2000, 576, 7168}, {4096, 4096, 4096}};
  for (Shape shape : shapes) {
    const Case c(shape, Layout::kTN, shape.m);
    c.poison();
    c.run(handle);
    c.run(handle);
    EXPECT_EQ(c.check(), "") << handle.describe(shape.m, shape.n, shape.k, Layout::kTN);
    const std::string route = handle.describe(shape.m, shape.n, shape.k, Layout::kTN);
    const bool predicted = route.rfind("predicted ", 0) == 0 && route.find("x cuBLASLt") != std::string::npos;
    EXPECT_TRUE(predicted || route.rfind("cublaslt floor", 0) == 0) << route;
  }
  const Stats s = handle.stats();
  EXPECT_EQ(s.predicted + s.cublaslt, 2 * shapes.size());
  EXPECT_EQ(s.total(), 2 * shapes.size());  // no call counted twice, none on another route
  // bf16: the fp16 twin's design in bf16, kept only where it measured faster than the bf16 floor.
  for (Shape shape : {Shape{1, 4096, 4096}, Shape{128, 4608, 3584}}) {
    EXPECT_EQ(bf16_call_errors(handle, shape, Layout::kTN), "");
    const std::string route = handle.describe(shape.m, shape.n, shape.k, Layout::kTN, DType::kBF16);
    const bool predicted = route.rfind("predicted ", 0) == 0 && route.find("/bf16") != std::string::npos &&
                           route.find("x cuBLASLt") != std::string::npos;
    EXPECT_TRUE(predicted || route.rfind("cublaslt floor", 0) == 0) << route;
  }
}

// Autotuning: an untuned shape's first call checks the predictor's few best kernels against the floor and
// keeps for each way of calling the fastest that passed (describe() says "autotuned", or the floor says what
// it measured); the choices are in the cache, so a second handle builds and checks only the kept kernels.
TEST_F(HandleGpu, AutotuneKeepsTheFastestAndASecondHandleFindsIt) {
  HandleOptions options = options_with({});
  options.autotune = true;
  options.autotune_candidates = 3;
  options.cache_dir = (dir_ / "cache").string();
  const std::vector<Shape> shapes = {{1, 4096, 4096}, {300, 4608, 3584}, {2000, 576, 7168}};
  std::vector<std::string> first;
  {
    Handle handle(options);
    for (Shape shape : shapes) {
      const Case c(shape, Layout::kTN, shape.m + 1);
      c.poison();
      c.run(handle);
      c.run(handle);
      const std::string route = handle.describe(shape.m, shape.n, shape.k, Layout::kTN);
      EXPECT_EQ(c.check(), "") << route;
      const bool kept = route.rfind("autotuned ", 0) == 0 && route.find("autotuned on first use: eager calls: ") != std::string::npos;
      const bool floor = route.rfind("cublaslt floor", 0) == 0 && route.find("autotuned on first use") != std::string::npos;
      EXPECT_TRUE(kept || floor) << route;
      EXPECT_NE(route.find("; CUDA graphs: "), std::string::npos) << route;
      first.push_back(route);
    }
    EXPECT_EQ(handle.stats().predicted + handle.stats().cublaslt, 2 * shapes.size());
    EXPECT_EQ(handle.stats().total(), 2 * shapes.size());
  }
  ASSERT_TRUE(std::filesystem::exists(dir_ / "cache" / "autotune-choices.csv"));
  Handle again(options);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Case c(shapes[i], Layout::kTN, shapes[i].m + 2);
    c.poison();
    c.run(again);
    const std::string route = again.describe(shapes[i].m, shapes[i].n, shapes[i].k, Layout::kTN);
    EXPECT_EQ(c.check(), "") << route;
    // A kernel kept for either way of calling is built and checked again; none kept: the floor, unmeasured.
    const bool any_kept = first[i].find("eager calls: sm") != std::string::npos ||
                          first[i].find("CUDA graphs: sm") != std::string::npos;
    if (any_kept) {
      EXPECT_NE(route.find("autotuned on this machine before, checked again on first use"), std::string::npos) << route;
    } else {
      EXPECT_NE(route.find("autotuned on this machine: none of"), std::string::npos) << route;
    }
  }
}

// Autotuning also measures the designs of the tuned rows nearest to an untuned shape: with one table row near the
// shape, the shape's first call measures one kernel more than without neighbours, and both calls are correct.
TEST_F(HandleGpu, AutotuneAlsoMeasuresTheNearestTunedRowsDesign) {
  const std::string neighbor = "sm80/16x64x64/w16x16/s4/swz/raster_m.g1/splitk1/epi_reg";  // no predictor's guess
  HandleOptions options = options_with({"512,4096,4096,tn," + neighbor + ",1.05"});
  options.autotune = true;
  options.autotune_candidates = 1;
  const Shape shape{300, 4608, 3584};
  std::vector<int> measured;
  for (int neighbors : {0, 1}) {
    options.autotune_neighbors = neighbors;
    const std::filesystem::path cache = dir_ / ("cache-" + std::to_string(neighbors));
    options.cache_dir = cache.string();
    {
      Handle handle(options);
      const Case c(shape, Layout::kTN, 11 + neighbors);
      c.poison();
      c.run(handle);
      EXPECT_EQ(c.check(), "") << handle.describe(shape.m, shape.n, shape.k, Layout::kTN);
    }
    // The choices file's row of the shape ends in how many kernels were measured.
    std::ifstream in(cache / "autotune-choices.csv");
    std::string line;
    int count = -1;
    while (std::getline(in, line))
      if (line.find(",300,4608,3584,") != std::string::npos) count = std::stoi(line.substr(line.rfind(',') + 1));
    ASSERT_GE(count, 0) << "no row of the shape in " << (cache / "autotune-choices.csv");
    measured.push_back(count);
  }
  EXPECT_EQ(measured[1], measured[0] + 1) << measured[0] << " then " << measured[1];
  options.autotune_neighbors = 9;
  EXPECT_THROW(Handle{options}, Error);
}

// HandleOptions::nearest_kernels: a shape without a tuned row checks its nearest row's design at first use (here
// alone: the predictor is off), and describe() names it, as what serves or as the kernel the floor beat; the
// result is right whichever route serves. Without the option the shape takes the floor unmeasured.
TEST_F(HandleGpu, NearestKernelsCheckTheNearestRowsDesignAtFirstUse) {
  const std::string neighbor = "sm80/16x64x64/w16x16/s4/swz/raster_m.g1/splitk1/epi_reg";
  HandleOptions options = options_with({"512,4096,4096,tn," + neighbor + ",1.05"});
  const Shape shape{300, 4608, 3584};
  for (bool nearest : {true, false}) {
    options.nearest_kernels = nearest;
    Handle handle(options);
    const Case c(shape, Layout::kTN, 21 + nearest);
    c.poison();
    c.run(handle);
    EXPECT_EQ(c.check(), "") << "nearest_kernels " << nearest;
    const std::string route = handle.describe(shape.m, shape.n, shape.k, Layout::kTN);
    EXPECT_EQ(route.find(neighbor) != std::string::npos, nearest) << route;
    if (nearest) EXPECT_NE(route.find("measured on first use"), std::string::npos) << route;
  }
}

// A tuned row's kernel is checked beside the designs the shape would take without the row (here the nearest other
// row's: the predictor is off), and the fastest of them that beats the floor serves; describe() names the untuned
// route's design (as what serves, or as the kernel the floor beat). Without the check the row serves as written.
TEST_F(HandleGpu, ATunedRowIsCheckedBesideTheUntunedRoutesDesign) {
  // The row's design two stages deep on 16x64 tiles; the other row's a kernel of large tiles, the faster here.
  const std::string row_design = "sm80/16x64x64/w16x16/s2/swz/raster_m.g1/splitk1/epi_reg";
  const std::string other = hopper_ ? "sm90.ws.pingpong/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg" : big_design();
  const Shape shape{300, 4608, 3584};
  HandleOptions options = options_with({"300,4608,3584,tn," + row_design + ",1.05",
                                        "512,4096,4096,tn," + other + ",1.05"});
  options.nearest_kernels = true;
  for (bool check : {true, false}) {
    options.check_routes = check;
    Handle handle(options);
    cudaStream_t stream;
    RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const Case c(shape, Layout::kTN, 41 + check);
    c.poison();
    c.run(handle, stream);  // first use: the check, where on
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(c.check(), "") << "check_routes " << check;
    EXPECT_EQ(replayed(c, stream, [&] { c.run(handle, stream); }), "") << "check_routes " << check;
    const std::string route = handle.describe(shape.m, shape.n, shape.k, Layout::kTN);
    EXPECT_EQ(route.find(other) != std::string::npos, check) << route;
    if (check) {
      EXPECT_NE(route.find("measured on first use"), std::string::npos) << route;
    } else {
      EXPECT_EQ(route.rfind("tuned " + row_design, 0), 0u) << route;
    }
    RLGEMM_CUDA_CHECK(cudaStreamDestroy(stream));
  }
}

// Where the floor's cuBLASLt candidate beat the heuristic's first in its final, a kernel's check times that first
// too, and where the floor runs slower against it than in the final, the kernel is held to the floor as the final
// found it (dispatch::against_floor_as_chosen). Decode shapes whose graph final keeps candidate 1 (clusters of 4)
// on an H200; calls are right in both ways of calling whichever serves, and describe() says when the rule applied.
TEST_F(HandleGpu, AKernelIsCheckedAgainstTheFloorAsItsFinalFoundIt) {
  const std::string kernel = "sm80/16x64x64/w16x16/s4/swz/raster_n.g4/splitk1/epi_reg";
  HandleOptions options = options_with({"16,14336,3584,tn," + kernel + ",1.05", "16,28672,3584,tn," + kernel + ",1.05"});
  options.check_routes = true;
  options.cache_dir = (dir_ / "cache").string();  // the floor's choices timed now, with their finals
  Handle handle(options);
  cudaStream_t stream;
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int beat_the_first = 0, slower = 0;
  const std::regex kept("candidate ([0-9]+) kept");
  const std::string note = "the floor ran slower against cuBLASLt's first candidate than in its final (0.";
  for (Shape shape : {Shape{16, 14336, 3584}, Shape{16, 28672, 3584}}) {
    const Case c(shape, Layout::kTN, 70 + shape.n % 7);
    c.poison();
    c.run(handle);  // first use: the floor's choice, then the check
    EXPECT_EQ(c.check(), "");
    const std::string route = handle.describe(shape.m, shape.n, shape.k, Layout::kTN);
    ASSERT_NE(route.find("(measured on first use: eager calls: "), std::string::npos) << route;
    // The floors' finals (eager calls' and, where another, captured calls'): which kept another than the first.
    bool another = false;
    for (auto it = std::sregex_iterator(route.begin(), route.end(), kept); it != std::sregex_iterator(); ++it)
      another = another || (*it)[1] != "0";
    beat_the_first += another;
    const size_t at = route.find(note);
    if (at != std::string::npos) {
      ++slower;
      EXPECT_TRUE(another) << "only a floor that beat the first is held to its final: " << route;
      EXPECT_NE(route.find("x on set ", at), std::string::npos) << route;
      EXPECT_NE(route.find("the kernels held to the floor as its final found it", at), std::string::npos) << route;
    }
    c.poison();
    c.run(handle, stream);  // eager
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(c.check(), "") << route;
    EXPECT_EQ(replayed(c, stream, [&] { c.run(handle, stream); }), "") << "replayed: " << route;
  }
  std::printf("[ floor's final ] %d of 2 shapes' floors beat the first; %d checks met one slower than its final\n",
              beat_the_first, slower);
  // What the two first uses did, by part: the floors chosen, the row's kernel built, and the check's rounds.
  const Stats s = handle.stats();
  EXPECT_GT(s.first_use_floor_s, 0);
  EXPECT_GT(s.first_use_build_s, 0);
  EXPECT_GT(s.first_use_check_s, 0);
  std::printf("[ first use ] floor's choice %.2f s, kernels built %.2f s, route check %.2f s\n", s.first_use_floor_s,
              s.first_use_build_s, s.first_use_check_s);
  cudaStreamDestroy(stream);
}

// Table rows are checked against the floor at first use, in CUDA graphs and in eager calls, and each way of
// calling takes its own winner: calls captured into a graph take the GPU-time winner (counted on its path when
// captured), eager calls the eager winner; both are correct, and describe() says which serves each way. Small
// shapes, where a kernel's lighter launch may win eager calls while cuBLAS's kernel wins the GPU's time.
TEST_F(HandleGpu, CapturedCallsTakeTheGpuTimeWinner) {
  const std::string small = hopper_ ? "sm90.ws.pingpong/64x64x64/s4/c1x1/raster_m.g8/splitk1/epi_reg"
                                    : "sm80/64x64x64/w32x32/s3/swz/raster_m.g8/splitk1/epi_reg";
  HandleOptions options = options_with({"64,64,128,tn," + small + ",1.3", "64,128,4096,tn," + split_design() + ",1.3",
                                        "1024,1024,128,tn," + small + ",1.3"});
  options.check_routes = true;
  Handle handle(options);
  cudaStream_t stream;
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int kernel_ways = 0, floor_ways = 0;
  for (Shape shape : {Shape{64, 64, 128}, Shape{64, 128, 4096}, Shape{1024, 1024, 128}}) {
    const Case c(shape, Layout::kTN, 40 + shape.k);
    c.poison();
    c.run(handle);  // first use: the check
    EXPECT_EQ(c.check(), "");
    const std::string route = handle.describe(shape.m, shape.n, shape.k, Layout::kTN);
    const std::string eager_says = "(measured on first use: eager calls: ", graph_says = "; CUDA graphs: ";
    const size_t eager_at = route.find(eager_says), graph_at = route.find(graph_says);
    ASSERT_NE(eager_at, std::string::npos) << route;
    ASSERT_NE(graph_at, std::string::npos) << route;
    // The first use passed its operands: the check timed on them too (and the call's C above is still right).
    EXPECT_NE(route.find("; on the scratch/the caller's operands: eager "), std::string::npos) << route;
    const bool eager_kernel = route.compare(eager_at + eager_says.size(), 2, "sm") == 0;
    const bool graph_kernel = route.compare(graph_at + graph_says.size(), 2, "sm") == 0;
    kernel_ways += eager_kernel + graph_kernel;
    floor_ways += !eager_kernel + !graph_kernel;
    EXPECT_EQ(route.rfind(eager_kernel ? "tuned " : "cublaslt floor", 0), 0u) << route;

    Stats before = handle.stats();
    c.poison();
    c.run(handle, stream);  // eager
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(c.check(), "") << route;
    Stats after = handle.stats();
    EXPECT_EQ(after.tuned - before.tuned, eager_kernel ? 1u : 0u) << route;
    EXPECT_EQ(after.cublaslt - before.cublaslt, eager_kernel ? 0u : 1u) << route;

    before = after;
    cudaGraph_t graph;
    RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    c.run(handle, stream);
    RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    after = handle.stats();
    EXPECT_EQ(after.tuned - before.tuned, graph_kernel ? 1u : 0u) << route;
    EXPECT_EQ(after.cublaslt - before.cublaslt, graph_kernel ? 0u : 1u) << route;
    cudaGraphExec_t exec;
    RLGEMM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) {
      c.poison();
      RLGEMM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      EXPECT_EQ(c.check(), "") << "replay " << replay << ": " << route;
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  std::printf("[ route check ] %d ways served by a kernel, %d by the floor\n", kernel_ways, floor_ways);
  cudaStreamDestroy(stream);
}

// Graphs of one split-K shape, captured on their own streams and replayed all at once, each into its own C:
// the first two take the shape's capture slots, the third graph memory, and no two share a workspace (a shared
// one would mix their partial sums and tickets). A direct call between the replays uses the pooled workspace.
TEST_F(HandleGpu, GraphsOfOneShapeReplayedAtOnceEachKeepTheirWorkspace) {
  Handle handle(options_with({"96,512,2048,tn," + split_design() + ",1.3"}));
  ASSERT_GT(handle.workspace_bytes(96, 512, 2048, Layout::kTN), 0u) << handle.describe(96, 512, 2048, Layout::kTN);
  constexpr int kGraphs = 3;
  std::vector<std::unique_ptr<Case>> cases;
  std::vector<cudaStream_t> streams(kGraphs);
  std::vector<cudaGraphExec_t> execs(kGraphs);
  for (int g = 0; g < kGraphs; ++g) {
    cases.push_back(std::make_unique<Case>(Shape{96, 512, 2048}, Layout::kTN, 60 + g));
    RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&streams[g], cudaStreamNonBlocking));
    cudaGraph_t graph;
    RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(streams[g], cudaStreamCaptureModeThreadLocal));
    cases[g]->run(handle, streams[g]);
    cases[g]->run(handle, streams[g]);  // twice in one graph: ordered on its stream, one slot
    RLGEMM_CUDA_CHECK(cudaStreamEndCapture(streams[g], &graph));
    RLGEMM_CUDA_CHECK(cudaGraphInstantiate(&execs[g], graph, 0));
    cudaGraphDestroy(graph);
  }
  const Case direct({96, 512, 2048}, Layout::kTN, 70);
  for (int round = 0; round < 4; ++round) {
    for (auto& c : cases) c->poison();
    direct.poison();
    for (int g = 0; g < kGraphs; ++g) RLGEMM_CUDA_CHECK(cudaGraphLaunch(execs[g], streams[g]));
    direct.run(handle);
    RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
    for (int g = 0; g < kGraphs; ++g) EXPECT_EQ(cases[g]->check(), "") << "graph " << g << ", round " << round;
    EXPECT_EQ(direct.check(), "") << "round " << round;
  }
  // Counted as they were captured: the third graph's two calls.
  EXPECT_EQ(handle.stats().graph_memory_workspaces, 2u);
  for (int g = 0; g < kGraphs; ++g) {
    cudaGraphExecDestroy(execs[g]);
    cudaStreamDestroy(streams[g]);
  }
}

// One shape captured again and again, each graph destroyed before the next capture (a server capturing anew, a
// benchmark sizing its graph twice): a capture slot comes back once the graph that took it is gone, so no
// capture takes graph memory (which cost a 1x256x1536 split-K call 5.8 us in a graph where its slot ran 3.7),
// and every replay is correct.
TEST_F(HandleGpu, DestroyedGraphsGiveTheirCaptureSlotsBack) {
  Handle handle(options_with({"96,512,2048,tn," + split_design() + ",1.3"}));
  ASSERT_GT(handle.workspace_bytes(96, 512, 2048, Layout::kTN), 0u) << handle.describe(96, 512, 2048, Layout::kTN);
  cudaStream_t stream;
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const Case c({96, 512, 2048}, Layout::kTN, 80);
  c.run(handle, stream);  // the shape's first use, outside any capture
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int g = 0; g < 5; ++g) {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    c.run(handle, stream);
    c.run(handle, stream);
    RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    RLGEMM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    RLGEMM_CUDA_CHECK(cudaGraphDestroy(graph));
    for (int replay = 0; replay < 2; ++replay) {
      c.poison();
      RLGEMM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      EXPECT_EQ(c.check(), "") << "capture " << g << ", replay " << replay;
    }
    RLGEMM_CUDA_CHECK(cudaGraphExecDestroy(exec));
    // CUDA gives the slot back on a thread of its own, soon after the graph is gone.
    RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(handle.stats().graph_memory_workspaces, 0u);
  // A direct call after them all is still correct (the slots are not the pooled workspace).
  c.poison();
  c.run(handle, stream);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(c.check(), "");
  cudaStreamDestroy(stream);
}

// The cuBLASLt route launches the candidate lt_auto measured fastest (the table's last column); an index this
// cuBLASLt does not offer falls back to the heuristic's first, and says so.
TEST_F(HandleGpu, CublasLtRouteLaunchesTheRecordedCandidate) {
  const auto file = dir_ / "tuned-candidates.csv";
  {
    std::ofstream out(file);
    out << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto,cublaslt_candidate\n";
    out << device_.name << ",200,512,1024,tn," << big_design() << ",10,0.5,1\n";
    out << device_.name << ",300,512,1024,tn," << big_design() << ",10,0.5,999\n";
  }
  HandleOptions options;
  options.tuned_table = file.string();
  Handle handle(options);
  for (Shape shape : {Shape{200, 512, 1024}, Shape{300, 512, 1024}}) {
    const Case c(shape, Layout::kTN, 11 + shape.m);
    c.poison();
    c.run(handle);
    EXPECT_EQ(c.check(), "") << shape.to_string();
  }
  EXPECT_EQ(handle.stats().cublaslt, 2u);
  // The route, then how its calls reach the GPU (cuBLASLt's kernel launched directly, or why not).
  const std::string recorded = handle.describe(200, 512, 1024, Layout::kTN);
  EXPECT_EQ(recorded.rfind("cublaslt candidate 1 (", 0), 0u) << recorded;
  const std::string fallback = handle.describe(300, 512, 1024, Layout::kTN);
  EXPECT_EQ(fallback.rfind("cublaslt candidate 999 (candidate 999 not offered", 0), 0u) << fallback;
}

// Capture needs no prepare(): a split-K route (a workspace), a plain one and a small untuned one, warmed up on
// the legacy default stream, then captured on another stream, whose workspace comes from graph memory. The
// graph's replays and direct calls of the same shapes on the capturing stream alternate without sharing a
// workspace.
TEST_F(HandleGpu, GraphCaptureNeedsNoPrepare) {
  Handle handle(options_with({"96,512,2048,tn," + split_design() + ",1.3", "96,512,2048,nn," + big_design() + ",1.3"}));
  const Case split({96, 512, 2048}, Layout::kTN, 1), plain({96, 512, 2048}, Layout::kNN, 2);
  const Case untuned({50, 64, 128}, Layout::kTN, 3);
  const std::vector<const Case*> cases = {&split, &plain, &untuned};
  EXPECT_GT(handle.workspace_bytes(96, 512, 2048, Layout::kTN), 0u) << handle.describe(96, 512, 2048, Layout::kTN);
  for (const Case* c : cases) c->run(handle);  // warm-up: compiled, loaded, planned
  RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
  cudaStream_t stream;
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  cudaGraph_t graph;
  RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (const Case* c : cases) c->run(handle, stream);
  RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  RLGEMM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const Case direct({96, 512, 2048}, Layout::kTN, 4);
  for (int replay = 0; replay < 3; ++replay) {
    for (const Case* c : cases) c->poison();
    direct.poison();
    RLGEMM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    direct.run(handle, stream);
    RLGEMM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (const Case* c : cases) EXPECT_EQ(c->check(), "") << "replay " << replay;
    EXPECT_EQ(direct.check(), "") << "direct call between replays " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);

  // A shape first seen inside a capture would have to be compiled and loaded there: refused, with the remedy.
  cudaStream_t other;
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  const Case unseen({40, 64, 136}, Layout::kNN, 5);  // its buffers allocated before the capture
  RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(other, cudaStreamCaptureModeThreadLocal));
  try {
    unseen.run(handle, other);
    ADD_FAILURE() << "a shape first seen inside a capture was captured";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("first seen while its stream is being captured"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("prepare("), std::string::npos) << e.what();
  }
  cudaGraph_t discarded = nullptr;
  cudaStreamEndCapture(other, &discarded);
  if (discarded) cudaGraphDestroy(discarded);
  (void)cudaGetLastError();
  // prepare() makes it capturable.
  handle.prepare(40, 64, 136, Layout::kNN, other);
  RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(other, cudaStreamCaptureModeThreadLocal));
  unseen.run(handle, other);
  RLGEMM_CUDA_CHECK(cudaStreamEndCapture(other, &graph));
  RLGEMM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  unseen.poison();
  RLGEMM_CUDA_CHECK(cudaGraphLaunch(exec, other));
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(other));
  EXPECT_EQ(unseen.check(), "");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(other);
  cudaStreamDestroy(stream);
}

// The caller's workspace, whatever its contents: the handle zeroes what the kernel needs zeroed.
TEST_F(HandleGpu, CallersWorkspaceMayHoldAnything) {
  Handle handle(options_with({"64,256,4096,tn," + split_design() + ",1.5"}));
  const Case c({64, 256, 4096}, Layout::kTN, 9);
  const size_t bytes = handle.workspace_bytes(64, 256, 4096, Layout::kTN);
  ASSERT_GT(bytes, 0u) << handle.describe(64, 256, 4096, Layout::kTN);
  DeviceMemory ws(bytes);
  for (int round = 0; round < 3; ++round) {
    RLGEMM_CUDA_CHECK(cudaMemset(ws.ptr, 0x5a + round, bytes));
    c.poison();
    handle.hgemm(nullptr, 64, 256, 4096, c.da->h(), c.db->h(), Layout::kTN, c.dc->h(), ws.ptr, bytes);
    EXPECT_EQ(c.check(), "") << "round " << round;
  }
  try {
    handle.hgemm(nullptr, 64, 256, 4096, c.da->h(), c.db->h(), Layout::kTN, c.dc->h(), ws.ptr, bytes - 16);
    ADD_FAILURE() << "a short workspace was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("workspace of " + std::to_string(bytes) + " bytes"), std::string::npos)
        << e.what();
  }
  size_t from_c = 0;
  rlgemm_handle_t h = nullptr;
  ASSERT_EQ(rlgemm_create(&h, nullptr), RLGEMM_OK) << rlgemm_last_error();
  ASSERT_EQ(rlgemm_workspace_size(h, nullptr, 64, 256, 4096, RLGEMM_LAYOUT_TN, &from_c), RLGEMM_OK) << rlgemm_last_error();
  DeviceMemory ws2(std::max<size_t>(from_c, 16));
  RLGEMM_CUDA_CHECK(cudaMemset(ws2.ptr, 0xff, std::max<size_t>(from_c, 16)));
  c.poison();
  ASSERT_EQ(rlgemm_hgemm_workspace(h, nullptr, 64, 256, 4096, c.da->ptr, c.db->ptr, RLGEMM_LAYOUT_TN, c.dc->ptr,
                                   from_c ? ws2.ptr : nullptr, from_c),
            RLGEMM_OK)
      << rlgemm_last_error();
  EXPECT_EQ(c.check(), "");
  EXPECT_EQ(rlgemm_destroy(h), RLGEMM_OK);
}

// Threads on cudaStreamPerThread: one stream handle value, a different stream in each thread. They must not
// share a split-K workspace (the old pool keyed workspaces by the handle value, and they did).
TEST_F(HandleGpu, ThreadsOnThePerThreadStreamEachGetAWorkspace) {
  Handle handle(options_with({"64,256,4096,tn," + split_design() + ",1.5"}));
  constexpr int kThreads = 4, kRounds = 50;
  std::vector<std::unique_ptr<Case>> cases;
  for (int t = 0; t < kThreads; ++t) cases.push_back(std::make_unique<Case>(Shape{64, 256, 4096}, Layout::kTN, 70 + t));
  cases[0]->run(handle);  // warm-up
  RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      try {
        RLGEMM_CUDA_CHECK(cudaSetDevice(device_.ordinal));
        cases[t]->poison();
        for (int round = 0; round < kRounds; ++round) cases[t]->run(handle, cudaStreamPerThread);
        RLGEMM_CUDA_CHECK(cudaStreamSynchronize(cudaStreamPerThread));
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (const auto& c : cases) EXPECT_EQ(c->check(), "");
}

TEST_F(HandleGpu, ConcurrentCallersOnTheirOwnStreams) {
  Handle handle(options_with({"64,256,4096,tn," + split_design() + ",1.5"}));
  const std::vector<Shape> shapes = {{64, 256, 4096}, {65, 256, 4096}, {3, 128, 256}};
  std::vector<std::unique_ptr<Case>> cases;
  for (int t = 0; t < 4; ++t)
    for (size_t i = 0; i < shapes.size(); ++i) cases.push_back(std::make_unique<Case>(shapes[i], Layout::kTN, 10 * t + i));
  std::vector<std::thread> threads;
  std::vector<std::string> errors(4);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      try {
        RLGEMM_CUDA_CHECK(cudaSetDevice(device_.ordinal));
        cudaStream_t stream;
        RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
        for (int round = 0; round < 20; ++round)
          for (size_t i = 0; i < shapes.size(); ++i) cases[t * shapes.size() + i]->run(handle, stream);
        RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
        cudaStreamDestroy(stream);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& e : errors) EXPECT_EQ(e, "");
  for (const auto& c : cases) EXPECT_EQ(c->check(), "");
  EXPECT_EQ(handle.stats().total(), 4u * 20u * shapes.size());
}

TEST_F(HandleGpu, BadInputsAreRefusedWithTheRule) {
  Handle handle(options_with({}));
  const Case c({64, 64, 64}, Layout::kTN, 1);
  auto message = [&](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      return e.what();
    }
    return "(no error)";
  };
  EXPECT_NE(message([&] { handle.hgemm(nullptr, 64, 64, 64, nullptr, c.db->h(), Layout::kTN, c.dc->h()); })
                .find("A is a null pointer"),
            std::string::npos);
  EXPECT_NE(message([&] { handle.hgemm(nullptr, 64, 56, 64, c.da->h(), c.db->h() + 1, Layout::kTN, c.dc->h()); })
                .find("B is not 16-byte aligned"),
            std::string::npos);
  EXPECT_NE(message([&] { handle.hgemm(nullptr, 64, 60, 64, c.da->h(), c.db->h(), Layout::kTN, c.dc->h()); })
                .find("multiple of 8"),
            std::string::npos);
  EXPECT_NE(message([&] { handle.hgemm(nullptr, 0, 64, 64, c.da->h(), c.db->h(), Layout::kTN, c.dc->h()); }),
            "(no error)");
  EXPECT_EQ(handle.stats().total(), 0u);

  // The C API: status = the error kind's exit code, message per thread.
  rlgemm_handle_t h = nullptr;
  ASSERT_EQ(rlgemm_create(&h, nullptr), RLGEMM_OK) << rlgemm_last_error();
  EXPECT_EQ(rlgemm_hgemm(h, nullptr, 64, 64, 64, c.da->ptr, c.db->ptr, 2, c.dc->ptr), RLGEMM_ERROR_INVALID_INPUT);
  EXPECT_NE(std::string(rlgemm_last_error()).find("layout must be 0"), std::string::npos);
  EXPECT_EQ(rlgemm_hgemm(h, nullptr, 64, 64, 64, c.da->ptr, static_cast<char*>(c.db->ptr) + 8, 1, c.dc->ptr),
            RLGEMM_ERROR_INVALID_INPUT);
  EXPECT_NE(std::string(rlgemm_last_error()).find("16-byte aligned"), std::string::npos);
  c.poison();
  ASSERT_EQ(rlgemm_hgemm(h, nullptr, 64, 64, 64, c.da->ptr, c.db->ptr, RLGEMM_LAYOUT_TN, c.dc->ptr), RLGEMM_OK)
      << rlgemm_last_error();
  EXPECT_EQ(c.check(), "");
  // The one good call, on whichever route served it: every route counts, the predicted one too (the default
  // handle has predicted kernels on, so an untuned shape may take it).
  rlgemm_stats_t stats{};
  ASSERT_EQ(rlgemm_stats(h, &stats), RLGEMM_OK);
  EXPECT_EQ(stats.tuned + stats.nearest + stats.policy + stats.default_design + stats.cublaslt + stats.predicted, 1u);
  static_assert(sizeof(rlgemm_stats_t) == 6 * sizeof(uint64_t), "a route added to rlgemm_stats_t belongs in the sum");
  // Its first use chose the floor (and checked a kernel where one was predicted); a NULL pointer skips a value.
  double floor_s = -1, check_s = -1;
  ASSERT_EQ(rlgemm_first_use_seconds(h, &floor_s, nullptr, &check_s), RLGEMM_OK);
  EXPECT_GT(floor_s, 0);
  EXPECT_GE(check_s, 0);
  char route[256];
  ASSERT_EQ(rlgemm_describe(h, 64, 64, 64, RLGEMM_LAYOUT_TN, route, sizeof route), RLGEMM_OK);
  EXPECT_GT(std::strlen(route), 0u);
  EXPECT_EQ(rlgemm_destroy(h), RLGEMM_OK);
  rlgemm_handle_t none = nullptr;
  EXPECT_EQ(rlgemm_create(&none, (dir_ / "missing.db").c_str()), RLGEMM_ERROR_INVALID_INPUT);
  EXPECT_NE(std::string(rlgemm_last_error()).find("does not exist"), std::string::npos);
  EXPECT_EQ(none, nullptr);
}

}  // namespace
}  // namespace rlgemm
