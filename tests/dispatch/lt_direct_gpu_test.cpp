// cuBLASLt's kernel launched directly, on a GPU (skipped without one): for decode, prefill and odd shapes, in
// both layouts and both element types, the direct launch gives cublasLtMatmul's bits on fresh random operands at
// addresses no recording used (16-byte aligned where the recipe says so), eagerly and replayed from a CUDA
// graph; and the handle's floor takes it, with the same bits as a handle that calls cublasLtMatmul.
#include "dispatch/lt_direct.h"

#include <gtest/gtest.h>

#include <cuda_fp16.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "bench/fill.h"
#include "bench/timing.h"
#include "core/cuda_util.h"
#include "dispatch/cublaslt_gemm.h"
#include "rlgemm/rlgemm.h"
#include "support/bf16.h"
#include "support/gpu.h"

namespace rlgemm::dispatch {
namespace {

std::vector<unsigned char> to_host(const void* p, size_t bytes) {
  std::vector<unsigned char> h(bytes);
  RLGEMM_CUDA_CHECK(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost));
  return h;
}

// The largest error of `c` (row-major M x N, as host bytes) against an fp64 product of the device operands, over
// the reference's largest magnitude.
double relative_error(const Problem& p, const void* a_dev, const void* b_dev, const std::vector<unsigned char>& c) {
  const int64_t M = p.shape.m, N = p.shape.n, K = p.shape.k;
  const auto a = to_host(a_dev, size_t(M * K) * 2), b = to_host(b_dev, size_t(K * N) * 2);
  auto value = [&](const std::vector<unsigned char>& v, int64_t i) {
    uint16_t bits;
    std::memcpy(&bits, v.data() + i * 2, 2);
    if (p.dtype == DType::kBF16) return double(test::bf16_float_of(bits));
    __half_raw raw;
    raw.x = bits;
    return double(__half2float(__half(raw)));
  };
  double worst = 0, scale = 1e-30;
  // Rows spread over M (every row of a small M), every column.
  for (int64_t m = 0; m < M; m += std::max<int64_t>(1, M / 8))
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k)
        ref += value(a, m * K + k) * (p.layout == Layout::kTN ? value(b, n * K + k) : value(b, k * N + n));
      worst = std::max(worst, std::abs(value(c, m * N + n) - ref));
      scale = std::max(scale, std::abs(ref));
    }
  return worst / scale;
}

struct Operands3 {
  DeviceScratch<unsigned char> a, b, a_at, b_at, a16, b16, c, c_ref, ws;
  explicit Operands3(const Problem& p, size_t ws_bytes)
      : a(bytes(p.a_elems())), b(bytes(p.b_elems())), a_at(bytes(p.a_elems())), b_at(bytes(p.b_elems())),
        a16(bytes(p.a_elems())), b16(bytes(p.b_elems())), c(bytes(p.c_elems())), c_ref(bytes(p.c_elems())),
        ws(ws_bytes + 4096) {}
  static size_t bytes(int64_t elems) { return size_t(elems) * 2 + 4096; }
};

// A tn call of `handle` captured in a CUDA graph on a stream of its own, and replayed once.
void call_captured(Handle& handle, const Shape& s, const half* a, const half* b, half* c) {
  cudaStream_t stream = nullptr;
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  bench::launch_captured_once([&](cudaStream_t st) { handle.hgemm(st, s.m, s.n, s.k, a, b, Layout::kTN, c); }, stream);
  cudaStreamDestroy(stream);
}

class LtDirectGpu : public ::testing::Test {
 protected:
  void SetUp() override { RLGEMM_REQUIRE_GPU(); }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // A handle's options with only the floor: an empty tuned table (the built-in one has rows for some shapes,
  // 1x4096x4096 among them), neither predicted kernels nor the nearest row's design, and its cache in a folder
  // of its own (`name`, emptied), removed after the test.
  HandleOptions floor_only(const std::string& name) {
    dir_ = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const auto empty_table = dir_ / "empty-table.csv";
    std::ofstream(empty_table) << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto\n";
    HandleOptions options;
    options.tuned_table = empty_table.string();
    options.predicted_kernels = false;
    options.nearest_kernels = false;
    options.cache_dir = dir_.string();
    return options;
  }
  std::filesystem::path dir_;
};

