#include <elf.h>
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <numeric>

#include "rlgemm/error.h"
#include "sass/isa.h"
#include "sass_fixture.h"

namespace rlgemm::sass {
namespace {

TEST(Cubin, IdentityWriteIsByteIdentical) {
  for (const char* name : kSassKernels) {
    RLGEMM_SASS_CUBIN(path, name);
    const Cubin cubin = Cubin::load(path);
    EXPECT_EQ(cubin.sm_version(), 90);
    const KernelText k = cubin.kernel(name);
    ASSERT_GT(k.words.size(), 100u);
    std::vector<int> order(k.words.size());
    std::iota(order.begin(), order.end(), 0);
    EXPECT_EQ(cubin.write(k, order), cubin.bytes()) << name;
    EXPECT_FALSE(k.offset_refs.empty()) << "every kernel has at least its EXIT offsets";
  }
}

TEST(Cubin, ReadsHopperOffsetAttributes) {
  RLGEMM_SASS_CUBIN(path, "wgmma_tma_gemm");
  const KernelText k = Cubin::load(path).kernel("wgmma_tma_gemm");
  std::map<uint8_t, int> by_id;
  for (const auto& r : k.offset_refs)
    if (r.kind == OffsetRef::Kind::kAttribute) ++by_id[r.attr_id];
  EXPECT_GE(by_id[0x1c], 1) << "EIATTR_EXIT_INSTR_OFFSETS";
  EXPECT_GE(by_id[0x39], 2) << "EIATTR_MBARRIER_INSTR_OFFSETS";
  EXPECT_GE(by_id[0x31], 1) << "EIATTR_INT_WARP_WIDE_INSTR_OFFSETS";
  EXPECT_TRUE(k.pinned.empty());
}

TEST(Cubin, AttributesNameTheRightInstructions) {
  RLGEMM_REQUIRE_NVDISASM();
  RLGEMM_SASS_CUBIN(path, "wgmma_tma_gemm");
  const Cubin cubin = Cubin::load(path);
  const KernelCode code = KernelCode::load(cubin, "wgmma_tma_gemm");
  for (const auto& r : code.text().offset_refs) {
    const std::string op = code.at(r.value / kInstructionBytes).dis.opcode;
    if (r.attr_id == 0x1c) EXPECT_EQ(op, "EXIT");
    if (r.attr_id == 0x39) EXPECT_EQ(op.rfind("SYNCS", 0), 0u) << op;
    if (r.attr_id == 0x31) EXPECT_NE(op.find("VOTE"), std::string::npos) << op;
  }
}

TEST(Cubin, WriteRejectsBadOrders) {
  RLGEMM_SASS_CUBIN(path, "mma_sync_gemm");
  const Cubin cubin = Cubin::load(path);
  KernelText k = cubin.kernel("mma_sync_gemm");
  std::vector<int> order(k.words.size());
  std::iota(order.begin(), order.end(), 0);
  auto dup = order;
  dup[1] = 0;
  EXPECT_THROW(cubin.write(k, dup), Error);
  EXPECT_THROW(cubin.write(k, std::vector<int>(3, 0)), Error);
  // An instruction named by an attribute rlgemm does not understand never moves.
  k.pinned.emplace_back(5, "EIATTR_UNKNOWN (0x99)");
  auto moved = order;
  std::swap(moved[5], moved[6]);
  try {
    cubin.write(k, moved);
    FAIL() << "moving a pinned instruction must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pinned"), std::string::npos);
  }
}

