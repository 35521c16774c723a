// Cubin surgery: a Hopper cubin (ELF64) read into memory, one kernel's code as 128-bit instruction words,
// and the metadata that names instructions by their byte offset (.nv.info.<kernel> attributes, relocations
// of .text.<kernel>). write() returns the cubin with the kernel's instructions permuted and every such
// offset following its instruction; with the identity order it returns the input, byte for byte.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace rlgemm::sass {

// One 128-bit instruction: the two little-endian 64-bit halves as stored in .text.
struct InstructionWord {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const InstructionWord&, const InstructionWord&) = default;
};
inline constexpr size_t kInstructionBytes = 16;

// The EIATTR record format byte.
enum class AttrFormat : uint8_t { kNoValue = 1, kByteValue = 2, kHalfValue = 3, kSizedValue = 4 };

// How rlgemm reads one .nv.info attribute with respect to instruction offsets.
enum class AttrOffsets {
  kNone,        // holds no instruction offsets (parameters, resources, versions...)
  kWordList,    // a list of 32-bit instruction offsets
  kMbarrier16,  // 16-byte records {offset, register, immediate, kind}: the first word is an offset
  kUnknown,     // not understood: every 32-bit word that could be an offset pins the instruction there
};

struct AttrInfo {
  const char* name;
  AttrOffsets offsets;
};
// What rlgemm knows of attribute `id` (names follow the public EIATTR_* tables).
AttrInfo attribute_info(uint8_t id);

// One attribute record of .nv.info.<kernel>.
struct NvInfoAttr {
  AttrFormat format = AttrFormat::kNoValue;
  uint8_t id = 0;
  size_t payload_offset = 0;  // byte offset of the payload within the section (after the 4-byte header)
  uint16_t size = 0;          // payload bytes (kSizedValue) or the inline 16-bit value
  std::string name() const { return attribute_info(id).name; }
};

// A place in the file that holds the byte offset of an instruction of the kernel.
struct OffsetRef {
  enum class Kind { kAttribute, kRelocation } kind = Kind::kAttribute;
  uint8_t attr_id = 0;         // for attributes
  size_t file_offset = 0;      // where the 32-bit (attribute) or 64-bit (relocation r_offset) value lives
  uint64_t value = 0;          // the offset it holds now
};

// One kernel parameter as the cubin lays it out in the parameter constant bank (EIATTR_KPARAM_INFO).
struct KernelParam {
  int ordinal = 0;      // position in the kernel's signature
  uint32_t offset = 0;  // byte offset within the parameter block
  uint32_t size = 0;    // bytes
};

// A kernel's parameter block: every parameter in ordinal order and the block's size in bytes
// (EIATTR_CBANK_PARAM_SIZE or EIATTR_PARAM_CBANK; the end of the last parameter when neither is present).
struct KernelParams {
  std::vector<KernelParam> params;
  uint32_t block_bytes = 0;
  std::string to_string() const;  // "0: 8 bytes at 0, 1: 4 bytes at 8 (block 12 bytes)"
};

struct KernelText {
  std::string name;
  int text_section = -1;
  int info_section = -1;              // -1: the kernel has no .nv.info.<kernel>
  std::vector<int> reloc_sections;    // .rel.text.<kernel> / .rela.text.<kernel>
  size_t text_file_offset = 0;
  size_t text_size = 0;
  std::vector<InstructionWord> words;
  std::vector<NvInfoAttr> attributes;
  std::vector<OffsetRef> offset_refs;  // understood references: they follow their instruction
  // Instructions named by attributes rlgemm does not understand: never moved. (index, attribute name)
  std::vector<std::pair<size_t, std::string>> pinned;
};

// A kernel's registers and stack frame as the image records them in its .nv.info section (EIATTR_REGCOUNT,
// EIATTR_FRAME_SIZE, keyed by the kernel's symbol); -1 where the image does not say. The frame holds spilled
// registers and local arrays: the local memory a thread of the kernel uses.
struct ImageResources {
  int registers = -1;
  int frame_bytes = -1;
};

class Cubin {
 public:
  // Throws Error (kInvalidInput) naming the rule: an ELF64 little-endian CUDA image for SM 90.
  static Cubin parse(std::vector<uint8_t> bytes, std::string origin = "<memory>");
  static Cubin load(const std::string& path);
  // The same reading for an image of any SM (the SASS stage's moves need SM 90; resources() does not).
  static Cubin parse_any_sm(std::vector<uint8_t> bytes, std::string origin = "<memory>");

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  int sm_version() const { return sm_; }
  std::vector<std::string> kernel_names() const;
  // Throws Error naming the kernels present when `name` is not one of them.
  KernelText kernel(const std::string& name) const;
  // The parameter block of kernel `name`, read from its .nv.info.<name> attributes. Throws Error
  // (kInvalidInput) for an unknown kernel or attributes that do not describe a consistent block.
  KernelParams kernel_params(const std::string& name) const;

  // The cubin with kernel `name`'s instructions in `order` (order[new_slot] = old index, a permutation of
  // 0..n-1): words moved, attribute offsets and relocation offsets rewritten to follow their instruction.
  // Throws Error when `order` is not a permutation or moves a pinned instruction.
  std::vector<uint8_t> write(const KernelText& kernel, const std::vector<int>& order) const;

  // Registers and stack frame of kernel `name` (Error naming the kernels present when it is not one).
  ImageResources resources(const std::string& name) const;

  // Names of sections that map code addresses (line tables) and go stale when code moves.
  std::vector<std::string> address_map_sections() const;

 private:
  std::vector<uint8_t> bytes_;
  std::string origin_;
  int sm_ = 0;
  struct Section {
    std::string name;
    uint32_t type = 0;
    uint64_t offset = 0;
    uint64_t size = 0;
    uint32_t info = 0;
    uint32_t link = 0;
    uint64_t entsize = 0;
  };
  std::vector<Section> sections_;
  int find_section(const std::string& name) const;
  // The .text section of kernel `name`; Error naming the kernels present when there is none.
  int text_section(const std::string& name) const;
  // The attribute records of an .nv.info section, in order; Error where they do not fit the section (corrupt).
  std::vector<NvInfoAttr> records(int section) const;
  static Cubin parse_image(std::vector<uint8_t> bytes, std::string origin, bool hopper_only);
};

// Writes bytes to path atomically (temporary file + rename).
void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace rlgemm::sass