TEST_F(LtDirectGpu, GivesCublasLtsBitsEagerAndInGraphsOrSaysWhyNot) {
  const std::vector<Problem> problems = {
      {{1, 256, 256}, Layout::kTN},         {{16, 4096, 4096}, Layout::kTN},   {{128, 3584, 4096}, Layout::kTN},
      {{2048, 512, 3584}, Layout::kTN},     {{2048, 64, 4544}, Layout::kTN},   {{333, 1000, 1032}, Layout::kTN},
      {{1, 5120, 5120}, Layout::kNN},       {{512, 2048, 4608}, Layout::kNN},  {{64, 4096, 4096}, Layout::kTN, DType::kBF16},
      {{4096, 4096, 4096}, Layout::kTN},
  };
  CublasLtContext context;
  cudaStream_t stream = nullptr;
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int direct_count = 0;
  std::string refused;
  for (const Problem& p : problems)
    for (int candidate : {0, 1}) {
      const std::string name = p.shape.to_string() + " " + std::string(to_string(p.layout)) + " " +
                               std::string(to_string(p.dtype)) +
                               " candidate " + std::to_string(candidate);
      CublasLtGemm plan(context, p, candidate);
      std::string why;
      const auto direct = LtDirect::make(plan, p, why);
      if (!direct) {
        EXPECT_FALSE(why.empty()) << name;
        refused += "\n  " + name + ": " + why;
        continue;
      }
      ++direct_count;
      std::printf("%s: %s, min alignment %zu\n", name.c_str(), direct->text().c_str(), direct->min_alignment());
      const size_t ws_bytes = plan.workspace_bytes();
      Operands3 x(p, ws_bytes);
      const size_t c_bytes = size_t(p.shape.m * p.shape.n) * 2;
      const uint64_t seed = uint64_t(p.shape.m * 131 + p.shape.n * 7 + candidate);
      bench::fill_random(reinterpret_cast<half*>(x.a.ptr), size_t(p.shape.m * p.shape.k), bench::Fill::kNormal, seed,
                         stream, p.dtype);
      bench::fill_random(reinterpret_cast<half*>(x.b.ptr), size_t(p.shape.k * p.shape.n), bench::Fill::kNormal,
                         seed + 1, stream, p.dtype);
      RLGEMM_CUDA_CHECK(cudaMemsetAsync(x.c_ref.ptr, 0xff, c_bytes, stream));
      plan.launch(stream, x.a.ptr, x.b.ptr, x.c_ref.ptr, ws_bytes ? x.ws.ptr : nullptr);
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));  // cudaMemcpy does not wait for a non-blocking stream
      const std::vector<unsigned char> want = to_host(x.c_ref.ptr, c_bytes);
      // Against an fp64 reference too: the reference is a GEMM, not garbage both launches share.
      EXPECT_LT(relative_error(p, x.a.ptr, x.b.ptr, want), p.dtype == DType::kBF16 ? 2e-2 : 5e-3) << name;
      // Operands at an offset of the smallest alignment served: copies of A and B there.
      const size_t off = direct->min_alignment() == 16 ? 16 : 256;
      unsigned char *a = x.a_at.ptr + off, *b = x.b_at.ptr + off, *c = x.c.ptr + off;
      RLGEMM_CUDA_CHECK(cudaMemcpyAsync(a, x.a.ptr, size_t(p.shape.m * p.shape.k) * 2, cudaMemcpyDeviceToDevice, stream));
      RLGEMM_CUDA_CHECK(cudaMemcpyAsync(b, x.b.ptr, size_t(p.shape.k * p.shape.n) * 2, cudaMemcpyDeviceToDevice, stream));
      RLGEMM_CUDA_CHECK(cudaMemsetAsync(c, 0x7f, c_bytes, stream));
      direct->launch(stream, a, b, c, ws_bytes ? x.ws.ptr + off : nullptr);
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      EXPECT_EQ(to_host(c, c_bytes), want) << name << ": eager direct launch";
      // Captured in a CUDA graph and replayed.
      RLGEMM_CUDA_CHECK(cudaMemsetAsync(c, 0x7f, c_bytes, stream));
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      direct->launch(stream, a, b, c, ws_bytes ? x.ws.ptr + off : nullptr);
      RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      RLGEMM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      RLGEMM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
      EXPECT_EQ(to_host(c, c_bytes), want) << name << ": direct launch replayed from a graph";
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
      // Addresses less aligned than the recipe's go through cublasLtMatmul, with the same bits.
      if (direct->min_alignment() > 16) {
        unsigned char *a16 = x.a16.ptr + 16, *b16 = x.b16.ptr + 16;
        RLGEMM_CUDA_CHECK(cudaMemcpyAsync(a16, x.a.ptr, size_t(p.shape.m * p.shape.k) * 2, cudaMemcpyDeviceToDevice, stream));
        RLGEMM_CUDA_CHECK(cudaMemcpyAsync(b16, x.b.ptr, size_t(p.shape.k * p.shape.n) * 2, cudaMemcpyDeviceToDevice, stream));
        RLGEMM_CUDA_CHECK(cudaMemsetAsync(c, 0x7f, c_bytes, stream));
        try {
          direct->launch(stream, a16, b16, c, ws_bytes ? x.ws.ptr : nullptr);
          RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
          EXPECT_EQ(to_host(c, c_bytes), want) << name << ": 16-byte aligned, through cublasLtMatmul";
        } catch (const Error& e) {
          std::printf("%s: cublasLtMatmul refuses 16-byte aligned operands: %s\n", name.c_str(), e.what());
        }
      }
    }
  std::printf("launched directly: %d of %zu plans; refused:%s\n", direct_count, problems.size() * 2,
              refused.empty() ? " none" : refused.c_str());
  // cuBLASLt's fp16 and bf16 GEMMs on the GPUs rlgemm serves are one kernel, a split-K kernel and its reduction,
  // or a memset and a kernel: every plan here launches directly.
  EXPECT_EQ(direct_count, int(problems.size() * 2)) << "refused:" << refused;
  cudaStreamDestroy(stream);
}

