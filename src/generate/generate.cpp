#include "generate/generate.h"

#include "generate/families.h"
#include "generate/sm90_family.h"
#include "rlgemm/error.h"

namespace rlgemm {

const KernelFamily& family_for(const Design& design) {
  switch (design.family) {
    case Family::kSm80: return sm80_family();
    case Family::kSm90: return sm90_family();
    case Family::kTest: return test_family();
  }
  fail("unknown kernel family");
}

std::string element_type_prelude(const Design& design) {
  return design.dtype == DType::kBF16 ? "#define RLGEMM_BF16 1  // bf16 A, B and C\n" : "";
}

std::string kernel_name(const Design& design, const Problem& problem) {
  std::string name = "rlgemm_" + to_string(design) + "_" + std::string(to_string(problem.layout));
  if (design.static_shape && design.family != Family::kTest) name += "_" + problem.shape.to_string();
  for (char& c : name) {
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum) c = '_';
  }
  return name;
}

namespace {

// "sm_90a" -> 90; -1 when the text is not of the form sm_<digits>[a].
int arch_number(const std::string& arch) {
  if (arch.size() < 5 || arch.compare(0, 3, "sm_") != 0) return -1;
  size_t end = arch.size() - (arch.back() == 'a' ? 1 : 0);
  int value = 0;
  for (size_t i = 3; i < end; ++i) {
    if (arch[i] < '0' || arch[i] > '9') return -1;
    value = value * 10 + (arch[i] - '0');
  }
  return end > 3 ? value : -1;
}

}  // namespace

std::string arch_for_device(const Design& design, int cc_major, int cc_minor) {
  if (design.family == Family::kSm90) return "sm_90a";
  return "sm_" + std::to_string(cc_major * 10 + cc_minor);
}

GeneratedKernel generate_kernel(const Design& design, const Problem& problem, const std::string& arch) {
  if (auto why = why_invalid(design, problem.layout))
    fail("design " + to_string(design) + " cannot be built for layout " + std::string(to_string(problem.layout)) +
         ": " + *why);
  if (design.family != Family::kTest && design.dtype != problem.dtype)
    fail("design " + to_string(design) + " cannot be built for a " + std::string(to_string(problem.dtype)) +
         " problem: the design's element type (" + std::string(to_string(design.dtype)) + ") must be the problem's");
  const KernelFamily& family = family_for(design);
  GeneratedKernel kernel;
  kernel.name = kernel_name(design, problem);
  kernel.arch = arch.empty() ? family.arch(design) : arch;
  const int number = arch_number(kernel.arch);
  if (number < 0) fail("unknown architecture '" + kernel.arch + "': expected sm_80, sm_90a, ...");
  if (design.family == Family::kSm90 && kernel.arch != "sm_90a")
    fail("sm90 designs use wgmma and TMA, which need sm_90a (got " + kernel.arch + ")");
  if (number < 80) fail("rlgemm kernels need sm_80 or later (got " + kernel.arch + ")");
  if (design.pdl && number < 90)
    fail("design " + to_string(design) + " cannot be built for " + kernel.arch +
         ": programmatic dependent launch (/pdl, griddepcontrol) needs sm_90 or later");
  kernel.source = family.source(design, problem, kernel.name);
  return kernel;
}

Problem layout_problem(Layout layout, DType dtype) {
  Problem p;
  p.shape = Shape{128, 128, 8192};  // K deep enough for every split-K design (64 slices of 128)
  p.layout = layout;
  p.dtype = dtype;
  return p;
}

}  // namespace rlgemm
