// On a GPU: every submission of tests/env/kernels through the whole service (compile, worker, capture, gate,
// timing beside the vendor calls, recheck on new inputs) gets the verdict and the reason its first line names;
// rlgemm's own designs are accepted; a submission may be evaluated again. Skips without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "env/reward.h"
#include "env/service.h"
#include "env_test_util.h"
#include "store/store.h"
#include "support/gpu.h"

namespace rlgemm::env {
namespace {

using nlohmann::json;

class EnvGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // A hung kernel is reported by the worker's own watchdog well before the service's timeout.
    ::setenv("RLGEMM_WATCHDOG_S", "10", 1);
  }
  std::unique_ptr<Service> make_service(const std::string& name) {
    const auto db = std::filesystem::temp_directory_path() / ("rlgemm-env-gpu-" + name + "-" + std::to_string(::getpid()) + ".db");
    std::filesystem::remove(db);
    ServiceOptions options;
    options.db = db;
    options.start_workers = gpu_workers("1", testing::rlgemm_binary(), 300);
    return std::make_unique<Service>(options);
  }
};

TEST_F(EnvGpu, EveryKernelCaseGetsItsVerdict) {
  RLGEMM_REQUIRE_GPU();
  auto service = make_service("cases");
  int honest = 0;
  for (const auto& c : testing::kernel_cases()) {
    const json answer = service->evaluate({{"source", c.source}, {"shape", "256,384,512"}});
    ASSERT_TRUE(answer.contains("record")) << c.name << ": " << answer.dump(2);
    // "a|b": either reason is right (the CUDA runtime may refuse the launch, or let it run outside the graph).
    EXPECT_EQ(testing::verdict_mismatch(c, answer.at("record")), "") << c.name << ": " << answer.at("record").dump(2);
    honest += c.expect == "accepted";
  }
  EXPECT_GE(honest, 10);
}

TEST_F(EnvGpu, RlgemmDesignsAreAcceptedAndMayBeEvaluatedAgain) {
  RLGEMM_REQUIRE_GPU();
  auto service = make_service("designs");
  for (const char* design : {"sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg",
                             "sm80/64x64x64/w32x32/s4/swz/raster_m.g8/splitk2.serial/epi_reg"}) {
    for (int again = 0; again < 2; ++again) {
      const json record = service->evaluate({{"design", design}, {"shape", "1024,1024,1024"}}).at("record");
      EXPECT_EQ(testing::verdict_mismatch({design, "", "accepted", ""}, record), "") << design << ": " << record.dump(2);
      EXPECT_EQ(record.at("speedup_vs_best_vendor_interval").value("rounds", 0), kRewardRounds) << record.dump(2);
      EXPECT_EQ(record.at("speedup_vs_best_vendor_offline_interval").value("rounds", 0), kRewardRounds);
    }
  }
  // The same source twice: a second evaluation finds no state left from the first.
  const auto honest = testing::kernel_case("honest_wmma");
  for (int again = 0; again < 2; ++again) {
    const json record = service->evaluate({{"source", honest.source}, {"shape", "512,512,512"}, {"layout", "nn"}}).at("record");
    EXPECT_EQ(testing::verdict_mismatch(honest, record), "") << record.dump(2);
  }
  EXPECT_EQ(service->recent(100).size(), 6u);
}

}  // namespace
}  // namespace rlgemm::env

namespace rlgemm::env {
namespace {

// `rlgemm propose --llm` against a stub endpoint with recorded answers: each is evaluated, an accepted design is
// kept as a measurement, the best is named.
TEST(EnvGpuPropose, EvaluatesEveryAnswerAndKeepsTheBestInTheDatabase) {
  RLGEMM_REQUIRE_GPU();
  testing::StubEndpoint stub({"Try sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg here.",
                              "```cuda\n" + testing::kernel_case("honest_tiled").source + "```",
                              "I would rather not.",
                              "```cuda\n" + testing::kernel_case("host_sync").source + "```"});
  const auto db = std::filesystem::temp_directory_path() / ("rlgemm-env-propose-" + std::to_string(::getpid()) + ".db");
  std::filesystem::remove(db);
  const auto run = testing::run_rlgemm("propose --llm " + stub.url() + " --model recorded --shape 512,512,512 --rounds 4 --db " +
                                       db.string());
  EXPECT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.output.find("round 1: sm80/128x128x32"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("round 3: the answer holds no design"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("rejected (host_sync)"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("best: "), std::string::npos) << run.output;
  ASSERT_EQ(stub.requests.size(), 4u);
  EXPECT_NE(stub.requests[0]["messages"][1]["content"].get<std::string>().find("512,512,512"), std::string::npos);
  Store store(db);
  EXPECT_EQ(store.evaluations(10).size(), 3u);
  // The accepted design, in both modes it was timed in, paired with the vendor calls of its rounds.
  const auto best = store.best_designs();
  ASSERT_EQ(best.size(), 2u);
  for (const BestDesign& b : best) {
    EXPECT_EQ(b.design, "sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg");
    EXPECT_EQ(b.paired.rounds, 16);
    EXPECT_GT(b.paired.reference_us, 0);
  }
  EXPECT_NE(best[0].mode, best[1].mode);
  // The second request's prompt names the design measured in the first.
  EXPECT_NE(stub.requests[1]["messages"][1]["content"].get<std::string>().find("sm80/128x128x32"), std::string::npos);
}

}  // namespace
}  // namespace rlgemm::env
