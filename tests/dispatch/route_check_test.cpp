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
