// `rlgemm propose --policy FILE --shape M,N,K [--layout tn]`: the trained policy's design for a shape, with
// no measurement at all (greedy decoding).
// `rlgemm propose --llm URL --model NAME --shape M,N,K [--rounds N] [--db FILE]`: asks an OpenAI-compatible
// chat endpoint for kernels of the shape (designs in rlgemm's grammar or source under the kernel contract),
// with the GPU and the best designs measured so far in the prompt; each answer is evaluated by the evaluation
// service on the GPU (recorded in the database's evaluations), an accepted design is recorded as a measurement
// (strategy "llm"), so that the database's best designs keep the best.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "cli/command.h"
#include "env/llm.h"
#include "env/service.h"
#include "rlgemm/error.h"
#include "search/rl_policy.h"

namespace rlgemm::cli {
namespace {

struct ProposeArgs {
  std::string policy;
  std::string shape;
  std::string layout = "tn";
  int sm_count = 0;
  std::string llm;
  std::string model;
  std::string api_key_env = "OPENAI_API_KEY";
  int rounds = 4;
  std::string db = "rlgemm-tune.db";
  std::string gpus = "1";
  std::string arch;
  double timeout_s = 300;
};

// The best designs of this GPU for the prompt, by their gain in GPU time (graph mode, the tuner's default): the
// shape's own first, then the others, fastest speedup first.
std::vector<BestDesign> prompt_designs(Store& store, int64_t gpu_id, const Problem& problem, size_t limit) {
  std::vector<BestDesign> all = store.best_designs(), own, other;
  for (auto& b : all) {
    if (b.gpu_id != gpu_id || b.mode != TimingMode::kGraph) continue;
    (b.problem == problem ? own : other).push_back(b);
  }
  std::sort(other.begin(), other.end(), [](const BestDesign& x, const BestDesign& y) {
    return x.speedup.value_or(0) > y.speedup.value_or(0);
  });
  for (auto& b : other)
    if (own.size() < limit) own.push_back(b);
  return own;
}

int propose_llm(const ProposeArgs& a) {
  const Problem problem{parse_shape(a.shape), parse_layout(a.layout)};
  if (a.model.empty()) fail("--llm needs --model NAME");
  env::ChatOptions chat;
  chat.url = a.llm;
  chat.model = a.model;
  if (const char* key = std::getenv(a.api_key_env.c_str())) chat.api_key = key;
  env::ServiceOptions options;
  options.db = a.db;
  options.arch = a.arch;
  options.start_workers = env::gpu_workers(a.gpus, self_exe(), a.timeout_s);
  env::Service service(options);
  Store store(a.db);
  const GpuIdentity gpu = service.gpu_identity();
  const int64_t gpu_id = store.gpu_id(gpu);
  const std::string gpu_name = gpu.name + " (" + std::to_string(gpu.sm_count) + " SMs, sm_" +
                               std::to_string(gpu.cc_major * 10 + gpu.cc_minor) + ")";
  std::optional<nlohmann::json> best;
  for (int round = 0; round < a.rounds; ++round) {
    std::string answer;
    try {
      answer = env::chat_completion(chat, env::propose_system_prompt(),
                                    env::propose_user_prompt(problem, gpu_name, prompt_designs(store, gpu_id, problem, 8)));
    } catch (const Error& e) {
      // One failed request (the endpoint busy, a timeout) costs its round, not the run.
      std::printf("round %d: %s\n", round + 1, e.what());
      continue;
    }
    auto submission = env::submission_from_answer(answer);
    if (!submission) {
      std::printf("round %d: the answer holds no design and no source with rlgemm_launch\n", round + 1);
      continue;
    }
    (*submission)["shape"] = problem.shape.to_string();
    (*submission)["layout"] = std::string(to_string(problem.layout));
    const nlohmann::json answer_json = service.evaluate(*submission);
    const nlohmann::json& record = answer_json.at("record");
    const std::string what = submission->contains("design") ? (*submission)["design"].get<std::string>() : "source";
    if (record.value("verdict", "") != "accepted") {
      const nlohmann::json& rejection = record.at("rejection");
      std::printf("round %d: %s rejected (%s): %s\n", round + 1, what.c_str(), rejection.value("reason", "").c_str(),
                  rejection.value("detail", "").c_str());
      continue;
    }
    // The headline (time_us, speedup_vs_best_vendor) is graph mode's, timed paired with the vendor calls.
    const double time_us = record.at("time_us").get<double>(), speedup = record.at("speedup_vs_best_vendor").get<double>();
    std::printf("round %d: %s accepted: %.2f us, %.3fx the best vendor call (%s)\n", round + 1, what.c_str(), time_us,
                speedup, record.value("best_vendor", "").c_str());
    if (submission->contains("design")) {
      // A design joins the database as the tuner records one, in both modes the service timed: paired, against
      // the best vendor call of its rounds (never slower than lt_auto, the tuner's reference: a gain over it is
      // at most the design's gain over lt_auto).
      for (const auto& [mode, suffix] : {std::pair{TimingMode::kGraph, ""}, std::pair{TimingMode::kOffline, "_offline"}}) {
        const std::string key(suffix);
        const double us = record.at("time_us" + key).get<double>();
        const nlohmann::json& interval = record.at("speedup_vs_best_vendor" + key + "_interval");
        MeasurementRecord m;
        m.gpu_id = gpu_id;
        m.problem = problem;
        m.design = what;
        m.mode = mode;
        m.measurement.status = MeasureStatus::kOk;
        m.measurement.timing = {us, us, us, interval.at("rounds").get<int>()};
        m.measurement.paired = PairedGain{record.at("best_vendor_us" + key).get<double>(),
                                          std::log(record.at("speedup_vs_best_vendor" + key).get<double>()),
                                          interval.at("low").get<double>() - 1, interval.at("high").get<double>() - 1,
                                          interval.at("rounds").get<int>()};
        m.reward = m.measurement.paired->log_ratio;
        m.strategy = "llm";
        store.record(m);
      }
    }
    if (!best || speedup > best->at("speedup_vs_best_vendor").get<double>()) best = record;
  }
  if (!best) {
    std::printf("no accepted kernel in %d rounds\n", a.rounds);
    return 1;
  }
  std::printf("best: %s, %.2f us, %.3fx the best vendor call (evaluation %lld in %s)\n",
              best->contains("design") ? (*best)["design"].get<std::string>().c_str() : "source",
              (*best)["time_us"].get<double>(), (*best)["speedup_vs_best_vendor"].get<double>(),
              (long long)(*best)["id"].get<int64_t>(), a.db.c_str());
  return 0;
}

CommandRegistration registration("propose", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand("propose", "Propose a kernel design for a shape: the trained policy's, or a chat model's, evaluated");
  auto args = std::make_shared<ProposeArgs>();
  cmd->add_option("--policy", args->policy, "Policy file written by `rlgemm tune --strategy rl --policy FILE`");
  cmd->add_option("--shape", args->shape, "M,N,K")->required();
  cmd->add_option("--layout", args->layout, "tn or nn")->default_val("tn");
  cmd->add_option("--sm-count", args->sm_count, "SM count of the target GPU (default: the one the policy trained on)");
  cmd->add_option("--llm", args->llm, "OpenAI-compatible chat endpoint (http://host:port): ask it instead of a policy");
  cmd->add_option("--model", args->model, "--llm: the model name the endpoint serves");
  cmd->add_option("--api-key-env", args->api_key_env, "--llm: environment variable holding the API key, if any")
      ->default_val("OPENAI_API_KEY");
  cmd->add_option("--rounds", args->rounds, "--llm: answers asked for and evaluated")->default_val(4)->check(CLI::Range(1, 100000));
  cmd->add_option("--db", args->db, "--llm: tuning database (best designs for the prompt; evaluations recorded)")
      ->default_val("rlgemm-tune.db");
  cmd->add_option("--gpus", args->gpus, "--llm: GPUs evaluating the answers")->default_val("1");
  cmd->add_option("--arch", args->arch, "--llm: nvcc -arch for source answers (default: the GPU's)");
  cmd->add_option("--timeout", args->timeout_s, "--llm: seconds one evaluation may take")->default_val(300);
  return [args] {
    if (!args->llm.empty()) {
      if (!args->policy.empty()) fail("--policy and --llm are two ways to propose: give one");
      return propose_llm(*args);
    }
    if (args->policy.empty()) fail("propose needs --policy FILE or --llm URL --model NAME");
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
