// The correctness gate on the GPU: it passes honest fp32-accumulating kernels and cuBLAS, and catches an
// fp16 accumulator, an unwritten element, and a write outside C; in bf16, it passes honest kernels and cuBLAS
// and catches a bf16 accumulator.
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cstring>
#include <regex>
#include <vector>

#include "bench/correctness.h"
#include "support/gpu.h"

namespace rlgemm::bench {
namespace {

// kFp16AfterShortK: exact on short K, fp16 accumulation past 256 terms (a long-K code path gone wrong).
enum class Flaw { kNone, kFp16Accumulator, kSkipLastElement, kWritePastEnd, kFp16AfterShortK };

template <typename Acc>
__global__ void naive_gemm(const half* a, const half* b, half* c, int m, int n, int k, int nn, int flaw) {
  const int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  Acc acc = Acc(0.0f);
  half low = 0.0f;
  for (int t = 0; t < k; ++t) {
    const float ab = __half2float(a[i * k + t]) * __half2float(nn ? b[t * n + j] : b[j * k + t]);
    if (flaw == int(Flaw::kFp16AfterShortK) && t >= 256) low = low + half(ab);
    else acc += Acc(ab);
  }
  acc += Acc(float(low));
  if (flaw == int(Flaw::kSkipLastElement) && i == m - 1 && j == n - 1) return;
  c[i * n + j] = __float2half(float(acc));
  if (flaw == int(Flaw::kWritePastEnd) && i == m - 1 && j == n - 1) c[m * n + 3] = c[i * n + j];
}

class Naive final : public Implementation {
 public:
  explicit Naive(Flaw flaw, bool runtime_shape = false) : flaw_(flaw), runtime_shape_(runtime_shape) {}
  std::string name() const override { return "naive"; }
  bool runtime_shape() const override { return runtime_shape_; }
  void run(const Problem& p, const Operands& x, cudaStream_t stream) override {
    dim3 block(16, 16), grid(unsigned((p.shape.n + 15) / 16), unsigned((p.shape.m + 15) / 16));
    const int nn = p.layout == Layout::kNN;
    if (flaw_ == Flaw::kFp16Accumulator)
      naive_gemm<half><<<grid, block, 0, stream>>>(x.a, x.b, x.c, int(p.shape.m), int(p.shape.n), int(p.shape.k), nn, int(flaw_));
    else
      naive_gemm<float><<<grid, block, 0, stream>>>(x.a, x.b, x.c, int(p.shape.m), int(p.shape.n), int(p.shape.k), nn, int(flaw_));
  }

 private:
  Flaw flaw_;
  bool runtime_shape_;
};

// cuBLAS's right answer, then a fault planted on top of it.
enum class Fault { kInteriorTile, kAfterThreeCalls, kPastWorkspace };

__global__ void add_to_tile(half* c, int64_t n, int64_t row0, int64_t col0, int size, float delta) {
  const int64_t i = row0 + blockIdx.y * blockDim.y + threadIdx.y, j = col0 + blockIdx.x * blockDim.x + threadIdx.x;
  if (i < row0 + size && j < col0 + size) c[i * n + j] = __float2half(__half2float(c[i * n + j]) + delta);
}

__global__ void poke(unsigned char* p) { *p = 0x42; }

class Faulty final : public Implementation {
 public:
  explicit Faulty(Fault fault) : fault_(fault), inner_(make_cublas_implementation("lt_heuristic")) {}
  std::string name() const override { return "faulty"; }
  void prepare(const Problem& p, const Operands& x, cudaStream_t stream) override {
    inner_->prepare(p, x, stream);
    calls_ = 0;
    workspace_.reserve(1024, stream);
  }
  void run(const Problem& p, const Operands& x, cudaStream_t stream) override {
    inner_->run(p, x, stream);
    ++calls_;
    if (fault_ == Fault::kInteriorTile || (fault_ == Fault::kAfterThreeCalls && calls_ > 3)) {
      // One 64 x 64 tile in the middle of C, off by 0.25: inside no sampled row or column but a few.
      add_to_tile<<<dim3(4, 4), dim3(16, 16), 0, stream>>>(x.c, p.shape.n, p.shape.m / 2 + 64, p.shape.n / 2 - 128, 64, 0.25f);
    }
    if (fault_ == Fault::kPastWorkspace)
      poke<<<1, 1, 0, stream>>>(reinterpret_cast<unsigned char*>(workspace_.data() + 1024) + 17);
  }
  std::string stray_write(cudaStream_t stream) const override {
    return workspace_.guards_intact(stream) ? "" : "a write strayed outside the faulty workspace";
  }

