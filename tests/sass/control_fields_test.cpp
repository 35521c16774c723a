// Verifies on real sm_90a cubins the control-field layout the game relies on (stall 105-108, yield 109,
// write scoreboard 110-112, read scoreboard 113-115, wait mask 116-121, reuse 122-125).
#include <gtest/gtest.h>

#include <set>

#include "sass/isa.h"
#include "sass_fixture.h"

namespace rlgemm::sass {
namespace {

TEST(ControlFields, LayoutHoldsOnSm90a) {
  RLGEMM_REQUIRE_NVDISASM();
  for (const char* name : kSassKernels) {
    RLGEMM_SASS_CUBIN(path, name);
    const KernelCode code = KernelCode::load(Cubin::load(path), name);
    int with_scoreboard = 0, waits = 0, waits_after_setter = 0, reuse_seen = 0, variable = 0;
    std::set<int> set_anywhere;
    for (size_t i = 0; i < code.size(); ++i) set_anywhere.insert(code.at(i).control.write_sb), set_anywhere.insert(code.at(i).control.read_sb);
    std::set<int> set_so_far;
    for (size_t i = 0; i < code.size(); ++i) {
      const Instruction& ins = code.at(i);
      const std::string base = ins.base();
      // Results of variable latency arrive through a write scoreboard...
      // (a few lean on a later load's scoreboard instead: in-order completion, see Instruction::in_order).
      if ((base == "LDG" || base == "LDS" || base == "LDSM" || base == "S2R" || base == "LDC") && ins.defs.any()) {
        ++variable;
        with_scoreboard += ins.control.write_sb < 6;
        if (ins.control.write_sb == kNoScoreboard) EXPECT_TRUE(ins.in_order || ins.dis.operands.rfind("R1,", 0) == 0) << ins.dis.text();
      }
      // ...fixed-latency ALU results never do.
      if (base == "IADD3" || base == "LOP3" || base == "ISETP" || base == "SHF" || base == "LEA" || base == "CS2R")
        EXPECT_EQ(ins.control.write_sb, kNoScoreboard) << name << " " << i << " " << ins.dis.text();
      // The reuse field is set exactly where nvdisasm prints ".reuse".
      const bool printed = ins.dis.operands.find(".reuse") != std::string::npos;
      EXPECT_EQ(ins.control.reuse != 0, printed) << name << " " << i << " " << ins.dis.text();
      reuse_seen += printed;
      // Every waited scoreboard is set by some instruction (most by an earlier one in program order).
      for (int b = 0; b < 6; ++b) {
        if (!(ins.control.wait_mask >> b & 1)) continue;
        ++waits;
        EXPECT_TRUE(set_anywhere.count(b)) << name << " waits on SB" << b << " nobody sets";
        waits_after_setter += set_so_far.count(b) ? 1 : 0;
      }
      // DEPBAR.LE SBn waits for cp.async groups: scoreboard n is the one LDGDEPBAR (the group commit) sets.
      if (base == "DEPBAR") {
        const int sb = ins.dis.operands[2] - '0';
        bool commit_sets = false;
        for (size_t j = 0; j < code.size(); ++j)
          if (code.at(j).base() == "LDGDEPBAR" && code.at(j).control.write_sb == sb) commit_sets = true;
        EXPECT_TRUE(commit_sets) << name << " " << ins.dis.text();
      }
      set_so_far.insert(ins.control.write_sb);
      set_so_far.insert(ins.control.read_sb);
      EXPECT_LE(ins.control.stall, 15);
    }
    EXPECT_GT(variable, 3) << name;
    EXPECT_GE(with_scoreboard * 10, variable * 8) << name << ": most variable-latency results use a write scoreboard";
    EXPECT_GT(waits, 10) << name;
    EXPECT_GE(waits_after_setter * 10, waits * 9) << name << ": waits should mostly follow their setter";
    if (std::string(name) == "mma_sync_gemm") EXPECT_GT(reuse_seen, 0);
  }
}

}  // namespace
}  // namespace rlgemm::sass
