#include "run/gemm_kernel.h"

#include <cstdint>
#include <cstring>

#include "generate/generate.h"
#include "rlgemm/error.h"
#include "run/driver.h"
#include "run/module_cache.h"

namespace rlgemm {

GemmKernel::GemmKernel(Unloaded, const Design& design, const Problem& problem, const DeviceInfo& device)
    : design_(design), compiled_for_(problem), device_(device), family_(&family_for(design)) {
  if (design.static_shape) validate(problem.shape);
  if (auto why = why_invalid(design, problem.layout, smem_limit_or_hopper(device.smem_per_block_optin)))
    fail("design " + to_string(design) + " cannot run on " + device.name + ": " + *why);
  const int device_cc = device.cc_major * 10 + device.cc_minor;
  if (device_cc < 80 || (design.family == Family::kSm90 && device_cc != 90))
    fail("design " + to_string(design) + " cannot run on " + device.name + " (sm_" + std::to_string(device_cc) +
         "): sm80 designs need sm_80 or later, sm90 designs an sm_90 GPU");
  if (design.pdl && device_cc < 90)
    fail("design " + to_string(design) + " cannot run on " + device.name + " (sm_" + std::to_string(device_cc) +
         "): programmatic dependent launch (/pdl) needs sm_90 or later");
}

GemmKernel::GemmKernel(const Design& design, const Problem& problem, const DeviceInfo& device,
                       const CompileOptions& options)
    : GemmKernel(Unloaded{}, design, problem, device) {
  const std::string arch = arch_for_device(design, device.cc_major, device.cc_minor);
  compiled_ = compile_kernel(generate_kernel(design, problem, arch), options);
  load();
}

GemmKernel GemmKernel::from_compiled(const Design& design, const Problem& problem, const DeviceInfo& device,
                                     CompiledKernel compiled) {
  if (compiled.cubin.empty()) fail("kernel " + compiled.name + ": the cubin to load is empty");
  if (compiled.cache_key.empty()) fail("kernel " + compiled.name + ": a cubin to load needs a module key");
  GemmKernel kernel(Unloaded{}, design, problem, device);
  kernel.compiled_ = std::move(compiled);
  kernel.load();
  return kernel;
}

GemmKernel GemmKernel::with_cubin(const std::vector<uint8_t>& cubin, std::string module_key) const {
  CompiledKernel changed = compiled_;
  changed.cubin.assign(cubin.begin(), cubin.end());
  changed.cache_key = std::move(module_key);
  changed.from_cache = false;
  return from_compiled(design_, compiled_for_, device_, std::move(changed));
}

void GemmKernel::load() {
  // Shared memory depends on the design alone (and the shape, for static designs).
  const LaunchPlan layout_plan =
      family_->plan(design_, design_.static_shape ? compiled_for_ : layout_problem(compiled_for_.layout, compiled_for_.dtype), device_);
  smem_bytes_ = layout_plan.smem_bytes;
  function_ = ModuleCache::instance().function(compiled_.cache_key, compiled_.cubin, compiled_.name, smem_bytes_);
  const unsigned cluster = layout_plan.cluster[0] * layout_plan.cluster[1] * layout_plan.cluster[2];
  // A persistent grid is as many CTAs as the device holds at once: one per SM, which whole clusters may not
  // reach (they must fit within a GPC). A stream-K tile's owner spins until the CTAs holding the rest of the
  // tile have published their partial sums, so there every CTA must be resident; elsewhere a cluster left
  // over would start only when another finished, doubling the time of its tiles. Serial split-K is not
  // persistent (one cluster per unit, in ticket order) and keeps its grid.
  if (design_.split == SplitK::kStreamK || (cluster > 1 && design_.split != SplitK::kSerial)) {
    const int clusters = max_active_clusters(function_, cluster, layout_plan.block[0], smem_bytes_);
    if (clusters < 1)
      fail("kernel " + compiled_.name + ": the device cannot hold one cluster of it resident" +
           (design_.split == SplitK::kStreamK ? ", which stream-K needs" : ""));
    max_resident_ctas_ = static_cast<unsigned>(clusters) * cluster;
  }
}

void GemmKernel::check_problem(const Problem& problem) const {
  if (problem.layout != compiled_for_.layout)
    fail("kernel " + compiled_.name + " was built for layout " + std::string(to_string(compiled_for_.layout)) +
         ", not " + std::string(to_string(problem.layout)));
  if (problem.dtype != compiled_for_.dtype)
    fail("kernel " + compiled_.name + " computes " + std::string(to_string(compiled_for_.dtype)) + ", not " +
         std::string(to_string(problem.dtype)) + ": a design's element type must be the problem's");
  if (design_.static_shape && !(problem.shape == compiled_for_.shape))
    fail("kernel " + compiled_.name + " is specialized to shape " + compiled_for_.shape.to_string() + ", not " +
         problem.shape.to_string());
}

LaunchPlan GemmKernel::plan(const Problem& problem) const {
  check_problem(problem);
  validate(problem.shape);
  LaunchPlan p = family_->plan(design_, problem, device_);
  // The kernel partitions its work by the grid it finds; the workspace planned for the larger grid suffices.
  if (max_resident_ctas_ > 0 && p.grid[0] > max_resident_ctas_) p.grid[0] = max_resident_ctas_;
  return p;
}

void GemmKernel::launch(cudaStream_t stream, const Problem& problem, const GemmOperands& operands) const {
  const LaunchPlan p = plan(problem);
  if (operands.workspace_bytes < p.workspace_bytes)
    fail("kernel " + compiled_.name + " needs " + std::to_string(p.workspace_bytes) + " bytes of workspace, " +
         std::to_string(operands.workspace_bytes) + " given");
  ParamBlock params;
  family_->params(design_, problem, operands, p, params);
  launch_params(stream, p, params);
}

GemmKernel::Prepared GemmKernel::prepare(const Problem& problem) const {
  Prepared prepared;
  prepared.problem = problem;
  prepared.plan = plan(problem);
  // Encoded with stand-in addresses (16-byte aligned, never dereferenced): every launch rebinds them.
  void* const stand_in = reinterpret_cast<void*>(uintptr_t(1) << 20);
  family_->params(design_, problem, GemmOperands{stand_in, stand_in, stand_in, stand_in, prepared.plan.workspace_bytes},
                  prepared.plan, prepared.params);
  return prepared;
}

void GemmKernel::launch(cudaStream_t stream, const Prepared& prepared, const GemmOperands& operands) const {
  if (operands.workspace_bytes < prepared.plan.workspace_bytes)
    fail("kernel " + compiled_.name + " needs " + std::to_string(prepared.plan.workspace_bytes) +
         " bytes of workspace, " + std::to_string(operands.workspace_bytes) + " given");
  ParamBlock params;
  std::memcpy(params.bytes, prepared.params.bytes, prepared.params.size);
  params.size = prepared.params.size;
  family_->rebind(design_, prepared.problem, operands, prepared.plan, params);
  launch_params(stream, prepared.plan, params);
}

void GemmKernel::launch_params(cudaStream_t stream, const LaunchPlan& p, const ParamBlock& params) const {
  if (p.smem_bytes > smem_bytes_)
    fail("kernel " + compiled_.name + " asks for " + std::to_string(p.smem_bytes) +
         " bytes of shared memory, more than it was loaded with");
  void* args[] = {const_cast<std::byte*>(params.bytes)};
  launch_function(function_, p.grid, p.block, p.cluster, unsigned(p.smem_bytes), reinterpret_cast<CUstream>(stream),
                  args, design_.pdl);
}

void build_ahead(std::vector<KernelBuild>& builds, const DeviceInfo& device, const CompileOptions& options) {
  std::vector<GeneratedKernel> kernels;
  std::vector<KernelBuild*> generated;
  for (KernelBuild& b : builds) {
    try {
      kernels.push_back(generate_kernel(b.design, b.problem, arch_for_device(b.design, device.cc_major, device.cc_minor)));
      generated.push_back(&b);
    } catch (const Error& e) {
      b.error = e.what();
    }
  }
  const auto results = compile_all(kernels, options);
  for (size_t i = 0; i < results.size(); ++i) {
    if (results[i].kernel) generated[i]->seconds = results[i].kernel->compile_seconds;
    else generated[i]->error = results[i].error;
  }
}

}  // namespace rlgemm
