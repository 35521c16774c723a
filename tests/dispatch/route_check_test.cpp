// The rule of the handle's first-use route check, on the CPU: each way of calling (eager, CUDA graphs) is served
// by the kernel whose gain over the floor clears the margin beyond its interval, else by the floor; a kernel
// that wins eager calls only (by its lighter launch) never serves a graph.
#include "dispatch/route_check.h"

#include <gtest/gtest.h>

#include "rlgemm/error.h"

namespace rlgemm::dispatch {
namespace {

GainInterval gain(double point, double half_width) { return {15, point, point - half_width, point + half_width}; }

TEST(RouteCheck, AKernelFasterOnlyEagerNeverServesAGraph) {
  // 64x128x4096 on an H200: 0.5x cuBLAS's host+GPU time eager, 1.44x its GPU time in a graph.
  const RouteVerdict v = decide_routes({gain(0.8, 0.05)}, {gain(-0.3, 0.02)});
  EXPECT_EQ(v.eager, 0);
  EXPECT_EQ(v.graph, -1);
}

TEST(RouteCheck, AGainInsideItsIntervalOrBelowTheMarginIsTheFloors) {
  EXPECT_EQ(decide_routes({gain(0.02, 0.03)}, {gain(0.02, 0.03)}).graph, -1);  // the interval holds 0
  EXPECT_EQ(decide_routes({gain(0.012, 0.004)}, {gain(0.012, 0.004)}).eager, -1);  // low 0.8%: under the margin
  const RouteVerdict both = decide_routes({gain(0.05, 0.01)}, {gain(0.04, 0.01)});
  EXPECT_EQ(both.eager, 0);
  EXPECT_EQ(both.graph, 0);
}

TEST(RouteCheck, EachWayTakesItsOwnFastestKernel) {
  // Kernel 0 wins eager calls by more, kernel 1 the GPU's time; kernel 2 is never sure.
  const RouteVerdict v = decide_routes({gain(0.20, 0.02), gain(0.10, 0.02), gain(0.30, 0.40)},
                                       {gain(0.03, 0.01), gain(0.06, 0.01), gain(0.50, 0.60)});
  EXPECT_EQ(v.eager, 0);
  EXPECT_EQ(v.graph, 1);
  EXPECT_THROW(decide_routes({gain(0.1, 0.01)}, {}), Error);
}

TEST(RouteCheck, AKernelMustWinOnEveryOperandSet) {
  // 16x36864x4608 on an H200: 1.06x the floor on the scratch operands, 0.95x on the caller's own.
  const GainInterval scratch = gain(0.06, 0.005), callers = gain(-0.05, 0.004);
  EXPECT_DOUBLE_EQ(weakest_of_sets({scratch, callers}).gain, -0.05);
  EXPECT_DOUBLE_EQ(weakest_of_sets({callers, scratch}).gain, -0.05);
  EXPECT_EQ(decide_routes({weakest_of_sets({scratch, callers})}, {weakest_of_sets({scratch, callers})}).graph, -1);
  // The set of the lowest bound decides, not the lowest estimate: a wide interval may hold the floor.
  EXPECT_DOUBLE_EQ(weakest_of_sets({gain(0.03, 0.025), gain(0.02, 0.005)}).gain, 0.03);
  EXPECT_EQ(decide_routes({weakest_of_sets({gain(0.03, 0.025), gain(0.02, 0.005)})}, {gain(0.05, 0.01)}).eager, -1);
  EXPECT_EQ(decide_routes({weakest_of_sets({gain(0.05, 0.01), gain(0.04, 0.01)})}, {gain(0.05, 0.01)}).eager, 0);
  EXPECT_THROW(weakest_of_sets({}), Error);
}

TEST(RouteCheck, AKernelMustBeatTheFloorAsItsFinalFoundIt) {
  // 16x28672x3584 on an H200: the floor, cuBLASLt's candidate 1, ran 0.95 of candidate 0's time in its final and
  // 50.3 us in the harness; in the check it ran 54 us, 1.03x candidate 0's, and the kernel (52.1 us) measured
  // 1.04x it, 1.01x candidate 0.
  const GainInterval over_floor = gain(0.04, 0.003), over_first = gain(0.01, 0.003);
  const GainInterval slow_floor = gain(-0.03, 0.004);  // the floor over the first in the check
  EXPECT_TRUE(floor_slower_than_its_final(slow_floor, 0.95));
  const GainInterval taken = against_floor_as_chosen(over_floor, over_first, slow_floor, 0.95);
  EXPECT_NEAR(taken.gain, 1.01 * 0.95 - 1, 1e-12);  // about 0.96x: the floor serves
  EXPECT_NEAR(taken.low, 1.007 * 0.95 - 1, 1e-12);
  EXPECT_NEAR(taken.high, 1.013 * 0.95 - 1, 1e-12);
  EXPECT_EQ(decide_routes({taken}, {taken}).graph, -1);
  EXPECT_EQ(decide_routes({over_floor}, {over_floor}).graph, 0);  // what the check alone said

  // The floor as fast against the first as in its final (its gain 1/0.95 - 1 = 0.053 within the interval): the
  // direct measurement stands, whatever the chain through the first says.
  const GainInterval steady_floor = gain(0.05, 0.004);
  EXPECT_FALSE(floor_slower_than_its_final(steady_floor, 0.95));
  EXPECT_DOUBLE_EQ(against_floor_as_chosen(over_floor, over_first, steady_floor, 0.95).gain, 0.04);
  // Within the tolerance (1%) of its final: no spell is read into it.
  EXPECT_FALSE(floor_slower_than_its_final(gain(0.045, 0.001), 0.95));
  EXPECT_TRUE(floor_slower_than_its_final(gain(0.03, 0.001), 0.95));

  // A slow floor where the kernel wins against the floor as its final found it too: the weaker claim serves.
  const GainInterval both = against_floor_as_chosen(gain(0.12, 0.01), gain(0.09, 0.01), slow_floor, 0.95);
  EXPECT_NEAR(both.gain, 1.09 * 0.95 - 1, 1e-12);
  EXPECT_EQ(decide_routes({both}, {both}).graph, 0);
  // The chain is never taken where it would claim more than the check measured.
  EXPECT_DOUBLE_EQ(against_floor_as_chosen(gain(0.02, 0.01), gain(0.09, 0.01), slow_floor, 0.95).gain, 0.02);

  // No final against the first (the floor is the first, or its choice was made in another process), or a ratio
  // that is not one: the check's own measurement.
  for (double none : {0.0, -1.0, 1.0, 1.2}) {
    EXPECT_FALSE(floor_slower_than_its_final(slow_floor, none));
    EXPECT_DOUBLE_EQ(against_floor_as_chosen(over_floor, over_first, slow_floor, none).gain, 0.04);
  }
}

TEST(RouteCheck, EagerCallsGetAFloorChoiceOfTheirOwnWhereTheirScreenTimesTheGpu) {
  // Through cublasLtMatmul, eager calls always take an eager choice.
  EXPECT_TRUE(eager_floor_choice(false, 0.0, false));
  EXPECT_TRUE(eager_floor_choice(false, 5.0, false));
  // Launched directly: a short kernel keeps the graph screen's choice for both ways (16x3584x3584, 7.9 us a call)...
  EXPECT_FALSE(eager_floor_choice(true, 7.9, false));
  EXPECT_FALSE(eager_floor_choice(true, kEagerScreenUs - 0.01, false));
  // ...a long one gets an eager screen (1x17920x5120, 48.5 us), and a choice known already is used at any length
  // (a graph choice read from the machine's file comes without a time).
  EXPECT_TRUE(eager_floor_choice(true, 48.5, false));
  EXPECT_TRUE(eager_floor_choice(true, kEagerScreenUs, false));
  EXPECT_TRUE(eager_floor_choice(true, 0.0, true));
}

TEST(RouteCheck, TheVerdictSaysWhatServesAndWhatWasMeasured) {
  EXPECT_EQ(route_verdict_text({"k"}, {gain(0.07, 0.02)}, 0), "k at 1.07x cuBLASLt (95% CI 1.05..1.09)");
  EXPECT_EQ(route_verdict_text({"k"}, {gain(-0.07, 0.02)}, -1),
            "cuBLASLt; the kernel k measured 0.93x cuBLASLt (95% CI 0.91..0.95)");
  EXPECT_EQ(route_verdict_text({"a", "b"}, {gain(-0.2, 0.01), gain(0.004, 0.02)}, -1),
            "cuBLASLt; the best of 2 kernels, b, measured 1.00x cuBLASLt (95% CI 0.98..1.02)");
}

}  // namespace
}  // namespace rlgemm::dispatch