TEST(Cubin, MovedOffsetsFollowTheirInstruction) {
  RLGEMM_SASS_CUBIN(path, "wgmma_tma_gemm");
  const Cubin cubin = Cubin::load(path);
  const KernelText k = cubin.kernel("wgmma_tma_gemm");
  // Reverse a whole window that holds attribute-named instructions: a byte-level check of the rewrite.
  std::vector<int> order(k.words.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t target = k.offset_refs.front().value / kInstructionBytes;
  const size_t lo = target > 2 ? target - 2 : 0, hi = std::min(order.size(), target + 3);
  std::reverse(order.begin() + lo, order.begin() + hi);
  const auto bytes = cubin.write(k, order);
  const KernelText after = Cubin::parse(bytes).kernel("wgmma_tma_gemm");
  std::vector<int> slot_of(order.size());
  for (size_t s = 0; s < order.size(); ++s) slot_of[order[s]] = int(s);
  ASSERT_EQ(after.offset_refs.size(), k.offset_refs.size());
  for (size_t i = 0; i < k.offset_refs.size(); ++i)
    EXPECT_EQ(after.offset_refs[i].value, uint64_t(slot_of[k.offset_refs[i].value / 16]) * 16);
  for (size_t s = 0; s < order.size(); ++s) EXPECT_EQ(after.words[s], k.words[order[s]]);
}

TEST(Cubin, RejectsBadInput) {
  RLGEMM_SASS_CUBIN(path, "mma_sync_gemm");
  const Cubin cubin = Cubin::load(path);
  const auto good = cubin.bytes();
  auto expect_error = [](std::vector<uint8_t> bytes, const std::string& needle) {
    try {
      Cubin::parse(std::move(bytes), "test");
      ADD_FAILURE() << "expected an error mentioning '" << needle << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({}, "shorter");
  auto bad_magic = good;
  bad_magic[1] = 'X';
  expect_error(bad_magic, "magic");
  // Another architecture: the SM number lives in bits 8-15 of e_flags (ELF ABI version 8).
  auto sm80 = good;
  Elf64_Ehdr eh;
  std::memcpy(&eh, sm80.data(), sizeof eh);
  eh.e_flags = (eh.e_flags & ~0xff00u) | (80u << 8);
  std::memcpy(sm80.data(), &eh, sizeof eh);
  expect_error(sm80, "sm_80");
  // The resource reader takes any architecture: the same image marked sm_80 gives the same counts.
  EXPECT_EQ(Cubin::parse_any_sm(sm80, "test").sm_version(), 80);
  EXPECT_EQ(Cubin::parse_any_sm(sm80, "test").resources("mma_sync_gemm").registers,
            cubin.resources("mma_sync_gemm").registers);
  auto stripped = good;
  std::memcpy(&eh, stripped.data(), sizeof eh);
  eh.e_shnum = 0;
  eh.e_shoff = 0;
  std::memcpy(stripped.data(), &eh, sizeof eh);
  expect_error(stripped, "stripped");
  expect_error(std::vector<uint8_t>(good.begin(), good.begin() + good.size() / 2), "outside the file");
  EXPECT_THROW(Cubin::load("/nonexistent/x.cubin"), Error);
  try {
    cubin.kernel("no_such_kernel");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mma_sync_gemm"), std::string::npos) << "lists the kernels present";
  }
  try {
    cubin.resources("no_such_kernel");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mma_sync_gemm"), std::string::npos) << "lists the kernels present";
  }
  const ImageResources r = cubin.resources("mma_sync_gemm");
  EXPECT_GT(r.registers, 0);
  EXPECT_EQ(r.frame_bytes, 0);
}

TEST(Cubin, RejectsCorruptNvInfo) {
  RLGEMM_SASS_CUBIN(path, "mma_sync_gemm");
  const Cubin cubin = Cubin::load(path);
  const KernelText k = cubin.kernel("mma_sync_gemm");
  // Point the EXIT offsets attribute at an address past the code.
  auto bytes = cubin.bytes();
  const auto& exit_ref = k.offset_refs.front();
  const uint32_t past = uint32_t(k.text_size + 16);
  std::memcpy(bytes.data() + exit_ref.file_offset, &past, 4);
  const Cubin broken = Cubin::parse(bytes);
  EXPECT_THROW(broken.kernel("mma_sync_gemm"), Error);
}

}  // namespace
}  // namespace rlgemm::sass
