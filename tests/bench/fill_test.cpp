// How many operand sets a placement-robust choice allocates: at most the number wanted, within the budget and
// half the free device memory, and never none.
#include <gtest/gtest.h>

#include <cstddef>

#include "bench/fill.h"

namespace rlgemm::bench {
namespace {

constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kGiB = size_t(1) << 30;

TEST(OperandSetCount, TakesTheNumberWantedWhereTheyFit) {
  EXPECT_EQ(operand_set_count(100 * kMiB, 3, kGiB, 100 * kGiB), 3);
  EXPECT_EQ(operand_set_count(100 * kMiB, 2, kGiB, 100 * kGiB), 2);
}

TEST(OperandSetCount, StopsAtTheBudget) {
  EXPECT_EQ(operand_set_count(400 * kMiB, 3, kGiB, 100 * kGiB), 2);
  EXPECT_EQ(operand_set_count(600 * kMiB, 3, kGiB, 100 * kGiB), 1);
}

TEST(OperandSetCount, StopsAtHalfTheFreeMemory) {
  EXPECT_EQ(operand_set_count(100 * kMiB, 3, kGiB, 400 * kMiB), 2);
  EXPECT_EQ(operand_set_count(100 * kMiB, 3, kGiB, 300 * kMiB), 1);
}

TEST(OperandSetCount, AlwaysOne) {
  EXPECT_EQ(operand_set_count(2 * kGiB, 3, kGiB, 100 * kGiB), 1);  // one set over the budget
  EXPECT_EQ(operand_set_count(100 * kMiB, 3, kGiB, 0), 1);          // no free memory reported
  EXPECT_EQ(operand_set_count(100 * kMiB, 0, kGiB, 100 * kGiB), 1);  // none wanted
  EXPECT_EQ(operand_set_count(0, 3, kGiB, 100 * kGiB), 3);           // an empty problem
}

}  // namespace
}  // namespace rlgemm::bench