 private:
  Fault fault_;
  ImplementationPtr inner_;
  int calls_ = 0;
  GuardedBuffer workspace_;
};

CheckResult gate(Implementation& impl, Problem p) {
  Gate g;
  g.load(p, 1234 + p.shape.m, nullptr);
  impl.prepare(p, g.operands(), nullptr);
  return g.check(impl, nullptr);
}

TEST(GateGpu, HonestKernelPassesOnRaggedShapes) {
  RLGEMM_REQUIRE_GPU();
  Naive honest(Flaw::kNone);
  for (Layout layout : {Layout::kNN, Layout::kTN})
    for (Shape s : {Shape{1, 72, 24}, Shape{7, 200, 136}, Shape{100, 72, 1000}, Shape{1000, 200, 24}}) {
      auto r = gate(honest, {s, layout});
      EXPECT_TRUE(r.ok) << s.to_string() << ": " << r.why;
    }
}

TEST(GateGpu, CatchesEachFlaw) {
  RLGEMM_REQUIRE_GPU();
  const Problem p{{100, 200, 2048}, Layout::kTN};
  Naive fp16(Flaw::kFp16Accumulator), skip(Flaw::kSkipLastElement), past(Flaw::kWritePastEnd);
  auto r = gate(fp16, p);
  EXPECT_FALSE(r.ok);
  r = gate(skip, p);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.why.find("not written"), std::string::npos) << r.why;
  r = gate(past, p);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.why.find("strayed outside C"), std::string::npos) << r.why;
}

TEST(GateGpu, LongKProbeCatchesAnFp16AccumulatorThatAShortKHides) {
  RLGEMM_REQUIRE_GPU();
  const Problem p{{64, 64, 128}, Layout::kNN};  // the flaw needs more than 256 terms to show
  Naive per_shape(Flaw::kFp16AfterShortK, false), any_shape(Flaw::kFp16AfterShortK, true);
  Naive honest(Flaw::kNone, true);
  EXPECT_TRUE(gate(per_shape, p).ok) << "the short-K problem alone cannot expose it";
  EXPECT_FALSE(gate(per_shape, {{64, 64, 4096}, Layout::kNN}).ok) << "a long K does";
  auto r = gate(any_shape, p);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.why.find("long-K probe"), std::string::npos) << r.why;
  r = gate(honest, p);
  EXPECT_TRUE(r.ok) << r.why;
}

TEST(GateGpu, CublasImplementationsPass) {
  RLGEMM_REQUIRE_GPU();
  for (const auto& name : cublas_implementation_names()) {
    auto impl = make_cublas_implementation(name);
    for (Layout layout : {Layout::kNN, Layout::kTN})
      for (Shape s : {Shape{1, 72, 24}, Shape{1000, 200, 1000}, Shape{4096, 4096, 4096}}) {
        const Problem p{s, layout};
        if (!impl->supports(p)) continue;
        auto r = gate(*impl, p);
        EXPECT_TRUE(r.ok) << name << " " << s.to_string() << ": " << r.why;
      }
  }
}

