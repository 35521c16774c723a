#include "sass/cubin.h"

#include <elf.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <unistd.h>

#include "rlgemm/error.h"

namespace rlgemm::sass {
namespace {

constexpr uint16_t kEmCuda = 190;  // EM_CUDA

template <typename T>
T read_at(const std::vector<uint8_t>& bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}
template <typename T>
void write_at(std::vector<uint8_t>& bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
}

}  // namespace

AttrInfo attribute_info(uint8_t id) {
  // Offsets-holding attributes are listed by how their payload is laid out; attributes known to hold no
  // offsets are kNone; anything else is kUnknown and pins every instruction its words could name.
  switch (id) {
    case 0x04: return {"EIATTR_CTAIDZ_USED", AttrOffsets::kNone};
    case 0x05: return {"EIATTR_MAX_THREADS", AttrOffsets::kNone};
    case 0x0a: return {"EIATTR_PARAM_CBANK", AttrOffsets::kNone};
    case 0x0d: return {"EIATTR_SYNC_STACK", AttrOffsets::kNone};
    case 0x0f: return {"EIATTR_EXTERNS", AttrOffsets::kNone};
    case 0x10: return {"EIATTR_REQNTID", AttrOffsets::kNone};
    case 0x11: return {"EIATTR_FRAME_SIZE", AttrOffsets::kNone};
    case 0x12: return {"EIATTR_MIN_STACK_SIZE", AttrOffsets::kNone};
    case 0x17: return {"EIATTR_KPARAM_INFO", AttrOffsets::kNone};
    case 0x19: return {"EIATTR_CBANK_PARAM_SIZE", AttrOffsets::kNone};
    case 0x1b: return {"EIATTR_MAXREG_COUNT", AttrOffsets::kNone};
    case 0x1c: return {"EIATTR_EXIT_INSTR_OFFSETS", AttrOffsets::kWordList};
    case 0x1d: return {"EIATTR_S2RCTAID_INSTR_OFFSETS", AttrOffsets::kWordList};
    case 0x1e: return {"EIATTR_CRS_STACK_SIZE", AttrOffsets::kNone};
    case 0x23: return {"EIATTR_MAX_STACK_SIZE", AttrOffsets::kNone};
    case 0x25: return {"EIATTR_LD_CACHEMOD_INSTR_OFFSETS", AttrOffsets::kWordList};
    case 0x27: return {"EIATTR_ATOM_SYS_INSTR_OFFSETS", AttrOffsets::kWordList};
    case 0x28: return {"EIATTR_COOP_GROUP_INSTR_OFFSETS", AttrOffsets::kWordList};
    case 0x2b: return {"EIATTR_WMMA_USED", AttrOffsets::kNone};
    case 0x2d: return {"EIATTR_ATOMF16_EMUL_INSTR_OFFSETS", AttrOffsets::kWordList};
    case 0x2f: return {"EIATTR_REGCOUNT", AttrOffsets::kNone};
    case 0x31: return {"EIATTR_INT_WARP_WIDE_INSTR_OFFSETS", AttrOffsets::kWordList};
    case 0x32: return {"EIATTR_SHARED_SCRATCH", AttrOffsets::kNone};
    // Branch-target tables are not decoded: every instruction they could name stays where it is.
    case 0x34: return {"EIATTR_INDIRECT_BRANCH_TARGETS", AttrOffsets::kUnknown};
    // A flags word (seen as 8 on sm_90a kernels): not an offset.
    case 0x36: return {"EIATTR_SW_WAR", AttrOffsets::kNone};
    case 0x37: return {"EIATTR_CUDA_API_VERSION", AttrOffsets::kNone};
    case 0x38: return {"EIATTR_NUM_MBARRIERS", AttrOffsets::kNone};
    // On sm_90a (CUDA 13) each entry is 16 bytes: instruction offset, barrier register (0xff: none),
    // immediate barrier offset, kind. Only the first word is a code offset.
    case 0x39: return {"EIATTR_MBARRIER_INSTR_OFFSETS", AttrOffsets::kMbarrier16};
    case 0x3a: return {"EIATTR_COROUTINE_RESUME_OFFSETS", AttrOffsets::kWordList};
    case 0x3d: return {"EIATTR_CTA_PER_CLUSTER", AttrOffsets::kNone};
    case 0x3e: return {"EIATTR_EXPLICIT_CLUSTER", AttrOffsets::kNone};
    case 0x3f: return {"EIATTR_MAX_CLUSTER_RANK", AttrOffsets::kNone};
    case 0x41: return {"EIATTR_RESERVED_SMEM_USED", AttrOffsets::kNone};
    case 0x42: return {"EIATTR_RESERVED_SMEM_0_SIZE", AttrOffsets::kNone};
    case 0x45: return {"EIATTR_KPARAM_INFO_V2", AttrOffsets::kNone};
    case 0x46: return {"EIATTR_SYSCALL_OFFSETS", AttrOffsets::kWordList};
    case 0x47: return {"EIATTR_SW_WAR_MEMBAR_SYS_INSTR_OFFSETS", AttrOffsets::kWordList};
    case 0x4c: return {"EIATTR_NUM_BARRIERS", AttrOffsets::kNone};
    case 0x57: return {"EIATTR_STACK_CANARY_TRAP_OFFSETS", AttrOffsets::kWordList};
    case 0x59: return {"EIATTR_LOCAL_CTA_ASYNC_STORE_OFFSETS", AttrOffsets::kWordList};
    case 0x5b: return {"EIATTR_BLOCKS_ARE_CLUSTERS", AttrOffsets::kNone};
    default: return {"EIATTR_UNKNOWN", AttrOffsets::kUnknown};
  }
}

Cubin Cubin::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read cubin '" + path + "': the file does not exist or is not readable");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse(std::move(bytes), path);
}

