// The correctness gate on the GPU: it passes honest fp32-accumulating kernels and cuBLAS, and catches an
// fp16 accumulator, an unwritten element, and a write outside C.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rlgemm::bench
