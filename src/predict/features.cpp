#include "predict/features.h"

#include <algorithm>
#include <cmath>

namespace rlgemm::predict {

namespace {

// Shared memory of one H100/H200 SM (228 KiB); each resident CTA also reserves 1 KiB.
constexpr double kSmemPerSm = 233472;
constexpr double kReservedPerCta = 1024;

double ceil_div(double a, double b) { return std::ceil(a / b); }

// How tiles of bm x bn fill the GPU: tiles, waves of one tile per SM, the last wave's fill and the share of
// the tiled area outside the problem.
struct TileFit {
  double tiles = 0, waves = 0, last_wave_fill = 0, waste = 0;
};

TileFit tile_fit(double m, double n, double bm, double bn, double slots) {
  TileFit f;
  const double tm = ceil_div(m, bm), tn = ceil_div(n, bn);
  f.tiles = tm * tn;
  f.waves = f.tiles / slots;
  f.last_wave_fill = f.waves / std::ceil(f.waves);
  f.waste = 1.0 - (m * n) / (tm * bm * tn * bn);
  return f;
}

void append_shape(const Problem& p, const GpuTraits& gpu, std::vector<double>& out) {
  const double m = double(p.shape.m), n = double(p.shape.n), k = double(p.shape.k);
  const double bytes = 2.0 * (m * k + k * n + m * n);
  out.push_back(std::log2(m));
  out.push_back(std::log2(n));
  out.push_back(std::log2(k));
  out.push_back(std::log2(2.0 * m * n * k));
  out.push_back(std::log2(2.0 * m * n * k / bytes));
  out.push_back(p.layout == Layout::kTN ? 1.0 : 0.0);
  out.push_back(double(gpu.sm_count));
  for (auto [bm, bn] : {std::pair{64.0, 64.0}, std::pair{128.0, 128.0}, std::pair{128.0, 256.0}}) {
    const TileFit f = tile_fit(m, n, bm, bn, gpu.sm_count);
    out.push_back(std::log2(f.waves));
    out.push_back(f.last_wave_fill);
    out.push_back(f.waste);
  }
}

}  // namespace

const std::vector<std::string>& shape_feature_names() {
  static const std::vector<std::string> names{
      "log2_m", "log2_n", "log2_k", "log2_flops", "log2_intensity", "layout_tn", "sm_count",
      "waves64", "fill64", "waste64", "waves128", "fill128", "waste128", "waves128x256", "fill128x256",
      "waste128x256"};
  return names;
}

const std::vector<std::string>& design_feature_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n = shape_feature_names();
    for (const char* f :
         {"sm90", "pingpong", "bm", "bn", "bk", "warp_m", "warp_n", "stages", "cluster_m", "cluster_n", "raster_n",
          "group", "split_kind", "splits", "staged_epilogue", "smem_pad", "swap", "static_shape", "log2_m_eff",
          "log2_n_eff", "log2_tiles", "waste_m", "waste_n", "waste_mn", "waste_k", "log2_kblocks_per_unit",
          "kblocks_per_stage", "log2_units", "log2_waves", "last_wave_fill", "smem_kib", "ctas_per_sm",
          "cluster_fit", "log2_tile_intensity"})
      n.push_back(f);
    return n;
  }();
  return names;
}

std::vector<double> shape_features(const Problem& problem, const GpuTraits& gpu) {
  std::vector<double> out;
  out.reserve(shape_feature_names().size());
  append_shape(problem, gpu, out);
  return out;
}

