// GPU tests (skipped without a GPU): sm80 and sm90 designs against a double-precision host reference, on
// shapes that are not tile multiples, in both layouts, with split-K, in fp16 and bf16, and as programmatic
// dependents (/pdl) of kernels that let them launch early, eagerly and in CUDA graphs; and the fault-injection
// designs doing what they say.
//
// Each check: fresh random normal fp16 inputs, C poisoned with NaN (an element the kernel fails to write
// stays NaN) and followed by a guard zone (a write past the end changes it), the workspace zeroed once and
// the kernel launched twice (the second launch relies on the kernel leaving split-K flags zeroed, and must
// give the same bits as the first).
#include "run/gemm_kernel.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "design/sm90_shape.h"
#include "run/driver.h"
#include "run/module_cache.h"
#include "support/bf16.h"
#include "support/gpu.h"
#include "support/coop_columns.h"
#include "support/bulk_tail.h"
#include "support/evict_hints.h"
#include "support/swizzle_alignment.h"
#include "support/epilogue_pieces.h"
#include "support/pingpong_wide.h"
#include "support/multicast_overlap.h"
#include "support/cluster_four.h"
#include "support/tile_widths.h"

namespace rlgemm {
namespace {

using Half = _Float16;
uint16_t bits_of(Half h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
float float_of(uint16_t b) {
  Half h;
  std::memcpy(&h, &b, 2);
  return float(h);
}

using test::bf16_bits_of;
using test::bf16_float_of;
uint16_t element_bits(float x, DType dtype) { return dtype == DType::kBF16 ? bf16_bits_of(x) : bits_of(Half(x)); }
float element_value(uint16_t b, DType dtype) { return dtype == DType::kBF16 ? bf16_float_of(b) : float_of(b); }

constexpr uint16_t kNaN = 0x7fff;  // a NaN in fp16 and bf16 alike
constexpr uint16_t kGuard = 0x1234;
constexpr size_t kGuardElems = 4096;

struct HostProblem {
  Problem problem;
  std::vector<uint16_t> a, b;  // as rlgemm stores them
  std::vector<double> ref;     // M x N
};

HostProblem make_problem(Shape shape, Layout layout, uint64_t seed, DType dtype = DType::kF16) {
  HostProblem hp;
  hp.problem = Problem{shape, layout, dtype};
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t M = shape.m, N = shape.n, K = shape.k;
  hp.a.resize(M * K);
  hp.b.resize(K * N);
  std::vector<float> af(M * K), bf(K * N);  // bf as K x N
  for (int64_t i = 0; i < M * K; ++i) {
    hp.a[i] = element_bits(normal(rng), dtype);
    af[i] = element_value(hp.a[i], dtype);
  }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const uint16_t v = element_bits(normal(rng), dtype);
      bf[k * N + n] = element_value(v, dtype);
      if (layout == Layout::kNN)
        hp.b[k * N + n] = v;
      else
        hp.b[n * K + k] = v;
    }
  hp.ref.assign(M * N, 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const double x = af[m * K + k];
      const float* brow = &bf[k * N];
      double* crow = &hp.ref[m * N];
      for (int64_t n = 0; n < N; ++n) crow[n] += x * brow[n];
    }
  return hp;
}

template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t n) : count(n) { RLGEMM_CUDA_CHECK(cudaMalloc(&ptr, std::max<size_t>(n, 1) * sizeof(T))); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
};

class GpuGemm : public ::testing::Test {
 public:
  void SetUp() override {
    RLGEMM_REQUIRE_GPU();
    device_ = open_device();
    cache_ = std::filesystem::temp_directory_path() / ("rlgemm-run-test-" + std::to_string(::getpid()));
    options_.cache_dir = cache_;
  }
  void TearDown() override {
    std::error_code ec;
    if (!cache_.empty()) std::filesystem::remove_all(cache_, ec);
  }

  // Compiles every design for both layouts at once (the pool), so that GemmKernel finds them cached.
  void precompile(const std::vector<std::string>& designs, const std::vector<Problem>& problems) {
    std::vector<GeneratedKernel> kernels;
    for (const auto& text : designs) {
      const Design d = with_dtype(parse_design(text), problems.front().dtype);
      for (const Problem& p : problems) {
        if (!d.static_shape && !(p.shape == problems.front().shape)) continue;
        kernels.push_back(generate_kernel(d, p, arch_for_device(d, device_.cc_major, device_.cc_minor)));
      }
    }
    const auto results = compile_all(kernels, options_);
    for (size_t i = 0; i < results.size(); ++i) ASSERT_TRUE(results[i].kernel) << results[i].error;
  }

  // "" when `out` (C, then the guard zone) holds the reference within rounding and the guard is intact, else
  // what is wrong.
  static std::string mismatch(const std::vector<uint16_t>& out, const HostProblem& hp, int serial_splits) {
    const Problem& p = hp.problem;
    const int64_t M = p.shape.m, N = p.shape.n, K = p.shape.k;
    const double atol = std::ldexp(1.0, -9) * std::sqrt(double(K)) * std::max(1, serial_splits);
    // Rounding to the element type: 2^-11 relative for fp16 and 2^-8 for bf16, with a factor 4 of margin.
    const double rtol = std::ldexp(1.0, p.dtype == DType::kBF16 ? -6 : -9);
    int64_t bad = 0;
    std::string first;
    for (int64_t i = 0; i < M * N; ++i) {
      const double got = element_value(out[i], p.dtype), want = hp.ref[i];
      const bool ok = std::isfinite(got) && std::abs(got - want) <= atol + rtol * std::abs(want);
      if (!ok && bad++ < 3)
        first += "\n    C[" + std::to_string(i / N) + "][" + std::to_string(i % N) + "] = " +
                 (std::isnan(got) ? std::string("NaN (never written)") : std::to_string(got)) + ", want " +
                 std::to_string(want);
    }
    int64_t guard_hits = 0;
    for (size_t i = M * N; i < out.size(); ++i) guard_hits += out[i] != kGuard;
    if (!bad && !guard_hits) return "";
    return std::to_string(bad) + " of " + std::to_string(M * N) + " elements wrong, " + std::to_string(guard_hits) +
           " written past the end" + first;
  }