Cubin Cubin::parse(std::vector<uint8_t> bytes, std::string origin) {
  return parse_image(std::move(bytes), std::move(origin), true);
}

Cubin Cubin::parse_any_sm(std::vector<uint8_t> bytes, std::string origin) {
  return parse_image(std::move(bytes), std::move(origin), false);
}

Cubin Cubin::parse_image(std::vector<uint8_t> bytes, std::string origin, bool hopper_only) {
  Cubin cubin;
  cubin.origin_ = origin;
  auto bad = [&](const std::string& why) -> void { fail("'" + origin + "' is not a usable cubin: " + why); };
  if (bytes.size() < sizeof(Elf64_Ehdr)) bad("shorter than an ELF64 header");
  const auto eh = read_at<Elf64_Ehdr>(bytes, 0);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) bad("no ELF magic number");
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) bad("not a 64-bit ELF (cubins are ELF64)");
  if (eh.e_ident[EI_DATA] != ELFDATA2LSB) bad("not little-endian");
  if (eh.e_machine != kEmCuda) bad("e_machine is " + std::to_string(eh.e_machine) + ", not EM_CUDA (190)");
  // ELF ABI version 8 (CUDA 12.8+) keeps the SM number in bits 8-15 of e_flags; older images in bits 0-7.
  const int abi = eh.e_ident[EI_ABIVERSION];
  cubin.sm_ = abi >= 8 ? int((eh.e_flags >> 8) & 0xff) : int(eh.e_flags & 0xff);
  if (hopper_only && cubin.sm_ != 90)
    bad("compiled for sm_" + std::to_string(cubin.sm_) + "; the SASS stage reads Hopper (sm_90/sm_90a) code only");
  if (eh.e_shnum == 0 || eh.e_shoff == 0) bad("no section headers (a stripped image)");
  if (eh.e_shentsize != sizeof(Elf64_Shdr)) bad("unexpected section header size");
  if (eh.e_shoff > bytes.size() || uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr) > bytes.size() - eh.e_shoff)
    bad("section headers lie outside the file (truncated?)");
  if (eh.e_shstrndx >= eh.e_shnum) bad("bad section-name table index");
  std::vector<Elf64_Shdr> headers(eh.e_shnum);
  for (size_t i = 0; i < headers.size(); ++i) headers[i] = read_at<Elf64_Shdr>(bytes, eh.e_shoff + i * sizeof(Elf64_Shdr));
  for (size_t i = 0; i < headers.size(); ++i) {
    const auto& h = headers[i];
    if (h.sh_type != SHT_NOBITS && (h.sh_offset > bytes.size() || h.sh_size > bytes.size() - h.sh_offset))
      bad("section " + std::to_string(i) + " lies outside the file (truncated?)");
  }
  const auto& names = headers[eh.e_shstrndx];
  for (const auto& h : headers) {
    Section s;
    if (h.sh_name >= names.sh_size) bad("section name outside the name table");
    const char* begin = reinterpret_cast<const char*>(bytes.data() + names.sh_offset + h.sh_name);
    s.name.assign(begin, strnlen(begin, names.sh_size - h.sh_name));
    s.type = h.sh_type;
    s.offset = h.sh_offset;
    s.size = h.sh_size;
    s.info = h.sh_info;
    s.link = h.sh_link;
    s.entsize = h.sh_entsize;
    cubin.sections_.push_back(std::move(s));
  }
  cubin.bytes_ = std::move(bytes);
  if (cubin.kernel_names().empty()) bad("no .text.<kernel> section (a stripped or empty image)");
  return cubin;
}