// Plans with cuBLASLt's bias epilogue take the bias as a fifth operand: the direct launch gives cublasLtMatmul's
// bits with the bias added, at addresses no recording used, and refuses a call without its bias.
TEST_F(LtDirectGpu, BiasPlansLaunchDirectlyWithTheSameBits) {
  const std::vector<Problem> problems = {{{1, 4096, 4096}, Layout::kTN},   {{16, 4096, 4096}, Layout::kTN},
                                         {{77, 1000, 2056}, Layout::kTN},  {{2048, 512, 3584}, Layout::kTN},
                                         {{32, 4096, 4096}, Layout::kNN},  {{64, 4096, 4096}, Layout::kTN, DType::kBF16}};
  CublasLtContext context;
  cudaStream_t stream = nullptr;
  RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  int direct_count = 0;
  std::string refused;
  for (const Problem& p : problems) {
    const std::string name = p.shape.to_string() + " " + std::string(to_string(p.layout)) + " " +
                             std::string(to_string(p.dtype));
    const CublasLtGemm floor(context, p, 0);
    const std::unique_ptr<CublasLtGemm> plan = floor.with_bias();
    ASSERT_TRUE(plan->takes_bias()) << name;
    std::string why;
    const auto direct = LtDirect::make(*plan, p, why);
    if (!direct) {
      refused += "\n  " + name + ": " + why;
      continue;
    }
    ++direct_count;
    std::printf("%s with bias: %s, min alignment %zu\n", name.c_str(), direct->text().c_str(), direct->min_alignment());
    const size_t ws_bytes = plan->workspace_bytes();
    Operands3 x(p, std::max(ws_bytes, floor.workspace_bytes()));
    DeviceScratch<unsigned char> bias(size_t(p.shape.n) * 2 + 4096);
    const size_t c_bytes = size_t(p.c_elems()) * 2;
    const uint64_t seed = uint64_t(p.shape.m * 17 + p.shape.n);
    bench::fill_random(reinterpret_cast<half*>(x.a.ptr), size_t(p.a_elems()), bench::Fill::kNormal, seed, stream, p.dtype);
    bench::fill_random(reinterpret_cast<half*>(x.b.ptr), size_t(p.b_elems()), bench::Fill::kNormal, seed + 1, stream, p.dtype);
    bench::fill_random(reinterpret_cast<half*>(bias.ptr), size_t(p.shape.n), bench::Fill::kNormal, seed + 2, stream, p.dtype);
    RLGEMM_CUDA_CHECK(cudaMemsetAsync(x.c_ref.ptr, 0xff, c_bytes, stream));
    plan->launch(stream, x.a.ptr, x.b.ptr, x.c_ref.ptr, ws_bytes ? x.ws.ptr : nullptr, bias.ptr);
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<unsigned char> want = to_host(x.c_ref.ptr, c_bytes);
    // The bias is there: the same product without it differs.
    RLGEMM_CUDA_CHECK(cudaMemsetAsync(x.c.ptr, 0xff, c_bytes, stream));
    floor.launch(stream, x.a.ptr, x.b.ptr, x.c.ptr, floor.workspace_bytes() ? x.ws.ptr : nullptr);
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_NE(to_host(x.c.ptr, c_bytes), want) << name;
    // Operands and bias at an offset of the smallest alignment served.
    const size_t off = direct->min_alignment() == 16 ? 16 : 256;
    unsigned char *a = x.a_at.ptr + off, *b = x.b_at.ptr + off, *c = x.c.ptr + off, *bias_at = bias.ptr + 2048 + off;
    RLGEMM_CUDA_CHECK(cudaMemcpyAsync(a, x.a.ptr, size_t(p.a_elems()) * 2, cudaMemcpyDeviceToDevice, stream));
    RLGEMM_CUDA_CHECK(cudaMemcpyAsync(b, x.b.ptr, size_t(p.b_elems()) * 2, cudaMemcpyDeviceToDevice, stream));
    RLGEMM_CUDA_CHECK(cudaMemcpyAsync(bias_at, bias.ptr, size_t(p.shape.n) * 2, cudaMemcpyDeviceToDevice, stream));
    RLGEMM_CUDA_CHECK(cudaMemsetAsync(c, 0x7f, c_bytes, stream));
    direct->launch(stream, a, b, c, ws_bytes ? x.ws.ptr + off : nullptr, bias_at);
    RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_EQ(to_host(c, c_bytes), want) << name << ": direct launch with the bias";
    EXPECT_THROW(direct->launch(stream, a, b, c, ws_bytes ? x.ws.ptr + off : nullptr), Error) << name;
  }
  std::printf("launched directly with a bias: %d of %zu plans; refused:%s\n", direct_count, problems.size(),
              refused.empty() ? " none" : refused.c_str());
  EXPECT_EQ(direct_count, int(problems.size())) << "refused:" << refused;
  cudaStreamDestroy(stream);
}

