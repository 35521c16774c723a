#include "sass/isa.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <sstream>

#include "rlgemm/error.h"

namespace rlgemm::sass {
namespace {

std::vector<std::string> split_dots(const std::string& opcode) {
  std::vector<std::string> parts;
  std::stringstream in(opcode);
  std::string p;
  while (std::getline(in, p, '.')) parts.push_back(p);
  return parts;
}

bool has_modifier(const std::vector<std::string>& mods, const std::string& m) {
  return std::find(mods.begin() + 1, mods.end(), m) != mods.end();
}

// A register or predicate token: returns its first slot and whether it was one (zero registers -> -1).
struct RegToken {
  bool is_register = false;
  bool is_predicate = false;
  int slot = -1;  // -1 for RZ/URZ/PT/UPT
  int width = 1;  // from a ".64" suffix
};

RegToken parse_register(std::string t) {
  RegToken r;
  while (!t.empty() && (t[0] == '-' || t[0] == '!' || t[0] == '|' || t[0] == '~')) t.erase(0, 1);
  while (!t.empty() && t.back() == '|') t.pop_back();
  static const std::regex reg(R"(^(UR|R|UP|P)(Z|T|\d+)((\.[A-Za-z0-9_]+)*)$)");
  std::smatch m;
  if (!std::regex_match(t, m, reg)) return r;
  const std::string kind = m[1], index = m[2], suffix = m[3];
  const bool pred = kind == "P" || kind == "UP";
  if (pred && index == "Z") return r;
  if (!pred && index == "T") return r;
  r.is_register = true;
  r.is_predicate = pred;
  if (suffix.find(".64") != std::string::npos) r.width = 2;
  if (index == "Z" || index == "T") return r;
  const int n = std::stoi(index);
  if (kind == "R" && n < 256) r.slot = n;
  else if (kind == "UR" && n < 64) r.slot = kUniformBase + n;
  else if (kind == "P" && n < 7) r.slot = kPredBase + n;
  else if (kind == "UP" && n < 7) r.slot = kUniformPredBase + n;
  return r;
}

void add_range(RegSet& set, int slot, int width) {
  if (slot < 0) return;
  const int limit = slot < kUniformBase ? kUniformBase : slot < kPredBase ? kPredBase : slot < kUniformPredBase ? kUniformPredBase : kRegSlots;
  for (int i = 0; i < width && slot + i < limit; ++i) set.set(slot + i);
}

// Registers named inside a memory or descriptor operand: "[R2.64+0x10]", "desc[UR4][R2.64]", "gdesc[UR16]".
void add_bracket_registers(const std::string& op, RegSet& uses, int uniform_width_override) {
  static const std::regex inner(R"((UR|R|UP|P)(\d+)(\.64)?)");
  bool in_desc = false;
  size_t pos = 0;
  while (pos < op.size()) {
    const size_t open = op.find('[', pos);
    if (open == std::string::npos) break;
    const size_t close = op.find(']', open);
    if (close == std::string::npos) break;
    const std::string prefix = op.substr(pos, open - pos);
    in_desc = prefix.find("desc") != std::string::npos;  // "desc" and "gdesc" name 64-bit descriptors
    const bool gdesc = prefix.find("gdesc") != std::string::npos;
    const std::string body = op.substr(open + 1, close - open - 1);
    for (std::sregex_iterator it(body.begin(), body.end(), inner), end; it != end; ++it) {
      RegToken r = parse_register((*it)[0]);
      int width = r.width;
      if (gdesc) width = 4;  // two 64-bit matrix descriptors (A and B)
      else if (in_desc) width = 2;
      if (!r.is_predicate && r.slot >= kUniformBase && uniform_width_override > 0) width = std::max(width, uniform_width_override);
      add_range(uses, r.slot, width);
    }
    pos = close + 1;
  }
}

struct OpcodeClass {
  MemClass mem = MemClass::kNone;
  unsigned reads = 0, writes = 0;
  bool fence = false;
  const char* fence_reason = "";
  bool no_dest = false;
  bool movable = false;
};

// Opcodes that order the instruction stream: barriers, fences, waits, control flow, warpgroup MMA.
const std::set<std::string>& fence_opcodes() {
  static const std::set<std::string> s = {
      "BAR", "BARRIER", "DEPBAR", "LDGDEPBAR", "MEMBAR", "FENCE", "ERRBAR", "CCTL", "CCTLL", "CCTLT", "SYNCS",
      "WARPGROUP", "WARPSYNC", "BSSY", "BSYNC", "BREAK", "BMOV", "BPT", "EXIT", "BRA", "BRX", "JMP", "JMX", "CALL",
      "RET", "KILL", "NANOSLEEP", "YIELD", "ELECT", "ARRIVES", "UCGABAR_ARV", "UCGABAR_WAIT", "ACQBULK", "UTMACCTL",
      "HGMMA", "LEPC", "PMTRIG", "VOTE.SYNC", "SETCTAID", "SETLMEMBASE", "ENDCOLLECTIVE", "PREEXIT", "USETMAXREG",
      "ACQSHMINIT", "UCGABAR"};
  return s;
}

// Opcodes rlgemm understands that do not order the stream.
const std::set<std::string>& plain_opcodes() {
  static const std::set<std::string> s = {
      "IADD3", "IADD", "IMAD", "IMUL", "LEA", "LOP3", "LOP", "SHF", "SHL", "SHR", "ISETP", "FSETP", "HSETP2", "DSETP",
      "PLOP3", "PSETP", "MOV", "UMOV", "SEL", "FSEL", "USEL", "IMNMX", "VIMNMX", "FMNMX", "FADD", "FMUL", "FFMA",
      "HADD2", "HMUL2", "HFMA2", "HMNMX2", "F2F", "F2I", "I2F", "I2FP", "F2IP", "FRND", "F2FP", "MUFU", "POPC", "FLO",
      "BREV", "PRMT", "SHFL", "VOTE", "VOTEU", "S2R", "S2UR", "CS2R", "R2UR", "R2P", "P2R", "UPRMT", "IABS", "IDP",
      "IMMA", "HMMA", "DMMA", "UIADD3", "UIMAD", "ULEA", "ULOP3", "USHF", "UISETP", "UFLO", "UPOPC", "UBREV", "USGXT",
      "SGXT", "BMSK", "UBMSK", "VIADD", "VIADDMNMX", "ISCADD", "FCHK", "DADD", "DMUL", "DFMA", "NOP", "MATCH",
      "REDUX", "CREDUX", "FSWZADD", "IMNMX3", "UP2UR", "UR2UP", "ULEPC", "I2I", "USETP", "UPLOP3", "UVIADD",
      "UVIMNMX", "UIMNMX", "UISCADD", "UFSEL", "QSPC", "F2FP", "HFMA2.MMA", "FMNMX3", "VHMNMX", "HMNMX"};
  return s;
}

OpcodeClass classify(const std::string& base, const std::vector<std::string>& mods) {
  OpcodeClass c;
  if (base == "LDG") c = {MemClass::kGlobal, kSpaceGlobal, 0, false, "", false, true};
  else if (base == "STG") c = {MemClass::kGlobal, 0, kSpaceGlobal, false, "", true, true};
  else if (base == "LDS" || base == "LDSM") c = {MemClass::kShared, kSpaceShared, 0, false, "", false, true};
  else if (base == "STS") c = {MemClass::kShared, 0, kSpaceShared, false, "", true, true};
  // STSM stays in place. Reordered STSMs of an sm_90a TMA-store epilogue made an H100 raise "illegal
  // instruction" although every register, scoreboard, latency and issue-spacing rule here held; until the
  // hardware rule behind it is known, the safe schedule is the compiled one.
  else if (base == "STSM") c = {MemClass::kShared, 0, kSpaceShared, false, "", true, false};
  else if (base == "LDGSTS") c = {MemClass::kAsyncCopy, kSpaceGlobal, kSpaceShared, false, "", true, true};
  else if (base == "LD") c = {MemClass::kGeneric, kSpaceAll, 0, false, "", false, false};
  else if (base == "ST") c = {MemClass::kGeneric, 0, kSpaceAll, false, "", true, false};
  else if (base == "LDL") c = {MemClass::kLocal, kSpaceLocal, 0, false, "", false, false};
  else if (base == "STL") c = {MemClass::kLocal, 0, kSpaceLocal, false, "", true, false};
  else if (base == "LDC" || base == "ULDC") c = {MemClass::kConstant, 0, 0, false, "", false, false};
  else if (base == "ATOM" || base == "ATOMG") c = {MemClass::kAtomic, kSpaceAll, kSpaceAll, false, "", false, false};
  else if (base == "RED" || base == "REDG") c = {MemClass::kAtomic, kSpaceAll, kSpaceAll, false, "", true, false};
  else if (base == "ATOMS") c = {MemClass::kAtomic, kSpaceShared, kSpaceShared, false, "", false, false};
  else if (base.rfind("UTMA", 0) == 0 || base.rfind("UBLK", 0) == 0)
    c = {MemClass::kBulk, kSpaceGlobal | kSpaceShared, kSpaceGlobal | kSpaceShared, false, "", true, false};
  else if (fence_opcodes().count(base)) {
    c.fence = true;
    c.fence_reason = "barrier, fence or control flow";
    if (base == "HGMMA") {
      c.mem = MemClass::kShared;
      c.reads = kSpaceShared;
      c.fence_reason = "asynchronous warpgroup MMA (bracketed by WARPGROUP fences)";
    } else if (base == "SYNCS") {
      c.mem = MemClass::kShared;
      c.reads = c.writes = kSpaceShared;
      c.fence_reason = "mbarrier operation";
    }
    c.no_dest = base != "HGMMA" && base != "SYNCS" && base != "ELECT" && base != "VOTE";
  } else if (plain_opcodes().count(base)) {
    // plain arithmetic, moves and conversions
  } else {
    c.fence = true;
    c.fence_reason = "opcode rlgemm does not model";
  }
  (void)mods;
  return c;
}

// Width in registers of operand `index` (after the guard) of a wide operation, or 0 for "as written".
int operand_width(const std::string& base, const std::vector<std::string>& mods, size_t index, size_t count,
                  bool is_store_like) {
  auto data_width = [&] {
    if (has_modifier(mods, "128")) return 4;
    if (has_modifier(mods, "64")) return 2;
    return 1;
  };
  if (base == "LDG" || base == "LDS" || base == "LD" || base == "LDL" || base == "LDC" || base == "ULDC" ||
      base == "ATOM" || base == "ATOMG" || base == "ATOMS") {
    if (index == 0) return data_width();
    if (base.rfind("ATOM", 0) == 0 && index + 1 == count) return data_width();
    return 0;
  }
  if (base == "STG" || base == "STS" || base == "ST" || base == "STL" || base == "RED" || base == "REDG")
    return index + 1 == count ? data_width() : 0;
  if (base == "LDSM" || base == "STSM") {
    const std::string& last = mods.back();
    const int n = last == "4" ? 4 : last == "2" ? 2 : 1;
    if (base == "LDSM" && index == 0) return n;
    if (base == "STSM" && index + 1 == count) return n;
    return 0;
  }
  if (base == "HMMA" && mods.size() >= 2) {
    const bool f32 = has_modifier(mods, "F32");
    const bool k16 = mods[1] == "16816";
    if (index == 0 || index == 3) return f32 ? 4 : 2;
    if (index == 1) return k16 ? 4 : 2;
    if (index == 2) return k16 ? 2 : 1;
    return 0;
  }
  if (base == "HGMMA" && mods.size() >= 2) {
    // "64xNxK": the accumulator tile is 64 x N spread over 128 threads.
    int n = 256;
    if (auto x = mods[1].find('x'); x != std::string::npos) n = std::atoi(mods[1].c_str() + x + 1);
    const bool f32 = has_modifier(mods, "F32") || has_modifier(mods, "S32");
    const int acc = std::max(1, f32 ? n / 2 : n / 4);
    if (index == 0 || index == 2) return acc;
    if (index == 1) return 4;  // A fragment from registers (m64 x k16 halves)
    return 0;
  }
  if ((base == "IMAD" || base == "UIMAD") && has_modifier(mods, "WIDE")) return index == 0 || index == 3 ? 2 : 0;
  if (base == "CS2R") return index == 0 && !has_modifier(mods, "32") ? 2 : 0;
  if (base == "DADD" || base == "DMUL" || base == "DFMA" || base == "DSETP") return 2;
  (void)is_store_like;
  return 0;
}

// Conservative fixed latencies (cycles) of results that carry no scoreboard, known for the ALU and tensor
// pipes. For the rest the compiled distance stays (kUntimedLatency): a memory instruction's result that ptxas
// left without a scoreboard (an LDSM read 100 cycles later, a ULDC whose vector readers ptxas keeps 10 cycles
// and more away), R2UR's, whose readers ptxas keeps 8 and more cycles away (13 in most places) on sm_90a,
// and the results of barrier, convergence and unknown instructions (ELECT's predicate and uniform register,
// BMOV, LEPC...), which issue to units whose latency rlgemm does not know. (A predicate read as a guard has a
// longer window of its own: kGuardPredicateLatency.)
int fixed_latency_of(const std::string& base, MemClass mem) {
  if (mem != MemClass::kNone || base == "R2UR") return kUntimedLatency;
  if (!plain_opcodes().count(base) && base != "HGMMA") return kUntimedLatency;
  if (base == "HMMA" || base == "IMMA" || base == "DMMA") return 32;
  if (base == "DADD" || base == "DMUL" || base == "DFMA") return 16;
  return 6;
}

}  // namespace

std::string register_name(int slot) {
  if (slot < kUniformBase) return "R" + std::to_string(slot);
  if (slot < kPredBase) return "UR" + std::to_string(slot - kUniformBase);
  if (slot < kUniformPredBase) return "P" + std::to_string(slot - kPredBase);
  return "UP" + std::to_string(slot - kUniformPredBase);
}

const char* to_string(MemClass c) {
  switch (c) {
    case MemClass::kNone: return "none";
    case MemClass::kGlobal: return "global";
    case MemClass::kShared: return "shared";
    case MemClass::kAsyncCopy: return "async-copy";
    case MemClass::kBulk: return "tma-bulk";
    case MemClass::kConstant: return "constant";
    case MemClass::kLocal: return "local";
    case MemClass::kGeneric: return "generic";
    case MemClass::kAtomic: return "atomic";
  }
  return "?";
}

std::string Instruction::base() const { return dis.opcode.substr(0, dis.opcode.find('.')); }

std::string ControlFields::to_string() const {
  std::string s = "[B";
  for (int b = 0; b < 6; ++b) s += (wait_mask >> b & 1) ? char('0' + b) : '-';
  s += ":R" + (read_sb == kNoScoreboard ? std::string("-") : std::to_string(read_sb));
  s += ":W" + (write_sb == kNoScoreboard ? std::string("-") : std::to_string(write_sb));
  s += yield ? ":Y" : ":-";
  s += ":S" + std::string(stall < 10 ? "0" : "") + std::to_string(stall) + "]";
  return s;
}

std::vector<std::string> split_operands(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  for (char ch : text) {
    if (ch == ',' && depth == 0) {
      flush();
      continue;
    }
    if (ch == '[' && depth == 0 && !cur.empty()) {
      // nvdisasm's JSON joins "URZ, [UR14]" and "[UR12], [UR6]" without a comma: a bracket that follows a
      // complete register or a complete memory operand starts a new operand; "desc[", "c[" do not.
      if (cur.front() == '[' || parse_register(cur).is_register) flush();
    }
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (ch != ' ') cur += ch;
  }
  flush();
  return out;
}

Instruction analyze_instruction(const DisasmInstruction& dis, const InstructionWord& word) {
  Instruction ins;
  ins.dis = dis;
  ins.control = decode_control(word);
  const auto mods = split_dots(dis.opcode.empty() ? std::string("?") : dis.opcode);
  const std::string base = mods[0];
  const OpcodeClass cls = classify(base, mods);
  ins.mem = cls.mem;
  ins.reads = cls.reads;
  ins.writes = cls.writes;
  ins.fence = cls.fence;
  ins.fence_reason = cls.fence_reason;
  if (dis.control_flow || dis.inter_warp_barrier) {
    ins.fence = true;
    if (ins.fence_reason.empty()) ins.fence_reason = "control flow or inter-warp barrier";
  }
  // Reading the clock or the PC must keep its place.
  if (dis.operands.find("SR_CLOCK") != std::string::npos || dis.operands.find("SR_GLOBALTIMER") != std::string::npos) {
    ins.fence = true;
    ins.fence_reason = "reads a clock";
  }
  // Guard predicate: a use.
  if (!dis.predicate.empty()) {
    RegToken g = parse_register(dis.predicate.substr(1));
    add_range(ins.uses, g.slot, 1);
    if (g.is_predicate) ins.guard = g.slot;
    // "@!PT" never executes: a filler that ptxas places, not worth moving.
  }
  const auto ops = split_operands(dis.operands);
  // Destinations: the leading register operand, then the predicate operands right after it (carry-outs,
  // second compare results); LOP3/SHFL-like forms "P, R, ..." also write the general register. A form that
  // starts with a predicate writes two at most ("ISETP P0, PT, R4, ...", "PLOP3.LUT P0, PT, P1, PT, UP0, ...":
  // Pd and Pq, the rest are its sources), one after a register at most two (IADD3's carries "R4, P0, P1").
  // VOTE's last operand is the predicate it votes on ("VOTEU.ALL UP0, P2", "VOTE.ANY R5, PT, P0"): a source.
  // (Taking every leading predicate as a destination hid PLOP3's and VOTEU's predicate sources from the
  // dependence graph and the latency windows: a schedule whose one shortened stall brought "PLOP3.LUT P0, PT,
  // PT, PT, UP0" 5 cycles after the UISETP writing UP0, 6 compiled, faulted an H100; see fault_schedules_test.)
  size_t dest_end = 0;
  if (!cls.no_dest && !ops.empty() && parse_register(ops[0]).is_register) {
    dest_end = 1;
    const bool first_pred = parse_register(ops[0]).is_predicate;
    size_t most = first_pred ? 2 : 3;
    if (base == "VOTE" || base == "VOTEU") most = std::min(most, ops.size() - 1);
    while (dest_end < most && dest_end < ops.size() && parse_register(ops[dest_end]).is_predicate) ++dest_end;
    if (first_pred && dest_end < ops.size() && (base == "LOP3" || base == "ULOP3" || base == "SHFL" || base == "LEA" ||
                                                base == "IADD3" || base == "UIADD3")) {
      RegToken r = parse_register(ops[dest_end]);
      if (r.is_register && !r.is_predicate) ++dest_end;
    }
    // Compare-like forms end their destinations at the first source.
  }
  const bool bulk = ins.mem == MemClass::kBulk;
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string& op = ops[i];
    if (op.find('[') != std::string::npos) {
      add_bracket_registers(op, ins.uses, bulk ? 8 : 0);
      continue;
    }
    RegToken r = parse_register(op);
    if (!r.is_register) continue;
    const int w = operand_width(base, mods, i, ops.size(), cls.no_dest);
    const int width = w > 0 ? w : r.width;
    if (i < dest_end) add_range(ins.defs, r.slot, width);
    else add_range(ins.uses, r.slot, width);
  }
  // A guarded definition may leave the old value in place: it reads what it writes.
  if (!dis.predicate.empty()) ins.uses |= ins.defs;
  ins.movable = cls.movable && !ins.fence && dis.predicate != "@!PT";
  ins.memory_pipe = dis.predicate != "@!PT" &&
                    (ins.mem == MemClass::kGlobal || ins.mem == MemClass::kShared || ins.mem == MemClass::kAsyncCopy ||
                     ins.mem == MemClass::kGeneric || ins.mem == MemClass::kLocal || ins.mem == MemClass::kAtomic) &&
                    base != "HGMMA" && base != "SYNCS";
  ins.fixed_latency = ins.control.write_sb == kNoScoreboard && ins.defs.any();
  ins.latency = fixed_latency_of(base, ins.mem);
  return ins;
}

