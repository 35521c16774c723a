// nvdisasm, NVIDIA's disassembler, is the source of truth for what each instruction word means: rlgemm reads
// its JSON output (opcode, guard predicate, operands) and never decodes opcodes itself.
// Where it is looked for, in order: $RLGEMM_NVDISASM, nvdisasm on PATH, /usr/local/cuda/bin, and the
// nvidia/cu13/bin folder of the Python package nvidia-cuda-nvdisasm (scripts/requirements.txt).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rlgemm::sass {

// Oldest nvdisasm whose JSON output rlgemm reads (the -json option and sm_90a support).
inline constexpr int kMinNvdisasmMajor = 12;
inline constexpr int kMinNvdisasmMinor = 8;

struct NvdisasmTool {
  std::string path;
  int major = 0;
  int minor = 0;
};

// Throws Error (kRuntime) saying where it looked and how to install it, or that the one found is too old.
NvdisasmTool find_nvdisasm();
// Like find_nvdisasm() but returns false with the reason instead of throwing (for tests that skip).
bool nvdisasm_available(std::string* why = nullptr);

struct DisasmInstruction {
  std::string predicate;  // "@!P1" or empty
  std::string opcode;     // "LDG.E.128"
  std::string operands;   // nvdisasm's comma-joined operand text
  bool control_flow = false;       // nvdisasm's "control-flow" attribute
  bool inter_warp_barrier = false; // nvdisasm's "inter-warp-barrier" attribute
  std::string text() const;        // "@!P1 LDG.E.128 R4,desc[UR4][R2.64]"
};

struct DisasmFunction {
  std::string name;
  uint64_t start = 0;
  uint64_t length = 0;
  std::vector<DisasmInstruction> instructions;  // one per 16 bytes
};

// Disassembles a cubin image (written to a temporary file) and returns every function.
std::vector<DisasmFunction> disassemble(const std::vector<uint8_t>& cubin);
// The function named `kernel`; throws Error when nvdisasm does not list it.
DisasmFunction disassemble_kernel(const std::vector<uint8_t>& cubin, const std::string& kernel);

// Parses nvdisasm -json text (exposed for tests).
std::vector<DisasmFunction> parse_nvdisasm_json(const std::string& json_text);

}  // namespace rlgemm::sass
