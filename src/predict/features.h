// What the speed predictor sees of a problem and a design: a fixed-length vector of numbers.
//
// Shape features (the cuBLASLt model's whole input, the start of the design model's): log2 of M, N, K, of the
// flops and of the arithmetic intensity, the layout, and how tiles of the common library sizes (64x64,
// 128x128, 128x256) fill the GPU's SMs: waves and partial-tile waste. Design features add the design's
// fields and what they make of this shape on this GPU: the tiles of the effective (swapped) problem, their
// waste at the edges, K-blocks per slice, work units per wave of resident CTAs or clusters and how full the
// last wave is, shared memory per CTA and the CTAs an SM holds.
//
// The feature list is part of a trained model's file (by name): a model trained on another list is refused
// at load time rather than fed the wrong numbers.
#pragma once

#include <string>
#include <vector>

#include "rlgemm/design.h"
#include "rlgemm/problem.h"

namespace rlgemm::predict {

// The GPU facts the features need.
struct GpuTraits {
  std::string name;  // as the CUDA runtime reports it
  int sm_count = 132;
  int cc_major = 9;
  int cc_minor = 0;
  int smem_per_block_optin = kHopperSmemPerBlock;
};

const std::vector<std::string>& shape_feature_names();
const std::vector<std::string>& design_feature_names();  // shape features first

std::vector<double> shape_features(const Problem& problem, const GpuTraits& gpu);
// Appends to `out` (cleared first) the design model's input; reused buffers keep ranking thousands of
// designs cheap.
void design_features(const Problem& problem, const Design& design, const GpuTraits& gpu, std::vector<double>& out);
// The same, starting from the problem's shape features (shape_features(problem, gpu)) computed once: what ranking
// a whole design space for one problem does.
void design_features(const std::vector<double>& shape, const Problem& problem, const Design& design,
                     const GpuTraits& gpu, std::vector<double>& out);
std::vector<double> design_features(const Problem& problem, const Design& design, const GpuTraits& gpu);

}  // namespace rlgemm::predict
