// The scheduling fields ptxas writes into the top bits of every Volta-to-Hopper instruction word.
// Bit numbers count from bit 0 of the first little-endian 64-bit half; the layout was checked on sm_90a
// cubins (tests/sass/control_fields_test.cpp): variable-latency instructions set a write scoreboard,
// fixed-latency ALU instructions never do, every waited scoreboard was set earlier, and the reuse field is
// non-zero exactly where nvdisasm prints ".reuse".
#pragma once

#include <cstdint>
#include <string>

#include "sass/cubin.h"

namespace rlgemm::sass {

inline constexpr int kNoScoreboard = 7;

struct ControlFields {
  int stall = 0;                     // bits 105-108: cycles before the next instruction may issue
  bool yield = false;                // bit 109
  int write_sb = kNoScoreboard;      // bits 110-112: scoreboard released when the result is written
  int read_sb = kNoScoreboard;       // bits 113-115: scoreboard released when the sources have been read
  int wait_mask = 0;                 // bits 116-121: scoreboards that must be released before issue
  int reuse = 0;                     // bits 122-125: operand-reuse cache flags

  int sets_mask() const {
    return (write_sb < 6 ? 1 << write_sb : 0) | (read_sb < 6 ? 1 << read_sb : 0);
  }
  std::string to_string() const;  // "[B------:R-:W2:Y:S04]"-like, as CuAssembler prints it
  friend bool operator==(const ControlFields&, const ControlFields&) = default;
};

inline ControlFields decode_control(const InstructionWord& w) {
  const uint64_t c = w.hi >> (105 - 64);
  ControlFields f;
  f.stall = int(c & 0xf);
  f.yield = ((c >> 4) & 1) != 0;
  f.write_sb = int((c >> 5) & 7);
  f.read_sb = int((c >> 8) & 7);
  f.wait_mask = int((c >> 11) & 0x3f);
  f.reuse = int((c >> 17) & 0xf);
  return f;
}

// Whether the stall and yield fields form a combination the hardware decodes: nvdisasm refuses a set yield
// bit with a stall of 0 or of 12 and more on every opcode tried (HMMA, ISETP, LDS, NOP on sm_90a), so a
// changed field stays within the combinations it reads.
inline bool encodable(const ControlFields& f) {
  return f.stall >= 0 && f.stall <= 15 && (!f.yield || (f.stall >= 1 && f.stall <= 11));
}

// The word with its scheduling fields replaced by `f` (the inverse of decode_control).
inline InstructionWord encode_control(InstructionWord w, const ControlFields& f) {
  const uint64_t mask = uint64_t(0x1fffff) << (105 - 64);
  const uint64_t c = uint64_t(f.stall & 0xf) | uint64_t(f.yield ? 1 : 0) << 4 | uint64_t(f.write_sb & 7) << 5 |
                     uint64_t(f.read_sb & 7) << 8 | uint64_t(f.wait_mask & 0x3f) << 11 | uint64_t(f.reuse & 0xf) << 17;
  w.hi = (w.hi & ~mask) | (c << (105 - 64));
  return w;
}

}  // namespace rlgemm::sass
