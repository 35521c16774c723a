#include <gtest/gtest.h>

#include "rlgemm/error.h"
#include "sass/isa.h"

namespace rlgemm::sass {
namespace {

Instruction make(const std::string& opcode, const std::string& operands, const std::string& pred = "") {
  DisasmInstruction d;
  d.opcode = opcode;
  d.operands = operands;
  d.predicate = pred;
  return analyze_instruction(d, InstructionWord{0, uint64_t(0x7) << (110 - 64) | uint64_t(0x7) << (113 - 64)});
}

RegSet regs(std::initializer_list<int> slots) {
  RegSet s;
  for (int x : slots) s.set(x);
  return s;
}

TEST(Isa, SplitsOperandsTheWayNvdisasmJoinsThem) {
  EXPECT_EQ(split_operands("URZ[UR14],UR6"), (std::vector<std::string>{"URZ", "[UR14]", "UR6"}));
  EXPECT_EQ(split_operands("[UR12][UR6],UR10"), (std::vector<std::string>{"[UR12]", "[UR6]", "UR10"}));
  EXPECT_EQ(split_operands("desc[UR20][R2.64],R24"), (std::vector<std::string>{"desc[UR20][R2.64]", "R24"}));
  EXPECT_EQ(split_operands("R1,c[0x0][0x28]"), (std::vector<std::string>{"R1", "c[0x0][0x28]"}));
  EXPECT_EQ(split_operands("R40[R65]"), (std::vector<std::string>{"R40", "[R65]"}));
}

TEST(Isa, WideLoadsAndStores) {
  const auto ldg = make("LDG.E.128", "R4,desc[UR4][R2.64]");
  EXPECT_EQ(ldg.defs, regs({4, 5, 6, 7}));
  EXPECT_EQ(ldg.uses, regs({kUniformBase + 4, kUniformBase + 5, 2, 3}));
  EXPECT_TRUE(ldg.movable);
  EXPECT_EQ(ldg.mem, MemClass::kGlobal);
  const auto stg = make("STG.E.64", "desc[UR6][R6.64],R16");
  EXPECT_TRUE(stg.defs.none());
  EXPECT_TRUE(stg.uses.test(16) && stg.uses.test(17) && !stg.uses.test(18));
  EXPECT_EQ(stg.writes, unsigned(kSpaceGlobal));
  const auto ldsm = make("LDSM.16.M88.4", "R40[R65]");
  EXPECT_EQ(ldsm.defs, regs({40, 41, 42, 43}));
  EXPECT_EQ(ldsm.uses, regs({65}));
  const auto cp = make("LDGSTS.E.BYPASS.128", "[R15],desc[UR6][R10.64]");
  EXPECT_TRUE(cp.defs.none());
  EXPECT_EQ(cp.reads, unsigned(kSpaceGlobal));
  EXPECT_EQ(cp.writes, unsigned(kSpaceShared));
}

TEST(Isa, MatrixOperations) {
  const auto hmma = make("HMMA.16816.F32", "R16,R40,R2.reuse,R16");
  EXPECT_EQ(hmma.defs, regs({16, 17, 18, 19}));
  EXPECT_TRUE(hmma.uses.test(43) && hmma.uses.test(3) && !hmma.uses.test(4) && hmma.uses.test(19));
  const auto hgmma = make("HGMMA.64x64x16.F32", "R24,gdesc[UR16],R24,gsb0");
  EXPECT_EQ(hgmma.defs.count(), 32u);
  EXPECT_TRUE(hgmma.defs.test(55) && !hgmma.defs.test(56));
  EXPECT_TRUE(hgmma.uses.test(kUniformBase + 19));
  EXPECT_TRUE(hgmma.fence);
}

TEST(Isa, PredicatesAndCarries) {
  const auto isetp = make("ISETP.GE.U32.AND", "P2,PT,R4,0x180,PT");
  EXPECT_EQ(isetp.defs, regs({kPredBase + 2}));
  EXPECT_EQ(isetp.uses, regs({4}));
  const auto lop = make("LOP3.LUT", "P3,R7,R5,0x3,RZ,0xc0,!PT");
  EXPECT_EQ(lop.defs, regs({kPredBase + 3, 7}));
  const auto iadd = make("IADD3", "R4,P0,PT,R2,R3,RZ");
  EXPECT_EQ(iadd.defs, regs({4, kPredBase + 0}));
  const auto guarded = make("MOV", "R0,0x400", "@!P1");
  EXPECT_TRUE(guarded.uses.test(kPredBase + 1));
  EXPECT_TRUE(guarded.uses.test(0)) << "a guarded write keeps the old value: it reads its destination";
  const auto ulea = make("ULEA", "UR6,UP0,UR14,UR10,0xb");
  EXPECT_EQ(ulea.defs, regs({kUniformBase + 6, kUniformPredBase + 0}));
  const auto wide = make("IMAD.WIDE.U32", "R2,R3,0x4,R4");
  EXPECT_EQ(wide.defs, regs({2, 3}));
  EXPECT_TRUE(wide.uses.test(5));
  // Predicate logic writes Pd (and Pq); the predicates after them are its sources.
  const auto plop = make("PLOP3.LUT", "P0,PT,PT,PT,UP0,0x80,0x0");
  EXPECT_EQ(plop.defs, regs({kPredBase + 0}));
  EXPECT_EQ(plop.uses, regs({kUniformPredBase + 0}));
  const auto plop2 = make("PLOP3.LUT", "P0,PT,P1,PT,PT,0x8,0x0", "@P1");
  EXPECT_EQ(plop2.defs, regs({kPredBase + 0}));
  EXPECT_EQ(plop2.uses, regs({kPredBase + 0, kPredBase + 1}));
  EXPECT_EQ(plop2.guard, kPredBase + 1);
  const auto fsetp = make("FSETP.GT.AND", "P0,P1,R2,R3,P2");
  EXPECT_EQ(fsetp.defs, regs({kPredBase + 0, kPredBase + 1}));
  EXPECT_EQ(fsetp.uses, regs({2, 3, kPredBase + 2}));
  // VOTE's last operand is the predicate it votes on.
  const auto voteu = make("VOTEU.ALL", "UP0,P2");
  EXPECT_EQ(voteu.defs, regs({kUniformPredBase + 0}));
  EXPECT_EQ(voteu.uses, regs({kPredBase + 2}));
  const auto vote = make("VOTE.ANY", "R5,PT,P0");
  EXPECT_EQ(vote.defs, regs({5}));
  EXPECT_EQ(vote.uses, regs({kPredBase + 0}));
  const auto carries = make("IADD3", "R4,P0,P1,R2,R3,RZ");
  EXPECT_EQ(carries.defs, regs({4, kPredBase + 0, kPredBase + 1}));
}

TEST(Isa, BarriersAndUnknownOpcodesAreFences) {
  for (const char* op : {"BAR.SYNC.DEFER_BLOCKING", "DEPBAR.LE", "LDGDEPBAR", "MEMBAR.ALL.CTA", "WARPGROUP.ARRIVE",
                         "SYNCS.ARRIVE.TRANS64", "WARPSYNC", "BSSY", "BSYNC", "EXIT", "BRA", "RET.REL", "CALL.REL",
                         "FENCE.VIEW.ASYNC.S", "SOMETHINGNEW"})
    EXPECT_TRUE(make(op, "").fence) << op;
  EXPECT_FALSE(make("IADD3", "R1,R2,R3,RZ").fence);
  EXPECT_TRUE(make("CS2R", "R4,SR_CLOCKLO").fence);
  EXPECT_FALSE(make("LDS", "RZ[RZ]", "@!PT").movable) << "a never-executed filler does not move";
}

}  // namespace
}  // namespace rlgemm::sass
