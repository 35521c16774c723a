#include "search/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>

#include "design/sm90_shape.h"
#include "kernels/sm90/params.h"
#include "kernels/sm90/stream_k.h"
#include "rlgemm/error.h"

namespace rlgemm::search {

namespace {

uint64_t fnv1a(std::string_view text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

// A factor in [1 - spread, 1 + spread], fixed by the text.
double luck(std::string_view text, double spread) {
  const uint64_t h = fnv1a(text);
  const double unit = double(h >> 11) / double(uint64_t(1) << 53);
  return 1.0 + spread * (2.0 * unit - 1.0);
}

double ceil_div(double a, double b) { return std::ceil(a / b); }

struct Breakdown {
  double cycles = 0;   // kernel body
  double extra_us = 0; // launches and second passes
};

Breakdown estimate(const SyntheticGpu& gpu, const Design& d, const Problem& problem) {
  const bool sm90 = d.family == Family::kSm90;
  double m = double(problem.shape.m), n = double(problem.shape.n);
  const double k = double(problem.shape.k);
  if (d.swap_ab) std::swap(m, n);  // the kernel computes C^T = B^T A^T
  const bool nn = problem.layout == Layout::kNN;
  const bool a_kmajor = !(d.swap_ab && nn);
  const bool b_kmajor = d.swap_ab || !nn;
  const double sms = gpu.identity.sm_count;
  const double bm = d.bm, bn = d.bn, bk = d.bk;

  // ---- occupancy ----
  double smem = double(d.stages) * (bm + bn) * bk * 2;
  double ctas_per_sm = 1;
  double warps_per_cta = 12;  // sm90: one producer and two consumer warpgroups
  if (sm90) {
    if (d.epilogue == Epilogue::kTma) smem += bm * bn * 2;
  } else {
    warps_per_cta = (bm / d.warp_m) * (bn / d.warp_n);
    const double threads = warps_per_cta * 32;
    const double regs = d.warp_m * d.warp_n / 32.0 + 2 * ((d.warp_m / 16) * 4 + (d.warp_n / 8) * 2) + 40;
    ctas_per_sm = std::min({std::floor(233472.0 / std::max(smem, 1.0)), std::floor(2048.0 / threads),
                            std::floor(65536.0 / (threads * regs)), 8.0});
    ctas_per_sm = std::max(ctas_per_sm, 1.0);
  }
  const double slots = sms * ctas_per_sm;

  // ---- main loop: one k-iteration of one CTA ----
  double sm_rate;  // flops per cycle of the whole SM
  if (sm90) {
    const double n_eff = std::min(1.0, 0.62 + 0.38 * bn / 256.0);  // narrow wgmma N issues less per instruction
    sm_rate = gpu.tensor_flops_per_sm_cycle * n_eff * (d.schedule != Sm90Schedule::kPingpong ? 1.0 : 0.96);
    if (!a_kmajor) sm_rate *= 0.97;
  } else {
    const double warp_eff = std::min(1.0, 0.45 + 0.55 * (d.warp_m * d.warp_n) / 4096.0 + 0.08);
    const double warps_on_sm = warps_per_cta * ctas_per_sm;
    sm_rate = gpu.tensor_flops_per_sm_cycle * 0.6 * warp_eff * std::min(1.0, warps_on_sm / 8.0);
    // ldmatrix.trans for MN-major operands costs issue slots; padded rows serve them without conflicts,
    // swizzled K-major tiles are the conflict-free case.
    const int mn_major = int(!a_kmajor) + int(!b_kmajor);
    const bool pad = d.smem == SmemLayout::kPad;
    sm_rate *= 1.0 - (pad ? 0.025 : 0.0) - mn_major * (pad ? 0.01 : 0.045);
  }
  const double cta_rate = sm_rate / ctas_per_sm;
  const double mma_cycles = 2 * bm * bn * bk / cta_rate;
  double a_bytes = bm * bk * 2, b_bytes = bn * bk * 2;
  if (sm90) b_bytes /= d.cluster_m;  // B tile multicast to the CTAs of a cluster column (along M)
  if (sm90) a_bytes /= d.cluster_n;  // A tile to those of a cluster row
  const double l2_per_cta_cycle = gpu.l2_bytes_per_s / gpu.clock_hz / slots;
  const double load_cycles = (a_bytes + b_bytes) / l2_per_cta_cycle;
  // Little's law: stages-1 loads in flight must cover the memory latency (the TMA producer of sm90 keeps
  // them in flight more reliably than cp.async issued by the math warps).
  const double latency = gpu.memory_latency_cycles * (sm90 ? 1.0 : 1.25);
  const double iter_cycles = std::max({mma_cycles, load_cycles, latency / (d.stages - 1)});

  // ---- accumulator pressure: a heavily loaded register file costs issue slots ----
  double pressure = 1.0;
  // Per thread: the consumer warpgroup's rows x columns over its 128 threads (a cooperative one holds half the
  // tile: half its rows or, coopn, half its columns).
  const double acc = sm90 ? double(sm90::warpgroup_rows(sm90_shape(d))) * sm90::warpgroup_cols(sm90_shape(d)) / 128.0
                          : d.warp_m * d.warp_n / 32.0;
  if (acc > 96) pressure += (acc - 96) / 600.0;

  // ---- epilogue of one tile ----
  double epi_bw, epi_fixed;
  if (sm90) {
    if (d.epilogue == Epilogue::kTma) { epi_bw = 96; epi_fixed = 420; }
    else { epi_bw = 30; epi_fixed = 140; }
  } else {
    if (d.epilogue == Epilogue::kSmem) { epi_bw = 60; epi_fixed = 260; }
    else { epi_bw = 22; epi_fixed = 90; }
  }
  if (d.swap_ab) epi_bw *= d.epilogue == Epilogue::kRegisters ? 0.7 : 0.95;  // C^T stores are strided
  double out_bytes = bm * bn * 2;
  if (d.split == SplitK::kParallel) out_bytes *= 2;  // fp32 partials
  const double epi_cycles = out_bytes / epi_bw + epi_fixed;
  double epi_exposed = 1.0;
  if (sm90 && d.schedule == Sm90Schedule::kPingpong) epi_exposed = 0.2;
  if (!sm90) epi_exposed = 1.0 / std::sqrt(ctas_per_sm);

  // ---- the tile grid ----
  double tm = ceil_div(m, bm), tn = ceil_div(n, bn);
  if (sm90) {  // whole clusters, as the kernel walks them
    tm = double(sm90::cluster_tiles_along(static_cast<long long>(m), d.bm, d.cluster_m) * d.cluster_m);
    tn = double(sm90::cluster_tiles_along(static_cast<long long>(n), d.bn, d.cluster_n) * d.cluster_n);
  }
  const double tiles = tm * tn;
  const double k_iters = ceil_div(k, bk);
  const double prologue = latency + 200;
  const double static_gain = d.static_shape ? 0.985 : 1.0;
  double main_cycles;
  double extra_us = gpu.launch_us;
  if (sm90 && (d.cluster_m > 1 || d.cluster_n > 1)) extra_us += 0.35;
  if (d.split == SplitK::kStreamK) {
    // The kernel's own partition (kernels/sm90/stream_k.h): whole waves of clusters run data parallel, then
    // each remaining tile is cut into f pieces at the same k-blocks, and its finisher adds the f - 1 contributors'
    // fp32 partials one after another.
    const double cluster = d.cluster_m * d.cluster_n;
    const int clusters = static_cast<int>(std::max(1.0, std::floor(slots / cluster)));
    const sm90::StreamK part = sm90::stream_k_partition(static_cast<int>(tiles / cluster),
                                                        static_cast<int>(k_iters), clusters);
    const int pieces = sm90::stream_k_pieces(part);
    const double unit = prologue + k_iters * iter_cycles * pressure * static_gain + epi_exposed * epi_cycles;
    main_cycles = part.dp_tiles / clusters * unit + 350;
    if (part.tiles > part.dp_tiles) {
      const double fixup = (pieces - 1) * ((bm * bn * 8) / 40.0 + 900);
      main_cycles += prologue + ceil_div(k_iters, pieces) * iter_cycles * pressure * static_gain +
                     epi_exposed * epi_cycles + fixup;
    }
  } else {
    const double s = d.split == SplitK::kNone ? 1 : d.splits;
    const double iters = ceil_div(k_iters, s);
    double unit = prologue + iters * iter_cycles * pressure * static_gain + epi_exposed * epi_cycles;
    const double units = tiles * s;
    const double waves = ceil_div(units, slots);
    main_cycles = waves * unit;
    if (d.split == SplitK::kSerial) {
      // Slices of one tile reduce into C in turn behind a semaphore.
      main_cycles += (s - 1) * ((bm * bn * 4) / 40.0 + 600);
    }
    if (d.split == SplitK::kParallel) {
      extra_us += 2.2 + (m * n * (4 * s + 2)) / gpu.dram_bytes_per_s * 1e6;  // the reduction kernel
    }
  }

  // ---- DRAM traffic: compulsory, plus re-reads when the operands overflow L2 ----
  const double operands = (m * k + n * k) * 2;
  double dram = operands + m * n * 2;
  const double overflow = std::clamp((operands - 0.5 * gpu.l2_bytes) / gpu.l2_bytes, 0.0, 1.0);
  if (overflow > 0) {
    const double wave = std::min(slots, tiles);
    const double along = d.raster == Raster::kAlongM ? tm : tn;  // fastest-varying tile index
    const double g = std::min<double>(d.group, along);
    // A wave covers `fast` tiles along the raster direction and `slow` across it.
    const double fast = std::min(along, std::max(1.0, d.group == 1 ? wave : std::ceil(wave / g)));
    const double slow = std::ceil(wave / fast);
    const double rows = d.raster == Raster::kAlongM ? fast : slow;
    const double cols = d.raster == Raster::kAlongM ? slow : fast;
    const double waves = ceil_div(tiles, wave);
    const double per_wave = (std::min(rows, tm) * bm + std::min(cols, tn) * bn) * k * 2;
    dram += overflow * std::max(0.0, waves * per_wave - operands);
  }
  const double dram_cycles = dram / (gpu.dram_bytes_per_s / gpu.clock_hz);

  const double startup = sm90 ? 900 : 300;
  const double body = std::max(main_cycles, dram_cycles) + 0.15 * std::min(main_cycles, dram_cycles) + startup;
  if (d.static_shape) extra_us -= 0.2;
  return {body, extra_us};
}

}  // namespace

double CostModel::time_us(const Design& design, const Problem& problem) const {
  if (design.family == Family::kTest)
    throw Error(ErrorKind::kInvalidInput, "the cost model has no time for test.* designs: they are not kernels");
  const Breakdown b = estimate(gpu_, design, problem);
  const std::string text = to_string(design);
  const double t = b.cycles / gpu_.clock_hz * 1e6 + b.extra_us;
  return t * luck(text + "|" + std::string(to_string(problem.layout)), 0.03) *
         luck(text + "|" + problem.shape.to_string(), 0.01);
}

double CostModel::reference_us(const Problem& problem) const {
  // A library's menu: a few tiles for the persistent sm90 kernel, split-K variants for short grids.
  double best = 1e300;
  for (auto [bm, bn, stages, cm, cn, schedule] :
       {std::tuple{128, 128, 4, 1, 1, Sm90Schedule::kCooperative}, std::tuple{128, 256, 3, 2, 1, Sm90Schedule::kCooperative},
        std::tuple{256, 128, 3, 1, 2, Sm90Schedule::kCooperative}, std::tuple{64, 128, 6, 1, 1, Sm90Schedule::kPingpong},
        std::tuple{64, 256, 4, 1, 1, Sm90Schedule::kPingpong}}) {
    for (auto [split, splits] : {std::pair{SplitK::kNone, 1}, std::pair{SplitK::kSerial, 2},
                                 std::pair{SplitK::kSerial, 4}}) {
      Design d;
      d.family = Family::kSm90;
      d.schedule = schedule;
      d.bm = bm;
      d.bn = bn;
      d.bk = 64;
      d.stages = stages;
      d.cluster_m = cm;
      d.cluster_n = cn;
      d.raster = Raster::kAlongM;
      d.group = 8;
      d.split = split;
      d.splits = splits;
      d.epilogue = Epilogue::kTma;
      const Breakdown b = estimate(gpu_, d, problem);
      best = std::min(best, b.cycles / gpu_.clock_hz * 1e6 + b.extra_us);
    }
  }
  return best * 1.04;  // a library kernel's generality: run-time checks, one binary for every shape
}

}  // namespace rlgemm::search