  // Runs `kernel` on `hp` twice and compares with the reference; returns "" or a description of the failure.
  std::string check(const GemmKernel& kernel, const HostProblem& hp, int serial_splits) {
    const Problem& p = hp.problem;
    const int64_t M = p.shape.m, N = p.shape.n, K = p.shape.k;
    DeviceBuffer<uint16_t> a(hp.a.size()), b(hp.b.size()), c(M * N + kGuardElems);
    RLGEMM_CUDA_CHECK(cudaMemcpy(a.ptr, hp.a.data(), hp.a.size() * 2, cudaMemcpyHostToDevice));
    RLGEMM_CUDA_CHECK(cudaMemcpy(b.ptr, hp.b.data(), hp.b.size() * 2, cudaMemcpyHostToDevice));
    const size_t ws_bytes = kernel.workspace_bytes(p);
    DeviceBuffer<char> ws(ws_bytes);
    RLGEMM_CUDA_CHECK(cudaMemset(ws.ptr, 0, std::max<size_t>(ws_bytes, 1)));
    std::vector<uint16_t> init(M * N + kGuardElems, kNaN), out(M * N + kGuardElems), first_out;
    std::fill(init.begin() + M * N, init.end(), kGuard);
    for (int launch = 0; launch < 2; ++launch) {
      RLGEMM_CUDA_CHECK(cudaMemcpy(c.ptr, init.data(), init.size() * 2, cudaMemcpyHostToDevice));
      kernel.launch(nullptr, p, GemmOperands{a.ptr, b.ptr, c.ptr, ws.ptr, ws_bytes});
      const cudaError_t status = cudaDeviceSynchronize();
      if (status != cudaSuccess) return std::string("kernel failed: ") + cudaGetErrorString(status);
      RLGEMM_CUDA_CHECK(cudaMemcpy(out.data(), c.ptr, out.size() * 2, cudaMemcpyDeviceToHost));
      if (std::string why = mismatch(out, hp, serial_splits); !why.empty())
        return "launch " + std::to_string(launch + 1) + ": " + why;
      // Same inputs, same bits: a split-K reduction must not depend on the order in which slices finish.
      if (launch == 0) first_out = out;
      else if (out != first_out) {
        int64_t differ = 0;
        for (int64_t i = 0; i < M * N; ++i) differ += out[i] != first_out[i];
        return "launch 2 gave different bits from launch 1 in " + std::to_string(differ) + " elements";
      }
    }
    return "";
  }

  // Every design against the reference on every shape, in both layouts (inputs seeded by seed_base, the shape
  // and the layout).
  void expect_designs_match(const std::vector<std::string>& designs, const std::vector<Shape>& shapes, int seed_base) {
    precompile(designs, {Problem{{128, 128, 128}, Layout::kTN}});
    precompile(designs, {Problem{{128, 128, 128}, Layout::kNN}});
    for (Layout layout : {Layout::kTN, Layout::kNN})
      for (Shape shape : shapes) {
        const HostProblem hp = make_problem(shape, layout, seed_base + int(shape.m + shape.n) + int(layout));
        for (const auto& text : designs) {
          const Design d = parse_design(text);
          const GemmKernel kernel(d, hp.problem, device_, options_);
          EXPECT_EQ(check(kernel, hp, d.split == SplitK::kSerial ? d.splits : 1), "")
              << text << " layout " << to_string(layout) << " shape " << shape.to_string();
        }
      }
  }

