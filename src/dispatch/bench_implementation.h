// The library itself as an implementation of the benchmark harness ("rlgemm"): every problem goes through
// rlgemm::Handle exactly as an application's call would (its route, tuned, nearest, policy, default or
// cuBLASLt, in the detail column), through the same correctness gate and timing.
#pragma once

#include "bench/implementation.h"
#include "rlgemm/rlgemm.h"

namespace rlgemm::dispatch {

inline constexpr const char* kDispatchImplementation = "rlgemm";
// The same library with the predicted route off (HandleOptions::predicted_kernels = false: every shape without
// a tuned row on the cuBLASLt floor), so that one run measures both beside the same vendor calls.
inline constexpr const char* kFloorDispatchImplementation = "rlgemm_floor";
// The same library with autotuning (HandleOptions::autotune): the predictor's few best kernels timed against
// the floor at each untuned shape's first use (in prepare(), before the harness's gate and timing).
inline constexpr const char* kAutotuneDispatchImplementation = "rlgemm_autotune";
// The same library checking, at each untuned shape's first use, the nearest tuned row's design beside the predicted
// one (HandleOptions::nearest_kernels): the default since the twenty-fourth set; the name stays for earlier runs.
inline constexpr const char* kNearestDispatchImplementation = "rlgemm_nearest";
// The same library without it (HandleOptions::nearest_kernels = false: the predicted design alone), so that one run
// measures the nearest rows' designs beside the handle that lacks them.
inline constexpr const char* kNoNearestDispatchImplementation = "rlgemm_no_nearest";
// The default handle (the built-in tuned table, the predicted route, no policy, no database, the default SASS),
// whatever the run's --rlgemm-* options give "rlgemm": beside a tuning database's handle in the same rounds, whether
// the tune made a shape slower (scripts/tuned_vs_zero_shot.py --same-run).
inline constexpr const char* kZeroShotDispatchImplementation = "rlgemm_zero_shot";

// A handle made with `options` (default: the built-in tuned table of this GPU), named `name` in the results.
bench::ImplementationPtr make_dispatch_implementation(const HandleOptions& options = {},
                                                      std::string name = kDispatchImplementation);

}  // namespace rlgemm::dispatch
