#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "rlgemm/error.h"
#include "sass/agent.h"
#include "sass/optimize.h"
#include "sass_fixture.h"

namespace rlgemm::sass {
namespace {

// Fails the schedule whenever a chosen instruction leaves its slot: the game must end the episode, give -1
// and keep the last good schedule.
class FailingEvaluator : public Evaluator {
 public:
  Measurement evaluate(const Candidate& c) override {
    Measurement m;
    m.ok = c.schedule.order() == first_ || first_.empty();
    if (first_.empty()) first_ = c.schedule.order();
    m.time_us = 1.0;
    m.failure = "output differs";
    return m;
  }
  std::string name() const override { return "failing"; }
  std::vector<int> first_;
};

TEST(Agents, SearchFindsVerifiedGainsOnTheSyntheticModel) {
  RLGEMM_REQUIRE_NVDISASM();
  RLGEMM_SASS_CUBIN(path, "wgmma_tma_gemm");
  const Cubin cubin = Cubin::load(path);
  const KernelCode code = KernelCode::load(cubin, "wgmma_tma_gemm");
  SyntheticEvaluator model;
  auto patch = [&](const Schedule& s) { return cubin.write(s.text(), s.order()); };
  std::map<std::string, SearchResult> results;
  for (const std::string agent : {"greedy", "anneal", "ppo"}) {
    Game game(code, model, patch);
    SearchOptions options{600, 3, 32};
    SearchResult r = agent == "greedy" ? search_greedy(game, options)
                     : agent == "anneal" ? search_anneal(game, options)
                                         : search_ppo(game, options);
    EXPECT_LE(r.best_time_us, r.initial_time_us) << agent;
    EXPECT_LE(r.evaluations - r.confirmations, 600 + 2) << agent;
    EXPECT_TRUE(check_invariants(code, r.best_order).empty()) << agent;
    Schedule replay(code);
    for (const auto& m : r.path) replay.apply(m.move);
    EXPECT_EQ(replay.order(), r.best_order) << agent << ": the recorded path leads to the best schedule";
    results[agent] = r;
  }
  EXPECT_GT(results["anneal"].gain(), 0.0) << "the latency model rewards interleaving the epilogue's loads and stores";
  // Same seed, same result.
  Game game(code, model, patch);
  const SearchResult again = search_ppo(game, {600, 3, 32});
  EXPECT_EQ(again.best_order, results["ppo"].best_order);
}

// Every schedule equally fast; the compiled one measured once at its time (as the GPU evaluator's long
// reference timing does), every other measurement off by up to +-8% at random (seeded): a reward of noise only.
class NoiseOnlyEvaluator : public Evaluator {
 public:
  explicit NoiseOnlyEvaluator(uint64_t seed) : rng_(seed) {}
  Measurement evaluate(const Candidate&) override {
    Measurement m;
    m.ok = true;
    m.time_us = first_ ? 100.0 : 100.0 * (1.0 + std::uniform_real_distribution<double>(-0.08, 0.08)(rng_));
    first_ = false;
    return m;
  }
  std::string name() const override { return "noise"; }

