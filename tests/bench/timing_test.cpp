#include "bench/timing.h"

#include <gtest/gtest.h>

#include "rlgemm/error.h"

namespace rlgemm::bench {
namespace {

TEST(Timing, Median) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 2, 3}), 2.5);
}

TEST(Timing, ModesParseAndRejectUnknown) {
  EXPECT_EQ(parse_mode("server"), Mode::kServer);
  EXPECT_EQ(parse_modes({"offline", "cold", "offline"}).size(), 2u);
  EXPECT_THROW(parse_mode("fast"), Error);
  EXPECT_THROW(parse_modes({}), Error);
  for (Mode m : {Mode::kOffline, Mode::kServer, Mode::kCold, Mode::kCudal2}) EXPECT_EQ(parse_mode(to_string(m)), m);
}

}  // namespace
}  // namespace rlgemm::bench