  // /pdl: `kernel` on `hp` behind a stage kernel that lets it launch at once and only then (after a sleep)
  // writes its operands and poisons C; launched twice back to back (the second behind the first, sharing its
  // workspace), then C is copied out. Eagerly `rounds` times on one stream, then captured in a graph replayed
  // `rounds` times. Every copy must match the reference: a global access before griddepcontrol.wait would
  // read the operands' old contents (scrambled before the stage), or see its stores overwritten with NaN.
  std::string check_programmatic(const GemmKernel& kernel, const HostProblem& hp, int serial_splits, int rounds = 3) {
    const Problem& p = hp.problem;
    const size_t c_elems = size_t(p.shape.m * p.shape.n), out_elems = c_elems + kGuardElems;
    DeviceBuffer<uint16_t> a0(hp.a.size()), b0(hp.b.size()), a(hp.a.size()), b(hp.b.size()), c(out_elems);
    RLGEMM_CUDA_CHECK(cudaMemcpy(a0.ptr, hp.a.data(), hp.a.size() * 2, cudaMemcpyHostToDevice));
    RLGEMM_CUDA_CHECK(cudaMemcpy(b0.ptr, hp.b.data(), hp.b.size() * 2, cudaMemcpyHostToDevice));
    const std::vector<uint16_t> guard(kGuardElems, kGuard);
    RLGEMM_CUDA_CHECK(cudaMemcpy(c.ptr + c_elems, guard.data(), kGuardElems * 2, cudaMemcpyHostToDevice));
    const size_t ws_bytes = kernel.workspace_bytes(p);
    DeviceBuffer<char> ws(ws_bytes);
    RLGEMM_CUDA_CHECK(cudaMemset(ws.ptr, 0, std::max<size_t>(ws_bytes, 1)));
    std::vector<std::unique_ptr<DeviceBuffer<uint16_t>>> outs;
    for (int r = 0; r < rounds; ++r) outs.push_back(std::make_unique<DeviceBuffer<uint16_t>>(out_elems));
    cudaStream_t stream;
    RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    auto round = [&](uint16_t* out) {
      stage(stream, {nullptr, nullptr, nullptr}, {a.ptr, b.ptr, c.ptr}, {a.count, b.count, c_elems}, 0);
      stage(stream, {a0.ptr, b0.ptr, nullptr}, {a.ptr, b.ptr, c.ptr}, {a.count, b.count, c_elems}, 20000);
      for (int twice = 0; twice < 2; ++twice)
        kernel.launch(stream, p, GemmOperands{a.ptr, b.ptr, c.ptr, ws.ptr, ws_bytes});
      stage(stream, {c.ptr, nullptr, nullptr}, {out, nullptr, nullptr}, {out_elems, 0, 0}, 0);
    };
    auto compare = [&](const uint16_t* out, const std::string& when) {
      std::vector<uint16_t> host(out_elems);
      RLGEMM_CUDA_CHECK(cudaMemcpy(host.data(), out, out_elems * 2, cudaMemcpyDeviceToHost));
      const std::string why = mismatch(host, hp, serial_splits);
      return why.empty() ? why : when + ": " + why;
    };
    std::string failure;
    for (int r = 0; r < rounds; ++r) round(outs[size_t(r)]->ptr);
    wait_for(stream, "eager /pdl rounds", 60.0);
    for (int r = 0; r < rounds && failure.empty(); ++r) failure = compare(outs[size_t(r)]->ptr, "eager round " + std::to_string(r + 1));

    cudaGraph_t graph;
    RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    round(outs[0]->ptr);
    RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    // The capture keeps the launches' programmatic edges: stage -> first GEMM -> second GEMM.
    size_t edges = 0;
    RLGEMM_CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &edges));
    std::vector<cudaGraphNode_t> from(edges), to(edges);
    std::vector<cudaGraphEdgeData> data(edges);
    RLGEMM_CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &edges));
    const auto programmatic = std::count_if(data.begin(), data.end(), [](const cudaGraphEdgeData& e) {
      return e.type == cudaGraphDependencyTypeProgrammatic;
    });
    if (failure.empty() && programmatic != 2)
      failure = "the captured graph holds " + std::to_string(programmatic) + " programmatic edges, not 2";
    cudaGraphExec_t exec;
    RLGEMM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int r = 0; r < rounds && failure.empty(); ++r) {
      RLGEMM_CUDA_CHECK(cudaMemset(outs[0]->ptr, 0xff, out_elems * 2));  // NaN: a replay must write every element
      RLGEMM_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      wait_for(stream, "graph replay " + std::to_string(r + 1), 60.0);
      failure = compare(outs[0]->ptr, "graph replay " + std::to_string(r + 1));
    }
    RLGEMM_CUDA_CHECK(cudaGraphExecDestroy(exec));
    RLGEMM_CUDA_CHECK(cudaGraphDestroy(graph));
    RLGEMM_CUDA_CHECK(cudaStreamDestroy(stream));
    return failure;
  }

  DeviceInfo device_;
  CompileOptions options_;
  std::filesystem::path cache_;

 private:
  // Copies up to three buffers on `stream` (a null source writes NaN), `sleep_ns` after letting a
  // programmatic dependent launch.
  void stage(cudaStream_t stream, std::array<const uint16_t*, 3> src, std::array<uint16_t*, 3> dst,
             std::array<size_t, 3> count, unsigned sleep_ns) {
    static constexpr const char* kSource = R"(
struct Stage {
  const unsigned short* src[3];
  unsigned short* dst[3];
  unsigned long long count[3];
  unsigned sleep_ns;
};
extern "C" __global__ void rlgemm_test_stage(const __grid_constant__ Stage s) {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  for (unsigned slept = 0; slept < s.sleep_ns; slept += 1000) __nanosleep(1000);
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (int b = 0; b < 3; ++b)
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; i < s.count[b]; i += stride)
      s.dst[b][i] = s.src[b] ? s.src[b][i] : 0x7fff;
}
)";
    struct Stage {
      const uint16_t* src[3];
      uint16_t* dst[3];
      unsigned long long count[3];
      unsigned sleep_ns;
    } params{{src[0], src[1], src[2]}, {dst[0], dst[1], dst[2]}, {count[0], count[1], count[2]}, sleep_ns};
    if (!stage_) {
      const CompiledKernel k = compile_kernel(GeneratedKernel{"rlgemm_test_stage", kSource, "sm_90"}, options_);
      stage_ = ModuleCache::instance().function(k.cache_key, k.cubin, k.name, 0);
    }
    const unsigned grid[3] = {264, 1, 1}, block[3] = {256, 1, 1}, cluster[3] = {1, 1, 1};
    void* args[] = {&params};
    launch_function(stage_, grid, block, cluster, 0, reinterpret_cast<CUstream>(stream), args);
  }
  CUfunction stage_ = nullptr;
};

// Covers both smem layouts, both epilogues, swap_ab, serial and parallel split-K, raster orders and
// group sizes, 2..8 stages, BK 32/64/128, and block tiles from 16x16 to 256x128.
const std::vector<std::string> kDesigns = {
    "sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg",
    "sm80/128x256x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_smem",
    "sm80/256x128x32/w64x64/s4/swz/raster_n.g4/splitk1/epi_reg",
    "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_smem",
    "sm80/128x64x64/w64x32/s3/pad/raster_n.g4/splitk1/epi_reg",
    "sm80/16x64x64/w16x32/s4/swz/raster_m.g1/splitk1/epi_reg",
    "sm80/16x16x32/w16x16/s8/swz/raster_m.g8/splitk1/epi_reg",
    "sm80/32x32x128/w16x16/s2/pad/raster_m.g2/splitk1/epi_smem",
    "sm80/64x128x32/w32x64/s5/swz/raster_m.g8/splitk1/epi_smem/swap",
    "sm80/64x64x32/w32x32/s3/pad/raster_n.g8/splitk1/epi_reg/swap",
    "sm80/64x64x64/w32x32/s3/swz/raster_m.g8/splitk3.serial/epi_reg",
    "sm80/64x64x32/w32x32/s4/pad/raster_n.g8/splitk4.parallel/epi_smem",
    "sm80/32x64x32/w16x32/s3/swz/raster_m.g8/splitk2.serial/epi_smem/swap",
    "sm80/64x32x64/w32x16/s4/swz/raster_m.g8/splitk5.parallel/epi_reg/swap",
};

std::vector<Shape> awkward_shapes() {
  std::vector<Shape> shapes;
  for (int64_t m : {1, 7, 100, 1000})
    for (int64_t n : {72, 200})
      for (int64_t k : {24, 136, 1000}) shapes.push_back({m, n, k});
  shapes.push_back({256, 256, 256});
  shapes.push_back({512, 1024, 2048});
  return shapes;
}

// Every design on every awkward shape it fits (why_unfit), in both layouts, in `dtype`. With
// `valid_layouts_only`, a layout the design is not valid for (why_invalid) is left out of its checks.
void check_designs_on_awkward_shapes(GpuGemm& t, const std::vector<std::string>& designs,
                                     DType dtype = DType::kF16, bool valid_layouts_only = false);

