// A kernel design: every decision that shapes one generated HGEMM kernel, as one plain value.
//
// The generator turns a Design (plus the problem's B layout) into CUDA source, the search proposes
// Designs, the tuning database stores them by their text form, and the dispatcher looks them up. The text
// form is canonical: to_string(parse_design(t)) == t for every valid t, and it is printed and parsed in
// design.cpp alone.
//
// Text form, fields in this order, separated by '/':
//   sm90: sm90.ws.{coop|coopn|pingpong}/BMxBNxBK/sS/cCMxCN/raster_{m|n}.gG/SPLIT/epi_{reg|tma}[/swap][/static]
//         [/l2pP][/evictAB][/bulktail][/pdl][/bf16]
//   sm80: sm80/BMxBNxBK/wWMxWN/sS/{swz|pad}/raster_{m|n}.gG/SPLIT/epi_{reg|smem}[/swap][/static][/pdl][/bf16]
//   test: test.{fault|hang|wrong}          (fault-injection designs, used by tests of the tuner's isolation)
// where SPLIT is one of: splitk1 | splitkN.serial | splitkN.parallel | streamk, /l2pP (P = 0, 64 or 128) is the
// L2 promotion of an sm90 design's operand tensor maps where it is not the default 256 bytes, /evictAB sets the
// L2 eviction priority of an sm90 design's TMA loads of the problem's A and B (each n: normal, f: evict_first,
// l: evict_last; "nn" is the default and is not written), /bulktail stores an
// epi_tma design's last BN % 64 columns of each warpgroup by bulk copies instead of from registers, /bf16 names the
// element type of a bf16 kernel (fp16, the default, is not written, so the texts of fp16 designs never change), and
// /pdl launches the kernel as a programmatic dependent of the previous kernel in its stream (sm_90 and later)
// e.g. sm90.ws.pingpong/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma
//      sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlgemm/problem.h"

namespace rlgemm {

enum class Family {
  kSm80,  // mma.sync m16n8k16 + ldmatrix + cp.async; sm_80 and later
  kSm90,  // wgmma + TMA + mbarrier, warp-specialized, persistent; sm_90a only
  kTest,  // fault-injection designs for tests; never proposed by a search
};

enum class Sm90Schedule {
  kCooperative,         // two consumer warpgroups share one BM x BN tile (each takes BM/2 rows)
  kPingpong,            // two consumer warpgroups alternate whole tiles: one's epilogue overlaps the other's MMA
  kCooperativeColumns,  // coopn: two consumer warpgroups share one tile, each taking BN/2 columns of all BM
                        // rows (so BM may be 64 or 192: a warpgroup's wgmma rows are the tile's)
};

enum class Raster { kAlongM, kAlongN };  // which tile index varies fastest within a group

enum class SplitK {
  kNone,      // splitk1
  kSerial,    // splitkN.serial: N slices of K, reduced in place in C in turn (tile semaphore)
  kParallel,  // splitkN.parallel: N slices write fp32 partials to a workspace, a second pass reduces
  kStreamK,   // streamk (sm90): whole waves of tiles, then the remaining tiles' k-blocks shared among the grid
};

enum class Epilogue {
  kRegisters,  // epi_reg: accumulators converted and stored to global memory straight from registers
  kTma,        // epi_tma (sm90): stmatrix into shared memory, then a TMA store
  kSmem,       // epi_smem (sm80): staged through shared memory for 16-byte coalesced stores
};

enum class SmemLayout { kSwizzle, kPad };  // sm80 shared-memory layout: XOR swizzle or padded rows

// The L2 eviction priority an sm90 kernel's TMA loads of an operand carry (createpolicy.fractional, the whole
// access): normal, evict_first (streamed: its lines go first), evict_last (reused: its lines stay longest).
enum class EvictHint { kNormal, kFirst, kLast };

enum class TestBehavior { kFault, kHang, kWrong };

struct Design {
  Family family = Family::kSm90;
  Sm90Schedule schedule = Sm90Schedule::kCooperative;  // sm90 only
  int bm = 128;
  int bn = 128;
  int bk = 64;
  int warp_m = 64;  // sm80 only: warp tile
  int warp_n = 64;  // sm80 only
  int stages = 4;
  int cluster_m = 1;  // sm90 only: CTAs per cluster along M (they share B tiles by TMA multicast)
  int cluster_n = 1;  // sm90 only: CTAs per cluster along N (they share A tiles)
  Raster raster = Raster::kAlongM;
  int group = 8;  // tile-order group size (1 = plain row-major order of tiles)
  SplitK split = SplitK::kNone;
  int splits = 1;  // slices of K for kSerial / kParallel; 1 otherwise
  Epilogue epilogue = Epilogue::kRegisters;
  SmemLayout smem = SmemLayout::kSwizzle;  // sm80 only
  bool swap_ab = false;       // compute C^T = B^T A^T (helps when M is small)
  bool static_shape = false;  // bake M, N, K into the kernel as compile-time constants
  // sm90: the L2 promotion of the A and B tensor maps in bytes (0 = none, 64, 128 or 256): how far the L2 widens
  // a TMA load's misses. The kernel is the same; only its tensor maps differ.
  int l2_promotion = 256;
  // sm90: the L2 eviction priority of the TMA loads of the problem's A and B (what each load leaves in the L2 for
  // the CTAs that read the same tile after it). Normal for both by default.
  EvictHint evict_a = EvictHint::kNormal;
  EvictHint evict_b = EvictHint::kNormal;
  // sm90 epi_tma with a warpgroup width that is not a multiple of 64 (168, 96, ...): the columns past the last whole
  // 64-column chunk are staged in shared memory too and stored with one bulk copy per row (whole 32-byte sectors)
  // instead of 4-byte stores from registers (16-byte pieces of a sector per instruction).
  bool bulk_tail = false;
  // Launch as a programmatic dependent of the previous kernel in the stream (sm_90+): this kernel's launch and
  // prologue overlap that kernel's tail, and it touches global memory only after griddepcontrol.wait.
  bool pdl = false;
  DType dtype = DType::kF16;  // element type of A, B and C: a design computes problems of its own type only
  TestBehavior test = TestBehavior::kFault;  // kTest only