// The reference covers all of C at every size: a wrong 64 x 64 tile in the interior of a 4096^3 product (which
// sampled rows and columns would mostly miss) fails, and the message names an element of it.
TEST(GateGpu, AWrongInteriorTileOfA4096CubedProblemFails) {
  RLGEMM_REQUIRE_GPU();
  const Problem p{{4096, 4096, 4096}, Layout::kTN};
  Faulty faulty(Fault::kInteriorTile);
  const CheckResult r = gate(faulty, p);
  EXPECT_FALSE(r.ok);
  // 0.25 is over the tolerance of all but the largest values of the 4096 in the tile.
  std::smatch at;
  ASSERT_TRUE(std::regex_search(r.why, at, std::regex(R"((\d+) of 16777216 elements over the tolerance)"))) << r.why;
  EXPECT_GT(std::stoi(at[1]), 3900) << r.why;
  EXPECT_LE(std::stoi(at[1]), 4096) << r.why;
  ASSERT_TRUE(std::regex_search(r.why, at, std::regex(R"(C\[(\d+),(\d+)\])"))) << r.why;
  const int row = std::stoi(at[1]), col = std::stoi(at[2]);
  EXPECT_TRUE(row >= 2112 && row < 2176 && col >= 1920 && col < 1984) << r.why;  // inside the planted tile
  auto honest = make_cublas_implementation("lt_heuristic");
  EXPECT_TRUE(gate(*honest, p).ok);
}

// A C too large to keep its reference (an LLM output layer) is compared in blocks of rows, recomputed at
// every check: a wrong interior tile still fails, and the message points into it.
TEST(GateGpu, AWrongTileOfAnOutputTooLargeToKeepFailsBlockByBlock) {
  RLGEMM_REQUIRE_GPU();
  const Problem p{{16384, 17408, 64}, Layout::kTN};
  ASSERT_GT(size_t(p.c_elems()) * 16, FullReference::kKeepBytes);
  Faulty faulty(Fault::kInteriorTile);
  const CheckResult r = gate(faulty, p);
  EXPECT_FALSE(r.ok);
  std::smatch at;
  ASSERT_TRUE(std::regex_search(r.why, at, std::regex(R"(C\[(\d+),(\d+)\])"))) << r.why;
  const int row = std::stoi(at[1]), col = std::stoi(at[2]);
  EXPECT_TRUE(row >= 8256 && row < 8320 && col >= 8576 && col < 8640) << r.why;
  auto honest = make_cublas_implementation("lt_heuristic");
  const CheckResult ok = gate(*honest, p);
  EXPECT_TRUE(ok.ok) << ok.why;
}

// A fault that appears only after a few calls passes the gate's two checks and fails the check after the
// timings, which repeats the call back to back first.
TEST(GateGpu, RecheckCatchesAFaultThatShowsOnlyUnderRepetition) {
  RLGEMM_REQUIRE_GPU();
  const Problem p{{512, 1024, 256}, Layout::kNN};
  Faulty late(Fault::kAfterThreeCalls);
  Gate g;
  g.load(p, 99, nullptr);
  late.prepare(p, g.operands(), nullptr);
  const CheckResult first = g.check(late, nullptr);
  EXPECT_TRUE(first.ok) << first.why;
  const CheckResult again = g.recheck(late, nullptr);
  EXPECT_FALSE(again.ok);
  EXPECT_NE(again.why.find("after the timings"), std::string::npos) << again.why;
}

TEST(GateGpu, AWritePastTheWorkspaceFails) {
  RLGEMM_REQUIRE_GPU();
  Faulty stray(Fault::kPastWorkspace);
  const CheckResult r = gate(stray, {{128, 128, 128}, Layout::kTN});
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.why.find("outside the faulty workspace"), std::string::npos) << r.why;
}

// bf16 A, B and C (the buffers hold 16-bit elements of the problem's type); the accumulator is fp32, or bf16
// (rounded after every product: the flaw the gate must catch).
template <bool kBf16Accumulator>
__global__ void naive_bf16_gemm(const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* c, int m, int n,
                                int k, int nn) {
  const int i = blockIdx.y * blockDim.y + threadIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m || j >= n) return;
  float acc = 0.0f;
  for (int t = 0; t < k; ++t) {
    const float ab = __bfloat162float(a[i * k + t]) * __bfloat162float(nn ? b[t * n + j] : b[j * k + t]);
    acc += ab;
    if (kBf16Accumulator) acc = __bfloat162float(__float2bfloat16_rn(acc));
  }
  c[i * n + j] = __float2bfloat16_rn(acc);
}

