// The design value's one text form (printed and parsed here alone) and its feasibility rules.
#include "rlgemm/design.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <vector>

#include "design/sm90_shape.h"
#include "kernels/sm90/params.h"
#include "rlgemm/error.h"

namespace rlgemm {

namespace {

std::string split_text(const Design& d) {
  switch (d.split) {
    case SplitK::kNone: return "splitk1";
    case SplitK::kSerial: return "splitk" + std::to_string(d.splits) + ".serial";
    case SplitK::kParallel: return "splitk" + std::to_string(d.splits) + ".parallel";
    case SplitK::kStreamK: return "streamk";
  }
  return "?";
}

std::string tile_text(const Design& d) {
  return std::to_string(d.bm) + "x" + std::to_string(d.bn) + "x" + std::to_string(d.bk);
}

std::string raster_text(const Design& d) {
  return std::string(d.raster == Raster::kAlongM ? "raster_m" : "raster_n") + ".g" + std::to_string(d.group);
}

std::string epilogue_text(Epilogue e) {
  switch (e) {
    case Epilogue::kRegisters: return "epi_reg";
    case Epilogue::kTma: return "epi_tma";
    case Epilogue::kSmem: return "epi_smem";
  }
  return "?";
}

char evict_letter(EvictHint h) { return h == EvictHint::kFirst ? 'f' : h == EvictHint::kLast ? 'l' : 'n'; }

std::string suffix_text(const Design& d) {
  std::string s;
  if (d.swap_ab) s += "/swap";
  if (d.static_shape) s += "/static";
  if (d.l2_promotion != 256) s += "/l2p" + std::to_string(d.l2_promotion);
  if (d.evict_a != EvictHint::kNormal || d.evict_b != EvictHint::kNormal)
    s += std::string("/evict") + evict_letter(d.evict_a) + evict_letter(d.evict_b);
  if (d.bulk_tail) s += "/bulktail";
  if (d.pdl) s += "/pdl";
  if (d.dtype != DType::kF16) s += "/" + std::string(to_string(d.dtype));
  return s;
}

// ---- parsing helpers: every failure names the field and what it accepts ----

[[noreturn]] void bad_field(std::string_view text, const std::string& field, const std::string& why) {
  fail("design '" + std::string(text) + "': " + field + ": " + why);
}

// A canonical decimal number: digits only, no sign, no leading zero (so the text form stays canonical).
int parse_number(std::string_view token, std::string_view text, const std::string& field) {
  int value = 0;
  auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  const bool digits_only = std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (token.empty() || !digits_only || ec != std::errc() || ptr != token.data() + token.size() ||
      (token.size() > 1 && token[0] == '0'))
    bad_field(text, field, "'" + std::string(token) + "' is not a plain decimal number");
  return value;
}

bool consume(std::string_view& token, std::string_view prefix) {
  if (token.substr(0, prefix.size()) != prefix) return false;
  token.remove_prefix(prefix.size());
  return true;
}

std::vector<std::string_view> split_on(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

// "AxB" or "AxBxC" -> numbers.
std::vector<int> parse_dims(std::string_view token, size_t count, std::string_view text, const std::string& field,
                            const std::string& form) {
  auto parts = split_on(token, 'x');
  if (parts.size() != count) bad_field(text, field, "'" + std::string(token) + "' is not of the form " + form);
  std::vector<int> out;
  for (auto p : parts) out.push_back(parse_number(p, text, field));
  return out;
}

void parse_tile(std::string_view token, std::string_view text, Design& d) {
  auto v = parse_dims(token, 3, text, "block tile", "BMxBNxBK (e.g. 128x128x64)");
  d.bm = v[0], d.bn = v[1], d.bk = v[2];
}

void parse_stages(std::string_view token, std::string_view text, Design& d) {
  if (!consume(token, "s")) bad_field(text, "stages", "expected sS (e.g. s4), got '" + std::string(token) + "'");
  d.stages = parse_number(token, text, "stages");
}

void parse_raster(std::string_view token, std::string_view text, Design& d) {
  const std::string form = "expected raster_m.gG or raster_n.gG (e.g. raster_m.g8), got '" + std::string(token) + "'";
  if (consume(token, "raster_m.g"))
    d.raster = Raster::kAlongM;
  else if (consume(token, "raster_n.g"))
    d.raster = Raster::kAlongN;
  else
    bad_field(text, "raster", form);
  d.group = parse_number(token, text, "raster group");
}

void parse_split(std::string_view token, std::string_view text, Design& d) {
  const std::string whole(token);
  if (token == "splitk1") {
    d.split = SplitK::kNone, d.splits = 1;
    return;
  }
  if (token == "streamk") {
    d.split = SplitK::kStreamK, d.splits = 1;
    return;
  }
  const std::string form = "expected splitk1, splitkN.serial, splitkN.parallel or streamk, got '" + whole + "'";
  if (!consume(token, "splitk")) bad_field(text, "split", form);
  auto dot = token.find('.');
  if (dot == std::string_view::npos) bad_field(text, "split", form);
  auto kind = token.substr(dot + 1);
  if (kind == "serial")
    d.split = SplitK::kSerial;
  else if (kind == "parallel")
    d.split = SplitK::kParallel;
  else
    bad_field(text, "split", form);
  d.splits = parse_number(token.substr(0, dot), text, "split count");
}

void parse_epilogue(std::string_view token, std::string_view text, Design& d, bool sm90) {
  if (token == "epi_reg")
    d.epilogue = Epilogue::kRegisters;
  else if (sm90 && token == "epi_tma")
    d.epilogue = Epilogue::kTma;
  else if (!sm90 && token == "epi_smem")
    d.epilogue = Epilogue::kSmem;
  else
    bad_field(text, "epilogue",
              std::string("expected ") + (sm90 ? "epi_reg or epi_tma" : "epi_reg or epi_smem") + ", got '" +
                  std::string(token) + "'");
}

// Optional trailing flags, in canonical order: swap, static, l2pP, evictAB, bulktail, pdl, then the element type
// (bf16; fp16 is the default and never written, so that every design has one text).
void parse_flags(const std::vector<std::string_view>& parts, size_t first, std::string_view text, Design& d) {
  size_t i = first;
  if (i < parts.size() && parts[i] == "swap") d.swap_ab = true, ++i;
  if (i < parts.size() && parts[i] == "static") d.static_shape = true, ++i;
  if (i < parts.size() && parts[i].substr(0, 3) == "l2p") {
    const std::string_view value = parts[i].substr(3);
    if (value == "0") d.l2_promotion = 0;
    else if (value == "64") d.l2_promotion = 64;
    else if (value == "128") d.l2_promotion = 128;
    else
      bad_field(text, "L2 promotion",
                "expected l2p0, l2p64 or l2p128 (256 bytes is the default and is not written), got '" +
                    std::string(parts[i]) + "'");
    ++i;
  }
  if (i < parts.size() && parts[i].substr(0, 5) == "evict") {
    const std::string_view value = parts[i].substr(5);
    auto hint = [](char c) -> std::optional<EvictHint> {
      for (EvictHint h : {EvictHint::kNormal, EvictHint::kFirst, EvictHint::kLast})
        if (evict_letter(h) == c) return h;
      return std::nullopt;
    };
    const auto a = value.size() == 2 ? hint(value[0]) : std::nullopt;
    const auto b = value.size() == 2 ? hint(value[1]) : std::nullopt;
    if (!a || !b || (*a == EvictHint::kNormal && *b == EvictHint::kNormal))
      bad_field(text, "L2 eviction hints",
                "expected evictAB, A and B each n (normal), f (evict_first) or l (evict_last), not both n (the "
                "default, not written), got '" + std::string(parts[i]) + "'");
    d.evict_a = *a;
    d.evict_b = *b;
    ++i;
  }
  if (i < parts.size() && parts[i] == "bulktail") d.bulk_tail = true, ++i;
  if (i < parts.size() && parts[i] == "pdl") d.pdl = true, ++i;
  if (i < parts.size() && parts[i] == "bf16") d.dtype = DType::kBF16, ++i;
  if (i < parts.size() && parts[i] == "fp16")
    bad_field(text, "element type", "fp16 is the default and is not written (the canonical text ends before it)");
  if (i < parts.size())
    bad_field(text, "flags",
              "unexpected '" + std::string(parts[i]) +
                  "' (only /swap, then /static, then /l2pP, then /evictAB, then /bulktail, then /pdl, then the element "
                  "type /bf16 may follow the epilogue)");
}

Design parse_sm90(const std::vector<std::string_view>& parts, std::string_view text) {
  Design d;
  d.family = Family::kSm90;
  if (parts.size() < 7)
    bad_field(text, "design", "an sm90 design has at least 7 fields: sm90.ws.{coop|coopn|pingpong}/BMxBNxBK/sS/cCMxCN/"
                              "raster_{m|n}.gG/SPLIT/epi_{reg|tma}");
  std::string_view head = parts[0];
  if (head == "sm90.ws.coop")
    d.schedule = Sm90Schedule::kCooperative;
  else if (head == "sm90.ws.pingpong")
    d.schedule = Sm90Schedule::kPingpong;
  else if (head == "sm90.ws.coopn")
    d.schedule = Sm90Schedule::kCooperativeColumns;
  else
    bad_field(text, "schedule",
              "expected sm90.ws.coop, sm90.ws.coopn or sm90.ws.pingpong, got '" + std::string(head) + "'");
  parse_tile(parts[1], text, d);
  parse_stages(parts[2], text, d);
  std::string_view cluster = parts[3];
  if (!consume(cluster, "c")) bad_field(text, "cluster", "expected cCMxCN (e.g. c2x1), got '" + std::string(parts[3]) + "'");
  auto c = parse_dims(cluster, 2, text, "cluster", "cCMxCN (e.g. c2x1)");
  d.cluster_m = c[0], d.cluster_n = c[1];
  parse_raster(parts[4], text, d);
  parse_split(parts[5], text, d);
  parse_epilogue(parts[6], text, d, /*sm90=*/true);
  parse_flags(parts, 7, text, d);
  return d;
}

Design parse_sm80(const std::vector<std::string_view>& parts, std::string_view text) {
  Design d;
  d.family = Family::kSm80;
  d.bm = 128, d.bn = 128, d.bk = 32, d.stages = 3;
  if (parts.size() < 8)
    bad_field(text, "design", "an sm80 design has at least 8 fields: sm80/BMxBNxBK/wWMxWN/sS/{swz|pad}/"
                              "raster_{m|n}.gG/SPLIT/epi_{reg|smem}");
  parse_tile(parts[1], text, d);
  std::string_view warp = parts[2];
  if (!consume(warp, "w")) bad_field(text, "warp tile", "expected wWMxWN (e.g. w64x64), got '" + std::string(parts[2]) + "'");
  auto w = parse_dims(warp, 2, text, "warp tile", "wWMxWN (e.g. w64x64)");
  d.warp_m = w[0], d.warp_n = w[1];
  parse_stages(parts[3], text, d);
  if (parts[4] == "swz")
    d.smem = SmemLayout::kSwizzle;
  else if (parts[4] == "pad")
    d.smem = SmemLayout::kPad;
  else
    bad_field(text, "shared-memory layout", "expected swz or pad, got '" + std::string(parts[4]) + "'");
  parse_raster(parts[5], text, d);
  parse_split(parts[6], text, d);
  parse_epilogue(parts[7], text, d, /*sm90=*/false);
  parse_flags(parts, 8, text, d);
  return d;
}

bool is_multiple(int value, int of) { return of > 0 && value % of == 0; }

}  // namespace

std::string to_string(const Design& d) {
  switch (d.family) {
    case Family::kTest:
      return d.test == TestBehavior::kFault ? "test.fault" : d.test == TestBehavior::kHang ? "test.hang" : "test.wrong";
    case Family::kSm90:
      return std::string(d.schedule == Sm90Schedule::kCooperative          ? "sm90.ws.coop"
                         : d.schedule == Sm90Schedule::kCooperativeColumns ? "sm90.ws.coopn"
                                                                           : "sm90.ws.pingpong") +
             "/" +
             tile_text(d) + "/s" + std::to_string(d.stages) + "/c" + std::to_string(d.cluster_m) + "x" +
             std::to_string(d.cluster_n) + "/" + raster_text(d) + "/" + split_text(d) + "/" +
             epilogue_text(d.epilogue) + suffix_text(d);
    case Family::kSm80:
      return "sm80/" + tile_text(d) + "/w" + std::to_string(d.warp_m) + "x" + std::to_string(d.warp_n) + "/s" +
             std::to_string(d.stages) + "/" + (d.smem == SmemLayout::kSwizzle ? "swz" : "pad") + "/" +
             raster_text(d) + "/" + split_text(d) + "/" + epilogue_text(d.epilogue) + suffix_text(d);
  }
  return "?";
}

Design parse_design(std::string_view text) {
  auto parts = split_on(text, '/');
  std::string_view head = parts[0];
  if (parts.size() == 1 && consume(head, "test.")) {
    Design d;
    d.family = Family::kTest;
    if (head == "fault")
      d.test = TestBehavior::kFault;
    else if (head == "hang")
      d.test = TestBehavior::kHang;
    else if (head == "wrong")
      d.test = TestBehavior::kWrong;
    else
      bad_field(text, "test behaviour", "expected test.fault, test.hang or test.wrong");
    return d;
  }
  if (parts[0] == "sm80") return parse_sm80(parts, text);
  if (parts[0].substr(0, 5) == "sm90.") return parse_sm90(parts, text);
  bad_field(text, "family",
            "the first field must be sm80, sm90.ws.coop, sm90.ws.coopn, sm90.ws.pingpong or test.{fault|hang|wrong}, "
            "got '" +
                std::string(parts[0]) + "'");
}

// ---- feasibility ----

namespace {

std::optional<std::string> common_rules(const Design& d) {
  // Up to 16: small tiles streaming a long K keep more bytes in flight with more stages (cuBLAS's kernels for
  // K-heavy small shapes on Hopper are named with 16 stages of a 64-wide k-block, `..._64x16_...`); shared memory
  // bounds the rest (why_invalid).
  if (d.stages < 2 || d.stages > 16)
    return "stages must be 2..16 (got " + std::to_string(d.stages) + "): one stage cannot overlap loads with math";
  if (d.bk != 32 && d.bk != 64 && d.bk != 128)
    return "BK must be 32, 64 or 128 (got " + std::to_string(d.bk) + ")";
  if (d.group < 1 || d.group > 64) return "raster group must be 1..64 (got " + std::to_string(d.group) + ")";
  switch (d.split) {
    case SplitK::kNone:
    case SplitK::kStreamK:
      if (d.splits != 1) return "splits must be 1 unless the split is serial or parallel";
      break;
    case SplitK::kSerial:
    case SplitK::kParallel:
      if (d.splits < 2 || d.splits > 64)
        return "a serial or parallel split-K needs 2..64 splits (got " + std::to_string(d.splits) + ")";
      break;
  }
  return std::nullopt;
}

std::string kib(long bytes) { return std::to_string(bytes) + " bytes (" + std::to_string(bytes / 1024) + " KiB)"; }

std::optional<std::string> sm80_rules(const Design& d, Layout layout, int smem_limit) {
  if (d.cluster_m != 1 || d.cluster_n != 1) return "clusters are an sm90 feature; sm80 designs use 1x1";
  if (d.l2_promotion != 256)
    return "/l2pP sets the L2 promotion of TMA tensor maps, an sm90 feature: sm80 designs load with cp.async";
  if (d.split == SplitK::kStreamK) return "stream-K needs the persistent sm90 tile scheduler; sm80 offers serial and parallel split-K";
  if (d.epilogue == Epilogue::kTma) return "epi_tma is an sm90 epilogue; sm80 offers epi_reg and epi_smem";
  if (d.bulk_tail) return "/bulktail is a part of the sm90 TMA-store epilogue (epi_tma); sm80 designs have none";
  if (d.evict_a != EvictHint::kNormal || d.evict_b != EvictHint::kNormal)
    return "/evictAB hints the L2 eviction of TMA loads, an sm90 feature: sm80 designs load with cp.async";
  // Powers of two: tile rows split evenly into 16-byte chunks per thread and swizzle phases.
  for (auto [name, v] : {std::pair{"BM", d.bm}, std::pair{"BN", d.bn}})
    if (v != 16 && v != 32 && v != 64 && v != 128 && v != 256)
      return std::string(name) + " must be 16, 32, 64, 128 or 256 for sm80 (got " + std::to_string(v) + ")";
  if (!is_multiple(d.warp_m, 16))
    return "warp tile M must be a multiple of 16, the mma.sync m16n8k16 row count (got " + std::to_string(d.warp_m) + ")";
  if (!is_multiple(d.warp_n, 16))
    return "warp tile N must be a multiple of 16 (two n8 mma.sync tiles per ldmatrix.x4; got " +
           std::to_string(d.warp_n) + ")";
  if (d.bm % d.warp_m != 0 || d.bn % d.warp_n != 0)
    return "warp tile " + std::to_string(d.warp_m) + "x" + std::to_string(d.warp_n) + " does not divide block tile " +
           std::to_string(d.bm) + "x" + std::to_string(d.bn);
  const int warps = (d.bm / d.warp_m) * (d.bn / d.warp_n);
  if (warps > 16) return "block tile needs " + std::to_string(warps) + " warps; at most 16 (512 threads)";
  const int threads = warps * 32;
  const int accumulators = d.warp_m * d.warp_n / 32;
  if (accumulators > 128)
    return "accumulator registers per thread would spill: warp tile " + std::to_string(d.warp_m) + "x" +
           std::to_string(d.warp_n) + " needs " + std::to_string(accumulators) + " fp32 per thread (at most 128)";
  // Accumulators + double-buffered A and B fragments + addressing: a conservative estimate of the
  // registers one thread keeps live in the main loop.
  const int fragments = 2 * ((d.warp_m / 16) * 4 + (d.warp_n / 8) * 2);
  const int estimate = accumulators + fragments + 40;
  if (estimate > 255)
    return "registers per thread would spill: about " + std::to_string(estimate) +
           " live (accumulators + double-buffered fragments + addressing) exceed 255";
  if (estimate * threads > 65536)
    return "registers would spill: " + std::to_string(threads) + " threads x about " + std::to_string(estimate) +
           " registers exceed the 64K-register file";
  const long smem = sm80_smem_bytes(d, layout);
  if (smem > smem_limit)
    return "shared memory over the limit: " + kib(smem) + " needed (" + std::to_string(d.stages) + " stages of " +
           std::to_string(d.bm) + "x" + std::to_string(d.bk) + " A and " + std::to_string(d.bn) + "x" +
           std::to_string(d.bk) + " B tiles, or the epilogue's staging), limit " + kib(smem_limit);
  return std::nullopt;
}

std::optional<std::string> sm90_rules(const Design& d, Layout layout, int smem_limit) {
  (void)layout;
  if (d.bm != 64 && d.bm != 128 && d.bm != 192 && d.bm != 256)
    return "BM must be 64, 128, 192 or 256 for sm90 (wgmma M is 64 per warpgroup; got " + std::to_string(d.bm) + ")";
  // A coopn tile gives each consumer warpgroup BN/2 columns, so its BN may reach 512; K-major B parts (one per
  // CTA of a cluster column) stay within a TMA box's 256 rows.
  const bool split_columns = d.schedule == Sm90Schedule::kCooperativeColumns;
  if (!split_columns && (d.bn < 16 || d.bn > 256 || d.bn % 8 != 0))
    return "BN must be a multiple of 8 in 16..256 (the wgmma N range; got " + std::to_string(d.bn) + ")";
  if (split_columns && (d.bn < 16 || d.bn > 512 || d.bn % 16 != 0))
    return "a coopn BN must be a multiple of 16 in 16..512: each of its two warpgroups takes a wgmma N of BN/2, a "
           "multiple of 8 in 8..256 (got " + std::to_string(d.bn) + ")";
  if (split_columns && d.bn > 256 && (layout == Layout::kNN || d.swap_ab || d.bn / d.cluster_m > 256))
    return "a coopn tile wider than 256 is loaded as K-major B parts of at most 256 rows (a TMA box): it needs tn, "
           "no swap and BN / CM <= 256, e.g. c2x1 (got BN " + std::to_string(d.bn) + ", CM " +
           std::to_string(d.cluster_m) + ")";
  if (layout == Layout::kNN && !d.swap_ab && d.bn % 64 != 0)
    return "an nn design needs BN a multiple of 64: an N-major B tile is built of 64-column 128-byte swizzle atoms (got " +
           std::to_string(d.bn) + ")";
  // With swap, an nn problem's A operand (B^T) is N-major: 128-byte swizzled atoms of 1024 bytes, each stage's A
  // tile on 1024 bytes. A stage of BK 32 is (BM + BN) x 64 bytes, a whole number of 1024 only where BN is a
  // multiple of 16 (BM is a multiple of 64).
  if (layout == Layout::kNN && d.swap_ab && d.bk == 32 && d.bn % 16 != 0)
    return "an nn design with swap and BK 32 needs BN a multiple of 16: its N-major A tiles are 128-byte swizzled, "
           "and a stage of (BM + BN) x 64 bytes must end on 1024 bytes for the next stage's (got " +
           std::to_string(d.bn) + ")";
  if (d.schedule == Sm90Schedule::kCooperative && d.bm % 128 != 0)
    return "a cooperative design splits BM between two consumer warpgroups of 64-row wgmma: BM must be 128 or 256 "
           "(got " + std::to_string(d.bm) + ")";
  if (split_columns && d.epilogue == Epilogue::kTma && d.bn < 128)
    return "epi_tma stores whole 64-column chunks of each warpgroup's columns: a coopn design needs BN at least 128 "
           "(got " + std::to_string(d.bn) + ")";
  // A cluster shares B tiles along M and A tiles along N (both in a 2x2 cluster); each extent is 1, 2 or 4 and
  // the cluster at most 4 CTAs, which every GPC of an H100 or H200 holds several of.
  auto cluster_extent = [](int e) { return e == 1 || e == 2 || e == 4; };
  if (!cluster_extent(d.cluster_m) || !cluster_extent(d.cluster_n) || d.cluster_m * d.cluster_n > 4)
    return "cluster must be CMxCN with CM and CN 1, 2 or 4 and at most 4 CTAs: 1x1, 2x1, 1x2, 2x2, 4x1 or 1x4 (got " +
           std::to_string(d.cluster_m) + "x" + std::to_string(d.cluster_n) + ")";
  if (d.epilogue == Epilogue::kSmem) return "epi_smem is an sm80 epilogue; sm90 offers epi_reg and epi_tma";
  if (d.l2_promotion != 0 && d.l2_promotion != 64 && d.l2_promotion != 128 && d.l2_promotion != 256)
    return "the L2 promotion of a tensor map is 0, 64, 128 or 256 bytes (got " + std::to_string(d.l2_promotion) + ")";
  if (d.epilogue == Epilogue::kTma && d.bn < 64)
    return "epi_tma stores whole 64-column chunks by TMA (a wider tile's last BN % 64 columns from registers): BN "
           "must be at least 64 (got " + std::to_string(d.bn) + ")";
  if (d.epilogue == Epilogue::kTma && d.swap_ab)
    return "epi_tma does not transpose: a swapped design (C^T = B^T A^T) stores from registers, use epi_reg";
  if (d.bulk_tail && (d.epilogue != Epilogue::kTma || (split_columns ? d.bn / 2 : d.bn) % 64 == 0))
    return "/bulktail stores the columns past a warpgroup's last whole 64-column chunk of an epi_tma design: it needs "
           "epi_tma and a warpgroup width (BN, or BN/2 for coopn) that is not a multiple of 64 (got " +
           epilogue_text(d.epilogue) + ", BN " + std::to_string(d.bn) + ")";
  {
    // A tile shared by a cluster is loaded in parts, one per sharing CTA: rows of a K-major tile, k-rows of an
    // MN-major one (at least 8 of them).
    const bool nn = layout == Layout::kNN;
    const bool a_mn = d.swap_ab && nn, b_mn = !d.swap_ab && nn;
    if (a_mn && d.bk / d.cluster_n < 8)
      return "BK too small to split an MN-major A tile across the cluster: BK / CN must be at least 8";
    if (b_mn && d.bk / d.cluster_m < 8)
      return "BK too small to split an MN-major B tile across the cluster: BK / CM must be at least 8";
    if (b_mn && d.bn % 64 != 0) return "an MN-major B tile is built of 64-column swizzle atoms: BN % 64 == 0";
    if (b_mn && split_columns && d.bn % 128 != 0)
      return "a coopn design gives each warpgroup BN/2 columns of an MN-major B tile, which are whole 64-column "
             "swizzle atoms: BN must be 128 or 256 (got " + std::to_string(d.bn) + ")";
  }
  const sm90::Shape shape = sm90_shape(d);
  const int rows_per_warpgroup = sm90::warpgroup_rows(shape), cols_per_warpgroup = sm90::warpgroup_cols(shape);
  const bool cooperative = d.schedule != Sm90Schedule::kPingpong;
  const int accumulators = rows_per_warpgroup * cols_per_warpgroup / 128;
  // A cooperative stream-K finisher keeps its accumulators live through the partition arithmetic and the
  // contributors' fixups: with 128 accumulators per thread (256x128, 128x256) ptxas spills 16-20 bytes; 96
  // (128x192) fits. A ping-pong warpgroup holds a whole tile: up to 168 accumulators (128x168, the tile of
  // cuBLASLt's fastest kernel on 2048x11008x4096; 192x112; 256x80) fit without a split of K. With one, they
  // spilled: parallel split-K's fragments 8-1760 bytes from 136 accumulators on, stream-K 20-380 bytes from 144,
  // serial split-K 8 bytes at 168 (the sm90 compile sweep, tests/generate/sm90_compile_test.cpp, holds the rule).
  const bool stream_k = d.split == SplitK::kStreamK;
  if (split_columns && d.split == SplitK::kParallel)
    return "a coopn design does not take parallel split-K: its slices' fragments spilled with three or four m64 "
           "blocks per warpgroup (192x128, 256x128); serial split-K and stream-K reduce in the kernel";
  const int limit = cooperative ? (stream_k ? 96 : 168) : (d.split == SplitK::kNone ? 168 : 128);
  if (accumulators > limit)
    return "accumulator registers per thread would spill: each consumer warpgroup holds " +
           std::to_string(rows_per_warpgroup) + "x" + std::to_string(cols_per_warpgroup) + " fp32 = " +
           std::to_string(accumulators) + " per thread, over " + std::to_string(limit) + " for the " +
           (cooperative ? (stream_k ? "cooperative stream-K" : "cooperative")
                       : (d.split == SplitK::kNone ? "ping-pong" : "ping-pong split-K")) +
           " schedule";
  const long smem = sm90_smem_bytes(d);
  if (smem > smem_limit)
    return "shared memory over the limit: " + kib(smem) + " needed (" + std::to_string(d.stages) + " stages of " +
           std::to_string(d.bm) + "x" + std::to_string(d.bk) + " A and " + std::to_string(d.bn) + "x" +
           std::to_string(d.bk) + " B tiles" + (d.epilogue == Epilogue::kTma ? " + the TMA-store staging" : "") +
           " + barriers), limit " + kib(smem_limit);
  return std::nullopt;
}

}  // namespace

static_assert(sm90::smem_per_block() == kHopperSmemPerBlock, "the sm90 kernel lays out its shared memory for this limit");

long sm80_smem_bytes(const Design& d, Layout layout) {
  // The kernel's view: with swap_ab the roles of A and B exchange (A' = B, B' = A).
  const bool pad = d.smem == SmemLayout::kPad;
  const long extra = pad ? 8 : 0;  // one 16-byte chunk per row breaks bank conflicts
  // A' tile: K-major (rows = BM, BK columns) unless swap of an nn problem makes it B^T, M-major.
  const bool a_kmajor = !(d.swap_ab && layout == Layout::kNN);
  const bool b_kmajor = d.swap_ab || layout == Layout::kTN;
  const long a_tile = a_kmajor ? d.bm * (d.bk + extra) : d.bk * (d.bm + extra);
  const long b_tile = b_kmajor ? d.bn * (d.bk + extra) : d.bk * (d.bn + extra);
  const long pipeline = long(d.stages) * (a_tile + b_tile) * 2;
  // The smem epilogue reuses the pipeline's buffers once the main loop is done.
  const long epilogue = d.epilogue == Epilogue::kSmem
                            ? (d.swap_ab ? long(d.bn) * (d.bm + 8) * 2 : long(d.bm) * (d.bn + 8) * 2)
                            : 0;
  return std::max(pipeline, epilogue);
}

long sm90_smem_bytes(const Design& d) {
  // The sm90 kernel's own accounting (pipeline ring, TMA-store staging chunks, barriers, alignment slack).
  return sm90::smem_bytes(sm90_shape(d));
}

std::optional<std::string> why_invalid(const Design& d, Layout layout, int smem_limit_bytes) {
  if (d.family == Family::kTest) return std::nullopt;
  if (auto why = common_rules(d)) return why;
  if (d.family == Family::kSm80) return sm80_rules(d, layout, smem_limit_bytes);
  return sm90_rules(d, layout, smem_limit_bytes);
}

std::optional<std::string> why_unfit(const Design& d, const Problem& problem) {
  if (d.family != Family::kTest && d.dtype != problem.dtype)
    return "the design's element type (" + std::string(to_string(d.dtype)) + ") must be the problem's (" +
           std::string(to_string(problem.dtype)) + "): a kernel reads and writes one element type";
  if (d.family != Family::kSm90 || d.split == SplitK::kNone) return std::nullopt;
  const int64_t k_blocks = (problem.shape.k + d.bk - 1) / d.bk;
  if (d.split == SplitK::kStreamK) {
    if (k_blocks < 1)
      return "stream-K shares out k-blocks of " + std::to_string(d.bk) + ": K = " + std::to_string(problem.shape.k) +
             " has none";
    return std::nullopt;
  }
  if (k_blocks < d.splits)
    return "split-K into " + std::to_string(d.splits) + " slices needs at least " + std::to_string(d.splits) +
           " k-blocks of " + std::to_string(d.bk) + ", K = " + std::to_string(problem.shape.k) + " has " +
           std::to_string(k_blocks);
  return std::nullopt;
}

std::vector<Design> read_designs(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read designs file '" + path + "'");
  std::vector<Design> designs;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = line.substr(0, line.find('#'));
    const auto b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
    if (b == std::string::npos) continue;
    Design d;
    try {
      d = parse_design(line.substr(b, e - b + 1));
    } catch (const Error& err) {
      fail(path + ":" + std::to_string(number) + ": " + err.what());
    }
    if (std::find(designs.begin(), designs.end(), d) == designs.end()) designs.push_back(d);
  }
  return designs;
}

}  // namespace rlgemm