// The handle's floor launches cuBLASLt's kernel directly, says so, and gives what a handle calling
// cublasLtMatmul gives, bit for bit: the second handle is made after the first chose its algorithms, and reads
// them from the shared cache directory, so both run the same algorithms (the choice timed in eager calls for
// eager calls, the one timed in CUDA graphs for captured calls, each way as the first handle ran it).
TEST_F(LtDirectGpu, TheHandlesFloorTakesItWithTheSameBits) {
  HandleOptions options = floor_only("rlgemm-lt-direct");
  options.direct_cublaslt = false;
  // Decode, odd and prefill shapes; cuBLASLt chooses the algorithms (split-K ones among them, on an H200), and
  // every one launches directly.
  const std::vector<Shape> shapes = {{1, 4096, 4096}, {77, 1000, 2056}, {2048, 512, 3584}, {128, 3584, 4096}};
  struct Buffers {
    DeviceScratch<half> a, b, c0, c1, c2;
    explicit Buffers(const Shape& s)
        : a(size_t(s.m * s.k)), b(size_t(s.k * s.n)), c0(size_t(s.m * s.n)), c1(size_t(s.m * s.n)), c2(size_t(s.m * s.n)) {}
  };
  std::vector<std::unique_ptr<Buffers>> buffers;
  {
    Handle through_lt(options);
    for (const Shape& s : shapes) {
      auto& x = *buffers.emplace_back(std::make_unique<Buffers>(s));
      bench::fill_random(x.a.ptr, size_t(s.m * s.k), bench::Fill::kNormal, 11, nullptr, DType::kF16);
      bench::fill_random(x.b.ptr, size_t(s.k * s.n), bench::Fill::kNormal, 12, nullptr, DType::kF16);
      // An eager call first (its algorithms are timed then) gives c0, then a captured call, replayed, c1.
      through_lt.hgemm(nullptr, s.m, s.n, s.k, x.a.ptr, x.b.ptr, Layout::kTN, x.c0.ptr);
      RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
      RLGEMM_CUDA_CHECK(cudaMemset(x.c1.ptr, 0xff, size_t(s.m * s.n) * 2));
      RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
      call_captured(through_lt, s, x.a.ptr, x.b.ptr, x.c1.ptr);
      EXPECT_EQ(through_lt.describe(s.m, s.n, s.k, Layout::kTN).find("launched directly"), std::string::npos);
    }
    RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  options.direct_cublaslt = true;
  Handle direct(options);
  int launched_directly = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    auto& x = *buffers[i];
    RLGEMM_CUDA_CHECK(cudaMemset(x.c2.ptr, 0x7f, size_t(s.m * s.n) * 2));
    direct.hgemm(nullptr, s.m, s.n, s.k, x.a.ptr, x.b.ptr, Layout::kTN, x.c2.ptr);
    RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
    const std::string said = direct.describe(s.m, s.n, s.k, Layout::kTN);
    std::printf("%s: %s\n", s.to_string().c_str(), said.c_str());
    EXPECT_NE(said.find("chosen on this machine before"), std::string::npos) << said;
    if (said.find("its kernel launched directly") != std::string::npos) ++launched_directly;
    // Both ways of calling were chosen before, so each takes its own choice: eager calls the eager one.
    EXPECT_EQ(to_host(x.c0.ptr, size_t(s.m * s.n) * 2), to_host(x.c2.ptr, size_t(s.m * s.n) * 2)) << s.to_string();
    RLGEMM_CUDA_CHECK(cudaMemset(x.c2.ptr, 0x7f, size_t(s.m * s.n) * 2));
    RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());  // the capture's stream does not wait for the legacy stream
    call_captured(direct, s, x.a.ptr, x.b.ptr, x.c2.ptr);
    EXPECT_EQ(to_host(x.c1.ptr, size_t(s.m * s.n) * 2), to_host(x.c2.ptr, size_t(s.m * s.n) * 2)) << s.to_string();
  }
  EXPECT_EQ(launched_directly, int(shapes.size()));
  EXPECT_EQ(direct.stats().cublaslt, 2 * shapes.size());  // an eager and a captured call a shape
}

