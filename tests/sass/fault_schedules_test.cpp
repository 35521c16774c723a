// Two schedules that the legality mask once allowed and that broke their kernel on an H100, replayed on the
// compiled originals (generated and compiled here with NVRTC, nothing binary checked in):
//  - sm80/64x64x64/w32x32/s4/...: the LDSM that waits for an LDGSTS's read scoreboard (SB4) moved below the
//    IADD3 that rewrites the LDGSTS's shared address register R109; the copy then wrote shared memory at the
//    new address (cudaErrorIllegalAddress). Rule: wait coverage.
//  - sm90.ws.pingpong/128x128x64/...: epilogue STSMs moved next to each other, 1 cycle apart, where ptxas
//    never issues two load/store-pipe requests fewer than 4 cycles apart (cudaErrorIllegalInstruction). Every
//    register, scoreboard and latency dependence of that schedule holds; the spacing is the one property of
//    the compiled code it breaks. Rule: memory issue spacing.
// The schedules are given as (slot, original index) pairs read off the faulting cubins' .text (the ping-pong one
// translated to the code this build compiles, see kPingpong).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <random>
#include <regex>
#include <utility>
#include <vector>

#include "compile/compiler.h"
#include "generate/generate.h"
#include "rlgemm/design.h"
#include "rlgemm/problem.h"
#include "sass/agent.h"
#include "sass/game.h"
#include "sass_fixture.h"

