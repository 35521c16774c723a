// A deterministic synthetic cost model: a plausible analytic estimate of a design's run time on a shape on
// an H100-like GPU, used as a measuring backend without a GPU (tests, strategy comparisons on the CPU).
//
// It is a roofline with the effects that decide real HGEMM kernels: wave quantization of the tile grid,
// tile efficiency (MMA instruction shape, operand bandwidth per flop), pipeline depth against memory
// latency, occupancy from shared memory, epilogue cost and its overlap (ping-pong), split-K and stream-K
// overheads, cluster multicast, L2 reuse from the raster order, launch overhead. Interactions are hidden
// in the sense that no single decision is best alone: split-K pays only when tiles do not fill a wave,
// multicast only when the grid has pairs of tiles, deep pipelines only when tiles are small enough to fit
// them. A per-design "compiler luck" factor of a few percent, hashed from the design text, makes
// neighbouring designs differ the way real compiled kernels do.
#pragma once

#include "rlgemm/design.h"
#include "rlgemm/problem.h"
#include "store/measurement.h"

namespace rlgemm::search {

struct SyntheticGpu {
  GpuIdentity identity{"synthetic H100 (cost model)", 132, 9, 0, 1830000, 2619000, 13000, 232448};
  double tensor_flops_per_sm_cycle = 4096;  // dense fp16 wgmma peak
  double clock_hz = 1.83e9;
  double dram_bytes_per_s = 3.35e12;
  double l2_bytes_per_s = 12.0e12;
  double l2_bytes = 50.0 * 1024 * 1024;
  double launch_us = 4.1;   // back-to-back launches of an empty kernel (measured on an H200)
  double memory_latency_cycles = 700;
};

class CostModel {
 public:
  explicit CostModel(SyntheticGpu gpu = {}) : gpu_(gpu) {}
  const SyntheticGpu& gpu() const { return gpu_; }

  // Estimated time of one call, in microseconds. Deterministic; defined for every design that why_invalid
  // accepts (test.* designs are not kernels: Error).
  double time_us(const Design& design, const Problem& problem) const;

  // The vendor reference (lt_auto): the fastest of a fixed set of library-like configurations, with the
  // generality overhead of a library kernel.
  double reference_us(const Problem& problem) const;

 private:
  SyntheticGpu gpu_;
};

}  // namespace rlgemm::search