TEST_F(LtDirectGpu, ALongFloorKernelGetsAnEagerChoiceOfItsOwn) {
  // Launched directly, the floor's choice is timed in CUDA graphs; a kernel long enough for back-to-back calls to
  // time the GPU (dispatch::kEagerScreenUs) is also screened in eager calls, a short one is not.
  HandleOptions options = floor_only("rlgemm-lt-eager");
  options.direct_cublaslt = true;
  Handle handle(options);
  const Shape long_one{2048, 8192, 8192}, short_one{16, 1024, 1024};  // about 350 us and 3 us on an H100/H200
  for (const Shape& s : {long_one, short_one}) {
    DeviceScratch<half> a(size_t(s.m * s.k)), b(size_t(s.k * s.n)), c(size_t(s.m * s.n)), want(size_t(s.m * s.n));
    bench::fill_random(a.ptr, size_t(s.m * s.k), bench::Fill::kNormal, 21, nullptr, DType::kF16);
    bench::fill_random(b.ptr, size_t(s.k * s.n), bench::Fill::kNormal, 22, nullptr, DType::kF16);
    RLGEMM_CUDA_CHECK(cudaMemset(c.ptr, 0xff, size_t(s.m * s.n) * 2));
    handle.hgemm(nullptr, s.m, s.n, s.k, a.ptr, b.ptr, Layout::kTN, c.ptr);
    RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
    const std::string said = handle.describe(s.m, s.n, s.k, Layout::kTN);
    std::printf("%s: %s\n", s.to_string().c_str(), said.c_str());
    const bool eager_screen = said.find("(timed on first use, on the caller's operands too: candidate") != std::string::npos;
    EXPECT_EQ(eager_screen, s.m == long_one.m) << said;
    // The graph screen's choice: the short kernel's for both ways, the long one's for captured calls where it
    // is another algorithm.
    if (!eager_screen) EXPECT_NE(said.find("(timed on first use in CUDA graphs"), std::string::npos) << said;
    // The eager call's bits are cuBLASLt's with the algorithm the handle names for eager calls.
    const std::size_t at = said.find("candidate ");
    ASSERT_NE(at, std::string::npos) << said;
    const int candidate = std::atoi(said.c_str() + at + 10);
    CublasLtContext context;
    CublasLtGemm plan(context, Problem{s, Layout::kTN}, candidate);
    DeviceScratch<unsigned char> workspace(std::max<size_t>(plan.workspace_bytes(), 1));
    plan.launch(nullptr, a.ptr, b.ptr, want.ptr, plan.workspace_bytes() ? workspace.ptr : nullptr);
    RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(to_host(want.ptr, size_t(s.m * s.n) * 2), to_host(c.ptr, size_t(s.m * s.n) * 2)) << s.to_string();
  }
}

}  // namespace
}  // namespace rlgemm::dispatch