  friend bool operator==(const Design&, const Design&) = default;
};

std::string to_string(const Design& design);

// The same design for problems of element type `dtype` (a search explores tiles and schedules; the element
// type is the problem's).
inline Design with_dtype(Design design, DType dtype) {
  design.dtype = dtype;
  return design;
}

// Parses the canonical text form; throws Error(kInvalidInput) naming the field that does not parse.
// Parsing checks syntax only; why_invalid() checks feasibility.
Design parse_design(std::string_view text);

// Designs from a text file, one per line; '#' starts a comment, blank lines are skipped. Throws
// Error(kInvalidInput) naming the file and line of a design that does not parse, or an unreadable file.
// Duplicates are kept once, in first-seen order.
std::vector<Design> read_designs(const std::string& path);

// The opt-in shared memory per block of an H100 or H200 (227 KiB): the limit designs are checked against when
// no device says otherwise.
inline constexpr int kHopperSmemPerBlock = 232448;
// A device's reported opt-in limit, or kHopperSmemPerBlock when it reported none (0).
inline int smem_limit_or_hopper(int reported_bytes) { return reported_bytes > 0 ? reported_bytes : kHopperSmemPerBlock; }

// Why this design cannot be built or run for this layout (shared memory over the limit, accumulators that
// would spill, a tile that the instruction shapes do not divide, TMA alignment, ...), or nullopt when it
// can. `smem_limit_bytes` is the device's opt-in per-block limit (227 KiB on H100).
std::optional<std::string> why_invalid(const Design& design, Layout layout, int smem_limit_bytes = kHopperSmemPerBlock);

// Why this design cannot compute this problem although it is valid for the layout, or nullopt: the rules
// that depend on the problem. The design's element type must be the problem's. An sm90 split-K design needs at least one k-block of BK per slice (K >= splits x
// BK, rounded up to whole k-blocks): slices left without k-blocks are not generated.
std::optional<std::string> why_unfit(const Design& design, const Problem& problem);

// Dynamic shared memory (bytes) a design needs, as why_invalid counts it against the limit.
// sm80: max(stages x (A tile + B tile), epilogue staging), padding included; the epilogue reuses the
// pipeline's buffers. sm90: stages x (BM + BN) x BK x 2 + the TMA-store staging + barriers + alignment slack,
// as the sm90 kernel requests it (src/kernels/sm90/params.h).
long sm80_smem_bytes(const Design& design, Layout layout);
long sm90_smem_bytes(const Design& design);

}  // namespace rlgemm
