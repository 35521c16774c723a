// The tolerance must pass fp32 accumulation and fail fp16 accumulation; simulated here on the CPU.
#include "bench/correctness.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace rlgemm::bench {
namespace {

struct Simulated {
  std::vector<half> got;
  Reference ref;
};

// One output row of length n with K-long dot products; `accumulate` rounds the running sum per 16-term
// chunk (as a tensor-core MMA with that accumulator type does).
template <typename Round>
Simulated simulate(int n, int k, bool positive, Round round_acc, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::uniform_real_distribution<float> uniform(0, 1);
  Simulated s;
  for (int j = 0; j < n; ++j) {
    double exact = 0, mag = 0;
    float acc = 0;
    for (int c = 0; c < k; c += 16) {
      float chunk = 0;
      for (int t = c; t < c + 16 && t < k; ++t) {
        const float a = __half2float(__float2half(positive ? uniform(rng) : normal(rng)));
        const float b = __half2float(__float2half(positive ? uniform(rng) : normal(rng)));
        chunk += a * b;
        exact += double(a) * double(b);
        mag += std::fabs(double(a) * double(b));
      }
      acc = round_acc(acc + chunk);
    }
    s.got.push_back(__float2half(acc));
    s.ref.value.push_back(exact);
    s.ref.abs_sum.push_back(mag);
  }
  return s;
}

const auto fp32 = [](float x) { return x; };
const auto fp16 = [](float x) { return __half2float(__float2half(x)); };

TEST(Correctness, Fp32AccumulationPasses) {
  for (int k : {8, 136, 1000, 4096, 16384})
    for (bool positive : {false, true}) {
      auto s = simulate(64, k, positive, fp32, 7 + k);
      auto r = compare_samples(s.got, s.ref, "sim");
      EXPECT_TRUE(r.ok) << "K=" << k << " positive=" << positive << ": " << r.why;
    }
}

TEST(Correctness, Fp16AccumulationFailsWithPositiveInputsAndLongK) {
  for (int k : {1024, 4096, 16384}) {
    auto s = simulate(64, k, true, fp16, 11 + k);
    EXPECT_FALSE(compare_samples(s.got, s.ref, "sim").ok) << "K=" << k;
  }
}

TEST(Correctness, NanAndWrongValuesFail) {
  auto s = simulate(8, 64, false, fp32, 3);
  s.got[5] = __float2half(NAN);
  auto r = compare_samples(s.got, s.ref, "sim");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.why.find("sample 5"), std::string::npos);
  s = simulate(8, 64, false, fp32, 3);
  s.got[2] = __float2half(__half2float(s.got[2]) * 1.01f + 0.01f);
  EXPECT_FALSE(compare_samples(s.got, s.ref, "sim").ok);
  s.got.pop_back();
  EXPECT_FALSE(compare_samples(s.got, s.ref, "sim").ok);
}

}  // namespace
}  // namespace rlgemm::bench
