// Turning a design into a kernel: the family that generates it, the kernel's name, and its complete
// NVRTC translation unit.
#pragma once

#include <string>

#include "generate/kernel_family.h"
#include "rlgemm/design.h"
#include "rlgemm/problem.h"

namespace rlgemm {

struct GeneratedKernel {
  std::string name;    // the extern "C" entry point
  std::string source;  // complete translation unit; includes only embedded headers
  std::string arch;    // "sm_80" or "sm_90a"
};

// A C identifier naming the kernel of (design, layout) -- and of the shape too for static designs:
// "rlgemm_" + the design's text form with every character outside [A-Za-z0-9] turned into '_' + layout.
std::string kernel_name(const Design& design, const Problem& problem);

// Checks the design (why_invalid, and its element type against the problem's) and generates its kernel;
// throws Error(kInvalidInput) with the reason when the design cannot be built for this problem. `arch` ("sm_80", "sm_86", "sm_90", "sm_90a",
// ...) overrides the family's architecture: sm80 and test kernels compile for any sm_80 or later (a
// cubin runs only on its own major architecture, so a Hopper GPU needs them built for sm_90); sm90
// kernels only for sm_90a.
GeneratedKernel generate_kernel(const Design& design, const Problem& problem, const std::string& arch = "");

// The architecture to build `design` for on a GPU of compute capability major.minor.
std::string arch_for_device(const Design& design, int cc_major, int cc_minor);

// The problem a design compiles for when the shape is a run-time argument: a representative shape with
// the given layout and element type (static designs need the real shape).
Problem layout_problem(Layout layout, DType dtype = DType::kF16);

}  // namespace rlgemm
