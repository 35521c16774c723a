// The gate's tolerance (tolerance_ratio, the rule the device comparison applies to every element of C) must
// pass fp32 accumulation and fail a 16-bit accumulator, in fp16 and in bf16; simulated here on the CPU.
#include "bench/device_data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>

#include "bench/correctness.h"

namespace rlgemm::bench {
namespace {

// fp32 -> bf16 -> fp32, rounding to nearest even (finite inputs): what cvt.rn.bf16.f32 does.
float bf16_round(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  bits = (bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  std::memcpy(&x, &bits, 4);
  return x;
}
float fp16_round(float x) { return __half2float(__float2half(x)); }

struct Simulated {
  std::vector<float> got;  // C as stored, widened
  std::vector<double> value, abs_sum;  // the fp64 reference
  DType dtype = DType::kF16;
};

// The largest |c - ref| / tolerance over the values (infinite for a non-finite one), with the tolerance of
// `as` (by default the type the values were computed in).
double worst_ratio(const Simulated& s, std::optional<DType> as = std::nullopt) {
  double worst = 0;
  const double rel = relative_tolerance(as.value_or(s.dtype));
  for (size_t t = 0; t < s.got.size(); ++t)
    worst = std::max(worst, tolerance_ratio(double(s.got[t]), s.value[t], s.abs_sum[t], rel));
  return worst;
}
bool passes(const Simulated& s) { return worst_ratio(s) <= 1.0; }

// One output row of length n with K-long dot products; `accumulate` rounds the running sum per 16-term
// chunk (as a tensor-core MMA with that accumulator type does).
template <typename Round>
Simulated simulate(int n, int k, bool positive, Round round_acc, uint64_t seed, DType dtype = DType::kF16) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform(0, 1);
  const auto element = [dtype](float x) { return dtype == DType::kBF16 ? bf16_round(x) : fp16_round(x); };
  Simulated s;
  s.dtype = dtype;
  for (int j = 0; j < n; ++j) {
    double exact = 0, mag = 0;
    float acc = 0;
    for (int c = 0; c < k; c += 16) {
      float chunk = 0;
      for (int t = c; t < c + 16 && t < k; ++t) {
        const float a = element(positive ? uniform(rng) : normal(rng));
        const float b = element(positive ? uniform(rng) : normal(rng));
        chunk += a * b;
        exact += double(a) * double(b);
        mag += std::fabs(double(a) * double(b));
      }
      acc = round_acc(acc + chunk);
    }
    s.got.push_back(element(acc));
    s.value.push_back(exact);
    s.abs_sum.push_back(mag);
  }
  return s;
}

const auto fp32 = [](float x) { return x; };
const auto fp16 = [](float x) { return fp16_round(x); };
const auto bf16 = [](float x) { return bf16_round(x); };

TEST(Correctness, Fp32AccumulationPasses) {
  for (int k : {8, 136, 1000, 4096, 16384})
    for (bool positive : {false, true}) {
      auto s = simulate(64, k, positive, fp32, 7 + k);
      EXPECT_TRUE(passes(s)) << "K=" << k << " positive=" << positive << ": ratio " << worst_ratio(s);
    }
}

TEST(Correctness, Fp16AccumulationFailsWithPositiveInputsAndLongK) {
  for (int k : {1024, 4096, 16384}) {
    auto s = simulate(64, k, true, fp16, 11 + k);
    EXPECT_FALSE(passes(s)) << "K=" << k;
  }
}

TEST(Correctness, NanInfinityAndWrongValuesFail) {
  auto s = simulate(8, 64, false, fp32, 3);
  ASSERT_TRUE(passes(s));
  s.got[5] = NAN;
  EXPECT_TRUE(std::isinf(worst_ratio(s)));
  s = simulate(8, 64, false, fp32, 3);
  s.got[1] = INFINITY;
  EXPECT_FALSE(passes(s));
  s = simulate(8, 64, false, fp32, 3);
  s.got[2] = fp16_round(s.got[2] * 1.01f + 0.01f);
  EXPECT_FALSE(passes(s));
}

TEST(Correctness, Bf16RoundsToNearestEven) {
  EXPECT_EQ(bf16_round(1.0f + 1.0f / 256), 1.0f);  // a tie (half of 2^-7): to the even neighbour, 1
  EXPECT_EQ(bf16_round(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);  // a tie: to the even neighbour, 1 + 2^-6
  EXPECT_EQ(bf16_round(1.0f + 1.0f / 256 + 1.0f / 65536), 1.0f + 1.0f / 128);  // above the tie: up
}

// bf16 keeps 8 significant bits: rounding the fp32 result alone costs up to 2^-8 relative, which the fp16
// tolerance (2^-10 |ref|, plus the accumulation term) refuses and the bf16 one (2^-7 |ref|) accepts.
TEST(Correctness, Bf16ToleranceIsDerivedFromItsSignificand) {
  EXPECT_EQ(relative_tolerance(DType::kBF16), 2 * std::ldexp(1.0, -8));
  EXPECT_EQ(relative_tolerance(DType::kF16), 2 * std::ldexp(1.0, -11));
  for (int k : {8, 136, 1000, 4096, 16384})
    for (bool positive : {false, true}) {
      auto s = simulate(64, k, positive, fp32, 17 + k, DType::kBF16);
      EXPECT_TRUE(passes(s)) << "K=" << k << " positive=" << positive << ": ratio " << worst_ratio(s);
      if (positive) EXPECT_GT(worst_ratio(s, DType::kF16), 1.0) << "K=" << k;  // the fp16 rule would refuse it
    }
  // An element off by one bf16 ulp fails (2^-7 relative against a tolerance of 2^-7 + 2^-16 of |ref| for
  // positive inputs: just over).
  auto s = simulate(8, 256, true, fp32, 5, DType::kBF16);
  ASSERT_TRUE(passes(s));
  s.got[3] = float(s.value[3] * (1 + std::ldexp(1.0, -7) * 1.01));
  EXPECT_FALSE(passes(s));
}

// A bf16 accumulator (the running sum rounded to bf16 after every 16-term MMA step) with positive inputs: each
// rounding loses up to half a bf16 ulp of the sum, 2^-9 of it, and once the sum dwarfs a step's contribution
// the errors lean one way. On 64 outputs the worst is 0.7x the tolerance at K = 64, 1.5x at 512, 2.8x at 1024
// and 8-10x at the long-K probe (K = 8192); fp32 accumulation stays below 0.5x throughout.
TEST(Correctness, Bf16AccumulationFailsWithPositiveInputs) {
  for (int k : {1024, 4096, 8192, 16384}) {
    auto s = simulate(64, k, true, bf16, 23 + k, DType::kBF16);
    EXPECT_FALSE(passes(s)) << "K=" << k << ": ratio " << worst_ratio(s);
  }
  auto probe = simulate(64, Gate::kLongK.k, true, bf16, 29, DType::kBF16);
  EXPECT_GT(worst_ratio(probe), 4.0);  // about 8x the tolerance
}

}  // namespace
}  // namespace rlgemm::bench
