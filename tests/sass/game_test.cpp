// The invariant of the assembly game on real sm_90a kernels: thousands of random legal moves never change
// the dependence graph, and the patched cubin disassembles to the same instructions.
#include <gtest/gtest.h>

#include <random>

#include "sass/game.h"
#include "sass/optimize.h"
#include "sass_fixture.h"

namespace rlgemm::sass {
namespace {

TEST(Game, RandomLegalMovesKeepEveryInvariant) {
  RLGEMM_REQUIRE_NVDISASM();
  for (const char* name : kSassKernels) {
    RLGEMM_SASS_CUBIN(path, name);
    const Cubin cubin = Cubin::load(path);
    const KernelCode code = KernelCode::load(cubin, name);
    ASSERT_GT(code.movable().size(), 4u) << name;
    Schedule schedule(code);
    std::mt19937_64 rng(7);
    int moves = 0;
    for (int step = 0; step < 3000; ++step) {
      const auto legal = schedule.legal_moves();
      ASSERT_FALSE(legal.empty()) << name << ": the reverse of the last move is always legal";
      schedule.apply(legal[rng() % legal.size()]);
      ++moves;
      if (step % 500 == 499) {
        const auto problems = check_invariants(code, schedule.order());
        ASSERT_TRUE(problems.empty()) << name << " after " << moves << " moves: " << problems.front();
      }
    }
    int displaced = 0;
    for (size_t s = 0; s < code.size(); ++s) displaced += schedule.order()[s] != int(s);
    EXPECT_GT(displaced, 10) << name << ": random play should move something";
    const auto patched = cubin.write(code.text(), schedule.order());
    const auto problems = verify_patch(cubin, code, schedule.order(), patched);
    EXPECT_TRUE(problems.empty()) << name << ": " << (problems.empty() ? "" : problems.front());
  }
}

TEST(Game, MaskMatchesTheRules) {
  RLGEMM_REQUIRE_NVDISASM();
  RLGEMM_SASS_CUBIN(path, "mma_sync_gemm");
  const KernelCode code = KernelCode::load(Cubin::load(path), "mma_sync_gemm");
  Schedule schedule(code);
  const auto mask = schedule.legal_mask();
  ASSERT_EQ(mask.size(), code.movable().size() * 2);
  int legal = 0, register_blocked = 0, fence_blocked = 0;
  for (size_t a = 0; a < mask.size(); ++a) {
    const Move m = schedule.action_move(a);
    const std::string why = schedule.why_illegal(m);
    EXPECT_EQ(mask[a] != 0, why.empty());
    legal += mask[a];
    const int t = schedule.slot(m.instruction) + m.direction;
    if (t < 0 || size_t(t) >= code.size()) continue;
    const Instruction& y = code.at(schedule.order()[t]);
    if (y.fence) EXPECT_FALSE(mask[a]) << "never next to a fence: " << y.dis.text();
    if (register_conflict(code.at(m.instruction), y)) EXPECT_FALSE(mask[a]);
    register_blocked += why.find("register") != std::string::npos;
    fence_blocked += why.find("banned") != std::string::npos;
  }
  EXPECT_GT(legal, 0);
  EXPECT_GT(register_blocked, 0);
  EXPECT_GT(fence_blocked, 0);
  // A non-memory instruction is not an actor.
  EXPECT_NE(schedule.why_illegal({0, +1}), "");
}

TEST(Game, UndoRestoresTheSchedule) {
  RLGEMM_REQUIRE_NVDISASM();
  RLGEMM_SASS_CUBIN(path, "wgmma_tma_gemm");
  const KernelCode code = KernelCode::load(Cubin::load(path), "wgmma_tma_gemm");
  Schedule schedule(code);
  const auto before = schedule.order();
  const auto legal = schedule.legal_moves();
  ASSERT_FALSE(legal.empty());
  schedule.apply(legal.front());
  EXPECT_NE(schedule.order(), before);
  schedule.apply({legal.front().instruction, -legal.front().direction});
  EXPECT_EQ(schedule.order(), before);
}

}  // namespace
}  // namespace rlgemm::sass
