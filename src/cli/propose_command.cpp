// `rlgemm propose --policy FILE --shape M,N,K [--layout tn]`: the trained policy's design for a shape, with
// no measurement at all (greedy decoding).
#include <cstdio>

#include "cli/command.h"
#include "rlgemm/error.h"
#include "search/rl_policy.h"

namespace rlgemm::cli {
namespace {

struct ProposeArgs {
  std::string policy;
  std::string shape;
  std::string layout = "tn";
  int sm_count = 0;
};

CommandRegistration registration("propose", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand("propose", "Print the trained policy's kernel design for a shape, without measuring");
  auto args = std::make_shared<ProposeArgs>();
  cmd->add_option("--policy", args->policy, "Policy file written by `rlgemm tune --strategy rl --policy FILE`")
      ->required();
  cmd->add_option("--shape", args->shape, "M,N,K")->required();
  cmd->add_option("--layout", args->layout, "tn or nn")->default_val("tn");
  cmd->add_option("--sm-count", args->sm_count, "SM count of the target GPU (default: the one the policy trained on)");
  return [args] {
    const search::Policy policy = search::Policy::load(args->policy);
    const Problem problem{parse_shape(args->shape), parse_layout(args->layout)};
    const search::DesignSpace space(search::spec_from_signature(policy.space_signature()), problem.layout);
    const int sms = args->sm_count > 0 ? args->sm_count : policy.sm_count();
    std::printf("%s\n", to_string(search::propose(policy, space, problem, sms)).c_str());
    return 0;
  };
});

}  // namespace
}  // namespace rlgemm::cli