class NaiveBf16 final : public Implementation {
 public:
  explicit NaiveBf16(bool bf16_accumulator) : bf16_accumulator_(bf16_accumulator) {}
  std::string name() const override { return "naive_bf16"; }
  void run(const Problem& p, const Operands& x, cudaStream_t stream) override {
    dim3 block(16, 16), grid(unsigned((p.shape.n + 15) / 16), unsigned((p.shape.m + 15) / 16));
    const auto* a = reinterpret_cast<const __nv_bfloat16*>(x.a);
    const auto* b = reinterpret_cast<const __nv_bfloat16*>(x.b);
    auto* c = reinterpret_cast<__nv_bfloat16*>(x.c);
    const int m = int(p.shape.m), n = int(p.shape.n), k = int(p.shape.k), nn = p.layout == Layout::kNN;
    if (bf16_accumulator_) naive_bf16_gemm<true><<<grid, block, 0, stream>>>(a, b, c, m, n, k, nn);
    else naive_bf16_gemm<false><<<grid, block, 0, stream>>>(a, b, c, m, n, k, nn);
  }

 private:
  bool bf16_accumulator_;
};

TEST(GateGpu, Bf16HonestKernelAndCublasPassOnRaggedShapes) {
  RLGEMM_REQUIRE_GPU();
  NaiveBf16 honest(false);
  for (Layout layout : {Layout::kNN, Layout::kTN})
    for (Shape s : {Shape{1, 72, 24}, Shape{7, 200, 136}, Shape{100, 72, 1000}, Shape{1000, 200, 2056}}) {
      const Problem p{s, layout, DType::kBF16};
      auto r = gate(honest, p);
      EXPECT_TRUE(r.ok) << s.to_string() << ": " << r.why;
      for (const auto& name : cublas_implementation_names()) {
        auto impl = make_cublas_implementation(name);
        if (!impl->supports(p)) continue;
        r = gate(*impl, p);
        EXPECT_TRUE(r.ok) << name << " bf16 " << s.to_string() << ": " << r.why;
      }
    }
}

// The bf16 tolerance (2^-7 relative) is eight times the fp16 one, yet a bf16 accumulator cannot hide in it:
// the running sum drops a product's low bits at every step (with uniform-positive inputs, whole products
// once the sum is 2^8 times larger).
TEST(GateGpu, Bf16AccumulatorIsCaught) {
  RLGEMM_REQUIRE_GPU();
  NaiveBf16 flawed(true);
  for (int k : {1024, 4096}) {
    const auto r = gate(flawed, {{64, 72, k}, Layout::kTN, DType::kBF16});
    EXPECT_FALSE(r.ok) << "K=" << k;
    EXPECT_NE(r.why.find("over the tolerance"), std::string::npos) << r.why;
  }
}

// The same seed draws the same inputs, so a failure can be replayed; another seed draws others.
TEST(GateGpu, TheSeedReplaysTheInputs) {
  RLGEMM_REQUIRE_GPU();
  const Problem p{{96, 64, 40}, Layout::kTN};
  auto fetch_a = [&](uint64_t seed) {
    Gate g;
    g.load(p, seed, nullptr);
    std::vector<half> host(size_t(p.a_elems()));
    EXPECT_EQ(cudaMemcpy(host.data(), g.operands().a, host.size() * sizeof(half), cudaMemcpyDeviceToHost), cudaSuccess);
    std::vector<unsigned short> bits(host.size());
    std::memcpy(bits.data(), host.data(), host.size() * sizeof(half));
    return bits;
  };
  EXPECT_EQ(fetch_a(5), fetch_a(5));
  EXPECT_NE(fetch_a(5), fetch_a(6));
}

}  // namespace
}  // namespace rlgemm::bench
