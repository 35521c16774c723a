#include "search/design_space.h"

#include <algorithm>
#include <sstream>
#include <tuple>

#include "rlgemm/error.h"

namespace rlgemm::search {

const char* field_name(Field field) {
  static const char* names[kFieldCount] = {"family", "schedule", "tile_m", "tile_n", "tile_k",
                                           "warp_tile", "stages", "cluster", "smem_layout", "raster",
                                           "group", "split", "epilogue", "swap", "static", "pdl"};
  return names[int(field)];
}

SpaceSpec SpaceSpec::for_gpu(int cc_major) {
  SpaceSpec spec;
  if (cc_major < 9) {
    spec.families = {Family::kSm80};
    std::erase(spec.epilogues, EpilogueOption::kStagedBulkTail);  // an sm90 epilogue: no sm80 design takes it
  }
  return spec;
}

EpilogueOption epilogue_option(const Design& d) {
  if (d.epilogue == Epilogue::kRegisters) return EpilogueOption::kRegisters;
  return d.bulk_tail ? EpilogueOption::kStagedBulkTail : EpilogueOption::kStaged;
}

const char* epilogue_label(EpilogueOption option) {
  switch (option) {
    case EpilogueOption::kRegisters: return "reg";
    case EpilogueOption::kStaged: return "staged";
    case EpilogueOption::kStagedBulkTail: return "bulktail";
  }
  return "?";
}

bool clusters_across_raster(const Design& d) {
  if (d.cluster_m > 1 && d.cluster_n > 1) return false;  // a 2x2 cluster runs along both directions
  return (d.cluster_m > 1 && d.raster != Raster::kAlongM) || (d.cluster_n > 1 && d.raster != Raster::kAlongN);
}

namespace {

bool applies(Field field, Family family) {
  switch (field) {
    case Field::kSchedule:
    case Field::kCluster: return family == Family::kSm90;
    case Field::kWarpTile:
    case Field::kSmemLayout: return family == Family::kSm80;
    default: return true;
  }
}

template <class T>
int count(const std::vector<T>& v) {
  return int(v.size());
}

}  // namespace

DesignSpace::DesignSpace(SpaceSpec spec, Layout layout, int smem_limit_bytes)
    : spec_(std::move(spec)), layout_(layout) {
  const int counts[kFieldCount] = {count(spec_.families),    count(spec_.schedules),    count(spec_.tile_m),
                                   count(spec_.tile_n),      count(spec_.tile_k),       count(spec_.warp_tiles),
                                   count(spec_.stages),      count(spec_.clusters),     count(spec_.smem_layouts),
                                   count(spec_.rasters),     count(spec_.groups),       count(spec_.splits),
                                   count(spec_.epilogues), count(spec_.swap),     count(spec_.static_shape),
                                   count(spec_.pdl)};
  for (int f = 0; f < kFieldCount; ++f) {
    if (counts[f] < 1 || counts[f] > 255)
      fail(std::string("design space field '") + field_name(Field(f)) + "' needs 1..255 options");
    option_counts_[f] = counts[f];
    option_offsets_[f] = total_options_;
    total_options_ += counts[f];
  }
  for (auto family : spec_.families)
    if (family == Family::kTest) fail("the design space cannot hold test.* fault-injection designs");

  // Depth-first over the fields; inapplicable fields take option 0 only. Enumeration order is
  // lexicographic, so the points come out sorted. The launch mode, the last field, is no rule of
  // why_invalid: one check covers all its options.
  static_assert(int(Field::kPdl) == kFieldCount - 1);
  Point p(kFieldCount, 0);
  auto visit = [&](auto&& self, int field) -> void {
    if (field == int(Field::kPdl)) {
      const Design d = apply(p);
      if (why_invalid(d, layout_, smem_limit_bytes)) return;
      if (spec_.clusters_along_raster && clusters_across_raster(d)) return;
      for (int o = 0; o < option_counts_[field]; ++o) {
        p[field] = uint8_t(o);
        points_.insert(points_.end(), p.begin(), p.end());
      }
      p[field] = 0;
      return;
    }
    const Family family = spec_.families[p[0]];
    const int n = field == 0 || applies(Field(field), family) ? option_counts_[field] : 1;
    for (int o = 0; o < n; ++o) {
      p[field] = uint8_t(o);
      self(self, field + 1);
    }
    p[field] = 0;
  };
  visit(visit, 0);
  if (points_.empty())
    fail("the design space holds no valid design for layout " + std::string(to_string(layout)) +
         ": widen its options");
}

Design DesignSpace::apply(const Point& p) const {
  Design d;
  d.family = spec_.families[p[0]];
  const bool sm90 = d.family == Family::kSm90;
  d.schedule = spec_.schedules[p[int(Field::kSchedule)]];
  d.bm = spec_.tile_m[p[int(Field::kTileM)]];
  d.bn = spec_.tile_n[p[int(Field::kTileN)]];
  d.bk = spec_.tile_k[p[int(Field::kTileK)]];
  if (sm90) {
    d.warp_m = Design{}.warp_m;
    d.warp_n = Design{}.warp_n;
    d.smem = SmemLayout::kSwizzle;
    std::tie(d.cluster_m, d.cluster_n) = spec_.clusters[p[int(Field::kCluster)]];
  } else {
    d.schedule = Sm90Schedule::kCooperative;
    std::tie(d.warp_m, d.warp_n) = spec_.warp_tiles[p[int(Field::kWarpTile)]];
    d.smem = spec_.smem_layouts[p[int(Field::kSmemLayout)]];
    d.cluster_m = d.cluster_n = 1;
  }
  d.stages = spec_.stages[p[int(Field::kStages)]];
  d.raster = spec_.rasters[p[int(Field::kRaster)]];
  d.group = spec_.groups[p[int(Field::kGroup)]];
  std::tie(d.split, d.splits) = spec_.splits[p[int(Field::kSplit)]];
  const EpilogueOption epilogue = spec_.epilogues[p[int(Field::kEpilogue)]];
  d.epilogue = epilogue == EpilogueOption::kRegisters ? Epilogue::kRegisters : sm90 ? Epilogue::kTma : Epilogue::kSmem;
  d.bulk_tail = epilogue == EpilogueOption::kStagedBulkTail;
  d.swap_ab = spec_.swap[p[int(Field::kSwap)]];
  d.static_shape = spec_.static_shape[p[int(Field::kStatic)]];
  d.pdl = spec_.pdl[p[int(Field::kPdl)]];
  return d;
}

Point DesignSpace::point(size_t index) const {
  return Point(points_.begin() + index * kFieldCount, points_.begin() + (index + 1) * kFieldCount);
}

Design DesignSpace::design(const Point& point) const {
  if (point.size() != size_t(kFieldCount)) fail("a design-space point needs one option per field");
  return apply(point);
}

Point DesignSpace::encode(const Design& d) const {
  if (d.family == Family::kTest) return {};
  Point p(kFieldCount, 0);
  auto find = [&](int field, const auto& options, const auto& value) -> bool {
    auto it = std::find(options.begin(), options.end(), value);
    if (it == options.end()) return false;
    p[field] = uint8_t(it - options.begin());
    return true;
  };
  const bool sm90 = d.family == Family::kSm90;
  bool ok = find(int(Field::kFamily), spec_.families, d.family) && find(int(Field::kTileM), spec_.tile_m, d.bm) &&
            find(int(Field::kTileN), spec_.tile_n, d.bn) && find(int(Field::kTileK), spec_.tile_k, d.bk) &&
            find(int(Field::kStages), spec_.stages, d.stages) && find(int(Field::kRaster), spec_.rasters, d.raster) &&
            find(int(Field::kGroup), spec_.groups, d.group) &&
            find(int(Field::kSplit), spec_.splits, std::pair{d.split, d.splits}) &&
            find(int(Field::kEpilogue), spec_.epilogues, epilogue_option(d)) &&
            find(int(Field::kSwap), spec_.swap, d.swap_ab) &&
            find(int(Field::kStatic), spec_.static_shape, d.static_shape) && find(int(Field::kPdl), spec_.pdl, d.pdl);
  if (sm90)
    ok = ok && find(int(Field::kSchedule), spec_.schedules, d.schedule) &&
         find(int(Field::kCluster), spec_.clusters, std::pair{d.cluster_m, d.cluster_n});
  else
    ok = ok && find(int(Field::kWarpTile), spec_.warp_tiles, std::pair{d.warp_m, d.warp_n}) &&
         find(int(Field::kSmemLayout), spec_.smem_layouts, d.smem);
  if (!ok || index_of(p) == size()) return {};
  return p;
}

DesignSpace::Range DesignSpace::narrow(Range r, int field, int option) const {
  // Within a range sharing the first `field` decisions, points are sorted by this field's option.
  size_t lo = r.first, hi = r.last;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (at(mid, field) < option) lo = mid + 1; else hi = mid;
  }
  const size_t first = lo;
  hi = r.last;
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (at(mid, field) <= option) lo = mid + 1; else hi = mid;
  }
  return {first, lo};
}

