// rlgemm's own kernels in the benchmark harness: one generated design, measured side by side with the
// cuBLAS implementations through the same correctness gate and the same output format.
//
//   auto impl = std::make_unique<DesignImplementation>(parse_design(text), open_device());
//   bench --design TEXT   (repeatable) adds one of these per design
//
// The design is compiled once per layout (once per shape for static designs) through the cubin cache, and
// the workspace (split-K partials, semaphores) is allocated in prepare(), never in run().
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/device_data.h"
#include "bench/implementation.h"
#include "compile/compiler.h"
#include "core/cuda_util.h"
#include "rlgemm/design.h"
#include "run/gemm_kernel.h"

namespace rlgemm::measure {

class DesignImplementation : public bench::Implementation {
 public:
  DesignImplementation(const Design& design, const DeviceInfo& device, const CompileOptions& options = {});
  ~DesignImplementation() override;

  std::string name() const override { return text_; }
  // False when the design cannot be built for the problem's layout on this GPU (the reason is kept in
  // unsupported_reason()): such problems get no row, as cublas_nn gets none for tn.
  bool supports(const Problem& problem) const override;
  void prepare(const Problem& problem, const bench::Operands& operands, cudaStream_t stream) override;
  void run(const Problem& problem, const bench::Operands& operands, cudaStream_t stream) override;
  std::string detail() const override { return detail_; }
  bool runtime_shape() const override { return !design_.static_shape; }
  std::string stray_write(cudaStream_t stream) const override;

  const Design& design() const { return design_; }
  std::string unsupported_reason(const Problem& problem) const;
  // The compiled kernel of a layout (compiling it when needed); for the compile-time record.
  const GemmKernel& kernel_for(const Problem& problem);
  // Frees the split-K workspace (the next prepare() allocates again): a tuner measuring hundreds of designs
  // keeps their kernels loaded, not their workspaces.
  void release_workspace();

 private:
  Design design_;
  std::string text_;
  DeviceInfo device_;
  CompileOptions options_;
  std::map<std::string, std::unique_ptr<GemmKernel>> kernels_;  // by layout (and shape, when static)
  const GemmKernel* current_ = nullptr;
  bench::GuardedBuffer workspace_;  // split-K partials and flags, guard bands around the part in use
  size_t workspace_used_ = 0;
  std::string detail_;
};

// Builds every (design, layout) pair this GPU can run ahead (static designs are built per shape, when
// first prepared). Returns one line per pair that failed, naming design and reason, and the compile times.
struct PrecompileReport {
  std::vector<std::string> failures;
  std::vector<std::pair<std::string, double>> compile_seconds;  // "design layout" -> seconds (0 = cached)
};
PrecompileReport precompile(const std::vector<Design>& designs, const std::vector<Layout>& layouts,
                            const DeviceInfo& device, const CompileOptions& options = {});

}  // namespace rlgemm::measure
