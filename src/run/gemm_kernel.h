// A design compiled and loaded for one layout (and, for static designs, one shape): the object the
// benchmark harness, the tuner and the dispatcher launch.
//
//   GemmKernel kernel(parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg"),
//                     Problem{{0, 0, 0}, Layout::kTN}, open_device());
//   size_t ws = kernel.workspace_bytes(problem);        // allocate (and zero) once, reuse for every call
//   kernel.launch(stream, problem, {a, b, c, workspace, ws});
//
// launch() allocates nothing, creates no stream and does not synchronize; errors in the launch
// configuration throw, errors during execution surface at the caller's next synchronization.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <optional>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "core/cuda_util.h"
#include "generate/kernel_family.h"
#include "rlgemm/design.h"
#include "rlgemm/problem.h"

namespace rlgemm {

class GemmKernel {
 public:
  // Generates, compiles (or takes from the cubin cache) and loads the design on the current device.
  // `problem` supplies the layout, and the shape when design.static_shape is set.
  GemmKernel(const Design& design, const Problem& problem, const DeviceInfo& device,
             const CompileOptions& options = {});

  // Loads `compiled` as given -- nothing is generated or compiled -- for a cubin of this design and problem
  // that was changed after compiling (a SASS reschedule): plan and launch are the design's, unchanged.
  // `compiled.cache_key` names the module in the ModuleCache, so each different cubin needs its own key;
  // ModuleCache::release(key) unloads it when it is no longer wanted.
  static GemmKernel from_compiled(const Design& design, const Problem& problem, const DeviceInfo& device,
                                  CompiledKernel compiled);

  // This kernel with its code replaced by `cubin` (a rescheduled copy of compiled().cubin: same kernel name
  // and resources), loaded through from_compiled under `module_key`, which must name these bytes only.
  GemmKernel with_cubin(const std::vector<uint8_t>& cubin, std::string module_key) const;

  const Design& design() const { return design_; }
  const CompiledKernel& compiled() const { return compiled_; }

  // Throws Error(kInvalidInput) when the problem does not fit the kernel (another layout, another shape
  // for a static design, or a shape that breaks the problem rules).
  LaunchPlan plan(const Problem& problem) const;
  // Bytes of workspace launch() needs for this problem (0 for most designs). When the plan says
  // workspace_must_be_zero, zero it once: the kernel leaves it zeroed after every launch.
  size_t workspace_bytes(const Problem& problem) const { return plan(problem).workspace_bytes; }
  // CTAs the device holds resident at once, which caps a persistent grid of clusters and stream-K's grid (the
  // driver's count of active clusters, times the cluster); 0 where nothing is capped.
  unsigned resident_ctas() const { return max_resident_ctas_; }
  void launch(cudaStream_t stream, const Problem& problem, const GemmOperands& operands) const;

  // A launch worked out once for one problem: its plan and its parameter block, descriptors encoded. Launching
  // it only points the parameter block at the call's operands (KernelFamily::rebind): no planning, no
  // encoding, no allocation -- the library's hot path.
  struct Prepared {
    Problem problem;
    LaunchPlan plan;
    ParamBlock params;
  };
  Prepared prepare(const Problem& problem) const;
  void launch(cudaStream_t stream, const Prepared& prepared, const GemmOperands& operands) const;

 private:
  struct Unloaded {};
  GemmKernel(Unloaded, const Design& design, const Problem& problem, const DeviceInfo& device);
  void load();
  void check_problem(const Problem& problem) const;
  void launch_params(cudaStream_t stream, const LaunchPlan& plan, const ParamBlock& params) const;

  Design design_;
  Problem compiled_for_;
  DeviceInfo device_;
  const KernelFamily* family_;
  CompiledKernel compiled_;
  CUfunction function_ = nullptr;
  int smem_bytes_ = 0;
  // CTAs the device holds resident at once, for persistent grids of clusters and for stream-K, whose CTAs wait
  // on each other; 0: no cap.
  unsigned max_resident_ctas_ = 0;
};

// A kernel to build ahead of its first use: a design for a problem (its layout, and its shape for a
// static design), and what building it gave.
struct KernelBuild {
  Design design;
  Problem problem;
  std::optional<double> seconds;  // compile time when it built (0: taken from the cubin cache)
  std::string error;              // why it did not
};
// Generates and compiles the kernels concurrently into the cubin cache, so that constructing their
// GemmKernels later only loads them; fills in each build's seconds or error.
void build_ahead(std::vector<KernelBuild>& builds, const DeviceInfo& device, const CompileOptions& options = {});

}  // namespace rlgemm
