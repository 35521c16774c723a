// The kernel parameter block as the cubin records it (.nv.info.<kernel>: EIATTR_KPARAM_INFO, EIATTR_CBANK_PARAM_SIZE),
// on kernels NVRTC compiles here with known signatures, and the architecture and kernel-name rules a foreign
// cubin meets before anything runs.
#include <gtest/gtest.h>

#include <elf.h>

#include <cstring>
#include <string>
#include <vector>

#include "rlgemm/error.h"
#include "sass/cubin.h"
#include "sass/sass_fixture.h"

namespace rlgemm::sass {
namespace {

// Parameters of every size and alignment: pointers, a 4-byte int, an 8-byte double, a 1-byte char, a 16-byte
// aligned vector (padding before it), a 3-byte struct, a 2-byte short, and a long long after it (padding).
constexpr const char* kSource = R"(
struct Three { char c[3]; };
extern "C" __global__ void probe(const unsigned short* a, float* out, int n, double x, char c, int4 v, Three t,
                                 short s, long long z) {
  if (threadIdx.x == 0) out[0] = float(a[0]) + n + float(x) + c + v.w + t.c[1] + s + float(z);
}
extern "C" __global__ void no_params() {}
extern "C" __global__ void one_float(float* p) { p[threadIdx.x] = 1.0f; }
)";

TEST(KernelParams, ReadsOffsetsAndSizesOfAKernelCompiledHere) {
  const Cubin cubin = Cubin::parse(testing::nvrtc_cubin(kSource, "probe", "sm_90a"), "probe.cubin");
  const KernelParams p = cubin.kernel_params("probe");
  const std::vector<std::pair<uint32_t, uint32_t>> want = {  // offset, size
      {0, 8}, {8, 8}, {16, 4}, {24, 8}, {32, 1}, {48, 16}, {64, 3}, {68, 2}, {72, 8}};
  ASSERT_EQ(p.params.size(), want.size()) << p.to_string();
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(p.params[i].ordinal, int(i));
    EXPECT_EQ(p.params[i].offset, want[i].first) << "parameter " << i << ": " << p.to_string();
    EXPECT_EQ(p.params[i].size, want[i].second) << "parameter " << i << ": " << p.to_string();
  }
  EXPECT_EQ(p.block_bytes, 80u);
  EXPECT_NE(p.to_string().find("5: 16 bytes at 48"), std::string::npos) << p.to_string();

  EXPECT_TRUE(cubin.kernel_params("no_params").params.empty());
  const KernelParams one = cubin.kernel_params("one_float");
  ASSERT_EQ(one.params.size(), 1u);
  EXPECT_EQ(one.params[0].size, 8u);
  EXPECT_EQ(one.block_bytes, 8u);
}

TEST(KernelParams, ACubinForAnotherArchitectureIsRefusedNamingIt) {
  try {
    Cubin::parse(testing::nvrtc_cubin(kSource, "probe", "sm_80"), "ampere.cubin");
    FAIL() << "an sm_80 cubin was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("sm_80"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ampere.cubin"), std::string::npos) << e.what();
  }
}

TEST(KernelParams, AnUnknownKernelListsTheKernelsPresent) {
  const Cubin cubin = Cubin::parse(testing::nvrtc_cubin(kSource, "probe", "sm_90a"), "probe.cubin");
  try {
    cubin.kernel_params("matmul_kernel");
    FAIL() << "an unknown kernel was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    for (const char* name : {"probe", "no_params", "one_float", "matmul_kernel"})
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

// Where section `name` of an ELF64 image starts in the file (0: no such section).
size_t section_file_offset(const std::vector<uint8_t>& bytes, const std::string& name) {
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof eh);
  Elf64_Shdr names;
  std::memcpy(&names, bytes.data() + eh.e_shoff + eh.e_shstrndx * sizeof(Elf64_Shdr), sizeof names);
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr h;
    std::memcpy(&h, bytes.data() + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof h);
    if (name == reinterpret_cast<const char*>(bytes.data() + names.sh_offset + h.sh_name)) return h.sh_offset;
  }
  return 0;
}

TEST(KernelParams, InconsistentRecordsAreRefused) {
  std::vector<uint8_t> bytes = testing::nvrtc_cubin(kSource, "probe", "sm_90a");
  const Cubin cubin = Cubin::parse(bytes, "probe.cubin");
  const KernelText k = cubin.kernel("probe");
  const size_t section_offset = section_file_offset(bytes, ".nv.info.probe");
  ASSERT_GT(section_offset, 0u);
  bool changed = false;
  for (const auto& a : k.attributes) {
    if (a.id != 0x17) continue;
    const size_t payload = section_offset + a.payload_offset;
    uint16_t ordinal;
    std::memcpy(&ordinal, bytes.data() + payload + 4, 2);
    if (ordinal == 1) {
      const uint16_t zero = 0;  // a second parameter 0
      std::memcpy(bytes.data() + payload + 4, &zero, 2);
      changed = true;
      break;
    }
  }
  ASSERT_TRUE(changed) << "no EIATTR_KPARAM_INFO record of parameter 1 found";
  try {
    Cubin::parse(bytes, "corrupt.cubin").kernel_params("probe");
    FAIL() << "two parameters 0 were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ordinals"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlgemm::sass