TEST_F(GpuGemm, Sm80DesignsMatchTheReferenceOnAwkwardShapes) { check_designs_on_awkward_shapes(*this, kDesigns); }

// Hopper designs: both consumer arrangements, clusters along M and N, both epilogues, swap, BK 32/64/128,
// serial and parallel split-K, stream-K, tensor maps without L2 promotion or with 64 bytes.
const std::vector<std::string> kSm90Designs = {
    "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg",
    "sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma",
    "sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/splitk1/epi_reg",
    "sm90.ws.pingpong/128x128x64/s5/c1x2/raster_n.g4/splitk1/epi_tma",
    "sm90.ws.pingpong/64x128x32/s6/c1x1/raster_m.g1/splitk1/epi_reg/swap",
    "sm90.ws.pingpong/64x64x128/s6/c1x1/raster_m.g8/splitk4.parallel/epi_reg",
    "sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/splitk3.parallel/epi_tma",
    "sm90.ws.pingpong/64x64x128/s6/c1x1/raster_n.g8/splitk2.serial/epi_reg/swap",
    "sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/streamk/epi_reg",
    "sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/streamk/epi_tma",
    "sm90.ws.pingpong/64x128x32/s6/c1x1/raster_n.g4/streamk/epi_reg/swap",
    "sm90.ws.pingpong/128x128x64/s5/c1x2/raster_n.g4/streamk/epi_tma",
    "sm90.ws.pingpong/128x128x64/s5/c2x1/raster_m.g8/splitk1/epi_tma/l2p0",
    "sm90.ws.coop/128x128x64/s4/c1x1/raster_n.g4/splitk2.serial/epi_reg/swap/l2p64",
};

TEST_F(GpuGemm, Sm90DesignsMatchTheReferenceOnAwkwardShapes) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  check_designs_on_awkward_shapes(*this, kSm90Designs);
}

// The cooperative schedule that splits each tile's columns between its warpgroups (192-row tiles among them),
// in each layout its designs are valid for.
TEST_F(GpuGemm, CooperativeColumnsMatchTheReferenceOnAwkwardShapes) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  check_designs_on_awkward_shapes(*this, test::kCoopColumnsDesigns, DType::kF16, /*valid_layouts_only=*/true);
}

// Designs whose TMA-store epilogue stages 64x64 pieces (the pipeline leaves too little shared memory for chunks
// of a warpgroup's whole rows): a ragged edge cuts pieces of every position, and the pieces' double buffer turns
// over within a tile and across tiles.
TEST_F(GpuGemm, EpilogueInPiecesMatchesTheReferenceOnAwkwardShapes) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  for (const auto& text : test::kEpiloguePiecesDesigns) {
    const sm90::Shape shape = sm90_shape(parse_design(text));
    ASSERT_LT(sm90::epilogue_rows(shape), sm90::warpgroup_rows(shape)) << text;
  }
  check_designs_on_awkward_shapes(*this, test::kEpiloguePiecesDesigns, DType::kF16, /*valid_layouts_only=*/true);
}

// The TMA-store epilogue's tail by bulk copies (/bulktail): a ragged edge cuts the tail's rows and its columns
// (a bulk copy of fewer than the tail's columns, or none), and the staging buffers turn over between the whole
// chunks and the tail within a tile and across tiles.
TEST_F(GpuGemm, BulkTailMatchesTheReferenceOnAwkwardShapes) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  check_designs_on_awkward_shapes(*this, test::kBulkTailDesigns, DType::kF16, /*valid_layouts_only=*/true);
  check_designs_on_awkward_shapes(*this, test::kBulkTailBf16Designs, DType::kBF16, /*valid_layouts_only=*/true);
}

// BK 32 stages that do not all end on 1024 bytes: the TMA-store epilogue after stages 512 bytes short (BN 8 mod 16,
// odd stages) stages on the next 1024 bytes, where TMA reads the swizzle it was written with; swap with BN a
// multiple of 16 keeps the nn layout's N-major A tiles on 1024 bytes.
TEST_F(GpuGemm, SwizzledBuffersAfterBk32StagesMatchTheReferenceOnAwkwardShapes) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  check_designs_on_awkward_shapes(*this, test::kSwizzleAlignmentDesigns, DType::kF16, /*valid_layouts_only=*/true);
  check_designs_on_awkward_shapes(*this, test::kSwizzleAlignmentBf16Designs, DType::kBF16,
                                  /*valid_layouts_only=*/true);
}

// L2 eviction hints on the operand loads (/evictAB): the same bits as without, on ragged shapes (a hint may change
// what stays in the L2, never what a load delivers), plain and multicast loads, K- and MN-major operands, swap.
TEST_F(GpuGemm, EvictionHintsMatchTheReferenceOnAwkwardShapes) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  check_designs_on_awkward_shapes(*this, test::kEvictHintDesigns, DType::kF16, /*valid_layouts_only=*/true);
  check_designs_on_awkward_shapes(*this, test::kEvictHintBf16Designs, DType::kBF16, /*valid_layouts_only=*/true);
}

// Ping-pong tiles of 129-168 accumulators per warpgroup thread (128x168 is cuBLASLt's tile on 2048x11008x4096):
// the whole tile in one warpgroup's registers, both epilogues, clusters along M and N, swap.
TEST_F(GpuGemm, WidePingpongTilesMatchTheReferenceOnAwkwardShapes) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  for (const auto& text : test::kPingpongWideDesigns) {
    const sm90::Shape shape = sm90_shape(parse_design(text));
    ASSERT_GT(sm90::warpgroup_rows(shape) * sm90::warpgroup_cols(shape) / 128, 128) << text;
  }
  check_designs_on_awkward_shapes(*this, test::kPingpongWideDesigns, DType::kF16, /*valid_layouts_only=*/true);
}

// 2x1 clusters whose B tile halves are not whole swizzle atoms: the CTAs multicast overlapping parts, and each
// stage's full barrier expects the overlap's bytes too (a wrong count hangs or reads a stage early).
TEST_F(GpuGemm, OverlappingMulticastPartsMatchTheReferenceOnAwkwardShapes) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  for (const auto& text : test::kMulticastOverlapDesigns) {
    const Design d = parse_design(text);
    ASSERT_NE((d.bn / 2) % 8, 0) << text;
  }
  check_designs_on_awkward_shapes(*this, test::kMulticastOverlapDesigns, DType::kF16, /*valid_layouts_only=*/true);
}