ImageResources Cubin::resources(const std::string& name) const {
  // The .text section's sh_info is its kernel's symbol; the module-wide .nv.info keys per-function attributes by
  // symbol: {u32 symbol, u32 value}.
  const uint32_t symbol = sections_[size_t(text_section(name))].info & 0xffffffu;
  ImageResources out;
  const int info = find_section(".nv.info");
  if (info < 0) return out;
  for (const NvInfoAttr& a : records(info)) {
    if (a.format != AttrFormat::kSizedValue || a.size != 8) continue;
    const size_t payload = sections_[size_t(info)].offset + a.payload_offset;
    if (read_at<uint32_t>(bytes_, payload) != symbol) continue;
    const int value = int(read_at<uint32_t>(bytes_, payload + 4));
    if (a.id == 0x2f) out.registers = value;    // EIATTR_REGCOUNT
    if (a.id == 0x11) out.frame_bytes = value;  // EIATTR_FRAME_SIZE
  }
  return out;
}

int Cubin::find_section(const std::string& name) const {
  for (size_t i = 0; i < sections_.size(); ++i)
    if (sections_[i].name == name) return int(i);
  return -1;
}

std::vector<std::string> Cubin::kernel_names() const {
  std::vector<std::string> names;
  for (const auto& s : sections_)
    if (s.type == SHT_PROGBITS && s.name.rfind(".text.", 0) == 0) names.push_back(s.name.substr(6));
  return names;
}

std::vector<std::string> Cubin::address_map_sections() const {
  std::vector<std::string> out;
  for (const auto& s : sections_)
    if (s.name.find("debug_line") != std::string::npos || s.name.find("nv_debug") != std::string::npos)
      out.push_back(s.name);
  return out;
}

int Cubin::text_section(const std::string& name) const {
  const int section = find_section(".text." + name);
  if (section < 0) {
    std::string present;
    for (const auto& n : kernel_names()) present += (present.empty() ? "" : ", ") + n;
    fail("kernel '" + name + "' is not in '" + origin_ + "' (kernels present: " + present + ")");
  }
  return section;
}

std::vector<NvInfoAttr> Cubin::records(int section) const {
  const auto& info = sections_[size_t(section)];
  auto corrupt = [&](const std::string& why) { fail("'" + origin_ + "': " + info.name + " is corrupt: " + why); };
  std::vector<NvInfoAttr> out;
  size_t pos = 0;
  while (pos < info.size) {
    if (info.size - pos < 4) corrupt("a record header is cut short");
    const size_t at = info.offset + pos;
    NvInfoAttr a;
    const uint8_t format = bytes_[at];
    if (format < 1 || format > 4) corrupt("unknown record format " + std::to_string(format));
    a.format = AttrFormat(format);
    a.id = bytes_[at + 1];
    a.size = read_at<uint16_t>(bytes_, at + 2);
    a.payload_offset = pos + 4;
    pos += 4;
    if (a.format == AttrFormat::kSizedValue) {
      if (a.size > info.size - pos) corrupt(a.name() + " runs past the section end");
      pos += a.size;
    }
    out.push_back(a);
  }
  return out;
}

