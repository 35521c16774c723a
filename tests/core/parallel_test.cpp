#include "core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

namespace rlgemm {
namespace {

TEST(ParallelChunks, EveryIndexOnceInContiguousChunks) {
  for (size_t n : {size_t(1), size_t(7), size_t(1000), size_t(1001)}) {
    for (int threads : {1, 2, 3, 8}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> chunks{0};
      parallel_chunks(n, 10, [&](size_t begin, size_t end) {
        ASSERT_LT(begin, end);
        ASSERT_LE(end, n);
        ++chunks;
        for (size_t i = begin; i < end; ++i) ++hits[i];
      }, threads);
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n " << n << " threads " << threads << " i " << i;
      EXPECT_LE(chunks.load(), threads) << n;
      EXPECT_GE(chunks.load(), 1);
    }
  }
}

TEST(ParallelChunks, ASmallRangeStaysOnTheCallingThread) {
  const std::thread::id caller = std::this_thread::get_id();
  int calls = 0;
  parallel_chunks(15, 8, [&](size_t begin, size_t end) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    EXPECT_EQ(begin, 0u);
    EXPECT_EQ(end, 15u);
    ++calls;
  }, 16);
  EXPECT_EQ(calls, 1);
  parallel_chunks(0, 1, [&](size_t, size_t) { ++calls; }, 4);  // nothing to do: no call
  EXPECT_EQ(calls, 1);
}

TEST(ParallelChunks, UsesOtherThreadsForALargeRange) {
  std::vector<std::thread::id> ids(4);
  parallel_chunks(4000, 1000, [&](size_t begin, size_t) { ids[begin / 1000] = std::this_thread::get_id(); }, 4);
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_NE(ids[i], ids[0]);
}

TEST(ParallelChunks, AChunksExceptionReachesTheCallerAfterEveryChunkEnded) {
  std::atomic<int> finished{0};
  EXPECT_THROW(parallel_chunks(4000, 1000, [&](size_t begin, size_t) {
    if (begin == 2000) throw std::runtime_error("chunk 2 failed");
    ++finished;
  }, 4), std::runtime_error);
  EXPECT_EQ(finished.load(), 3);
}

}  // namespace
}  // namespace rlgemm