// Clusters of four CTAs: 2x2 multicasts both operands, 4x1 and 1x4 one operand in four overlapping parts. A
// stage's empty barrier counts the consumers of the CTA's cluster row and column (a wrong count hangs, or lets
// a producer overwrite a stage a peer still reads: wrong results under load).
TEST_F(GpuGemm, ClustersOfFourMatchTheReferenceOnAwkwardShapes) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  for (const auto& text : test::kClusterFourDesigns) {
    const Design d = parse_design(text);
    ASSERT_EQ(d.cluster_m * d.cluster_n, 4) << text;
  }
  check_designs_on_awkward_shapes(*this, test::kClusterFourDesigns, DType::kF16, /*valid_layouts_only=*/true);
}

// The tile widths the search offers beside 64..256 in steps of 64 (search/design_space.h): narrow tiles (16, 32)
// for tiny problems and fitted widths (96, 160, 224) that waves of tiles fill better, in both families, with
// clusters, split-K in the kernel (serial and parallel), stream-K, swap and both epilogues; each in the layouts it
// is valid for (an nn design of a width that is not a multiple of 64 needs swap).
TEST_F(GpuGemm, NewTileWidthsMatchTheReferenceOnAwkwardShapes) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  std::vector<std::string> designs = test::kNewTileWidthDesigns;
  for (const char* text : {"sm90.ws.pingpong/64x16x64/s8/c1x1/raster_m.g1/splitk1/epi_reg",
                           "sm90.ws.coop/128x96x64/s5/c1x1/raster_m.g8/splitk1/epi_reg",
                           "sm90.ws.pingpong/64x16x64/s8/c1x1/raster_n.g1/splitk2.serial/epi_reg/swap",
                           "sm80/64x16x64/w16x16/s4/swz/raster_m.g8/splitk1/epi_reg",
                           "sm80/128x32x32/w32x16/s4/swz/raster_n.g4/splitk4.parallel/epi_reg"})
    designs.emplace_back(text);
  for (const auto& text : designs) {
    const auto why = why_invalid(parse_design(text), Layout::kTN);
    ASSERT_FALSE(why) << text << ": " << *why;
  }
  check_designs_on_awkward_shapes(*this, designs, DType::kF16, true);
}

// Stream-K's partition cases on a 132-SM H100 or H200, for both designs (64x64 tiles on 132 clusters;
// 256x128 cluster tiles on 66): data-parallel waves before a cut remainder (2000x1096: 576 tiles, 48 cut in
// 2; 72 cluster tiles, 6 cut in 4), every tile cut with no data-parallel wave (320x512: 40 tiles in 3
// pieces; 8 cluster tiles in 4), and one or two long-K tiles cut in 5 (an owner adding several partials).
TEST_F(GpuGemm, Sm90StreamKMatchesTheReferenceInEveryPartitionCase) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  const std::vector<std::string> designs = {
      "sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/streamk/epi_reg",
      "sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/streamk/epi_tma",
  };
  precompile(designs, {Problem{{128, 128, 128}, Layout::kTN}});
  precompile(designs, {Problem{{128, 128, 128}, Layout::kNN}});
  for (Layout layout : {Layout::kTN, Layout::kNN})
    for (Shape shape : {Shape{2000, 1096, 4104}, Shape{320, 512, 4104}, Shape{64, 128, 8192}}) {
      const HostProblem hp = make_problem(shape, layout, 31 + shape.k);
      for (const auto& text : designs) {
        const GemmKernel kernel(parse_design(text), hp.problem, device_, options_);
        EXPECT_EQ(check(kernel, hp, 1), "") << text << " layout " << to_string(layout) << " shape " << shape.to_string();
      }
    }
}

void check_designs_on_awkward_shapes(GpuGemm& t, const std::vector<std::string>& designs, DType dtype,
                                     bool valid_layouts_only) {
  for (Layout layout : {Layout::kTN, Layout::kNN}) {
    std::vector<std::string> valid;
    for (const auto& text : designs)
      if (!valid_layouts_only || !why_invalid(parse_design(text), layout)) valid.push_back(text);
    t.precompile(valid, {Problem{{128, 128, 128}, layout, dtype}});
  }
  const auto shapes = awkward_shapes();
  int failures = 0, checks = 0;
  for (Layout layout : {Layout::kTN, Layout::kNN}) {
    for (size_t s = 0; s < shapes.size(); ++s) {
      const HostProblem hp = make_problem(shapes[s], layout, 1000 * s + int(layout), dtype);
      for (const auto& text : designs) {
        const Design d = with_dtype(parse_design(text), dtype);
        if (why_unfit(d, hp.problem) || (valid_layouts_only && why_invalid(d, layout))) continue;
        const GemmKernel kernel(d, hp.problem, t.device_, t.options_);
        const std::string why = t.check(kernel, hp, d.split == SplitK::kSerial ? d.splits : 1);
        ++checks;
        if (!why.empty()) {
          ++failures;
          ADD_FAILURE() << to_string(d) << " layout " << to_string(layout) << " shape " << shapes[s].to_string() << ": "
                        << why;
        }
      }
    }
  }
  std::printf("  %d design x shape x layout checks, %d failed\n", checks, failures);
}

// bf16 through both families: the same tiles with bf16 MMAs, bf16 TMA descriptors and epilogues that round
// to bf16; every epilogue, swap, split-K (serial, parallel) and stream-K.
TEST_F(GpuGemm, Bf16DesignsOfBothFamiliesMatchTheReferenceOnAwkwardShapes) {
  std::vector<std::string> designs = {
      "sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg",
      "sm80/64x64x32/w32x32/s4/pad/raster_n.g8/splitk4.parallel/epi_smem",
      "sm80/32x64x32/w16x32/s3/swz/raster_m.g8/splitk2.serial/epi_smem/swap",
  };
  if (device_.cc_major == 9)
    designs.insert(designs.end(), {
        "sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma",
        "sm90.ws.pingpong/64x128x32/s6/c1x1/raster_m.g1/splitk1/epi_reg/swap",
        "sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/splitk3.parallel/epi_tma",
        "sm90.ws.pingpong/64x64x128/s6/c1x1/raster_n.g8/splitk2.serial/epi_reg/swap",
        "sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/streamk/epi_reg",
    });
  check_designs_on_awkward_shapes(*this, designs, DType::kBF16);
}

