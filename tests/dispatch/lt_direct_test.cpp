// The recipe of a directly launched cuBLASLt kernel (CPU only): from launches recorded with one operand moved
// at a time it learns which parameter bytes hold which address, as a raw pointer plus a constant or inside a
// tensor map, and makes the block for any addresses; a byte it cannot explain, a kernel that changes with an
// address, or a byte two operands share is refused with what it is. The tensor maps here are a stand-in
// encoding (the address shifted right by 4, at bytes 8 to 15 of the 128), so that a raw-pointer rule cannot
// explain them by accident.
#include "dispatch/lt_direct.h"

#include <gtest/gtest.h>

#include <cstring>

#include "rlgemm/error.h"

namespace rlgemm::dispatch {
namespace {

bool fake_replace(unsigned char* map, uint64_t address) {
  if (address % 16) return false;
  const uint64_t encoded = address >> 4;
  std::memcpy(map + 8, &encoded, 8);
  return true;
}

void put64(std::vector<unsigned char>& p, size_t offset, uint64_t v) { std::memcpy(p.data() + offset, &v, 8); }

// A launch as a kernel with A at 0, B + 64 at 8, a tensor map of C at 64, a constant at 192, the workspace at
// 200 and the bias at 208 would record it; `bad` adds a byte that holds A >> 8 (nothing the recipe may explain).
RecordedLaunch launch_of(const Operands& ops, bool bad = false, CUfunction function = reinterpret_cast<CUfunction>(0x1000)) {
  RecordedLaunch l;
  l.function = function;
  l.grid = {4, 2, 1};
  l.block = {384, 1, 1};
  l.smem_bytes = 200000;
  CUlaunchAttribute cluster{};
  cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster.value.clusterDim.x = 2;
  cluster.value.clusterDim.y = cluster.value.clusterDim.z = 1;
  l.attributes.push_back(cluster);
  l.params.assign(bad ? 224 : 216, 0xab);
  put64(l.params, 0, ops[0]);
  put64(l.params, 8, ops[1] + 64);
  for (size_t i = 64; i < 192; ++i) l.params[i] = static_cast<unsigned char>(i * 7);  // the map's other fields
  EXPECT_TRUE(fake_replace(l.params.data() + 64, ops[2]));
  put64(l.params, 192, 0x123456789ull);
  put64(l.params, 200, ops[3]);
  put64(l.params, 208, ops[4]);
  if (bad) put64(l.params, 216, ops[0] >> 8);
  return l;
}

const Operands kBase = {0x7f0000000000, 0x7f0000100000, 0x7f0000200000, 0x7f0000300000, 0x7f0000400000};

std::vector<LaunchRecipe::Moved> moved_launches(bool bad = false) {
  std::vector<LaunchRecipe::Moved> moved;
  for (int op = 0; op < kOperandCount; ++op) {
    Operands ops = kBase;
    ops[size_t(op)] += 512;
    moved.push_back({op, launch_of(ops, bad), ops});
  }
  return moved;
}

TEST(LaunchRecipe, LearnsPointersAndTensorMapsAndMakesAnyLaunch) {
  const LaunchRecipe recipe = LaunchRecipe::derive(launch_of(kBase), kBase, moved_launches(), fake_replace);
  ASSERT_EQ(recipe.rules().size(), 5u);
  int maps = 0;
  for (const PatchRule& r : recipe.rules()) {
    if (r.kind == PatchRule::Kind::kTensorMap) {
      ++maps;
      EXPECT_EQ(r.operand, 2);
      EXPECT_EQ(r.offset, 64u);
    } else if (r.operand == 1) {
      EXPECT_EQ(r.offset, 8u);
      EXPECT_EQ(r.delta, 64);
    } else if (r.operand == 4) {  // the bias
      EXPECT_EQ(r.offset, 208u);
      EXPECT_EQ(r.delta, 0);
    }
  }
  EXPECT_EQ(maps, 1);
  // Every operand elsewhere, some of them 16-byte aligned only: byte for byte what such a launch records.
  const Operands other = {0x7e0000000010, 0x7e0000100400, 0x7e0000200030, 0x7e0000300000, 0x7e0000400020};
  std::string why;
  EXPECT_TRUE(recipe.reproduces(launch_of(other), other, fake_replace, why)) << why;
  std::vector<unsigned char> made(recipe.base().params.size());
  ASSERT_TRUE(recipe.fill(other, made.data(), fake_replace));
  EXPECT_EQ(made, launch_of(other).params);
}

TEST(LaunchRecipe, AByteNothingExplainsIsRefusedByName) {
  try {
    LaunchRecipe::derive(launch_of(kBase, true), kBase, moved_launches(true), fake_replace);
    FAIL() << "derive accepted a byte that holds A >> 8";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kRuntime);
    EXPECT_NE(std::string(e.what()).find("changes with A"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("0xd"), std::string::npos) << e.what();  // byte 216 + 1..
  }
}

TEST(LaunchRecipe, AKernelThatChangesWithAnAddressIsRefused) {
  auto moved = moved_launches();
  moved[1].launch = launch_of(moved[1].operands, false, reinterpret_cast<CUfunction>(0x2000));
  EXPECT_THROW(LaunchRecipe::derive(launch_of(kBase), kBase, moved, fake_replace), Error);
  moved = moved_launches();
  moved[2].launch.grid[0] = 5;
  EXPECT_THROW(LaunchRecipe::derive(launch_of(kBase), kBase, moved, fake_replace), Error);
}

TEST(LaunchRecipe, ABytePairThatTwoOperandsChangeIsRefused) {
  // A parameter holding A - B changes with both: no address rule may own it.
  auto with_difference = [](const Operands& ops) {
    RecordedLaunch l = launch_of(ops);
    put64(l.params, 192, ops[0] - ops[1]);
    return l;
  };
  std::vector<LaunchRecipe::Moved> moved;
  for (int op = 0; op < 2; ++op) {
    Operands ops = kBase;
    ops[size_t(op)] += 512;
    moved.push_back({op, with_difference(ops), ops});
  }
  try {
    LaunchRecipe::derive(with_difference(kBase), kBase, moved, fake_replace);
    FAIL() << "derive accepted bytes two operands change";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("both"), std::string::npos) << e.what();
  }
}

TEST(LaunchRecipe, ReproducesSaysWhereALaunchDiffers) {
  const LaunchRecipe recipe = LaunchRecipe::derive(launch_of(kBase), kBase, moved_launches(), fake_replace);
  Operands other = kBase;
  other[0] += 4096;
  RecordedLaunch changed = launch_of(other);
  changed.params[192] ^= 1;
  std::string why;
  EXPECT_FALSE(recipe.reproduces(changed, other, fake_replace, why));
  EXPECT_NE(why.find("0xc0"), std::string::npos) << why;
  changed = launch_of(other);
  changed.block[0] = 256;
  EXPECT_FALSE(recipe.reproduces(changed, other, fake_replace, why));
  // A tensor map that refuses the address (not 16-byte aligned).
  other[2] += 8;
  std::vector<unsigned char> made(recipe.base().params.size());
  EXPECT_FALSE(recipe.fill(other, made.data(), fake_replace));
}

TEST(LaunchRecipe, BadMovesAreRefusedAsBadInput) {
  auto moved = moved_launches();
  moved[0].operand = 7;
  EXPECT_THROW(LaunchRecipe::derive(launch_of(kBase), kBase, moved, fake_replace), Error);
  moved = moved_launches();
  moved[0].operands[1] += 16;  // two operands moved in one launch
  EXPECT_THROW(LaunchRecipe::derive(launch_of(kBase), kBase, moved, fake_replace), Error);
  moved = moved_launches();
  moved[3].operands = kBase;  // "moved" but in place
  EXPECT_THROW(LaunchRecipe::derive(launch_of(kBase), kBase, moved, fake_replace), Error);
}

// A memset's destination: an operand's address plus a constant, or a fixed address; one that moves otherwise,
// or whose size changes, is refused.
TEST(MemsetRule, FollowsItsOperandOrStaysPut) {
  auto memset_at = [](uint64_t dst) {
    cudaMemsetParams p{};
    p.dst = reinterpret_cast<void*>(dst);
    p.value = 0;
    p.elementSize = 4;
    p.width = 256;
    p.height = 1;
    return p;
  };
  std::vector<MemsetRule::Moved> moved;
  for (int op = 0; op < kOperandCount; ++op) {
    Operands ops = kBase;
    ops[size_t(op)] += 512;
    moved.push_back({op, memset_at(ops[3] + 1024), ops});
  }
  const MemsetRule rule = MemsetRule::derive(memset_at(kBase[3] + 1024), kBase, moved);
  EXPECT_EQ(rule.operand, 3);
  EXPECT_EQ(rule.delta, 1024);
  const Operands other = {1 << 20, 2 << 20, 3 << 20, 4 << 20, 5 << 20};
  EXPECT_EQ(rule.destination(other), (4u << 20) + 1024);
  EXPECT_TRUE(rule.reproduces(memset_at((4 << 20) + 1024), other));
  EXPECT_FALSE(rule.reproduces(memset_at((4 << 20) + 2048), other));

  // cuBLASLt's own buffer: the same address whatever moves.
  for (auto& m : moved) m.params = memset_at(0x5000);
  const MemsetRule fixed = MemsetRule::derive(memset_at(0x5000), kBase, moved);
  EXPECT_EQ(fixed.operand, -1);
  EXPECT_EQ(fixed.destination(other), 0x5000u);

  // Moving with C but by another amount; a size that changes with A.
  for (size_t i = 0; i < moved.size(); ++i) moved[i].params = memset_at(kBase[3] + (i == 2 ? 64 : 0));
  EXPECT_THROW(MemsetRule::derive(memset_at(kBase[3]), kBase, moved), Error);
  for (auto& m : moved) m.params = memset_at(kBase[3]);
  moved[0].params.width = 128;
  EXPECT_THROW(MemsetRule::derive(memset_at(kBase[3]), kBase, moved), Error);
}

}  // namespace
}  // namespace rlgemm::dispatch