KernelText Cubin::kernel(const std::string& name) const {
  KernelText k;
  k.name = name;
  k.text_section = text_section(name);
  const auto& text = sections_[k.text_section];
  if (text.size % kInstructionBytes != 0)
    fail("'" + origin_ + "': .text." + name + " is not a whole number of 128-bit instructions (corrupt)");
  k.text_file_offset = text.offset;
  k.text_size = text.size;
  for (size_t off = 0; off < text.size; off += kInstructionBytes)
    k.words.push_back({read_at<uint64_t>(bytes_, text.offset + off), read_at<uint64_t>(bytes_, text.offset + off + 8)});

  auto corrupt = [&](const std::string& why) { fail("'" + origin_ + "': .nv.info." + name + " is corrupt: " + why); };
  auto is_code_offset = [&](uint64_t v) { return v % kInstructionBytes == 0 && v < k.text_size; };
  k.info_section = find_section(".nv.info." + name);
  if (k.info_section >= 0) {
    const auto& info = sections_[k.info_section];
    k.attributes = records(k.info_section);
    for (const NvInfoAttr& a : k.attributes) {
      if (a.format != AttrFormat::kSizedValue) continue;  // 16-bit inline values hold no offset lists
      const AttrInfo meta = attribute_info(a.id);
      const size_t payload = info.offset + a.payload_offset;
      auto add_ref = [&](size_t file_offset) {
        const uint32_t v = read_at<uint32_t>(bytes_, file_offset);
        if (!is_code_offset(v))
          corrupt(std::string(meta.name) + " names offset " + std::to_string(v) + ", not an instruction of the kernel");
        k.offset_refs.push_back({OffsetRef::Kind::kAttribute, a.id, file_offset, v});
      };
      AttrOffsets kind = meta.offsets;
      if (kind == AttrOffsets::kMbarrier16 && a.size % 16 != 0) kind = AttrOffsets::kUnknown;
      if (kind == AttrOffsets::kWordList && a.size % 4 != 0) corrupt(std::string(meta.name) + " size is not whole words");
      if (kind == AttrOffsets::kWordList) {
        for (size_t w = 0; w < a.size; w += 4) add_ref(payload + w);
      } else if (kind == AttrOffsets::kMbarrier16) {
        for (size_t w = 0; w < a.size; w += 16) add_ref(payload + w);
      } else if (kind == AttrOffsets::kUnknown) {
        std::string label = std::string(meta.name) + " (0x" + [&] {
          char buf[8];
          std::snprintf(buf, sizeof buf, "%02x", a.id);
          return std::string(buf);
        }() + ")";
        for (size_t w = 0; w + 4 <= a.size; w += 4) {
          const uint32_t v = read_at<uint32_t>(bytes_, payload + w);
          if (is_code_offset(v)) k.pinned.emplace_back(v / kInstructionBytes, label);
        }
      }
    }
  }
  for (size_t i = 0; i < sections_.size(); ++i) {
    const auto& s = sections_[i];
    if ((s.type != SHT_REL && s.type != SHT_RELA) || int(s.info) != k.text_section) continue;
    const size_t entry = s.type == SHT_RELA ? sizeof(Elf64_Rela) : sizeof(Elf64_Rel);
    if (s.size % entry != 0) fail("'" + origin_ + "': " + s.name + " is not a whole number of entries (corrupt)");
    k.reloc_sections.push_back(int(i));
    for (size_t off = 0; off < s.size; off += entry) {
      const uint64_t r_offset = read_at<uint64_t>(bytes_, s.offset + off);
      if (r_offset >= k.text_size) fail("'" + origin_ + "': " + s.name + " relocates an offset outside the code");
      k.offset_refs.push_back({OffsetRef::Kind::kRelocation, 0, size_t(s.offset + off), r_offset});
    }
  }
  std::sort(k.pinned.begin(), k.pinned.end());
  k.pinned.erase(std::unique(k.pinned.begin(), k.pinned.end(),
                             [](auto& x, auto& y) { return x.first == y.first; }),
                 k.pinned.end());
  return k;
}

std::string KernelParams::to_string() const {
  std::string text;
  for (const auto& p : params)
    text += (text.empty() ? "" : ", ") + std::to_string(p.ordinal) + ": " + std::to_string(p.size) + " bytes at " +
            std::to_string(p.offset);
  return (text.empty() ? std::string("no parameters") : text) + " (block " + std::to_string(block_bytes) + " bytes)";
}