// /pdl designs of both families, each behind a kernel that lets it launch early and behind itself: serial
// and parallel split-K (workspace), stream-K (tickets), clusters, the TMA store, swap; eagerly and in a
// replayed graph.
TEST_F(GpuGemm, PdlDesignsWaitForThePreviousKernelEagerlyAndInGraphs) {
  if (device_.cc_major < 9) GTEST_SKIP() << "programmatic dependent launch needs sm_90 or later";
  std::vector<std::string> designs = {
      "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_smem/pdl",
      "sm80/64x64x64/w32x32/s3/swz/raster_m.g8/splitk3.serial/epi_reg/pdl",
      "sm80/32x64x32/w32x32/s4/pad/raster_n.g8/splitk4.parallel/epi_reg/swap/pdl",
  };
  if (device_.cc_major == 9)
    designs.insert(designs.end(), {
        "sm90.ws.pingpong/64x64x128/s6/c1x1/raster_n.g8/splitk2.serial/epi_reg/swap/pdl",
        "sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/splitk3.parallel/epi_tma/pdl",
        "sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/streamk/epi_reg/pdl",
    });
  precompile(designs, {Problem{{128, 128, 128}, Layout::kTN}});
  precompile(designs, {Problem{{128, 128, 128}, Layout::kNN}});
  int checks = 0;
  for (Layout layout : {Layout::kTN, Layout::kNN})
    for (Shape shape : {Shape{100, 200, 1000}, Shape{7, 72, 4104}, Shape{1000, 200, 136}}) {
      const HostProblem hp = make_problem(shape, layout, 500 + shape.m + int(layout));
      for (const auto& text : designs) {
        const Design d = parse_design(text);
        if (why_unfit(d, hp.problem)) continue;
        const GemmKernel kernel(d, hp.problem, device_, options_);
        EXPECT_EQ(check_programmatic(kernel, hp, d.split == SplitK::kSerial ? d.splits : 1), "")
            << text << " layout " << to_string(layout) << " shape " << shape.to_string();
        ++checks;
      }
    }
  std::printf("  %d design x shape x layout checks\n", checks);
}

