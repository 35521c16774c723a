// What each instruction of a kernel does, as far as scheduling is concerned: registers and predicates it
// defines and uses (register pairs and quads of wide operations included), scoreboards it sets and waits on,
// the memory it reads and writes, and whether it is a barrier, fence or control-flow instruction that nothing
// may be moved across. Opcodes and operands come from nvdisasm; control fields from the raw words.
#pragma once

#include <bitset>
#include <string>
#include <vector>

#include "sass/control.h"
#include "sass/cubin.h"
#include "sass/nvdisasm.h"

namespace rlgemm::sass {

// Register file slots: R0-R255, UR0-UR63, P0-P6, UP0-UP6 (RZ, URZ, PT and UPT carry no dependence).
inline constexpr int kUniformBase = 256, kPredBase = 320, kUniformPredBase = 327, kRegSlots = 334;
// The latency of a result without a scoreboard whose timing is not modelled: a window min(compiled distance,
// latency) then keeps the compiled distance.
inline constexpr int kUntimedLatency = 1 << 20;
// A predicate read as a guard ("@P0 BRA", "@P0 ELECT", "@P2 PLOP3") needs a longer distance than the same
// predicate read as a source (likely because a guard is read earlier in the pipeline; the H100 faults of
// schedules that brought guard reads to 12 cycles say so too): ptxas keeps every guard read of a fixed-latency
// predicate at least 13 cycles after its producer in the sm_80/sm_90a kernels rlgemm reads (thousands of reads, none closer), while
// the same predicates as plain sources (SEL, carries, ISETP's combine) are read 4 cycles after. (Not every
// uniform predicate: ptxas guards uniform instructions with a VOTEU's UP0 5 cycles after it, which the
// min() below keeps.) A guard read of a fixed-latency predicate stays min(compiled distance,
// kGuardPredicateLatency) away.
inline constexpr int kGuardPredicateLatency = 13;
using RegSet = std::bitset<kRegSlots>;
std::string register_name(int slot);

enum MemSpace : unsigned { kSpaceGlobal = 1, kSpaceShared = 2, kSpaceLocal = 4, kSpaceAll = 7 };

enum class MemClass { kNone, kGlobal, kShared, kAsyncCopy, kBulk, kConstant, kLocal, kGeneric, kAtomic };
const char* to_string(MemClass c);

struct Instruction {
  DisasmInstruction dis;
  ControlFields control;
  RegSet defs;
  RegSet uses;
  MemClass mem = MemClass::kNone;
  unsigned reads = 0;   // MemSpace bits read
  unsigned writes = 0;  // MemSpace bits written
  // A barrier, fence, wait, control-flow or PC-relative instruction, an instruction rlgemm does not
  // recognise, or one pinned by an attribute: it never moves and nothing moves past it.
  bool fence = false;
  std::string fence_reason;
  // One of the memory instructions the game moves: LDG, STG, LDS, STS, LDSM, STSM, LDGSTS.
  bool movable = false;
  // Result produced after a fixed number of cycles (no write scoreboard): consumers rely on stall counts.
  bool fixed_latency = false;
  // A memory instruction whose completion (or operand read) is covered by a later memory instruction's
  // scoreboard: ptxas relies on memory requests completing in issue order, e.g. an LDSM without a write
  // scoreboard whose consumer waits on the next LDSM's. It keeps its order with every memory instruction.
  bool in_order = false;
  int latency = 0;  // cycles a consumer of a fixed-latency result must stay away (conservative; kUntimedLatency:
                    // as far as the compiled code had it)
  int guard = -1;   // register slot of the guard predicate ("@P0", "@!UP1"), -1 for none or PT
  // A request to the load/store pipe that executes (LDG, STG, LDS, STS, LDSM, STSM, LDGSTS, LD, ST, LDL, STL,
  // atomics; not a "@!PT" filler): ptxas never issues two of them closer than kMemoryIssueCycles.
  bool memory_pipe = false;
  bool is_load() const { return reads != 0 && writes == 0; }
  std::string base() const;  // opcode up to the first '.'
};

// Splits nvdisasm's operand text into operands ("URZ[UR14],UR6" -> "URZ", "[UR14]", "UR6").
std::vector<std::string> split_operands(const std::string& operands);

// Source operand `slot` (0 = A) of an instruction whose reuse flags rlgemm may set, as register text ("R40"),
// or "" where the slot holds no plain register or the opcode's operand layout is not one rlgemm knows
// (one register destination, then the sources in reuse-slot order: FFMA, HMMA, IMAD, LOP3 and kin).
std::string reuse_operand(const Instruction& ins, int slot);

// Analyzes one instruction (word for the control fields, disassembly for everything else).
Instruction analyze_instruction(const DisasmInstruction& dis, const InstructionWord& word);

// A kernel ready for the game: its words, metadata, analysis and basic blocks, indexed by original position.
class KernelCode {
 public:
  // Reads kernel `name` of `cubin` and disassembles it with nvdisasm.
  static KernelCode load(const Cubin& cubin, const std::string& name);
  // From parts already at hand (the disassembly must be of the same words).
  static KernelCode from_parts(KernelText text, const DisasmFunction& disasm);

  size_t size() const { return instructions_.size(); }
  const Instruction& at(size_t id) const { return instructions_[id]; }
  const std::vector<Instruction>& instructions() const { return instructions_; }
  const KernelText& text() const { return text_; }
  // Basic block of each original index; blocks are ranges of slots that never change.
  const std::vector<int>& block_of() const { return block_; }
  // Indices of movable instructions, in program order: the game's actors.
  const std::vector<int>& movable() const { return movable_; }
  // Human-readable notes: pinned instructions and why, stale address maps.
  std::vector<std::string> notes;

 private:
  KernelText text_;
  std::vector<Instruction> instructions_;
  std::vector<int> block_;
  std::vector<int> movable_;
};

}  // namespace rlgemm::sass