namespace {

// The design's own features and those of the design on this problem, after the shape's.
void append_design(const Problem& p, const Design& d, const GpuTraits& gpu, std::vector<double>& out) {
  const bool sm90 = d.family == Family::kSm90;
  const double bm = d.bm, bn = d.bn, bk = d.bk;
  const double m = double(d.swap_ab ? p.shape.n : p.shape.m), n = double(d.swap_ab ? p.shape.m : p.shape.n);
  const double k = double(p.shape.k);
  const double split_kind = d.split == SplitK::kNone ? 0 : d.split == SplitK::kSerial ? 1
                            : d.split == SplitK::kParallel                            ? 2
                                                                                      : 3;
  const double splits = d.split == SplitK::kSerial || d.split == SplitK::kParallel ? d.splits : 1;
  out.push_back(sm90 ? 1 : 0);
  out.push_back(sm90 && d.schedule == Sm90Schedule::kPingpong ? 1 : 0);
  out.push_back(bm);
  out.push_back(bn);
  out.push_back(bk);
  out.push_back(sm90 ? 0 : d.warp_m);
  out.push_back(sm90 ? 0 : d.warp_n);
  out.push_back(d.stages);
  out.push_back(sm90 ? d.cluster_m : 1);
  out.push_back(sm90 ? d.cluster_n : 1);
  out.push_back(d.raster == Raster::kAlongN ? 1 : 0);
  out.push_back(d.group);
  out.push_back(split_kind);
  out.push_back(splits);
  out.push_back(d.epilogue == Epilogue::kRegisters ? 0 : 1);
  out.push_back(!sm90 && d.smem == SmemLayout::kPad ? 1 : 0);
  out.push_back(d.swap_ab ? 1 : 0);
  out.push_back(d.static_shape ? 1 : 0);
  out.push_back(std::log2(m));
  out.push_back(std::log2(n));

  const double tm = ceil_div(m, bm), tn = ceil_div(n, bn), tiles = tm * tn;
  const double kblocks = ceil_div(k, bk);
  out.push_back(std::log2(tiles));
  out.push_back(1.0 - m / (tm * bm));
  out.push_back(1.0 - n / (tn * bn));
  out.push_back(1.0 - (m * n) / (tiles * bm * bn));
  out.push_back(1.0 - k / (kblocks * bk));

  // Work units and the slots that run them at once: sm90 kernels are persistent, one CTA per SM, whole
  // clusters; sm80 kernels launch one CTA per tile and slice, as many per SM as shared memory allows.
  const double smem = sm90 ? double(sm90_smem_bytes(d)) : double(sm80_smem_bytes(d, p.layout));
  const double ctas_per_sm = sm90 ? 1.0 : std::max(1.0, std::floor(kSmemPerSm / (smem + kReservedPerCta)));
  const double cluster = sm90 ? double(d.cluster_m * d.cluster_n) : 1.0;
  double units, slots, kblocks_per_unit;
  if (sm90) {
    const double cluster_tiles = ceil_div(tm, d.cluster_m) * ceil_div(tn, d.cluster_n);
    slots = std::max(1.0, std::floor(gpu.sm_count / cluster));
    if (d.split == SplitK::kStreamK) {
      // Units count whole tiles; each cluster of the grid gets an equal share of all the k-blocks.
      units = cluster_tiles;
      kblocks_per_unit = cluster_tiles * kblocks / std::min(cluster_tiles * kblocks, slots);
    } else {
      units = cluster_tiles * splits;
      kblocks_per_unit = kblocks / splits;
    }
  } else {
    units = tiles * splits;
    slots = gpu.sm_count * ctas_per_sm;
    kblocks_per_unit = kblocks / splits;
  }
  const double waves = units / slots;
  // Stream-K balances its last wave by sharing k-blocks: every slot stays busy.
  const double fill = d.split == SplitK::kStreamK && sm90 ? 1.0 : waves / std::ceil(waves);
  out.push_back(std::log2(std::max(1.0, kblocks_per_unit)));
  out.push_back(kblocks_per_unit / d.stages);
  out.push_back(std::log2(units));
  out.push_back(std::log2(waves));
  out.push_back(fill);
  out.push_back(smem / 1024.0);
  out.push_back(ctas_per_sm);
  // Clusters along a dimension with an odd tile count leave a CTA idle in the last cluster.
  const double fit_m = sm90 ? tm / (ceil_div(tm, d.cluster_m) * d.cluster_m) : 1.0;
  const double fit_n = sm90 ? tn / (ceil_div(tn, d.cluster_n) * d.cluster_n) : 1.0;
  out.push_back(fit_m * fit_n);
  out.push_back(std::log2(bm * bn / (bm + bn)));
}

}  // namespace

void design_features(const Problem& p, const Design& d, const GpuTraits& gpu, std::vector<double>& out) {
  out.clear();
  append_shape(p, gpu, out);
  append_design(p, d, gpu, out);
}

void design_features(const std::vector<double>& shape, const Problem& p, const Design& d, const GpuTraits& gpu,
                     std::vector<double>& out) {
  out.assign(shape.begin(), shape.end());
  append_design(p, d, gpu, out);
}

std::vector<double> design_features(const Problem& problem, const Design& design, const GpuTraits& gpu) {
  std::vector<double> out;
  out.reserve(design_feature_names().size());
  design_features(problem, design, gpu, out);
  return out;
}

}  // namespace rlgemm::predict
