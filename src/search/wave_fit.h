// Tile widths fitted to a problem's waves. A persistent sm90 kernel runs one CTA per SM, each taking tiles in
// turn: its tiles go in waves of (SMs, rounded down to whole clusters) tiles, and the last wave leaves the rest
// of the GPU idle when the tile count is not a multiple of it. A wave of whole tiles takes time in proportion
// to a tile's area, plus a tile's fixed cost, so the cost of a width is waves x BM x (BN + kTileFixedColumns).
// On mid-size layers the width that fills its waves ran 7-25% faster than the best multiple of 64
// (bench/results/h100/fitted-widths.csv), and cuBLAS runs such widths there (144, 168, 192: bench/results/h100/ncu).
// The tuner measures a fitted width beside the speed predictor's guesses (`rlgemm tune --wave-fit`), and the
// handle checks one beside its predicted design, since a policy or predictor trained before the widths existed
// would not propose them.
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "rlgemm/design.h"
#include "rlgemm/problem.h"

namespace rlgemm::search {

// The widths a design may be fitted to: every multiple of 8 from 64 to 256, the steps of wgmma's N. Finer than the
// search's own widths (SpaceSpec::tile_n), since the width that fills the waves is the point: on 2048x11008 a
// 128-row tile fills 8 whole waves at 168 wide, the width cuBLASLt's fastest kernel takes there, where 160 and 176
// cost as much as 128 (bench/results/h100/README.md, the NVTX-chosen profiles).
std::vector<int> fitting_widths();

// Waves x BM x BN of `design` on `problem` (tiles of its own view: swapped designs tile N x M, rounded up to whole
// clusters) with `sm_count` SMs; split-K slices count as tiles. 0 for designs without waves of whole tiles (sm80,
// stream-K).
long long wave_cost(const Design& design, const Problem& problem, int sm_count);

// A tile's fixed cost, in columns of its width: its prologue and epilogue, and the A operand a narrower tile reads
// once more per column. Among the widths of one design timed side by side on an H100 (166 such sets on the 107
// shape runs of bench/results/h100/mid-oracle, fine-widths and fitted-widths, graph rows), the width the cost
// picks ran 1.0150 of the fastest one with no fixed cost and 1.0066 with 8 columns; fitted on two of the files,
// the third held out, 8 to 24 columns, better on each (tests/search/wave_fit_test.cpp checks it). With it, a
// width is proposed where it costs 5% less: at 3%, wider tiles that save part of a wave came in and some ran
// slower.
inline constexpr int kTileFixedColumns = 8;
inline constexpr double kFitMinGain = 0.05;

// What wave_fitted compares: waves x BM x (BN + kTileFixedColumns); 0 where wave_cost is.
long long fit_cost(const Design& design, const Problem& problem, int sm_count);

// `design` with the width among `widths` whose fit_cost on `problem` is least, where that is at least `min_gain`
// cheaper than the design's own width (ties: the wider tile, which reads each operand less often) and the design
// stays valid for the problem's layout, with fewer stages (down to 3) where a wider tile's do not fit in shared
// memory; nullopt otherwise, and for designs without waves of whole tiles. Only
// widths of at least 64 and two thirds of the design's own are tried: a far narrower tile reads its operands more
// often per multiply-add than the fixed cost says. Throws Error(kInvalidInput) when sm_count < 1.
std::optional<Design> wave_fitted(const Design& design, const Problem& problem, int sm_count,
                                  std::span<const int> widths, double min_gain = kFitMinGain,
                                  int smem_limit_bytes = kHopperSmemPerBlock);

// For each of `designs`, in order, its fitted design (wave_fitted over fitting_widths() with kFitMinGain), less
// repeats and designs already among `designs`: what a tuner or an autotuning handle measures beside a predictor's
// guesses, which were trained before the fitted widths existed. Throws as wave_fitted does.
std::vector<Design> fitted_alternatives(std::span<const Design> designs, const Problem& problem, int sm_count,
                                        int smem_limit_bytes = kHopperSmemPerBlock);

}  // namespace rlgemm::search