KernelCode KernelCode::load(const Cubin& cubin, const std::string& name) {
  KernelText text = cubin.kernel(name);
  const DisasmFunction disasm = disassemble_kernel(cubin.bytes(), name);
  KernelCode code = from_parts(std::move(text), disasm);
  for (const auto& s : cubin.address_map_sections())
    code.notes.push_back("section " + s + " maps code addresses and is left as compiled (it goes stale when code moves)");
  return code;
}

KernelCode KernelCode::from_parts(KernelText text, const DisasmFunction& disasm) {
  KernelCode code;
  if (disasm.instructions.size() != text.words.size())
    throw Error(ErrorKind::kRuntime, "nvdisasm lists " + std::to_string(disasm.instructions.size()) +
                                         " instructions for " + text.name + ", the code has " +
                                         std::to_string(text.words.size()));
  const size_t n = text.words.size();
  for (size_t i = 0; i < n; ++i) code.instructions_.push_back(analyze_instruction(disasm.instructions[i], text.words[i]));
  for (const auto& [index, why] : text.pinned) {
    auto& ins = code.instructions_[index];
    ins.fence = true;
    ins.movable = false;
    ins.fence_reason = "named by " + why;
    code.notes.push_back("instruction " + std::to_string(index) + " (" + ins.dis.text() + ") is pinned: named by " + why +
                         ", which rlgemm does not understand");
  }
  // Memory instructions that lean on in-order completion: the first reader of a loaded register (or the
  // first writer of a stored one) in the block does not wait on this instruction's own scoreboard.
  for (size_t i = 0; i < n; ++i) {
    auto& ins = code.instructions_[i];
    if (ins.mem == MemClass::kNone) continue;
    const int wsb = ins.control.write_sb, rsb = ins.control.read_sb;
    RegSet results = ins.defs, sources = ins.uses & ~ins.defs;
    for (size_t j = i + 1; j < n && (results.any() || sources.any()); ++j) {
      const auto& later = code.instructions_[j];
      if (later.dis.control_flow) {
        // Beyond the block: without a scoreboard of its own nothing protects the result.
        if ((results.any() && wsb == kNoScoreboard) || (sources.any() && rsb == kNoScoreboard)) ins.in_order = true;
        break;
      }
      if ((results & (later.uses | later.defs)).any()) {
        if (wsb == kNoScoreboard || !(later.control.wait_mask >> wsb & 1)) ins.in_order = true;
        results.reset();
      }
      if ((sources & later.defs).any()) {
        if (rsb == kNoScoreboard ? later.control.wait_mask != 0 : !(later.control.wait_mask >> rsb & 1)) ins.in_order = true;
        sources.reset();
      }
    }
  }
  // Block leaders: the entry, every branch or reconvergence target, and whatever follows control flow.
  std::vector<bool> leader(n + 1, false);
  leader[0] = true;
  static const std::regex hex(R"(0x[0-9a-fA-F]+)");
  for (size_t i = 0; i < n; ++i) {
    const auto& ins = code.instructions_[i];
    if (!ins.dis.control_flow) continue;
    leader[i + 1] = true;
    for (std::sregex_iterator it(ins.dis.operands.begin(), ins.dis.operands.end(), hex), end; it != end; ++it) {
      const uint64_t target = std::stoull((*it)[0], nullptr, 16);
      if (target % kInstructionBytes == 0 && target / kInstructionBytes < n) leader[target / kInstructionBytes] = true;
    }
  }
  code.block_.resize(n);
  int block = -1;
  for (size_t i = 0; i < n; ++i) {
    if (leader[i]) ++block;
    code.block_[i] = block;
  }
  for (size_t i = 0; i < n; ++i)
    if (code.instructions_[i].movable) code.movable_.push_back(int(i));
  code.text_ = std::move(text);
  return code;
}

std::string reuse_operand(const Instruction& ins, int slot) {
  static const std::set<std::string> kLayout = {"FFMA", "FMUL", "FADD", "FMNMX", "HFMA2", "HADD2", "HMUL2", "HMMA",
                                                "IMMA", "IMAD", "IADD3", "LOP3", "SHF", "IMNMX"};
  if (slot < 0 || slot > 3 || ins.fence || !kLayout.count(ins.base())) return "";
  const auto ops = split_operands(ins.dis.operands);
  static const std::regex reg(R"(R[0-9]+)");
  auto plain = [](std::string op) {
    if (const auto at = op.find(".reuse"); at != std::string::npos) op.erase(at);
    return op;
  };
  // One register destination: a second predicate destination (IADD3's carry) shifts the sources.
  if (ops.size() < 2 || !std::regex_match(plain(ops[0]), reg) || plain(ops[1]).rfind("P", 0) == 0) return "";
  if (size_t(slot) + 1 >= ops.size()) return "";
  const std::string op = plain(ops[size_t(slot) + 1]);
  return std::regex_match(op, reg) ? op : "";
}

}  // namespace rlgemm::sass
