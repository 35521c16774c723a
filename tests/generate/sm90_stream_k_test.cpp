// The sm90 kernel's stream-K partition (src/kernels/sm90/stream_k.h), checked on the host with the very
// functions the kernel calls: every k-block of every tile is computed exactly once, the stream-K region is
// shared out evenly, and the fixup's waits cannot form a cycle (peers are first segments, owners last).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/sm90/stream_k.h"

namespace rlgemm::sm90 {
namespace {

std::string where(int tiles, int k_blocks, int clusters) {
  return "T=" + std::to_string(tiles) + " KB=" + std::to_string(k_blocks) + " G=" + std::to_string(clusters);
}

// Checks every property the kernel relies on for one (T, KB, G); returns how many segments were cut (not
// whole tiles), so callers can tell that stream-K was exercised.
int check_partition(int tiles, int k_blocks, int clusters) {
  SCOPED_TRACE(where(tiles, k_blocks, clusters));
  const StreamK s = stream_k_partition(tiles, k_blocks, clusters);
  EXPECT_EQ(s.dp_tiles % clusters, 0);
  EXPECT_LE(s.dp_tiles, tiles);
  if (tiles % clusters == 0) EXPECT_EQ(s.dp_tiles, tiles) << "whole waves are all data parallel";
  else if (tiles >= 2 * clusters) EXPECT_EQ(s.dp_tiles, (tiles / clusters - 1) * clusters);
  else EXPECT_EQ(s.dp_tiles, 0);
  EXPECT_EQ(s.sk_iters, static_cast<long long>(tiles - s.dp_tiles) * k_blocks);
  // S clusters share the region, none with fewer than stream_k_min_iters k-blocks unless S is 1, and S is
  // cut below G only for that reason.
  const int sk = s.sk_clusters;
  EXPECT_GE(sk, 1);
  EXPECT_LE(sk, clusters);
  if (s.sk_iters > 0 && sk > 1) EXPECT_GE(s.sk_iters / sk, stream_k_min_iters(k_blocks));
  if (sk < clusters) EXPECT_LT(s.sk_iters / (sk + 1), stream_k_min_iters(k_blocks));
  if (s.dp_tiles > 0) EXPECT_EQ(sk, clusters) << "a region of G tiles or more is never cut too fine";
  // The kernel's overflow-free form of cluster g's first iteration is floor(g * I / S), and I from S on.
  for (int g = 0; g <= clusters; ++g)
    EXPECT_EQ(stream_k_begin(s, g), g < sk ? static_cast<long long>(g) * s.sk_iters / sk : s.sk_iters)
        << "cluster " << g;

  std::vector<int> covered(static_cast<size_t>(tiles) * k_blocks, 0);
  std::vector<std::vector<StreamKSegment>> units(clusters);
  long long min_iters = -1, max_iters = 0;
  int cut = 0;
  for (int g = 0; g < clusters; ++g) {
    const int n = stream_k_units(s, g);
    const int dp_units = s.dp_tiles / clusters;
    EXPECT_EQ(n, dp_units + stream_k_segments(s, g));
    long long sk_iters = 0;
    for (int j = 0; j < n; ++j) {
      const StreamKSegment seg = stream_k_unit(s, g, j);
      units[g].push_back(seg);
      EXPECT_GE(seg.tile, 0);
      EXPECT_LT(seg.tile, tiles);
      EXPECT_GE(seg.kb_begin, 0);
      EXPECT_LT(seg.kb_begin, seg.kb_end) << "cluster " << g << " unit " << j << " is empty";
      EXPECT_LE(seg.kb_end, k_blocks);
      if (j < dp_units) {
        EXPECT_EQ(seg.tile, g + j * clusters) << "data-parallel tiles are walked with a grid stride";
        EXPECT_EQ(seg.kb_begin, 0);
        EXPECT_EQ(seg.kb_end, k_blocks);
      } else {
        EXPECT_GE(seg.tile, s.dp_tiles);
        sk_iters += seg.kb_end - seg.kb_begin;
        if (j > dp_units) EXPECT_GT(seg.tile, units[g][j - 1].tile) << "segments in tile order";
      }
      // Only the first stream-K segment may start inside a tile (a peer): the owners wait on peers only.
      if (seg.kb_begin > 0) EXPECT_EQ(j, dp_units) << "cluster " << g << ": a peer that is not its first segment";
      // Only the last segment may start a tile without finishing it (an owner that waits).
      if (seg.kb_begin == 0 && seg.kb_end < k_blocks) EXPECT_EQ(j, n - 1) << "cluster " << g << ": owner not last";
      if (seg.kb_begin > 0 || seg.kb_end < k_blocks) ++cut;
      for (int kb = seg.kb_begin; kb < seg.kb_end; ++kb) ++covered[static_cast<size_t>(seg.tile) * k_blocks + kb];
    }
    if (g >= sk) {
      EXPECT_EQ(sk_iters, 0) << "cluster " << g << " is past the clusters that share the region";
      continue;
    }
    min_iters = min_iters < 0 ? sk_iters : std::min(min_iters, sk_iters);
    max_iters = std::max(max_iters, sk_iters);
  }
  EXPECT_LE(max_iters - min_iters, 1) << "the stream-K region is shared out evenly";
  for (size_t i = 0; i < covered.size(); ++i)
    EXPECT_EQ(covered[i], 1) << "tile " << i / k_blocks << " k-block " << i % k_blocks;

  // Each owner finds, through stream_k_holds_part_of, exactly the peers holding the rest of its tile, in
  // k order, each one the first stream-K segment of its cluster; and no other cluster holds any of it.
  for (int g = 0; g < clusters; ++g) {
    if (units[g].empty()) continue;
    const StreamKSegment owner = units[g].back();
    if (owner.kb_begin != 0 || owner.kb_end == k_blocks) continue;
    int next_kb = owner.kb_end, peers = 0, h = g + 1;
    for (; stream_k_holds_part_of(s, h, owner.tile); ++h) {
      if (stream_k_idle(s, h)) continue;
      const StreamKSegment peer = units[h][s.dp_tiles / clusters];
      EXPECT_EQ(peer.tile, owner.tile) << "owner " << g << ", peer " << h;
      EXPECT_EQ(peer.kb_begin, next_kb) << "owner " << g << ", peer " << h;
      next_kb = peer.kb_end;
      ++peers;
    }
    EXPECT_EQ(next_kb, k_blocks) << "owner " << g << " of tile " << owner.tile << " misses k-blocks";
    EXPECT_GE(peers, 1);
    for (; h < clusters; ++h)
      for (const StreamKSegment& seg : units[h]) EXPECT_NE(seg.tile, owner.tile) << "cluster " << h;
  }
  return cut;
}

TEST(StreamKPartition, CoversEveryKBlockOnceWithoutCycles) {
  int cut = 0;
  for (int clusters : {1, 2, 3, 4, 7, 8, 33, 66, 132})
    for (int k_blocks : {1, 2, 3, 5, 8, 16, 64, 257}) {
      std::vector<int> tile_counts = {1, 2, 3, clusters - 1, clusters, clusters + 1, 2 * clusters - 1, 2 * clusters,
                                      2 * clusters + 1, 3 * clusters + clusters / 2, 5 * clusters + 3};
      for (int tiles : tile_counts)
        if (tiles >= 1) cut += check_partition(tiles, k_blocks, clusters);
    }
  EXPECT_GT(cut, 0) << "no case cut a tile: stream-K was not exercised";
}

TEST(StreamKPartition, LargestShapesStayInIntRange) {
  // K = 2^20 with BK = 32 (2^15 k-blocks) on 132 clusters, one tile short of whole waves, and the largest
  // tile count (2^20 / 64 squared).
  check_partition(2 * 132 - 1, 1 << 15, 132);
  const StreamK s = stream_k_partition(1 << 28, 1 << 15, 131);
  EXPECT_EQ(s.tiles - s.dp_tiles, 131 + (1 << 28) % 131);
  EXPECT_EQ(stream_k_begin(s, 131), s.sk_iters);
  EXPECT_EQ(s.sk_iters, static_cast<long long>(s.tiles - s.dp_tiles) << 15);
}

TEST(StreamKPartition, HybridWorkedExample) {
  // 9 tiles on 4 clusters: one data-parallel wave (tiles 0..3), then 5 tiles x 4 k-blocks = 20 iterations,
  // 5 per cluster.
  const StreamK s = stream_k_partition(9, 4, 4);
  EXPECT_EQ(s.dp_tiles, 4);
  EXPECT_EQ(s.sk_iters, 20);
  auto unit = [&](int g, int j) {
    const StreamKSegment seg = stream_k_unit(s, g, j);
    return std::to_string(seg.tile) + ":" + std::to_string(seg.kb_begin) + "-" + std::to_string(seg.kb_end);
  };
  ASSERT_EQ(stream_k_units(s, 0), 3);
  EXPECT_EQ(unit(0, 0), "0:0-4");
  EXPECT_EQ(unit(0, 1), "4:0-4");  // iterations 0..3: tile 4 whole
  EXPECT_EQ(unit(0, 2), "5:0-1");  // iteration 4: tile 5's owner
  ASSERT_EQ(stream_k_units(s, 1), 3);
  EXPECT_EQ(unit(1, 0), "1:0-4");
  EXPECT_EQ(unit(1, 1), "5:1-4");  // iterations 5..7: a peer of tile 5
  EXPECT_EQ(unit(1, 2), "6:0-2");  // iterations 8..9: tile 6's owner
  EXPECT_TRUE(stream_k_holds_part_of(s, 1, 5));
  EXPECT_FALSE(stream_k_holds_part_of(s, 2, 5));
  EXPECT_EQ(unit(3, 1), "7:3-4");
  EXPECT_EQ(unit(3, 2), "8:0-4");
}

TEST(StreamKPartition, ShortTilesAreNotCutTooFine) {
  // 1 tile of 3 k-blocks on 8 clusters: cutting it would cost more fixups than it saves, so one cluster
  // takes it whole and the others idle (the owner finds no peer).
  const StreamK s = stream_k_partition(1, 3, 8);
  EXPECT_EQ(s.sk_clusters, 1);
  for (int g = 0; g < 8; ++g) EXPECT_EQ(stream_k_idle(s, g), g > 0);
  check_partition(1, 3, 8);
  // 1 tile of 128 k-blocks (64 x 64 x 8192 with BK = 64) on 132 clusters: pieces of sqrt(4 * 128) = 22
  // k-blocks, 5 clusters, 4 peers for the owner to add, rather than 127.
  EXPECT_EQ(stream_k_min_iters(128), 22);
  EXPECT_EQ(stream_k_partition(1, 128, 132).sk_clusters, 5);
  EXPECT_EQ(check_partition(1, 128, 132), 5);
  // Plenty of tiles: every cluster takes part.
  EXPECT_EQ(stream_k_partition(248, 32, 132).sk_clusters, 132);
  for (unsigned x = 0; x < (1u << 17) + 4; ++x)
    EXPECT_EQ(stream_k_isqrt(x), static_cast<int>(std::sqrt(static_cast<double>(x)))) << x;
}

}  // namespace
}  // namespace rlgemm::sm90
