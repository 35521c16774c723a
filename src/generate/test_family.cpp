// Fault-injection family: kernels that fault, hang or answer wrongly on purpose, for tests of how the
// tuner isolates bad candidates. Never proposed by a search.
#include <cstring>

#include "generate/families.h"
#include "kernels/test/params.h"
#include "rlgemm/error.h"

namespace rlgemm {
namespace {

const char* behaviour_function(TestBehavior t) {
  switch (t) {
    case TestBehavior::kFault: return "fault";
    case TestBehavior::kHang: return "hang";
    case TestBehavior::kWrong: return "wrong";
  }
  return "?";
}

class TestFamily final : public KernelFamily {
 public:
  std::string arch(const Design&) const override { return "sm_80"; }

  std::string source(const Design& d, const Problem&, const std::string& kernel_name) const override {
    if (d.family != Family::kTest) fail("the test family cannot generate " + to_string(d));
    return "// " + to_string(d) + "\n#include \"test/faults.cuh\"\n\nextern \"C\" __global__ void " + kernel_name +
           "(const __grid_constant__ rlgemm::test::Params params) {\n  rlgemm::test::" +
           behaviour_function(d.test) + "(params);\n}\n";
  }

  LaunchPlan plan(const Design& d, const Problem& problem, const DeviceInfo&) const override {
    LaunchPlan plan;
    plan.block[0] = d.test == TestBehavior::kWrong ? 256 : 32;
    plan.grid[0] = d.test == TestBehavior::kWrong ? unsigned((problem.shape.m * problem.shape.n + 255) / 256) : 1;
    return plan;
  }

  void params(const Design&, const Problem& problem, const GemmOperands& ops, const LaunchPlan&,
              ParamBlock& out) const override {
    test::Params p{};
    p.d = static_cast<unsigned short*>(ops.c);
    p.m = int(problem.shape.m), p.n = int(problem.shape.n), p.ldd = int(problem.ldc());
    std::memcpy(out.bytes, &p, sizeof(p));
    out.size = sizeof(p);
  }
};

}  // namespace

const KernelFamily& test_family() {
  static const TestFamily family;
  return family;
}

}  // namespace rlgemm
