// `rlgemm tune` from the command line: models' layers (--model --batch), the default backend (the GPU; the cost
// model only by name, and then said loudly), the per-model summary, and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "core/cuda_util.h"
#include "core/model_shapes.h"
#include "rlgemm/shapes.h"
#include "search/search_test_util.h"
#include "store/store.h"
#include "support/cli.h"

namespace rlgemm::search {
namespace {

using rlgemm::testing::read_text;
using rlgemm::testing::run_rlgemm;
using testing::TempDir;

const std::string kModels = std::string(RLGEMM_SOURCE_DIR) + "/bench/models/";

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(TuneCli, ModelLayersAreTunedWithAPerModelSummary) {
  TempDir dir;
  const std::string summary = (dir / "summary.csv").string();
  const auto r = run_rlgemm("tune --model " + kModels + "llama-3.2-1b.json --batch 1,64 --backend synthetic --budget 2 "
                            "--db " + (dir / "t.db").string() + " --summary " + summary + " --in-process");
  ASSERT_EQ(r.code, 0) << r.output;
  // Every distinct GEMM of the model at both token counts is one row of the result table.
  const auto gemms = model_gemms(load_model_config(kModels + "llama-3.2-1b.json"), {1, 64});
  EXPECT_EQ(count(r.output, "\ntn,"), gemms.size()) << r.output;
  EXPECT_NE(r.output.find("tn,fp16,64,128256,2048,graph,"), std::string::npos);  // lm_head, in the default mode
  // The synthetic backend says so at the start and at the end.
  EXPECT_EQ(count(r.output, "SYNTHETIC BACKEND"), 2u) << r.output;
  EXPECT_NE(r.output.find("summary of SYNTHETIC estimates"), std::string::npos);
  const std::string csv = read_text(summary);
  EXPECT_EQ(csv.rfind("model,backend,gpu,shapes,tuned,kernel_faster,evaluations,wall_s,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\nmeta-llama/Llama-3.2-1B,synthetic,"), std::string::npos) << csv;
}

TEST(TuneCli, ShapesStartFromThePredictorsGuesses) {
  // The built-in predictor (where this build has one) proposes the first designs of each shape.
  TempDir dir;
  const auto r = run_rlgemm("tune --shapes 512,4096,4096 --backend synthetic --budget 3 --guesses 2 --in-process --db " +
                            (dir / "t.db").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const bool has_predictor = r.output.find("best guesses") != std::string::npos;
  EXPECT_TRUE(has_predictor || r.output.find("no predictor for") != std::string::npos) << r.output;
  if (has_predictor) {
    Store store(dir / "t.db");
    const auto gpus = store.gpus();
    ASSERT_EQ(gpus.size(), 1u);
    const auto rows = store.measurements(gpus[0].first, {{512, 4096, 4096}, Layout::kTN}, TimingMode::kGraph);
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[0].strategy, "predicted");
    EXPECT_EQ(rows[1].strategy, "predicted");
  }
}

TEST(TuneCli, BadInputNamesTheRule) {
  TempDir dir;
  std::ofstream(dir / "no-hidden.json") << R"({"model_type": "llama", "intermediate_size": 11008,
      "num_attention_heads": 32, "vocab_size": 32000})";
  auto r = run_rlgemm("tune --model " + (dir / "no-hidden.json").string() + " --backend synthetic --budget 2");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("'hidden_size'"), std::string::npos) << r.output;
  r = run_rlgemm("tune --model " + kModels + "yi-6b.json --batch 0,8 --backend synthetic --budget 2");
  EXPECT_EQ(r.code, 2) << r.output;
  r = run_rlgemm("tune --shapes 64,64,64 --batch 8 --backend synthetic --budget 2");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--round"), std::string::npos) << r.output;
  r = run_rlgemm("tune --budget 2 --backend synthetic");
  EXPECT_EQ(r.code, 2) << r.output;
  r = run_rlgemm("tune --shapes 64,64,64 --model " + kModels + "yi-6b.json --backend synthetic --budget 2");
  EXPECT_EQ(r.code, 2) << r.output;
  // bench reads models the same way, and checks them before touching a GPU.
  r = run_rlgemm("bench --model " + (dir / "no-hidden.json").string() + " --batch 1 --impl lt_auto");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("'hidden_size'"), std::string::npos) << r.output;
}

TEST(TuneCli, DefaultBackendIsTheGpu) {
  TempDir dir;
  std::string why;
  if (cuda_device_available(&why)) GTEST_SKIP() << "a GPU is present: the default backend would measure on it";
  const auto r = run_rlgemm("tune --shapes 64,64,64 --budget 1 --db " + (dir / "t.db").string());
  EXPECT_EQ(r.code, 3) << r.output;  // no GPU: the cost model is never taken silently
  EXPECT_NE(r.output.find("--backend synthetic"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "t.db"));
}

// The committed LLM shape sets are what `rlgemm model-shapes` lists for the committed configs
// (bench/shapes/README.md); the held-out part is never in the tuning part.
TEST(ModelShapesCli, CommittedLlmShapeSetsAreReproduced) {
  TempDir dir;
  const std::string shapes_dir = std::string(RLGEMM_SOURCE_DIR) + "/bench/shapes/";
  auto models = [&](const std::vector<std::string>& names) {
    std::string args;
    for (const auto& n : names) args += " --model " + kModels + n + ".json";
    return args;
  };
  const std::string batch = " --batch 1,16,128,512,2048,8192";
  const std::vector<std::string> heldout{"qwen2.5-1.5b", "qwen2.5-7b", "qwen2.5-32b", "gemma-7b", "gemma-2-9b",
                                         "gemma-2-27b", "phi-3-mini", "phi-3-medium", "falcon-7b"};
  const std::vector<std::string> tune{"llama-2-7b", "llama-2-70b", "llama-3-8b", "llama-3.2-1b", "mistral-7b",
                                      "mixtral-8x7b", "deepseek-llm-7b", "deepseek-v2-lite", "pythia-1.4b",
                                      "pythia-6.9b", "gpt-neox-20b", "yi-6b", "yi-34b"};
  auto r = run_rlgemm("model-shapes" + models(heldout) + batch + " --out " + (dir / "h.csv").string());
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_rlgemm("model-shapes" + models(tune) + batch + " --exclude " + shapes_dir + "llm-heldout.csv --out " +
                 (dir / "t.csv").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto heldout_shapes = load_shapes_csv(shapes_dir + "llm-heldout.csv");
  const auto tune_shapes = load_shapes_csv(shapes_dir + "llm-tune.csv");
  EXPECT_EQ(load_shapes_csv(dir / "h.csv"), heldout_shapes);
  EXPECT_EQ(load_shapes_csv(dir / "t.csv"), tune_shapes);
  const std::set<Shape> held(heldout_shapes.begin(), heldout_shapes.end());
  for (const Shape& s : tune_shapes) EXPECT_EQ(held.count(s), 0u) << s.to_string();
  EXPECT_GE(heldout_shapes.size() + tune_shapes.size(), 300u);
}

}  // namespace
}  // namespace rlgemm::search
