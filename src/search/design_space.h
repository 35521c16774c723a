// The design space the search explores: a list of options per decision field, the valid designs among
// their combinations (filtered by why_invalid for one layout, and by the spec's own filters), and the queries
// a sequential chooser needs: which options of the next field keep at least one valid design reachable, given
// the options taken so far.
//
// A design is a Point: one option index per field, in field order. Fields that do not apply to the chosen
// family (the warp tile of an sm90 design, the schedule of an sm80 design) hold option 0 and are forced.
// The valid points are kept sorted lexicographically, so the designs that share a prefix of decisions form
// one contiguous range: narrowing the range field by field answers every masking query by binary search.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "rlgemm/design.h"
#include "rlgemm/problem.h"

namespace rlgemm::search {

enum class Field : int {
  kFamily,
  kSchedule,   // sm90
  kTileM,
  kTileN,
  kTileK,
  kWarpTile,   // sm80
  kStages,
  kCluster,    // sm90
  kSmemLayout, // sm80
  kRaster,
  kGroup,
  kSplit,
  kEpilogue,   // reg | staged (epi_tma on sm90, epi_smem on sm80) | bulktail (epi_tma with /bulktail)
  kSwap,
  kStatic,
  kPdl,        // launch as a programmatic dependent (sm_90+)
};
inline constexpr int kFieldCount = 16;
const char* field_name(Field field);

// The epilogue field's options: from registers; staged (sm90's TMA store, sm80's shared-memory pass); staged with
// the columns past a warpgroup's whole 64-column chunks stored by bulk copies (an sm90 epi_tma design whose
// warpgroup width is not a multiple of 64, /bulktail: valid there alone).
enum class EpilogueOption : uint8_t { kRegisters, kStaged, kStagedBulkTail };
EpilogueOption epilogue_option(const Design& design);
const char* epilogue_label(EpilogueOption option);  // "reg", "staged", "bulktail": the labels policy files record

// The options of every field. Each list must be non-empty; option labels are what a policy file records.
struct SpaceSpec {
  std::vector<Family> families{Family::kSm90, Family::kSm80};
  // coopn (the tile's columns split between the warpgroups) is left out until its kernels are measured on a GPU.
  std::vector<Sm90Schedule> schedules{Sm90Schedule::kCooperative, Sm90Schedule::kPingpong};
  // 16 and 32: sm80 only (wgmma tiles are 64 rows per warpgroup); decode's few tokens fill them, where a 64-row
  // tile would read and reduce mostly zeros.
  std::vector<int> tile_m{16, 32, 64, 128, 256};
  // 16 and 32: a tiny problem spread over more CTAs (cuBLAS runs 64x8 tiles there); 96, 144, 160, 176, 200, 224
  // and 240: widths whose waves of tiles fill the 132 SMs where multiples of 64 leave a wave part-empty (7-25%
  // faster on such layers, bench/results/h100/fitted-widths.csv; search/wave_fit.h proposes them). sm80 takes
  // the powers of two.
  std::vector<int> tile_n{16, 32, 64, 96, 128, 144, 160, 176, 192, 200, 224, 240, 256};
  std::vector<int> tile_k{32, 64, 128};
  std::vector<std::pair<int, int>> warp_tiles{{16, 16}, {16, 32}, {16, 64}, {32, 32}, {32, 64}, {64, 32}, {64, 64}};
  std::vector<int> stages{2, 3, 4, 5, 6, 8};
  std::vector<std::pair<int, int>> clusters{{1, 1}, {2, 1}, {1, 2}};
  // A cluster pairs tiles along the raster's direction only: c2x1 (a pair along M) with raster_m, c1x2 with
  // raster_n. Across it the pair costs what its multicast saves and more: over 482 pairs of tuned designs that
  // differ only in their cluster (bench/results/h100/cluster-pairs.csv), c2x1 ran 0.990 of c1x1 with raster_m and
  // 0.949 with raster_n (M >= 512), c1x2 0.983 with raster_n and 0.781 with raster_m (cluster-probe.csv: the
  // same on six large shapes). Such designs stay valid (tables may hold them); the search does not propose them.
  bool clusters_along_raster = true;
  std::vector<SmemLayout> smem_layouts{SmemLayout::kSwizzle, SmemLayout::kPad};
  std::vector<Raster> rasters{Raster::kAlongM, Raster::kAlongN};
  std::vector<int> groups{1, 4, 8, 16};
  // 8 and 16 slices: K-heavy small shapes (decode) have too few tiles to fill the GPU otherwise.
  std::vector<std::pair<SplitK, int>> splits{{SplitK::kNone, 1},      {SplitK::kSerial, 2},    {SplitK::kSerial, 4},
                                             {SplitK::kSerial, 8},    {SplitK::kSerial, 16},   {SplitK::kParallel, 2},
                                             {SplitK::kParallel, 4},  {SplitK::kParallel, 8}, {SplitK::kParallel, 16},
                                             {SplitK::kStreamK, 1}};
  // The bulk tail: side by side with the register tail on six LLM shapes (bench/results/h100/bulk-tail/four-warps),
  // ping-pong 128x168 ran 1.0-3.7% faster with it at 512-2048 tokens in graphs and no slower beyond its interval
  // elsewhere; coop 256x168 lost 2.3% at 4096x28672x8192. The search chooses it per shape.
  std::vector<EpilogueOption> epilogues{EpilogueOption::kRegisters, EpilogueOption::kStaged,
                                        EpilogueOption::kStagedBulkTail};
  std::vector<bool> swap{false, true};
  std::vector<bool> static_shape{false, true};
  // Off by default: a graph that replays one GEMM back to back credits PDL with 1.4-1.9x on small kernels, but
  // behind a kernel that does not trigger its dependents (a norm or an activation in a model) a PDL launch ran
  // 0.91-0.99x of a plain one (bench/results/h200/pdl-probe.csv). A search that times GEMMs back to back would
  // choose it for the wrong reason. A space may still offer it ({false, true}) for chains of GEMMs.
  std::vector<bool> pdl{false};

