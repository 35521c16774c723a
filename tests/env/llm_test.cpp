// `rlgemm propose --llm`'s pieces against a local stub of an OpenAI-compatible endpoint that returns recorded
// answers: the request it sends, the prompt's contents, reading a submission out of an answer.
#include <httplib.h>
#include <gtest/gtest.h>

#include <thread>

#include "env/llm.h"
#include "rlgemm/design.h"
#include "rlgemm/error.h"
#include "env_test_util.h"
#include "support/cli.h"

namespace rlgemm::env {
namespace {

using nlohmann::json;
using testing::StubEndpoint;

const char* kDesignAnswer = "For this shape I would use\n\n`sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg`\n\nbecause...";
const char* kSourceAnswer =
    "Here is a kernel:\n```cuda\nextern \"C\" __global__ void k(const half* a) {}\n"
    "extern \"C\" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void* w, size_t s,"
    " cudaStream_t st) { return 0; }\n```\nIt is fast.";

TEST(EnvLlm, ChatCompletionSendsTheModelAndMessagesAndReturnsTheContent) {
  StubEndpoint stub({kDesignAnswer});
  ChatOptions options;
  options.model = "kernel-writer-7b";
  options.api_key = "secret";
  for (const std::string& url : {stub.url(), stub.url() + "/v1", stub.url() + "/v1/chat/completions"}) {
    options.url = url;
    EXPECT_EQ(chat_completion(options, "system text", "user text"), kDesignAnswer) << url;
  }
  ASSERT_EQ(stub.requests.size(), 3u);
  EXPECT_EQ(stub.requests[0]["model"], "kernel-writer-7b");
  EXPECT_EQ(stub.requests[0]["messages"][0]["role"], "system");
  EXPECT_EQ(stub.requests[0]["messages"][1]["content"], "user text");
  EXPECT_EQ(stub.authorization[0], "Bearer secret");
}

TEST(EnvLlm, EndpointFailuresAreErrorsNamingTheEndpoint) {
  StubEndpoint busy({"x"}, 503);
  ChatOptions options;
  options.url = busy.url();
  options.model = "m";
  try {
    chat_completion(options, "s", "u");
    FAIL() << "an HTTP 503 must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("HTTP 503"), std::string::npos) << e.what();
  }
  options.url = "http://127.0.0.1:1";
  options.timeout_s = 2;
  EXPECT_THROW(chat_completion(options, "s", "u"), Error);
  options.url = "ftp://example";
  EXPECT_THROW(chat_completion(options, "s", "u"), Error);
}

TEST(EnvLlm, ReadsADesignOrASourceOutOfAnAnswer) {
  const auto design = submission_from_answer(kDesignAnswer);
  ASSERT_TRUE(design);
  EXPECT_EQ((*design)["design"], "sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg");
  const auto source = submission_from_answer(kSourceAnswer);
  ASSERT_TRUE(source);
  EXPECT_NE((*source)["source"].get<std::string>().find("rlgemm_launch"), std::string::npos);
  EXPECT_EQ((*source)["source"].get<std::string>().find("```"), std::string::npos);
  EXPECT_FALSE(submission_from_answer("I cannot help with that."));
  EXPECT_FALSE(submission_from_answer("sm80/this/is/not/a/design"));
}

TEST(EnvLlm, ThePromptCarriesTheShapeTheGpuAndTheBestDesigns) {
  BestDesign best;
  best.problem = Problem{{4096, 4096, 4096}, Layout::kTN};
  best.design = "sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg";
  best.median_us = 812.5;
  best.speedup = 1.07;
  const std::string prompt = propose_user_prompt(Problem{{1024, 2048, 512}, Layout::kNN}, "NVIDIA H100 80GB HBM3", {best});
  EXPECT_NE(prompt.find("1024,2048,512"), std::string::npos);
  EXPECT_NE(prompt.find("layout nn"), std::string::npos);
  EXPECT_NE(prompt.find("H100"), std::string::npos);
  EXPECT_NE(prompt.find(best.design), std::string::npos);
  EXPECT_NE(prompt.find("1.07x"), std::string::npos);
  EXPECT_NE(propose_user_prompt(best.problem, "g", {}).find("No design has been measured"), std::string::npos);
  // The grammar's examples in the system prompt are designs the parser accepts.
  const std::string system = propose_system_prompt();
  EXPECT_NE(system.find("rlgemm_launch"), std::string::npos);
  const auto example = submission_from_answer(system);
  ASSERT_TRUE(example);
  EXPECT_NO_THROW(parse_design((*example)["design"].get<std::string>()));
}

TEST(EnvLlm, ProposeWithoutAPolicyOrEndpointIsABadInvocation) {
  const auto none = testing::run_rlgemm("propose --shape 128,128,128");
  EXPECT_EQ(none.code, 2) << none.output;
  EXPECT_NE(none.output.find("--policy FILE or --llm URL"), std::string::npos) << none.output;
  const auto no_model = testing::run_rlgemm("propose --llm http://127.0.0.1:1 --shape 128,128,128");
  EXPECT_EQ(no_model.code, 2) << no_model.output;
  EXPECT_NE(no_model.output.find("--model"), std::string::npos) << no_model.output;
}

}  // namespace
}  // namespace rlgemm::env
