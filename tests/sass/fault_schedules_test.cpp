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

// The kernels of `designs` compiled here, then the test kernels (tests/sass/kernels); empty, with the reason in
// *why, where one of them cannot be built.
std::vector<std::pair<std::string, KernelCode>> designs_and_test_kernels(std::initializer_list<const char*> designs,
                                                                         std::string* why) {
  std::vector<std::pair<std::string, KernelCode>> kernels;
  for (const char* design : designs) {
    try {
      kernels.emplace_back(design, *load_compiled(design).code);
    } catch (const std::exception& e) {
      *why = std::string("cannot compile ") + design + ": " + e.what();
      return {};
    }
  }
  for (const char* name : kSassKernels) {
    const std::string path = ::rlgemm::sass::testing::compiled_cubin(name, why);
    if (path.empty()) {
      *why = "cannot build the test cubin: " + *why;
      return {};
    }
    kernels.emplace_back(name, KernelCode::load(Cubin::load(path), name));
  }
  return kernels;
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

// ---- Control-field faults -------------------------------------------------------------------------------
// The control-field game (stall, yield and reuse actions) hung or faulted an H100 on every sm90 kernel it
// played, and once on an sm80 kernel (compiled for sm_90a), each time with a stall shortened by one cycle
// inside a window where a predicate written by a fixed-latency instruction is read as a guard, from 13 cycles
// (all ptxas ever leaves) to 12:
//  - the elect-one loop around every TMA copy ("@P0 ELECT P1; ...; UTMALDG; @P1 PLOP3.LUT P0, ..., P1;
//    PLOP3.LUT P1; @P0 BRA.U.ANY"): the UTMALDG's stall 10 -> 9 brings the PLOP3 12 cycles after the ELECT
//    whose predicate guards it (a hang: the loop never sees its thread done), the second PLOP3's 11 -> 10
//    brings the BRA.U.ANY 12 cycles after the PLOP3 writing its guard, and the stall of the instruction before
//    the loop's ELECT, 12 -> 11, the ELECT 12 cycles after the PLOP3 setting its guard;
//  - "ISETP.NE.AND P0, PT, R53, RZ, PT" (S13) -> "@P0 BRA": 12 -> 11 (cudaErrorIllegalAddress).
// The game allowed them: it bound those readers by the 6-cycle ALU latency, and ELECT ends a block, so its
// reader three instructions into the next one was bound by nothing. Rules: kGuardPredicateLatency and
// entry_windows (dependence.h). The windows are replayed on the compiled originals, one change at a time,
// where this build compiles the code they were recorded on.
struct ControlFault {
  const char* design;
  size_t instructions;
  std::vector<std::pair<int, const char*>> anchors;
  int instruction;  // the instruction whose stall was shortened by one cycle
};

const ControlFault kControlFaults[] = {
    // The UTMALDG between an ELECT and the PLOP3 its predicate guards.
    {"sm90.ws.pingpong/128x64x64/s6/c1x1/raster_m.g8/splitk1/epi_reg/swap",
     1288,
     {{1123, "@P0 ELECT P1,URZ,PT"}, {1125, "UTMALDG.2D [UR16],[UR12]"}, {1126, "@P1 PLOP3.LUT P0,PT,P1,PT,PT,0x8,0x0"}},
     1125},
    // The PLOP3 between "@P1 PLOP3.LUT P0" and the "@P0 BRA.U.ANY" that closes the loop.
    {"sm90.ws.pingpong/128x64x64/s6/c1x1/raster_m.g8/splitk1/epi_reg/swap",
     1288,
     {{1014, "@P1 PLOP3.LUT P0,PT,P1,PT,PT,0x8,0x0"}, {1015, "PLOP3.LUT P1,PT,PT,PT,PT,0x8,0x0"}},
     1015},
    // The UIADD3 between the PLOP3 setting P0 and the "@P0 ELECT" that opens the loop.
    {"sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/splitk1/epi_reg",
     1128,
     {{991, "PLOP3.LUT P0,PT,PT,PT,PT,0x80,0x0"}, {992, "UIADD3 UR24,UR24,0x2000,URZ"}, {993, "@P0 ELECT P1,URZ,PT"}},
     992},
    // The ISETP whose predicate the next instruction, a branch, reads as its guard.
    {"sm80/64x64x64/w32x32/s4/swz/raster_m.g8/splitk2.serial/epi_reg", 784, {{5, "ISETP.NE.AND P0,PT,R53,RZ,PT"}}, 5},
};

TEST(FaultSchedules, TheRecordedControlFaultsAreRefused) {
  RLGEMM_REQUIRE_NVDISASM();
  int replayed = 0;
  for (const ControlFault& fc : kControlFaults) {
    const FaultCase as_case{fc.design, fc.instructions, fc.anchors, {}};
    std::string why;
    Loaded k;
    try {
      k = load_original(as_case, &why);
    } catch (const std::exception& e) {
      GTEST_SKIP() << "cannot compile " << fc.design << ": " << e.what();
    }
    if (!k.code) continue;  // not the code the fault was recorded on
    ++replayed;
    const KernelCode& code = *k.code;
    const Schedule schedule(code, ActionSpace::kBoth);
    const std::string refused = schedule.why_illegal({fc.instruction, -1, ActionKind::kStall});
    EXPECT_NE(refused.find("latency window"), std::string::npos)
        << fc.design << ": stall -1 of " << code.at(fc.instruction).dis.text() << ": " << refused;
    std::vector<ControlFields> controls;
    for (const auto& ins : code.instructions()) controls.push_back(ins.control);
    --controls[size_t(fc.instruction)].stall;
    std::vector<int> identity(code.size());
    for (size_t i = 0; i < identity.size(); ++i) identity[i] = int(i);
    EXPECT_TRUE(check_controls(code, identity, controls).empty());  // a legal encoding: the windows are the rule
    const auto problems = check_invariants(code, identity, &controls);
    EXPECT_TRUE(mentions(problems, "latency window")) << fc.design << ": " << code.at(fc.instruction).dis.text();
  }
  if (replayed == 0) GTEST_SKIP() << "this build compiles none of the kernels the faults were recorded on";
}

// The rule in this build's kernels, whatever their register allocation: in the compiled schedule, no legal
// stall decrease brings an instruction that reads a predicate as its guard closer to the fixed-latency
// instruction that wrote it than min(13, the compiled distance), within a block or across the start of the
// block (ELECT ends its block; its reader lies a few instructions into the next). Checked here against the
// compiled code directly, not through the game's windows.
TEST(FaultSchedules, NoLegalStallDecreaseShortensAGuardPredicateWindow) {
  RLGEMM_REQUIRE_NVDISASM();
  std::string why;
  const auto kernels = designs_and_test_kernels({"sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/splitk1/epi_reg",
                                                 "sm80/64x64x64/w32x32/s4/swz/raster_m.g8/splitk2.serial/epi_reg"},
                                                &why);
  if (kernels.empty()) GTEST_SKIP() << why;
  int windows = 0, elect = 0;
  for (const auto& [name, code] : kernels) {
    const int n = int(code.size());
    // (writer, reader) of every guard predicate a fixed-latency instruction wrote, found backwards from the
    // reader through straight-line code (a branch that is not taken falls through; an unconditional one ends
    // the search).
    std::vector<std::pair<int, int>> guards;
    for (int c = 0; c < n; ++c) {
      const int g = code.at(c).guard;
      if (g < 0) continue;
      for (int w = c - 1; w >= 0 && w >= c - 32; --w) {
        const Instruction& x = code.at(w);
        if ((x.base() == "BRA" || x.base() == "EXIT") && x.dis.predicate.empty()) break;
        if (!x.defs[size_t(g)]) continue;
        if (x.fixed_latency) guards.emplace_back(w, c);
        break;
      }
    }
    auto distance = [&](int from, int to, int shortened) {
      int d = 0;
      for (int i = from; i < to; ++i) d += std::max(1, code.at(i).control.stall - (i == shortened ? 1 : 0));
      return d;
    };
    const Schedule schedule(code, ActionSpace::kControl);
    for (const auto& [w, c] : guards) {
      ++windows;
      elect += code.at(w).base() == "ELECT";
      const int compiled = distance(w, c, -1);
      for (int i = w; i < c; ++i) {
        if (code.at(i).control.stall <= 1 || !schedule.legal({i, -1, ActionKind::kStall})) continue;
        EXPECT_GE(distance(w, c, i), std::min(compiled, 13))
            << name << ": stall -1 of " << code.at(i).dis.text() << " brings " << code.at(c).dis.text() << " closer to "
            << code.at(w).dis.text();
      }
    }
  }
  EXPECT_GT(windows, 0);
  EXPECT_GT(elect, 0) << "no elect-one loop in the kernels";
}

// ---- A predicate source taken for a destination ------------------------------------------------------
// The control-field game (moves and control actions, PPO) on sm90.ws.pingpong/64x128x64/s6/c1x1/raster_m.g8/
// splitk1/epi_reg (64x12288x16384) raised cudaErrorLaunchFailure at the first draw of a candidate that changed
// 30 instructions' fields: 15 stall increases, 14 yield flips, one reuse flag cleared, and one stall decrease,
// "UISETP.GE.U32.AND UP0, UPT, UR6, 0x3, UPT" S03 -> S02, which brought
// "PLOP3.LUT P0, PT, PT, PT, UP0, 0x80, 0x0" (two instructions on) 5 cycles after the UISETP writing the UP0 it
// reads, where ptxas had 6, the ALU latency. The game allowed it because it took every predicate at the head
// of the operand list for a destination: UP0 was a result of the PLOP3, not a source, and no latency window
// bound the pair. (That the decrease caused the fault is inferred: it is the one change that shortens a
// distance, and a stale UP0 sends the "@!P0 BRA" after the PLOP3, which picks the main loop's unrolled path
// by the k-tile count, the wrong way; the other changes only lengthen stalls or flip yield and reuse hints.)
// Rule: a form starting with a predicate writes two at most, VOTE's last operand is read (isa.cpp).
const FaultCase kPlop3Source{
    "sm90.ws.pingpong/64x128x64/s6/c1x1/raster_m.g8/splitk1/epi_reg",
    1216,
    {{177, "USEL UR11,UR20,0x1,!UP0"},
     {179, "UISETP.GE.U32.AND UP0,UPT,UR6,0x3,UPT"},
     {180, "UMOV UR6,URZ"},
     {181, "PLOP3.LUT P0,PT,PT,PT,UP0,0x80,0x0"},
     {182, "@!P0 BRA 0x1840"},
     {690, "ISETP.GE.OR P6,PT,R3.reuse,UR17,P0"}},
    {}};

struct ControlChange {
  int instruction;
  int stall;          // added to the compiled stall
  bool flip_yield;
  bool clear_reuse;
};

// The recorded candidate's fields against the compiled ones (read off the faulting cubin's .text).
const ControlChange kPlop3SourceChanges[] = {
    {7, 0, true, false},    {48, 1, false, false},  {122, 0, true, false},  {131, 0, true, false},
    {166, 1, false, false}, {179, -1, false, false}, {189, 1, false, false}, {250, 1, false, false},
    {306, 1, false, false}, {362, 2, false, false}, {433, 1, false, false}, {447, 0, true, false},
    {469, 1, false, false}, {523, 0, true, false},  {559, 1, false, false}, {647, 0, true, false},
    {663, 0, true, false},  {683, 0, true, false},  {690, 0, true, true},   {693, 0, true, false},
    {758, 1, false, false}, {763, 0, true, false},  {890, 1, false, false}, {896, 1, false, false},
    {919, 1, false, false}, {941, 0, true, false},  {949, 0, true, false},  {977, 0, true, false},
    {1097, 1, false, false}, {1211, 1, false, false}};

TEST(FaultSchedules, ThePlop3ThatReadsAUniformPredicateKeepsItsWindow) {
  RLGEMM_LOAD_FAULT_CASE(k, kPlop3Source);
  const KernelCode& code = *k.code;
  const Instruction& plop = code.at(181);
  EXPECT_TRUE(plop.uses.test(kUniformPredBase + 0)) << "UP0 is a source of " << plop.dis.text();
  EXPECT_FALSE(plop.defs.test(kUniformPredBase + 0)) << "UP0 is no result of " << plop.dis.text();
  // The game refuses the one stall decrease of the recorded candidate.
  const Schedule schedule(code, ActionSpace::kBoth);
  const std::string refused = schedule.why_illegal({179, -1, ActionKind::kStall});
  EXPECT_NE(refused.find("latency window"), std::string::npos) << refused;
  // The whole recorded candidate: a legal encoding, and that window is the one rule it breaks.
  std::vector<ControlFields> controls;
  for (const auto& ins : code.instructions()) controls.push_back(ins.control);
  for (const ControlChange& c : kPlop3SourceChanges) {
    ControlFields& f = controls[size_t(c.instruction)];
    f.stall += c.stall;
    if (c.flip_yield) f.yield = !f.yield;
    if (c.clear_reuse) f.reuse = 0;
  }
  std::vector<int> identity(code.size());
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = int(i);
  EXPECT_TRUE(check_controls(code, identity, controls).empty());
  const auto problems = check_invariants(code, identity, &controls);
  ASSERT_EQ(problems.size(), 1u) << (problems.empty() ? "no problem reported" : problems.front());
  EXPECT_EQ(problems[0], "latency window: 179->181 only 5 cycles apart, needs 6");
}

// The rule in this build's kernels, whatever their register allocation: every predicate source of a PLOP3
// or a VOTE (read off the text, not through the parser) is a use, no destination, and no legal stall decrease
// brings the reader closer to the fixed-latency instruction that wrote it than min(6, the compiled distance).
TEST(FaultSchedules, NoLegalStallDecreaseShortensAPredicateSourceWindow) {
  RLGEMM_REQUIRE_NVDISASM();
  std::string why;
  const auto kernels =
      designs_and_test_kernels({kPlop3Source.design, "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg"}, &why);
  if (kernels.empty()) GTEST_SKIP() << why;
  static const std::regex predicate(R"(^!?(U?P)([0-6])$)");
  int windows = 0;
  for (const auto& [name, code] : kernels) {
    const int n = int(code.size());
    const Schedule schedule(code, ActionSpace::kControl);
    for (int c = 0; c < n; ++c) {
      const Instruction& reader = code.at(c);
      const std::string base = reader.base();
      if (base != "PLOP3" && base != "UPLOP3" && base != "VOTE" && base != "VOTEU") continue;
      const auto ops = split_operands(reader.dis.operands);
      std::vector<std::string> sources;
      if (base == "VOTE" || base == "VOTEU") sources.push_back(ops.back());
      else for (size_t i = 2; i < ops.size(); ++i) sources.push_back(ops[i]);
      for (const std::string& op : sources) {
        std::smatch m;
        if (!std::regex_match(op, m, predicate)) continue;
        const int slot = (m[1] == "UP" ? kUniformPredBase : kPredBase) + std::stoi(m[2]);
        EXPECT_TRUE(reader.uses.test(size_t(slot))) << name << ": " << reader.dis.text() << " reads " << op;
        if (reader.dis.predicate.empty()) EXPECT_FALSE(reader.defs.test(size_t(slot))) << name << ": " << reader.dis.text();
        const auto& block = code.block_of();
        for (int w = c - 1; w >= 0 && block[w] == block[c]; --w) {
          const Instruction& x = code.at(w);
          if (!x.defs[size_t(slot)]) continue;
          if (!x.fixed_latency || x.latency >= kUntimedLatency) break;
          ++windows;
          auto distance = [&](int shortened) {
            int d = 0;
            for (int i = w; i < c; ++i) d += std::max(1, code.at(i).control.stall - (i == shortened ? 1 : 0));
            return d;
          };
          const int compiled = distance(-1);
          for (int i = w; i < c; ++i) {
            if (code.at(i).control.stall <= 1 || !schedule.legal({i, -1, ActionKind::kStall})) continue;
            EXPECT_GE(distance(i), std::min(compiled, x.latency))
                << name << ": stall -1 of " << code.at(i).dis.text() << " brings " << reader.dis.text() << " closer to "
                << x.dis.text();
          }
          break;
        }
      }
    }
  }
  EXPECT_GT(windows, 0);
}

// The entry windows end where the code waits for an HGMMA ("WARPGROUP.DEPBAR.LE gsb0, 0x0"): the epilogue after
// the main loop, which reads the accumulators hundreds of cycles into its block behind that wait, is not bound
// to the loop's last HGMMA (whose latency is not modelled, so each reader would keep its whole compiled distance
// from the block's start). In this build's cooperative kernel that leaves its one legal memory move (an
// epilogue STG one slot down), which every window of the compiled code allows, and which the short GPU search
// in tests/measure (sass_evaluator_test) needs to evaluate anything beyond the compiled schedule.
TEST(FaultSchedules, EntryWindowsEndAtTheWaitForAnHgmma) {
  RLGEMM_LOAD_COMPILED(k, "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg");
  const KernelCode& code = *k.code;
  const auto& block = code.block_of();
  for (const auto& e : entry_windows(code)) {
    if (code.at(e.producer).base() != "HGMMA") continue;
    for (int i = e.consumer - 1; i >= 0 && block[i] == block[e.consumer]; --i)
      EXPECT_FALSE(code.at(i).dis.opcode.rfind("WARPGROUP.DEPBAR", 0) == 0 && code.at(i).dis.text().find("gsb0,0x0") != std::string::npos)
          << "an entry window from " << code.at(e.producer).dis.text() << " past " << code.at(i).dis.text() << " to "
          << code.at(e.consumer).dis.text();
  }
  bool waited = false;
  for (size_t i = 0; i < code.size(); ++i)
    waited |= code.at(i).dis.opcode.rfind("WARPGROUP.DEPBAR", 0) == 0 && code.at(i).dis.text().find("gsb0,0x0") != std::string::npos;
  EXPECT_TRUE(waited) << "the kernel waits for its HGMMAs";
  const Schedule schedule(code);
  EXPECT_FALSE(schedule.legal_moves().empty());
}

}  // namespace
}  // namespace rlgemm::sass