std::vector<int> DesignSpace::valid_options(Range r, int field) const {
  std::vector<int> options;
  size_t i = r.first;
  while (i < r.last) {
    const int o = at(i, field);
    options.push_back(o);
    i = narrow({i, r.last}, field, o).last;
  }
  return options;
}

Point DesignSpace::project(const Point& wanted, std::mt19937_64& rng) const {
  Range r = full_range();
  Point out(kFieldCount, 0);
  for (int f = 0; f < kFieldCount; ++f) {
    Range kept = narrow(r, f, wanted[f]);
    if (kept.empty()) {
      const auto options = valid_options(r, f);
      kept = narrow(r, f, options[std::uniform_int_distribution<size_t>(0, options.size() - 1)(rng)]);
    }
    r = kept;
    out[f] = at(r.first, f);
  }
  return out;
}

size_t DesignSpace::index_of(const Point& p) const {
  if (p.size() != size_t(kFieldCount)) return size();
  Range r = full_range();
  for (int f = 0; f < kFieldCount && !r.empty(); ++f) r = narrow(r, f, p[f]);
  return r.empty() ? size() : r.first;
}

std::string DesignSpace::option_label(int field, int option) const {
  std::ostringstream s;
  switch (Field(field)) {
    case Field::kFamily: s << (spec_.families[option] == Family::kSm90 ? "sm90" : "sm80"); break;
    case Field::kSchedule:
      s << (spec_.schedules[option] == Sm90Schedule::kCooperative          ? "coop"
            : spec_.schedules[option] == Sm90Schedule::kCooperativeColumns ? "coopn"
                                                                           : "pingpong");
      break;
    case Field::kTileM: s << spec_.tile_m[option]; break;
    case Field::kTileN: s << spec_.tile_n[option]; break;
    case Field::kTileK: s << spec_.tile_k[option]; break;
    case Field::kWarpTile: s << spec_.warp_tiles[option].first << 'x' << spec_.warp_tiles[option].second; break;
    case Field::kStages: s << spec_.stages[option]; break;
    case Field::kCluster: s << spec_.clusters[option].first << 'x' << spec_.clusters[option].second; break;
    case Field::kSmemLayout: s << (spec_.smem_layouts[option] == SmemLayout::kSwizzle ? "swz" : "pad"); break;
    case Field::kRaster: s << (spec_.rasters[option] == Raster::kAlongM ? "m" : "n"); break;
    case Field::kGroup: s << spec_.groups[option]; break;
    case Field::kSplit: {
      const auto [kind, n] = spec_.splits[option];
      if (kind == SplitK::kNone) s << "splitk1";
      else if (kind == SplitK::kStreamK) s << "streamk";
      else s << "splitk" << n << (kind == SplitK::kSerial ? ".serial" : ".parallel");
      break;
    }
    case Field::kEpilogue: s << epilogue_label(spec_.epilogues[option]); break;
    case Field::kSwap: s << (spec_.swap[option] ? "swap" : "noswap"); break;
    case Field::kStatic: s << (spec_.static_shape[option] ? "static" : "dynamic"); break;
    case Field::kPdl: s << (spec_.pdl[option] ? "on" : "off"); break;
  }
  return s.str();
}

std::string DesignSpace::signature() const {
  std::string out;
  for (int f = 0; f < kFieldCount; ++f) {
    if (f) out += ';';
    out += field_name(Field(f));
    out += ':';
    for (int o = 0; o < option_counts_[f]; ++o) out += (o ? " " : "") + option_label(f, o);
  }
  // The filter is named only where it is off, so that the default space keeps the signature its policies carry.
  if (!spec_.clusters_along_raster) out += ";cluster_raster:any";
  return out;
}

const DesignSpace& DesignSpaces::of(Layout layout) {
  auto& slot = spaces_[layout];
  if (!slot) slot = std::make_unique<const DesignSpace>(spec_, layout, smem_limit_bytes_);
  return *slot;
}

}  // namespace rlgemm::search