KernelParams Cubin::kernel_params(const std::string& name) const {
  const KernelText k = kernel(name);  // throws naming the kernels present
  KernelParams out;
  auto corrupt = [&](const std::string& why) {
    fail("'" + origin_ + "': the parameter attributes of kernel '" + name + "' are inconsistent: " + why);
  };
  bool v2_only = false;
  std::optional<uint32_t> block_bytes;
  if (k.info_section >= 0) {
    const size_t base = sections_[k.info_section].offset;
    for (const auto& a : k.attributes) {
      const size_t at = base + a.payload_offset;
      if (a.id == 0x17 && a.format == AttrFormat::kSizedValue) {  // EIATTR_KPARAM_INFO
        // {u32 index, u16 ordinal, u16 offset, u32 flags}; flags bits 18-31 hold the size in bytes (bits 12-16
        // the constant bank, 0-7 the pointee's log2 alignment).
        if (a.size != 12) corrupt("an EIATTR_KPARAM_INFO record of " + std::to_string(a.size) + " bytes, not 12");
        KernelParam p;
        p.ordinal = read_at<uint16_t>(bytes_, at + 4);
        p.offset = read_at<uint16_t>(bytes_, at + 6);
        p.size = read_at<uint32_t>(bytes_, at + 8) >> 18;
        out.params.push_back(p);
      } else if (a.id == 0x45) {  // EIATTR_KPARAM_INFO_V2
        v2_only = true;
      } else if (a.id == 0x19 && a.format == AttrFormat::kHalfValue) {  // EIATTR_CBANK_PARAM_SIZE
        block_bytes = a.size;
      } else if (a.id == 0x0a && a.format == AttrFormat::kSizedValue && a.size == 8 && !block_bytes) {
        block_bytes = read_at<uint16_t>(bytes_, at + 6);  // EIATTR_PARAM_CBANK {u32 symbol, u16 offset, u16 size}
      }
    }
  }
  if (v2_only && out.params.empty())
    fail("'" + origin_ + "': kernel '" + name + "' describes its parameters with EIATTR_KPARAM_INFO_V2 only, which "
         "rlgemm does not read");
  std::sort(out.params.begin(), out.params.end(), [](auto& a, auto& b) { return a.ordinal < b.ordinal; });
  uint32_t end = 0;
  for (size_t i = 0; i < out.params.size(); ++i) {
    const auto& p = out.params[i];
    if (p.ordinal != int(i)) corrupt("parameter ordinals are not 0.." + std::to_string(out.params.size() - 1));
    if (p.size == 0) corrupt("parameter " + std::to_string(i) + " has size 0");
    if (i > 0 && p.offset < out.params[i - 1].offset + out.params[i - 1].size)
      corrupt("parameter " + std::to_string(i) + " overlaps the one before it");
    end = std::max(end, p.offset + p.size);
  }
  out.block_bytes = block_bytes.value_or(end);
  if (end > out.block_bytes)
    corrupt("the parameters end at byte " + std::to_string(end) + ", past the " + std::to_string(out.block_bytes) +
            "-byte block");
  return out;
}

std::vector<uint8_t> Cubin::write(const KernelText& kernel, const std::vector<int>& order) const {
  const size_t n = kernel.words.size();
  if (order.size() != n) fail("schedule has " + std::to_string(order.size()) + " slots, the kernel " + std::to_string(n));
  std::vector<int> new_slot(n, -1);
  for (size_t slot = 0; slot < n; ++slot) {
    const int old = order[slot];
    if (old < 0 || size_t(old) >= n || new_slot[old] != -1) fail("schedule is not a permutation of the kernel's instructions");
    new_slot[old] = int(slot);
  }
  for (const auto& [index, why] : kernel.pinned)
    if (new_slot[index] != int(index))
      fail("instruction " + std::to_string(index) + " is pinned by " + why + " and cannot move");
  std::vector<uint8_t> out = bytes_;
  for (size_t slot = 0; slot < n; ++slot) {
    const auto& w = kernel.words[order[slot]];
    write_at(out, kernel.text_file_offset + slot * kInstructionBytes, w.lo);
    write_at(out, kernel.text_file_offset + slot * kInstructionBytes + 8, w.hi);
  }
  for (const auto& ref : kernel.offset_refs) {
    const uint64_t moved = uint64_t(new_slot[ref.value / kInstructionBytes]) * kInstructionBytes + ref.value % kInstructionBytes;
    if (ref.kind == OffsetRef::Kind::kAttribute)
      write_at(out, ref.file_offset, uint32_t(moved));
    else
      write_at(out, ref.file_offset, moved);
  }
  return out;
}

void write_file_atomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write '" + tmp + "'");
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!out) throw Error(ErrorKind::kRuntime, "cannot write '" + tmp + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error(ErrorKind::kRuntime, "cannot move the result into '" + path + "'");
  }
}

}  // namespace rlgemm::sass
