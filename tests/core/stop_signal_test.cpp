#include "core/stop_signal.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "rlgemm/error.h"

namespace rlgemm {
namespace {

TEST(StopSignal, ASecondSignalEndsOnlyASecondOrMoreAfterTheFirst) {
  EXPECT_FALSE(second_signal_ends(5'000'000'000, 5'000'000'000));
  EXPECT_FALSE(second_signal_ends(5'000'000'000, 5'999'999'999));
  EXPECT_TRUE(second_signal_ends(5'000'000'000, 6'000'000'000));
}

TEST(StopSignal, SignalsThatComeTogetherAreOneRequest) {
  StopSignal stop;
  EXPECT_FALSE(stop.requested());
  // As timeout(1) sends them: to the process, then to its group.
  std::raise(SIGINT);
  std::raise(SIGINT);
  EXPECT_TRUE(stop.requested());
  std::raise(SIGTERM);  // still within the second: this process goes on
  EXPECT_TRUE(stop.requested());
  EXPECT_THROW(StopSignal(), Error);
}

TEST(StopSignal, ASecondSignalLaterEndsTheProcess) {
  EXPECT_EXIT(
      {
        StopSignal stop;
        std::raise(SIGTERM);
        std::this_thread::sleep_for(std::chrono::milliseconds(1100));
        std::raise(SIGTERM);
        std::exit(0);  // not reached
      },
      testing::KilledBySignal(SIGTERM), "");
}

TEST(StopSignal, EachObjectStartsCleared) {
  {
    StopSignal stop;
    std::raise(SIGINT);
    EXPECT_TRUE(stop.requested());
  }
  StopSignal again;
  EXPECT_FALSE(again.requested());
}

}  // namespace
}  // namespace rlgemm