namespace rlgemm::sass {
namespace {

struct FaultCase {
  const char* design;
  size_t instructions;                         // kernel size the slots below refer to
  std::vector<std::pair<int, const char*>> anchors;  // original index -> instruction text, to check the code
  std::vector<std::pair<int, int>> faulting;   // order[slot] = original index, where it differs
};

const FaultCase kMmaSync{
    "sm80/64x64x64/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg",
    608,
    {{439, "@!P1 LDGSTS.E.BYPASS.LTC128B.128 [R109+0x3800],desc[UR10][R110.64],!P2"},
     {457, "LDSM.16.M88.4 R56,[R56+0x2000]"},
     {458, "IMAD.IADD R64,R3,0x1,R80"},
     {459, "IADD3 R109,R105,UR9,R78"}},
    {{136, 137}, {137, 136}, {180, 182}, {181, 180}, {182, 181}, {190, 191}, {191, 190}, {306, 307}, {307, 308},
     {308, 306}, {455, 456}, {456, 455}, {457, 458}, {458, 459}, {459, 457}, {539, 540}, {540, 539}, {542, 543},
     {543, 542}, {547, 548}, {548, 547}, {582, 583}, {583, 582}, {585, 586}, {586, 585}}};

// The schedule of the faulting GPU run, recorded on a 1080-instruction build of this kernel (STSM [R23],R40 at
// 460, STSM [R25],R48 at 463) and translated move for move to the code this build compiles (1096 instructions;
// the STSMs matched by their data registers and neighbours, the slots of the first epilogue stage 39 later, of
// the second 37 later). Every change is an STSM moving past non-memory neighbours:
//  - first stage (block of 463..523): STSM [R17],R24 (470) down 1; STSM [R27],R40 (499) down 1 past the F2FP
//    of R99 and STSM [R23],R48 (502) up 1 past the F2FP of R105, so the two issue back to back, 1 cycle apart
//    (the fault); STSM [R17+0x2000],R88 (505) up 3 to follow them; STSM [R25+0x2000],R96 (508) and
//    STSM [R27+0x2000],R104 (511) down 1 each.
//  - second stage (block of 541..586): STSM [R17],R56 (554) up 1; STSM [R25],R64 (557) down 1 and
//    STSM [R27],R72 (560) up 1, back to back; STSM [R17+0x2000],R120 (569) down 3 and
//    STSM [R25+0x2000],R128 (574) up 1; STSM [R27+0x2000],R136 (579) down 1.
// (The recorded run's 473<->474 is taken as the R104 STSM moving down rather than the R112 one moving up: the
// latter would also cut the F2FP->STSM latency windows, which the recorded schedule kept.)
const FaultCase kPingpong{
    "sm90.ws.pingpong/128x128x64/s5/c2x1/raster_m.g8/splitk1/epi_tma",
    1096,
    {{470, "STSM.16.M88.4 [R17],R24"},
     {498, "F2FP.F16.F32.PACK_AB R98,R101,R100"},
     {499, "STSM.16.M88.4 [R27],R40"},
     {500, "F2FP.F16.F32.PACK_AB R99,R103,R102"},
     {501, "F2FP.F16.F32.PACK_AB R105,R107,R106"},
     {502, "STSM.16.M88.4 [R23],R48"},
     {505, "STSM.16.M88.4 [R17+0x2000],R88"},
     {508, "STSM.16.M88.4 [R25+0x2000],R96"},
     {511, "STSM.16.M88.4 [R27+0x2000],R104"},
     {554, "STSM.16.M88.4 [R17],R56"},
     {557, "STSM.16.M88.4 [R25],R64"},
     {560, "STSM.16.M88.4 [R27],R72"},
     {569, "STSM.16.M88.4 [R17+0x2000],R120"},
     {574, "STSM.16.M88.4 [R25+0x2000],R128"},
     {579, "STSM.16.M88.4 [R27+0x2000],R136"}},
    {{470, 471}, {471, 470}, {499, 500}, {500, 499}, {501, 502}, {502, 505}, {503, 501}, {504, 503}, {505, 504},
     {508, 509}, {509, 508}, {511, 512}, {512, 511}, {553, 554}, {554, 553}, {557, 558}, {558, 557}, {559, 560},
     {560, 559}, {569, 570}, {570, 571}, {571, 572}, {572, 569}, {573, 574}, {574, 573}, {579, 580}, {580, 579}}};

// An instruction's text as anchors compare it: its predicate and opcode, then its operands sorted. nvdisasm
// builds differ in separators ("R56, [R56+0x2000]", "R56[R56+0x2000]") and in where they print an LDGSTS's
// shared address ("[R109+0x3800], desc[UR10][R110.64], !P2" here, "desc[UR10][R110.64],!P2[R109+0x3800]" with
// the H200 machine's CUDA 13.0): the same instruction either way.
std::string squeeze(const std::string& s) {
  static const std::regex token(R"(desc\[[^\]]*\](?:\[[^\]]*\])?|\[[^\]]*\]|[^,\s\[\]]+)");
  std::vector<std::string> tokens(std::sregex_token_iterator(s.begin(), s.end(), token), {});
  const size_t head = std::min(tokens.size(), size_t(!tokens.empty() && tokens[0][0] == '@' ? 2 : 1));
  std::sort(tokens.begin() + ptrdiff_t(head), tokens.end());
  std::string out;
  for (const std::string& t : tokens) out += (out.empty() ? "" : " ") + t;
  return out;
}

// The design's compiled kernel (tn layout, sm_90a), or skips: no NVRTC/nvdisasm, or a compiler whose code
// differs from the one the schedules were recorded on.
struct Loaded {
  std::optional<Cubin> cubin;
  std::optional<KernelCode> code;
};

// The design's kernel as the generator and compiler of this build make it.
Loaded load_compiled(const char* design) {
  Loaded out;
  const GeneratedKernel kernel = generate_kernel(parse_design(design), layout_problem(parse_layout("tn")), "sm_90a");
  CompileOptions options;
  options.cache_dir = std::filesystem::path(RLGEMM_BINARY_DIR) / "sass-test-cubins" / "designs";
  const CompiledKernel compiled = compile_kernel(kernel, options);
  out.cubin = Cubin::parse(std::vector<uint8_t>(compiled.cubin.begin(), compiled.cubin.end()), kernel.name);
  out.code = KernelCode::load(*out.cubin, kernel.name);
  return out;
}

Loaded load_original(const FaultCase& fc, std::string* why) {
  Loaded out = load_compiled(fc.design);
  if (out.code->size() != fc.instructions) {
    *why = std::string("this build's kernel of ") + fc.design + " has " + std::to_string(out.code->size()) + " instructions, not " +
           std::to_string(fc.instructions);
    return {};
  }
  for (const auto& [index, text] : fc.anchors)
    if (squeeze(out.code->at(index).dis.text()) != squeeze(text)) {
      *why = "instruction " + std::to_string(index) + " is " + out.code->at(index).dis.text() + ", not " + text;
      return {};
    }
  return out;
}

#define RLGEMM_LOAD_COMPILED(var, design)                                                        \
  RLGEMM_REQUIRE_NVDISASM();                                                                     \
  Loaded var;                                                                                    \
  try {                                                                                          \
    var = load_compiled(design);                                                                 \
  } catch (const std::exception& e) {                                                            \
    GTEST_SKIP() << "cannot compile " << (design) << ": " << e.what();                          \
  }

#define RLGEMM_LOAD_FAULT_CASE(var, fc)                                                          \
  RLGEMM_REQUIRE_NVDISASM();                                                                     \
  std::string why_;                                                                              \
  Loaded var;                                                                                    \
  try {                                                                                          \
    var = load_original((fc), &why_);                                                            \
  } catch (const std::exception& e) {                                                            \
    GTEST_SKIP() << "cannot compile " << (fc).design << ": " << e.what();                        \
  }                                                                                              \
  if (!var.code) GTEST_SKIP() << "not the code the faulting schedule was recorded on: " << why_

std::vector<int> faulting_order(const FaultCase& fc) {
  std::vector<int> order(fc.instructions);
  for (size_t i = 0; i < order.size(); ++i) order[i] = int(i);
  for (const auto& [slot, original] : fc.faulting) order[slot] = original;
  return order;
}

bool mentions(const std::vector<std::string>& problems, const std::string& what) {
  for (const auto& p : problems)
    if (p.find(what) != std::string::npos) return true;
  return false;
}

TEST(FaultSchedules, LdsmMayNotLeaveTheAddressRewriteItsWaitProtects) {
  RLGEMM_LOAD_FAULT_CASE(k, kMmaSync);
  const KernelCode& code = *k.code;
  Schedule schedule(code);
  // The LDSM at 457 waits on SB4, the read scoreboard of the LDGSTS at 439 whose shared address R109 the
  // IADD3 at 459 rewrites. One slot down (past the IMAD) is fine; the next slot down leaves the IADD3 without
  // the wait.
  const auto covered = wait_coverage(code);
  EXPECT_TRUE(std::binary_search(covered[457].begin(), covered[457].end(), 459));
  ASSERT_EQ(schedule.why_illegal({457, +1}), "");
  schedule.apply({457, +1});
  const std::string why = schedule.why_illegal({457, +1});
  EXPECT_NE(why.find("wait coverage"), std::string::npos) << why;
  // The whole faulting schedule: the lost wait and the requests issued back to back are both reported.
  const auto problems = check_invariants(code, faulting_order(kMmaSync));
  EXPECT_TRUE(mentions(problems, "wait edge 457->459 lost")) << (problems.empty() ? "" : problems.front());
  EXPECT_TRUE(mentions(problems, "memory issue spacing"));
}

// STSM is pinned (see isa.cpp): in this build's ping-pong TMA-store kernel no legal move is an STSM move,
// and none of the STSMs may move either way.
TEST(FaultSchedules, StsmsStayInPlace) {
  RLGEMM_LOAD_COMPILED(k, kPingpong.design);
  const KernelCode& code = *k.code;
  Schedule schedule(code);
  int stsm = 0;
  for (size_t i = 0; i < code.size(); ++i) {
    if (code.at(i).base() != "STSM") continue;
    ++stsm;
    EXPECT_FALSE(schedule.legal({int(i), +1})) << code.at(i).dis.text();
    EXPECT_FALSE(schedule.legal({int(i), -1})) << code.at(i).dis.text();
  }
  EXPECT_GT(stsm, 0) << "the TMA-store epilogue stages C through stmatrix";
  for (const Move& m : schedule.legal_moves()) EXPECT_NE(code.at(m.instruction).base(), "STSM");
}

// The schedule that faulted on the GPU (kPingpong) brought two epilogue STSMs next to each other by moving one
// down past its F2FP neighbours. The same move in this build's kernel, whatever its register allocation: the
// first STSM of the TMA-store epilogue whose next STSM follows after non-memory instructions it may pass is
// moved down next to it. The game refuses the move (STSMs are pinned), and the checker reports the issue
// spacing it breaks, the one rule it breaks. The recorded schedule itself (kPingpong.faulting) replays where
// this build compiles the code it was recorded on.
TEST(FaultSchedules, TheRecordedStsmScheduleIsRejected) {
  RLGEMM_LOAD_COMPILED(k, kPingpong.design);
  const KernelCode& code = *k.code;
  const Schedule schedule(code);
  const int n = int(code.size());
  const auto& block = code.block_of();
  int moved = -1, next = -1;
  for (int a = 0; a < n && moved < 0; ++a) {
    if (code.at(a).base() != "STSM" || std::max(1, code.at(a).control.stall) >= kMemoryIssueCycles) continue;
    for (int b = a + 1; b < n && block[b] == block[a]; ++b) {
      const Instruction& y = code.at(b);
      if (y.base() == "STSM") {
        if (b > a + 1) moved = a, next = b;
        break;
      }
      if (y.mem != MemClass::kNone || y.fence || register_conflict(code.at(a), y)) break;
    }
  }
  ASSERT_GE(moved, 0) << "no epilogue STSM can pass its neighbours to the next STSM in this build's kernel";
  EXPECT_FALSE(schedule.legal({moved, +1})) << code.at(moved).dis.text();
  std::vector<int> order(code.size());
  for (int i = 0; i < n; ++i) order[size_t(i)] = i;
  std::rotate(order.begin() + moved, order.begin() + moved + 1, order.begin() + next);  // `moved` now at next-1
  const auto problems = check_invariants(code, order);
  EXPECT_TRUE(mentions(problems, "memory issue spacing: " + code.at(next).dis.text() + " would issue " +
                                     std::to_string(std::max(1, code.at(moved).control.stall)) + " cycles after " +
                                     code.at(moved).dis.text()))
      << (problems.empty() ? "no problem reported" : problems.front());
  // Every register, scoreboard and latency dependence of the schedule holds: the spacing is all it breaks.
  for (const auto& p : problems) EXPECT_EQ(p.rfind("memory issue spacing: ", 0), 0u) << p;
  // The recorded schedule, where this build's code is the one it was recorded on.
  std::string why;
  const Loaded recorded = load_original(kPingpong, &why);
  if (!recorded.code) return;
  const auto replayed = check_invariants(*recorded.code, faulting_order(kPingpong));
  EXPECT_TRUE(mentions(replayed,
                       "memory issue spacing: STSM.16.M88.4 [R23],R48 would issue 1 cycles after STSM.16.M88.4 [R27],R40"));
}

// Random play on both kernels (as this build compiles them) never reaches a schedule that check_invariants
// rejects, and in particular keeps every wait-coverage edge and the memory issue spacing.
TEST(FaultSchedules, RandomLegalPlayKeepsWaitsAndSpacing) {
  for (const FaultCase* fc : {&kMmaSync, &kPingpong}) {
    RLGEMM_LOAD_COMPILED(k, fc->design);
    const KernelCode& code = *k.code;
    Schedule schedule(code);
    std::mt19937_64 rng(11);
    for (int step = 0; step < 2000; ++step) {
      const auto legal = schedule.legal_moves();
      if (fc == &kPingpong && legal.empty()) break;  // its only movable candidates are the pinned STSMs
      ASSERT_FALSE(legal.empty()) << fc->design;
      schedule.apply(legal[rng() % legal.size()]);
      if (step % 250 == 249) {
        const auto problems = check_invariants(code, schedule.order());
        ASSERT_TRUE(problems.empty()) << fc->design << " after " << step + 1 << " moves: " << problems.front();
      }
    }
  }
}

// A kernel where nothing may move (the ping-pong TMA-store kernel, whose only movable candidates are its
// pinned STSMs): every agent ends at once with the compiled schedule, having measured only that.
TEST(FaultSchedules, EveryAgentStopsWhenNothingMayMove) {
  RLGEMM_LOAD_COMPILED(k, kPingpong.design);
  const KernelCode& code = *k.code;
  if (!Schedule(code).legal_moves().empty()) GTEST_SKIP() << "this build's kernel has legal moves";
  SyntheticEvaluator model;
  for (const std::string agent : {"greedy", "anneal", "ppo"}) {
    Game game(code, model, nullptr);
    const SearchOptions options{200, 3, 32};
    const SearchResult r = agent == "greedy" ? search_greedy(game, options)
                           : agent == "anneal" ? search_anneal(game, options)
                                               : search_ppo(game, options);
    EXPECT_TRUE(r.path.empty()) << agent;
    EXPECT_EQ(r.best_time_us, r.initial_time_us) << agent;
    EXPECT_LE(r.evaluations, 1) << agent;
  }
}

}  // namespace
}  // namespace rlgemm::sass