  // The default space for a GPU of compute capability `cc_major`: sm90 and sm80 kernels on Hopper, sm80
  // kernels alone before it (and never programmatic dependent launch, which needs sm_90).
  static SpaceSpec for_gpu(int cc_major);
};

// Whether a design's cluster lines up tiles across its raster's direction (c2x1 or c4x1 with raster_n, c1x2 or
// c1x4 with raster_m; a 2x2 cluster runs along both): what SpaceSpec::clusters_along_raster leaves out.
bool clusters_across_raster(const Design& design);

// A space's signature lists its fields' options, then the filters that are off, as items of their own:
// "cluster_raster:any" for clusters_along_raster off. Whether a signature item is such a filter, not a field.
inline bool is_filter_item(const std::string& item) { return item.rfind("cluster_raster:", 0) == 0; }

using Point = std::vector<uint8_t>;  // one option index per field

class DesignSpace {
 public:
  // Enumerates every combination, keeps those why_invalid accepts for `layout` (duplicates of one design
  // collapse to one point). Throws Error(kInvalidInput) when no valid design remains.
  DesignSpace(SpaceSpec spec, Layout layout, int smem_limit_bytes = kHopperSmemPerBlock);

  const SpaceSpec& spec() const { return spec_; }
  Layout layout() const { return layout_; }
  size_t size() const { return points_.size() / kFieldCount; }
  int option_count(int field) const { return option_counts_[field]; }
  int total_options() const { return total_options_; }
  int option_offset(int field) const { return option_offsets_[field]; }
  std::string option_label(int field, int option) const;
  // "family:sm90 sm80;schedule:coop pingpong;..." - identifies the space in policy files.
  std::string signature() const;

  Point point(size_t index) const;
  Design design(const Point& point) const;
  Design design(size_t index) const { return design(point(index)); }
  // The point of a design, or an empty Point when the design is not in this space.
  Point encode(const Design& design) const;

  // Range of valid points [first, last) whose first fields equal `prefix`.
  struct Range { size_t first = 0; size_t last = 0; bool empty() const { return first >= last; } };
  Range full_range() const { return {0, size()}; }
  // Narrows `range` (points sharing a prefix of `field` decisions) to those taking `option` at `field`.
  Range narrow(Range range, int field, int option) const;
  // The options of `field` that stay valid within `range`, ascending.
  std::vector<int> valid_options(Range range, int field) const;

  // The valid point nearest to `wanted`: decisions are kept field by field while a valid design remains,
  // otherwise replaced by a random option that keeps one. Used by evolution to repair children.
  Point project(const Point& wanted, std::mt19937_64& rng) const;
  size_t index_of(const Point& point) const;  // size() when not valid

 private:
  uint8_t at(size_t index, int field) const { return points_[index * kFieldCount + field]; }
  Design apply(const Point& point) const;

  SpaceSpec spec_;
  Layout layout_;
  int option_counts_[kFieldCount] = {};
  int option_offsets_[kFieldCount] = {};
  int total_options_ = 0;
  std::vector<uint8_t> points_;  // size() x kFieldCount, sorted lexicographically
};

// The spaces of one spec and shared-memory limit, one per layout, each built when first asked for: building one
// runs the design rules on every combination of options, about a second, so a caller that meets many problems
// keeps one DesignSpaces rather than building a space per problem. Not thread-safe.
class DesignSpaces {
 public:
  explicit DesignSpaces(SpaceSpec spec, int smem_limit_bytes = kHopperSmemPerBlock)
      : spec_(std::move(spec)), smem_limit_bytes_(smem_limit_bytes) {}

  const SpaceSpec& spec() const { return spec_; }
  // The space of `layout` (a reference that stays valid for the life of this object).
  const DesignSpace& of(Layout layout);

 private:
  SpaceSpec spec_;
  int smem_limit_bytes_;
  std::map<Layout, std::unique_ptr<const DesignSpace>> spaces_;
};

}  // namespace rlgemm::search