 private:
  std::mt19937_64 rng_;
  bool first_ = true;
};

// Where no schedule is faster, the best a search reports is the luck of its measurements. Confirming each new
// best by fresh measurements (SearchOptions::confirm) takes most of that luck away; the confirmations are
// counted apart from the steps.
TEST(Agents, ConfirmingANewBestTakesMostOfTheLuckAway) {
  RLGEMM_REQUIRE_NVDISASM();
  RLGEMM_SASS_CUBIN(path, "mma_sync_gemm");
  const Cubin cubin = Cubin::load(path);
  const KernelCode code = KernelCode::load(cubin, "mma_sync_gemm");
  double gain[2] = {0, 0};
  for (const int confirm : {0, 4}) {
    NoiseOnlyEvaluator noise(7);
    Game game(code, noise, nullptr);
    SearchOptions options{300, 3, 32};
    options.confirm = confirm;
    const SearchResult r = search_anneal(game, options);
    gain[confirm ? 1 : 0] = r.gain();
    EXPECT_EQ(r.confirmations > 0, confirm > 0);
    EXPECT_EQ(r.confirmations % (confirm ? confirm : 1), 0);
    std::printf("confirm %d: reported gain %+.2f%%, %d evaluations, %d confirmations\n", confirm, 100 * r.gain(),
                r.evaluations, r.confirmations);
  }
  EXPECT_GT(gain[0], 0.05) << "300 noisy draws find a schedule that looks 5% faster";
  EXPECT_LT(gain[1], gain[0] / 2);
}

TEST(Agents, FailedEvaluationEndsTheEpisodeWithMinusOne) {
  RLGEMM_REQUIRE_NVDISASM();
  RLGEMM_SASS_CUBIN(path, "mma_sync_gemm");
  const Cubin cubin = Cubin::load(path);
  const KernelCode code = KernelCode::load(cubin, "mma_sync_gemm");
  FailingEvaluator failing;
  Game game(code, failing, nullptr);
  game.reset();
  const auto before = game.schedule().order();
  const StepResult r = game.step(game.schedule().legal_moves().front());
  EXPECT_EQ(r.reward, -1.0);
  EXPECT_TRUE(r.done);
  EXPECT_EQ(game.schedule().order(), before);
}

TEST(Agents, ObservationHasOneRowPerMovableInstruction) {
  RLGEMM_REQUIRE_NVDISASM();
  RLGEMM_SASS_CUBIN(path, "wgmma_tma_gemm");
  const KernelCode code = KernelCode::load(Cubin::load(path), "wgmma_tma_gemm");
  Schedule s(code);
  const auto mask = s.legal_mask();
  const auto rows = observe(s, mask);
  EXPECT_EQ(rows.size(), code.movable().size() * kObservationWidth);
}

TEST(SassOpt, WritesOnlyVerifiedCubinsAndReportsBadInput) {
  RLGEMM_REQUIRE_NVDISASM();
  RLGEMM_SASS_CUBIN(path, "mma_sync_gemm");
  namespace fs = std::filesystem;
  const fs::path out = fs::path(RLGEMM_BINARY_DIR) / "sass-test-cubins" / "opt_out.cubin";
  fs::remove(out);
  SassOptOptions o;
  o.cubin_path = path;
  o.kernel = "mma_sync_gemm";
  o.out_path = out.string();
  o.agent = "anneal";
  o.steps = 300;
  const auto report = run_sass_opt(o);
  EXPECT_TRUE(report.problems.empty());
  EXPECT_TRUE(report.written);
  EXPECT_TRUE(fs::exists(out));
  fs::remove(out);
  o.evaluator = "gpu";
  try {
    run_sass_opt(o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not available in this build"), std::string::npos);
  }
  o.evaluator = "synthetic";
  o.kernel = "missing";
  EXPECT_THROW(run_sass_opt(o), Error);
  EXPECT_FALSE(fs::exists(out));
}

TEST(Nvdisasm, RejectsJsonItCannotRead) {
  EXPECT_THROW(parse_nvdisasm_json("not json"), Error);
  EXPECT_THROW(parse_nvdisasm_json("{\"a\":1}"), Error);
  const auto fns = parse_nvdisasm_json(
      R"([{}, [{"function-name":"k","start":0,"length":32,"sass-instructions":[{"opcode":"NOP"},)"
      R"({"predicate":"@P0","opcode":"BRA","operands":"0x0","other-attributes":{"control-flow":"True"}}]}]])");
  ASSERT_EQ(fns.size(), 1u);
  EXPECT_TRUE(fns[0].instructions[1].control_flow);
  EXPECT_EQ(fns[0].instructions[1].text(), "@P0 BRA 0x0");
}

}  // namespace
}  // namespace rlgemm::sass
