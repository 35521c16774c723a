#include "measure/design_implementation.h"

#include <cstdio>

#include "generate/generate.h"
#include "rlgemm/error.h"

namespace rlgemm::measure {
namespace {

std::string kernel_key(const Design& design, const Problem& problem) {
  std::string key(to_string(problem.layout));
  if (design.static_shape) key += "/" + problem.shape.to_string();
  return key;
}

}  // namespace

DesignImplementation::DesignImplementation(const Design& design, const DeviceInfo& device, const CompileOptions& options)
    : design_(design), text_(to_string(design)), device_(device), options_(options) {}

DesignImplementation::~DesignImplementation() = default;

void DesignImplementation::release_workspace() {
  workspace_.release();
  workspace_used_ = 0;
  current_ = nullptr;
}

std::string DesignImplementation::stray_write(cudaStream_t stream) const {
  if (!workspace_.data() || workspace_.guards_intact(stream)) return "";
  return "a write strayed outside the kernel's workspace (" + std::to_string(workspace_used_) + " bytes)";
}

std::string DesignImplementation::unsupported_reason(const Problem& problem) const {
  const int cc = device_.cc_major * 10 + device_.cc_minor;
  if (design_.family == Family::kSm90 && cc != 90)
    return "sm90 designs need an sm_90 GPU, " + device_.name + " is sm_" + std::to_string(cc);
  if (cc < 80) return "rlgemm kernels need sm_80 or later, " + device_.name + " is sm_" + std::to_string(cc);
  if (auto why = why_invalid(design_, problem.layout, smem_limit_or_hopper(device_.smem_per_block_optin))) return *why;
  if (problem.shape.k > 0)
    if (auto why = why_unfit(design_, problem)) return *why;
  return "";
}

bool DesignImplementation::supports(const Problem& problem) const { return unsupported_reason(problem).empty(); }

const GemmKernel& DesignImplementation::kernel_for(const Problem& problem) {
  auto& slot = kernels_[kernel_key(design_, problem)];
  if (!slot) slot = std::make_unique<GemmKernel>(design_, problem, device_, options_);
  return *slot;
}

void DesignImplementation::prepare(const Problem& problem, const bench::Operands&, cudaStream_t stream) {
  current_ = &kernel_for(problem);
  const LaunchPlan plan = current_->plan(problem);
  if (plan.workspace_bytes) {
    // Grown here, never in run(), with guard bands right after the bytes this problem uses; zeroed for every
    // problem (a kernel that failed the gate may have left it dirty; a zeroed workspace stays zeroed, the
    // kernels leave it so).
    workspace_.reserve((plan.workspace_bytes + sizeof(half) - 1) / sizeof(half), stream);
    RLGEMM_CUDA_CHECK(cudaMemsetAsync(workspace_.data(), 0, plan.workspace_bytes, stream));
  }
  workspace_used_ = plan.workspace_bytes;
  const auto& compiled = current_->compiled();
  char buf[160];
  std::snprintf(buf, sizeof buf, "regs=%d spill=%d grid=%ux%ux%u ws=%zu", compiled.resources.registers,
                compiled.resources.spill_store_bytes, plan.grid[0], plan.grid[1], plan.grid[2], plan.workspace_bytes);
  detail_ = buf;
}

void DesignImplementation::run(const Problem& problem, const bench::Operands& x, cudaStream_t stream) {
  if (!current_) fail("design " + text_ + " was run before prepare()");
  current_->launch(stream, problem, {x.a, x.b, x.c, workspace_.data(), workspace_used_});
}

PrecompileReport precompile(const std::vector<Design>& designs, const std::vector<Layout>& layouts,
                            const DeviceInfo& device, const CompileOptions& options) {
  std::vector<KernelBuild> builds;
  for (const Design& d : designs) {
    if (d.static_shape) continue;  // built per shape, in prepare()
    const DesignImplementation probe(d, device, options);
    for (Layout layout : layouts)
      if (probe.supports(layout_problem(layout, d.dtype))) builds.push_back({d, layout_problem(layout, d.dtype), {}, {}});
  }
  build_ahead(builds, device, options);
  PrecompileReport report;
  for (const KernelBuild& b : builds) {
    const std::string label = to_string(b.design) + " " + std::string(to_string(b.problem.layout));
    if (b.seconds) report.compile_seconds.emplace_back(label, *b.seconds);
    else report.failures.push_back(label + ": " + b.error);
  }
  return report;
}

}  // namespace rlgemm::measure
