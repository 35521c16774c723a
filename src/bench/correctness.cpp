#include "bench/correctness.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/cuda_util.h"

namespace rlgemm::bench {

void Gate::load(const Problem& p, uint64_t seed, cudaStream_t stream) {
  problem_ = p;
  seed_ = seed;
  for (int s = 0; s < 2; ++s) {
    a_[s].reserve(size_t(p.a_elems()), stream);
    b_[s].reserve(size_t(p.b_elems()), stream);
    const Fill fill = s ? Fill::kUniformPositive : Fill::kNormal;
    fill_random(a_[s].data(), size_t(p.a_elems()), fill, seed + 2 * s, stream, p.dtype);
    fill_random(b_[s].data(), size_t(p.b_elems()), fill, seed + 2 * s + 1, stream, p.dtype);
  }
  c_.reserve(size_t(p.c_elems()), stream);
  for (int s = 0; s < 2; ++s) ref_[s].compute(p, a_[s].data(), b_[s].data(), s == 1, stream);
}

void Gate::rewrite_inputs(cudaStream_t stream) {
  fill_random(a_[0].data(), size_t(problem_.a_elems()), Fill::kNormal, seed_, stream, problem_.dtype);
  fill_random(b_[0].data(), size_t(problem_.b_elems()), Fill::kNormal, seed_ + 1, stream, problem_.dtype);
}

CheckResult Gate::recheck(Implementation& impl, cudaStream_t stream) {
  CheckResult r = check_set(impl, 0, kRecheckRepeats, stream);
  if (!r.ok) r.why = "after the timings, " + std::to_string(kRecheckRepeats) + " calls back to back: " + r.why;
  return r;
}

CheckResult Gate::check(Implementation& impl, cudaStream_t stream) {
  CheckResult normal = check_set(impl, 0, 1, stream);
  if (!normal.ok) return normal;
  CheckResult positive = check_set(impl, 1, 1, stream);
  positive.worst_ratio = std::max(positive.worst_ratio, normal.worst_ratio);
  if (!positive.ok || !impl.runtime_shape() || problem_.shape.k >= kLongK.k) return positive;
  // A short K cannot expose a 16-bit accumulator. An implementation that serves every shape with one kernel
  // is also checked, once per layout, on a long K of positive inputs.
  const auto key = std::make_tuple(impl.name(), problem_.layout, problem_.dtype);
  if (!long_k_passed_.count(key)) {
    auto& probe = long_k_[int(problem_.layout)][int(problem_.dtype)];
    if (!probe) {
      probe = std::make_unique<Gate>();
      probe->load({kLongK, problem_.layout, problem_.dtype}, seed_ ^ 0x10c6ull, stream);
    }
    impl.prepare(probe->problem(), probe->operands(), stream);
    CheckResult r = probe->check_set(impl, 1, 1, stream);
    impl.prepare(problem_, operands(), stream);
    if (!r.ok) {
      r.why = "long-K probe " + kLongK.to_string() + ": " + r.why;
      return r;
    }
    long_k_passed_.insert(key);
  }
  return positive;
}

CheckResult Gate::check_set(Implementation& impl, int set, int repeats, cudaStream_t stream) {
  const Problem& p = problem_;
  const std::string what = set ? "positive inputs" : "normal inputs";
  const Operands x{a_[set].data(), b_[set].data(), c_.data()};
  fill_nan(c_.data(), size_t(p.c_elems()), stream);
  a_[set].arm_guards(size_t(p.a_elems()), stream);
  b_[set].arm_guards(size_t(p.b_elems()), stream);
  c_.arm_guards(size_t(p.c_elems()), stream);
  for (int r = 0; r < repeats; ++r) impl.run(p, x, stream);
  RLGEMM_CHECK_LAUNCH();
  wait_for(stream, impl.name() + " on " + p.shape.to_string() + " (" + what + ")");
  CheckResult r;
  const GuardedBuffer* guarded[3] = {&a_[set], &b_[set], &c_};
  const char* names[3] = {"A", "B", "C"};
  for (int t = 0; t < 3; ++t)
    if (!guarded[t]->guards_intact(stream)) {
      r.ok = false;
      r.why = what + ": a write strayed outside " + names[t];
      return r;
    }
  if (const std::string stray = impl.stray_write(stream); !stray.empty()) {
    r.ok = false;
    r.why = what + ": " + stray;
    return r;
  }
  const int64_t bad = count_nonfinite(c_.data(), size_t(p.c_elems()), p.dtype, stream);
  if (bad) {
    r.ok = false;
    r.why = what + ": " + std::to_string(bad) + " elements of C not written or not finite";
    return r;
  }
  const FullReference::Mismatch m = ref_[set].compare(c_.data(), stream);
  r.worst_ratio = m.worst_ratio;
  if (m.over == 0) return r;
  r.ok = false;
  char buf[320];
  if (m.worst_index >= 0)
    std::snprintf(buf, sizeof buf, "%s: %lld of %lld elements over the tolerance, the worst C[%lld,%lld] = %.6g against %.6g (error %.3g, %.3gx the tolerance)",
                  what.c_str(), (long long)m.over, (long long)p.c_elems(), (long long)(m.worst_index / p.shape.n),
                  (long long)(m.worst_index % p.shape.n), m.worst_c, m.worst_ref, std::fabs(m.worst_c - m.worst_ref),
                  m.worst_ratio);
  else
    std::snprintf(buf, sizeof buf, "%s: %lld of %lld elements over the tolerance", what.c_str(), (long long)m.over,
                  (long long)p.c_elems());
  r.why = buf;
  return r;
}

}  // namespace rlgemm::bench