TEST(GemmKernelRules, PdlNeedsSm90) {
  DeviceInfo a100;
  a100.name = "NVIDIA A100-SXM4-80GB";
  a100.cc_major = 8, a100.cc_minor = 0;
  const Problem p{{64, 64, 128}, Layout::kTN};
  try {
    // Refused before anything is compiled or loaded, so this runs without a GPU.
    GemmKernel(parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg/pdl"), p, a100);
    FAIL() << "a /pdl design was accepted for an sm_80 GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("programmatic dependent launch (/pdl) needs sm_90"), std::string::npos)
        << e.what();
  }
}

// 16 slices of K for shapes with few tiles and a deep K (decode, down-projections), ragged ones included.
const std::vector<std::string> kSplitK16Designs = {
    "sm80/32x64x64/w32x32/s4/swz/raster_m.g8/splitk16.parallel/epi_reg",
    "sm80/64x64x64/w32x32/s3/pad/raster_n.g8/splitk16.serial/epi_smem",
};
const std::vector<Shape> kKHeavyShapes = {{64, 128, 4096}, {16, 4096, 4096}, {40, 136, 4104}};

// Decode tiles: 16 rows of tokens (warp tiles of 16 rows), the K-split reduced in the kernel; on token counts
// below, at and past one tile, and N and K that are not tile multiples.
const std::vector<std::string> kDecodeTileDesigns = {
    "sm80/16x64x128/w16x16/s4/swz/raster_m.g1/splitk4.parallel/epi_reg",
    "sm80/16x128x64/w16x32/s6/swz/raster_m.g1/splitk2.parallel/epi_smem",
    "sm80/16x64x64/w16x64/s8/pad/raster_n.g4/splitk8.serial/epi_reg",
    "sm80/16x64x64/w16x32/s4/swz/raster_m.g1/splitk2.parallel/epi_smem/swap",
};
const std::vector<Shape> kDecodeShapes = {{1, 136, 4104}, {3, 4104, 1000}, {16, 200, 3080}, {17, 72, 4096}, {40, 4096, 520}};

TEST_F(GpuGemm, DecodeTilesMatchTheReferenceOnRaggedShapes) {
  expect_designs_match(kDecodeTileDesigns, kDecodeShapes, 1700);
}

TEST_F(GpuGemm, SplitK16DesignsMatchTheReferenceOnKHeavyShapes) {
  expect_designs_match(kSplitK16Designs, kKHeavyShapes, 900);
}

// Pipelines deeper than 8 stages (up to 16: small tiles streaming a long K), both families, parallel and serial
// split-K and an unsplit TMA-store tile, on K-heavy shapes whose slices wrap the ring several times, ragged ones
// included.
const std::vector<std::string> kDeepPipelineDesigns = {
    "sm90.ws.pingpong/64x16x64/s16/c1x1/raster_n.g1/splitk8.parallel/epi_reg/swap",
    "sm90.ws.pingpong/64x32x64/s16/c1x1/raster_n.g1/splitk4.serial/epi_reg/swap",
    "sm90.ws.coop/128x64x32/s12/c1x1/raster_m.g8/splitk1/epi_tma",
    "sm80/16x64x64/w16x16/s12/swz/raster_n.g1/splitk8.parallel/epi_reg/swap",
};
const std::vector<Shape> kDeepPipelineShapes = {{256, 64, 16384}, {40, 136, 4104}, {200, 72, 16392}};

TEST_F(GpuGemm, DeepPipelinesMatchTheReferenceOnKHeavyShapes) {
  if (device_.cc_major != 9) GTEST_SKIP() << "needs a Hopper GPU (sm_90a)";
  expect_designs_match(kDeepPipelineDesigns, kDeepPipelineShapes, 2300);
}

TEST_F(GpuGemm, Bf16KernelRefusesAnFp16Problem) {
  const HostProblem hp = make_problem({100, 200, 136}, Layout::kTN, 9);
  EXPECT_THROW(GemmKernel(parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg/bf16"), hp.problem,
                          device_, options_),
               Error);
}

TEST_F(GpuGemm, StaticDesignsMatchTheReference) {
  const std::string text = "sm80/64x64x32/w32x32/s3/swz/raster_m.g8/splitk1/epi_reg/static";
  const std::string swapped = "sm80/32x64x64/w16x32/s4/swz/raster_m.g8/splitk2.serial/epi_smem/swap/static";
  for (Layout layout : {Layout::kTN, Layout::kNN})
    for (Shape shape : {Shape{100, 72, 136}, Shape{7, 200, 1000}}) {
      const HostProblem hp = make_problem(shape, layout, 77 + shape.m);
      for (const auto& t : {text, swapped}) {
        const Design d = parse_design(t);
        const GemmKernel kernel(d, hp.problem, device_, options_);
        EXPECT_EQ(check(kernel, hp, d.split == SplitK::kSerial ? d.splits : 1), "")
            << t << " layout " << to_string(layout) << " shape " << shape.to_string();
        // A static kernel refuses other shapes.
        EXPECT_THROW(kernel.plan(Problem{{shape.m + 1, shape.n, shape.k}, layout}), Error);
      }
    }
}

// A persistent grid of clusters holds no more CTAs than the device keeps resident at once (clusters must fit
// within a GPC): a cluster left over would start only when another finished. The count goes to the log.
TEST_F(GpuGemm, PersistentClusterGridsHoldOnlyResidentClusters) {
  const HostProblem hp = make_problem({2048, 1032, 136}, Layout::kTN, 31);
  for (const char* text : {"sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/splitk1/epi_tma",
                           "sm90.ws.pingpong/64x128x64/s5/c1x2/raster_n.g4/splitk2.parallel/epi_reg",
                           "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma"}) {
    const Design d = parse_design(text);
    const GemmKernel kernel(d, hp.problem, device_, options_);
    const unsigned cluster = d.cluster_m * d.cluster_n;
    const LaunchPlan plan = kernel.plan(hp.problem);
    std::cout << text << ": " << kernel.resident_ctas() << " CTAs resident, grid " << plan.grid[0] << " of "
              << device_.sm_count << " SMs\n";
    if (cluster == 1) {
      EXPECT_EQ(kernel.resident_ctas(), 0u) << text;  // one CTA per SM: nothing to cap
      continue;
    }
    ASSERT_GT(kernel.resident_ctas(), 0u) << text;
    EXPECT_EQ(kernel.resident_ctas() % cluster, 0u) << text;
    EXPECT_LE(plan.grid[0], kernel.resident_ctas()) << text;
    EXPECT_EQ(plan.grid[0] % cluster, 0u) << text;
    EXPECT_EQ(check(kernel, hp, 1), "") << text;
  }
}

TEST_F(GpuGemm, KernelRefusesAnotherLayoutAndShortWorkspace) {
  const HostProblem hp = make_problem({100, 200, 1000}, Layout::kTN, 5);
  const GemmKernel kernel(parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk4.parallel/epi_reg"), hp.problem,
                          device_, options_);
  EXPECT_THROW(kernel.plan(Problem{hp.problem.shape, Layout::kNN}), Error);
  EXPECT_GT(kernel.workspace_bytes(hp.problem), 0u);
  EXPECT_THROW(kernel.launch(nullptr, hp.problem, GemmOperands{nullptr, nullptr, nullptr, nullptr, 0}), Error);
}

TEST_F(GpuGemm, WrongDesignWritesWrongValues) {
  const HostProblem hp = make_problem({100, 200, 136}, Layout::kTN, 9);
  const GemmKernel kernel(parse_design("test.wrong"), hp.problem, device_, options_);
  const std::string why = check(kernel, hp, 1);
  EXPECT_NE(why.find("elements wrong"), std::string::npos) << why;
}

// Launches whose CTAs wait on other CTAs of the same launch (stream-K, serial split-K) or count each other in
// (parallel split-K), on four streams at once, some launches big enough to fill the GPU, others decode-sized
// with 16 slices: none may assume that the GPU holds all of its CTAs at once, nor share another's workspace.
// Every stream must finish (the watchdog bounds the wait) and give the bits the same launch gives alone. Runs
// in a child process, which a hung kernel cannot take down with the test binary.
void run_concurrent_launches_and_exit() {
  const DeviceInfo device = open_device();
  CompileOptions options;
  options.cache_dir = std::filesystem::temp_directory_path() / ("rlgemm-concurrency-" + std::to_string(::getpid()));
  struct Case {
    std::string design;
    Shape shape;
    Layout layout = Layout::kTN;
  };
  std::vector<Case> cases = {{"sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk3.serial/epi_reg", {1000, 2000, 3000}},
                             {"sm80/32x64x32/w16x32/s3/swz/raster_m.g8/splitk2.serial/epi_smem/swap", {200, 4096, 2048}}};
  // Decode-like K-heavy shapes, cut into 16 slices: many small launches whose slices wait on each other.
  for (const std::string& design : kSplitK16Designs)
    for (Layout layout : {Layout::kTN, Layout::kNN})
      for (Shape shape : kKHeavyShapes) cases.push_back({design, shape, layout});
  for (size_t i = 0; i < kDecodeTileDesigns.size(); ++i)
    cases.push_back({kDecodeTileDesigns[i], kDecodeShapes[i % kDecodeShapes.size()], i % 2 ? Layout::kNN : Layout::kTN});
  if (device.cc_major == 9) {
    cases.push_back({"sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/streamk/epi_reg", {2000, 1096, 4104}});
    cases.push_back({"sm90.ws.coop/128x128x64/s4/c2x1/raster_m.g8/streamk/epi_tma", {320, 512, 8192}});
    cases.push_back({"sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk4.serial/epi_reg", {1024, 2048, 4096}});
  }
  constexpr int kStreams = 4, kRounds = 25;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  struct Run {
    std::unique_ptr<GemmKernel> kernel;
    Problem problem;
    std::unique_ptr<DeviceBuffer<uint16_t>> a, b;
    std::vector<std::unique_ptr<DeviceBuffer<uint16_t>>> c;  // one per stream, and one for the solo launch
    std::vector<std::unique_ptr<DeviceBuffer<char>>> ws;
    size_t ws_bytes = 0;
  };
  std::vector<Run> runs;
  for (const Case& cs : cases) {
    Run r;
    r.problem = Problem{cs.shape, cs.layout};
    r.kernel = std::make_unique<GemmKernel>(parse_design(cs.design), r.problem, device, options);
    const size_t a_elems = size_t(cs.shape.m * cs.shape.k), b_elems = size_t(cs.shape.n * cs.shape.k);
    std::vector<uint16_t> host(std::max(a_elems, b_elems));
    r.a = std::make_unique<DeviceBuffer<uint16_t>>(a_elems);
    r.b = std::make_unique<DeviceBuffer<uint16_t>>(b_elems);
    for (auto* buf : {r.a.get(), r.b.get()}) {
      for (size_t i = 0; i < buf->count; ++i) host[i] = bits_of(Half(normal(rng)));
      RLGEMM_CUDA_CHECK(cudaMemcpy(buf->ptr, host.data(), buf->count * 2, cudaMemcpyHostToDevice));
    }
    r.ws_bytes = r.kernel->workspace_bytes(r.problem);
    for (int s = 0; s <= kStreams; ++s) {
      r.c.push_back(std::make_unique<DeviceBuffer<uint16_t>>(size_t(cs.shape.m * cs.shape.n)));
      r.ws.push_back(std::make_unique<DeviceBuffer<char>>(r.ws_bytes));
      RLGEMM_CUDA_CHECK(cudaMemset(r.ws.back()->ptr, 0, std::max<size_t>(r.ws_bytes, 1)));
    }
    runs.push_back(std::move(r));
  }
  auto launch = [&](Run& r, int slot, cudaStream_t stream) {
    r.kernel->launch(stream, r.problem, GemmOperands{r.a->ptr, r.b->ptr, r.c[slot]->ptr, r.ws[slot]->ptr, r.ws_bytes});
  };
  // Alone first: the bits every stream must reproduce.
  for (Run& r : runs) launch(r, kStreams, nullptr);
  wait_for(cudaStream_t(nullptr), "the solo launches", 60.0);
  std::vector<cudaStream_t> streams(kStreams);
  for (auto& s : streams) RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int round = 0; round < kRounds; ++round)
    for (int s = 0; s < kStreams; ++s)
      for (size_t i = 0; i < runs.size(); ++i) launch(runs[(i + s) % runs.size()], s, streams[s]);
  for (int s = 0; s < kStreams; ++s) {
    try {
      wait_for(streams[s], "stream " + std::to_string(s) + " of concurrent stream-K and serial split-K launches", 60.0);
    } catch (const Error& e) {
      std::fprintf(stderr, "HANG: %s\n", e.what());
      std::_Exit(5);
    }
  }
  int wrong = 0;
  for (const Run& r : runs) {
    const size_t n = r.c[kStreams]->count;
    std::vector<uint16_t> solo(n), got(n);
    RLGEMM_CUDA_CHECK(cudaMemcpy(solo.data(), r.c[kStreams]->ptr, n * 2, cudaMemcpyDeviceToHost));
    for (int s = 0; s < kStreams; ++s) {
      RLGEMM_CUDA_CHECK(cudaMemcpy(got.data(), r.c[s]->ptr, n * 2, cudaMemcpyDeviceToHost));
      if (got != solo) {
        ++wrong;
        std::fprintf(stderr, "%s on stream %d: other bits than alone\n", r.kernel->compiled().name.c_str(), s);
      }
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(*options.cache_dir, ec);
  if (wrong) std::_Exit(1);
  std::fprintf(stderr, "all %d streams finished, %zu kernels each\n", kStreams, runs.size());
  std::_Exit(0);
}

TEST(GpuConcurrentLaunches, StreamKAndSplitKFinishOnFourStreams) {
  RLGEMM_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_concurrent_launches_and_exit(), ::testing::ExitedWithCode(0), "all 4 streams finished");
}

// The fault and hang designs poison or occupy the GPU context, so each runs in a fresh process.
void run_fault_design_and_exit(const char* text) {
  const DeviceInfo device = open_device();
  CompileOptions options;
  options.cache_dir.reset();
  const Problem problem{{64, 64, 64}, Layout::kTN};
  const GemmKernel kernel(parse_design(text), problem, device, options);
  DeviceBuffer<uint16_t> c(64 * 64);
  kernel.launch(nullptr, problem, GemmOperands{c.ptr, c.ptr, c.ptr, nullptr, 0});
  if (std::string(text) == "test.fault") {
    const cudaError_t status = cudaDeviceSynchronize();
    std::fprintf(stderr, "synchronize: %s\n", cudaGetErrorName(status));
    std::_Exit(status == cudaErrorIllegalAddress || status == cudaErrorLaunchFailure ? 42 : 1);
  }
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const cudaError_t status = cudaStreamQuery(nullptr);
  std::fprintf(stderr, "after 3 s: %s\n", cudaGetErrorName(status));
  std::_Exit(status == cudaErrorNotReady ? 43 : 1);
}

TEST(GpuFaultDesigns, FaultFailsWithAnIllegalAddress) {
  RLGEMM_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_fault_design_and_exit("test.fault"), ::testing::ExitedWithCode(42), "synchronize: cudaError");
}

TEST(GpuFaultDesigns, HangKeepsRunning) {
  RLGEMM_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_fault_design_and_exit("test.hang"), ::testing::ExitedWithCode(43), "cudaErrorNotReady");
}

TEST(GpuFaultDesigns, WatchdogReportsAHang) {
  RLGEMM_REQUIRE_GPU();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto run = [] {
    const DeviceInfo device = open_device();
    const Problem problem{{64, 64, 64}, Layout::kTN};
    const GemmKernel kernel(parse_design("test.hang"), problem, device);
    DeviceBuffer<uint16_t> c(64 * 64);
    kernel.launch(nullptr, problem, GemmOperands{c.ptr, c.ptr, c.ptr, nullptr, 0});
    try {
      wait_for(cudaStream_t(nullptr), "test.hang", 2.0);
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      std::_Exit(e.kind() == ErrorKind::kHang ? exit_code(e.kind()) : 1);
    }
    std::_Exit(1);
  };
  EXPECT_EXIT(run(), ::testing::ExitedWithCode(5), "did not finish within 2 s");
}

}  // namespace
}  // namespace rlgemm
