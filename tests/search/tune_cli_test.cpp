// `rlgemm tune` from the command line: models' layers (--model --batch), the default backend (the GPU; the cost
// model only by name, and then said loudly), the per-model summary, and bad input.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "core/cuda_util.h"
#include "core/model_shapes.h"
#include "predict/predictor.h"
#include "rlgemm/shapes.h"
#include "search/search_test_util.h"
#include "search/synthetic_measurer.h"
#include "store/store.h"
#include "support/cli.h"

namespace rlgemm::search {
namespace {

using rlgemm::testing::read_text;
using rlgemm::testing::rlgemm_binary;
using rlgemm::testing::run_rlgemm;
using testing::TempDir;

const std::string kModels = std::string(RLGEMM_SOURCE_DIR) + "/bench/models/";
// The synthetic backend's GPU, two designs of its space and a tuned table's header, for the tables these tests write.
const std::string kSyntheticGpu = "synthetic H100 (cost model)";
const std::string kBigDesign = "sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma";
const std::string kTinyDesign = "sm80/16x64x64/w16x16/s2/swz/raster_m.g1/splitk1/epi_reg";
const std::string kTableHeader = "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto,cublaslt_candidate,dtype\n";

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
  // Where the measuring took its time, after each model's table.
  EXPECT_NE(r.output.find("measuring time by phase over "), std::string::npos) << r.output;
  const std::string csv = read_text(summary);
  EXPECT_EQ(csv.rfind("model,backend,gpu,shapes,tuned,kernel_faster,evaluations,wall_s,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\nmeta-llama/Llama-3.2-1B,synthetic,"), std::string::npos) << csv;
}

TEST(TuneCli, ANegativeWaveFitCountIsRefused) {
  TempDir dir;
  const auto r = run_rlgemm("tune --shapes 512,4096,4096 --backend synthetic --budget 2 --wave-fit -1 --in-process --db " +
                            (dir / "t.db").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--wave-fit must be >= 0"), std::string::npos) << r.output;
}

// Ctrl-C or timeout(1)'s SIGINT ends a tune once the batch in flight is recorded: the result table and the summary
// are printed for what was tuned, the database is closed whole (no write-ahead log left beside it), and the same
// command goes on from there without measuring a design twice.
TEST(TuneCli, ASignalEndsTheRunAfterTheBatchInFlightAndTheSameCommandGoesOn) {
  TempDir dir;
  const std::string db = (dir / "t.db").string();
  const std::string shapes = (dir / "shapes.csv").string();
  std::ofstream(shapes) << "M,N,K\n512,4096,4096\n1024,1024,1024\n64,4096,4096\n";
  // 36 measurements of 200 ms each: the signal at 5 s comes in the middle, whatever the start costs.
  const std::string args = "tune --shapes " + shapes + " --layout tn --backend synthetic --delay-ms 200 --budget 12 "
                           "--round 4 --guesses 0 --db " + db;
  const auto r = rlgemm::testing::run_command("timeout --preserve-status -s INT 5 " + rlgemm_binary() + " " + args);
  EXPECT_EQ(r.code, 130) << r.output;  // as rlgemm bench: the run did not finish
  EXPECT_NE(r.output.find("rlgemm tune: stopped by a signal after "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" of 3 problems"), std::string::npos) << r.output;
  // The workers are not the signal's: no measurement crashed.
  EXPECT_EQ(r.output.find("crashed"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("layout,dtype,m,n,k,mode,evaluations,"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("measuring time by phase over "), std::string::npos) << r.output;
  // The workers built each round's kernels at once before measuring them (the synthetic backend's estimate).
  std::smatch built;
  ASSERT_TRUE(std::regex_search(r.output, built, std::regex("; ([0-9.]+) s of wall time building batches ahead")))
      << r.output;
  EXPECT_GT(std::stod(built[1].str()), 0.0) << r.output;
  EXPECT_FALSE(std::filesystem::exists(db + "-wal")) << "the database was not closed";
  size_t first = 0;
  {
    Store store(db);
    first = size_t(store.count_measurements());
  }
  EXPECT_GT(first, 0u);
  EXPECT_LT(first, 36u);
  const auto again = run_rlgemm(args);
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(again.output.find("stopped by a signal"), std::string::npos) << again.output;
  Store store(db);
  EXPECT_EQ(store.count_measurements(), 36);  // 12 each, none measured twice
}

// Runs on several GPUs share a shape list out: each tunes its shard into its own database, and tuned-table
// reads them together.
TEST(TuneCli, ShardsOfAShapeListTuneEveryShapeOnce) {
  TempDir dir;
  const std::string shapes = (dir / "shapes.csv").string();
  std::ofstream(shapes) << "M,N,K\n512,4096,4096\n1024,1024,1024\n64,4096,4096\n";
  for (const char* shard : {"0/2", "1/2"}) {
    const auto r = run_rlgemm("tune --shapes " + shapes + " --shard " + shard + " --backend synthetic --budget 2 "
                              "--guesses 0 --in-process --db " + (dir / (std::string("t") + shard[0] + ".db")).string());
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_EQ(count(r.output, "\ntn,"), shard[0] == '0' ? 2u : 1u) << r.output;
  }
  Store first(dir / "t0.db"), second(dir / "t1.db");
  const int64_t gpu = first.gpu_id(SyntheticMeasurer().gpu());
  EXPECT_EQ(first.count_measurements(gpu, {{512, 4096, 4096}, Layout::kTN}, TimingMode::kGraph), 2);
  EXPECT_EQ(first.count_measurements(gpu, {{64, 4096, 4096}, Layout::kTN}, TimingMode::kGraph), 2);
  EXPECT_EQ(first.count_measurements(gpu, {{1024, 1024, 1024}, Layout::kTN}, TimingMode::kGraph), 0);
  EXPECT_EQ(second.count_measurements(second.gpu_id(SyntheticMeasurer().gpu()), {{1024, 1024, 1024}, Layout::kTN},
                                      TimingMode::kGraph),
            2);
  // A shard that holds no shape, a malformed one, and a model's layers are refused before any work.
  for (const std::string& bad : {std::string("--shapes ") + shapes + " --shard 3/4",
                                 std::string("--shapes ") + shapes + " --shard 2/2",
                                 std::string("--model ") + kModels + "llama-3.2-1b.json --shard 0/2"}) {
    const auto r = run_rlgemm("tune " + bad + " --backend synthetic --budget 2 --db " + (dir / "bad.db").string());
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("--shard"), std::string::npos) << r.output;
  }
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

// A tuned table measured again: --seed-table makes each shape measure its own row's design first (strategy
// "table"), and with --budget 1 --guesses 0 nothing else; `tuned-table` then keeps the rows whose design measured
// faster than the reference beyond its paired interval, and sends the others back to the floor.
TEST(TuneCli, SeedTableRowsAreMeasuredAgainAndOnlyThoseThatHoldAreKept) {
  // The seeds' order and labels, one measurement each: --no-confirm (tuner_test checks the confirmations).
  TempDir dir;
  {
    std::ofstream t(dir / "table.csv");
    t << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto,cublaslt_candidate,dtype\n"
      << kSyntheticGpu << ",4096,4096,4096,tn," << kBigDesign << ",100.0,1.05,,fp16\n"
      << kSyntheticGpu << ",8192,8192,4096,tn," << kTinyDesign << ",900.0,1.02,,fp16\n"
      << kSyntheticGpu << ",2048,2048,2048,tn," << kBigDesign << ",20.0,1.10,,fp16\n"
      << "NVIDIA H100 80GB HBM3,4096,4096,4096,tn," << kTinyDesign << ",50.0,2.0,,fp16\n";  // another GPU's row
    std::ofstream(dir / "shapes.csv") << "M,N,K\n4096,4096,4096\n8192,8192,4096\n1024,1024,1024\n";
  }
  const std::string db = (dir / "v.db").string();
  auto r = run_rlgemm("tune --no-confirm --shapes " + (dir / "shapes.csv").string() + " --seed-table " +
                      (dir / "table.csv").string() + " --guesses 0 --budget 1 --strategy random --backend synthetic "
                      "--in-process --db " + db);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("2 of 3 problems start from their rows of"), std::string::npos) << r.output;
  std::set<Shape> held;
  {
    Store store(db);
    const int64_t id = store.gpu_id(store.gpus().at(0).second);
    for (const Shape& s : {Shape{4096, 4096, 4096}, Shape{8192, 8192, 4096}}) {
      const auto rows = store.measurements(id, {s, Layout::kTN}, TimingMode::kGraph);
      ASSERT_EQ(rows.size(), 1u) << s.to_string();  // the table's design, and nothing else
      EXPECT_EQ(rows[0].strategy, "table");
      EXPECT_EQ(rows[0].design, s.m == 4096 ? kBigDesign : kTinyDesign);
      ASSERT_TRUE(rows[0].measurement.paired);
      if (rows[0].measurement.paired->better()) held.insert(s);
    }
    // A shape without a row starts from the strategy.
    const auto rows = store.measurements(id, {{1024, 1024, 1024}, Layout::kTN}, TimingMode::kGraph);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_NE(rows[0].strategy, "table");
  }
  // The cost model puts the big tile ahead of cuBLASLt at 4096^3 and the 16-row tile behind at 8192x8192x4096:
  // one row to keep and one to drop, which is what this test is about.
  ASSERT_EQ(held.count({4096, 4096, 4096}), 1u);
  ASSERT_EQ(held.count({8192, 8192, 4096}), 0u);

  const std::string out = (dir / "verified.csv").string();
  r = run_rlgemm("tuned-table --db " + db + " --modes graph --out " + out + " --against " +
                 (dir / "table.csv").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string text = read_text(out);
  EXPECT_NE(text.find(kSyntheticGpu + ",4096,4096,4096,tn," + kBigDesign + ","), std::string::npos) << text;
  EXPECT_EQ(text.find("8192,8192,4096"), std::string::npos) << text;
  EXPECT_EQ(text.find("2048,2048,2048"), std::string::npos) << text;  // never measured: not claimed
  EXPECT_NE(r.output.find(kSyntheticGpu + ": of the 3 rows of"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("1 kept their design, 0 took another, 2 go back to the floor"), std::string::npos)
      << r.output;
  // --against may name the table --out replaces: it is read before the new one is written.
  std::filesystem::copy_file(dir / "table.csv", dir / "same.csv");
  r = run_rlgemm("tuned-table --db " + db + " --modes graph --out " + (dir / "same.csv").string() + " --against " +
                 (dir / "same.csv").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("1 kept their design, 0 took another, 2 go back to the floor"), std::string::npos)
      << r.output;
  EXPECT_EQ(read_text(dir / "same.csv"), text);

  // A second run over one of those shapes, into a database of its own: read together, the shape held in both takes
  // the larger gain, and the table keeps its row.
  const std::string again_db = (dir / "v2.db").string();
  r = run_rlgemm("tune --no-confirm --shapes 4096,4096,4096 --seed-table " + (dir / "table.csv").string() +
                 " --guesses 0 --budget 1 --strategy random --backend synthetic --in-process --db " + again_db);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_rlgemm("tuned-table --db " + db + " --db " + again_db + " --modes graph --out " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("1 problem(s) held in more than one database"), std::string::npos) << r.output;
  EXPECT_NE(read_text(out).find(kSyntheticGpu + ",4096,4096,4096,tn," + kBigDesign + ","), std::string::npos)
      << read_text(out);
  r = run_rlgemm("tuned-table --db " + db + " --db " + db + " --out " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("twice"), std::string::npos) << r.output;

  // Bad input: a table with no row for the GPU being tuned, a mode named twice, a missing database.
  std::ofstream(dir / "other.csv") << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto\n"
                                   << "NVIDIA H100 80GB HBM3,4096,4096,4096,tn," << kBigDesign << ",100.0,1.05\n";
  r = run_rlgemm("tune --no-confirm --shapes 4096,4096,4096 --seed-table " + (dir / "other.csv").string() +
                 " --budget 1 --backend synthetic --in-process --db " + (dir / "o.db").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("has no row for this GPU ('" + kSyntheticGpu + "')"), std::string::npos) << r.output;
  r = run_rlgemm("tuned-table --db " + db + " --modes graph,graph --out " + out);
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("twice"), std::string::npos) << r.output;
  r = run_rlgemm("tuned-table --db " + (dir / "missing.db").string() + " --out " + out);
  EXPECT_EQ(r.code, 2) << r.output;
}

// --seed-table given twice (a new element type seeded from this GPU's table of the other type and from another
// GPU's table of its own type): a shape measures its row of each table first, in the order given, and a design
// both tables hold once; the budget left goes to the strategy.
TEST(TuneCli, EverySeedTablesRowIsMeasuredFirstAndASharedDesignOnce) {
  // The seeds' order and labels, one measurement each: --no-confirm (tuner_test checks the confirmations).
  TempDir dir;
  std::ofstream(dir / "a.csv") << kTableHeader
                               << kSyntheticGpu << ",4096,4096,4096,tn," << kBigDesign << ",100.0,1.05,,fp16\n"
                               << kSyntheticGpu << ",2048,2048,2048,tn," << kBigDesign << ",20.0,1.10,,fp16\n";
  std::ofstream(dir / "b.csv") << kTableHeader
                               << kSyntheticGpu << ",4096,4096,4096,tn," << kTinyDesign << ",900.0,1.02,,fp16\n"
                               << kSyntheticGpu << ",2048,2048,2048,tn," << kBigDesign << ",20.0,1.10,,fp16\n"
                               << kSyntheticGpu << ",1024,1024,1024,tn," << kTinyDesign << ",9.0,1.01,,fp16\n";
  std::ofstream(dir / "shapes.csv") << "M,N,K\n4096,4096,4096\n2048,2048,2048\n";
  const std::string db = (dir / "t.db").string();
  auto r = run_rlgemm("tune --no-confirm --shapes " + (dir / "shapes.csv").string() + " --seed-table " +
                      (dir / "a.csv").string() + " --seed-table " + (dir / "b.csv").string() +
                      " --guesses 0 --budget 2 --strategy random --backend synthetic --in-process --db " + db);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("2 of 2 problems start from their rows of " + (dir / "a.csv").string() + ", " +
                          (dir / "b.csv").string()),
            std::string::npos)
      << r.output;
  Store store(db);
  const int64_t id = store.gpu_id(store.gpus().at(0).second);
  auto designs_of = [&](const Shape& s, const std::string& strategy) {
    std::multiset<std::string> designs;
    for (const auto& row : store.measurements(id, {s, Layout::kTN}, TimingMode::kGraph))
      if (row.strategy == strategy) designs.insert(row.design);
    return designs;
  };
  EXPECT_EQ(designs_of({4096, 4096, 4096}, "table"), (std::multiset<std::string>{kBigDesign, kTinyDesign}));
  EXPECT_EQ(designs_of({2048, 2048, 2048}, "table"), (std::multiset<std::string>{kBigDesign}));
  EXPECT_EQ(store.measurements(id, {{2048, 2048, 2048}, Layout::kTN}, TimingMode::kGraph).size(), 2u);

  // Each table is checked: one without a row for this GPU is refused, whichever place it has.
  std::ofstream(dir / "other.csv") << kTableHeader
                                   << "NVIDIA H100 80GB HBM3,4096,4096,4096,tn," << kBigDesign << ",100.0,1.05,,fp16\n";
  r = run_rlgemm("tune --no-confirm --shapes 4096,4096,4096 --seed-table " + (dir / "a.csv").string() + " --seed-table " +
                 (dir / "other.csv").string() + " --budget 1 --backend synthetic --in-process --db " +
                 (dir / "o.db").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--seed-table " + (dir / "other.csv").string() + " has no row for this GPU"),
            std::string::npos)
      << r.output;
}

// Each shape measures first what a default handle would check for it (strategy "route"): its built-in table row,
// else the designs of the handle's predicted route (predict::route_guess with the built-in offline predictor), so
// that a tune's best is never slower than what the handle serves without it. --no-route-seeds leaves them out.
TEST(TuneCli, RouteSeedsMeasureWhatTheDefaultHandleWouldCheckFirst) {
  // The seeds' order and labels, one measurement each: --no-confirm (tuner_test checks the confirmations).
  const GpuIdentity gpu = SyntheticMeasurer().gpu();
  const predict::GpuTraits traits = predict::traits_of(gpu);
  const predict::Predictor* predictor = predict::builtin_predictor(traits);
  if (!predictor) GTEST_SKIP() << "no built-in predictor for " << gpu.name;
  // A shape the handle would give a kernel: the first of these whose route the predictor proposes.
  std::optional<Problem> problem;
  std::vector<Design> route;
  for (const Shape shape : {Shape{16, 2048, 4608}, Shape{512, 2816, 2048}, Shape{2048, 576, 2048},
                            Shape{128, 10944, 2048}, Shape{1, 50304, 2048}, Shape{16, 1280, 5120}}) {
    const Problem p{shape, Layout::kTN};
    const int smem = smem_limit_or_hopper(gpu.smem_per_block_optin);
    if (const auto r = predict::route_guess(*predictor, traits, p, gpu.sm_count, smem, predict::kCheckedRouteZ,
                                            [&](const Design& d) { return !why_invalid(d, p.layout, smem) && !why_unfit(d, p); })) {
      problem = p;
      route = r->designs(DType::kF16);
      break;
    }
  }
  ASSERT_TRUE(problem) << "none of the shapes has a predicted route on " << gpu.name;
  TempDir dir;
  const std::string shape = std::to_string(problem->shape.m) + "," + std::to_string(problem->shape.n) + "," +
                            std::to_string(problem->shape.k);
  const auto strategies = [&](const std::string& db) {
    Store store(db);
    std::vector<std::pair<std::string, Design>> got;
    for (const auto& row : store.measurements(store.gpu_id(store.gpus().at(0).second), *problem, TimingMode::kGraph))
      got.emplace_back(row.strategy, parse_design(row.design));
    return got;
  };
  // After the shape's table row (kTinyDesign, which the predictor does not propose), the route's designs; then the
  // budget goes on to the predictor's guesses.
  std::ofstream(dir / "table.csv") << kTableHeader << kSyntheticGpu << "," << shape << ",tn," << kTinyDesign
                                   << ",10.0,1.05,,fp16\n";
  const std::string db = (dir / "r.db").string();
  auto r = run_rlgemm("tune --no-confirm --shapes " + shape + " --seed-table " + (dir / "table.csv").string() + " --budget " +
                      std::to_string(route.size() + 2) + " --guesses 2 --strategy random --backend synthetic "
                      "--in-process --db " + db);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("each shape measures first what a default handle would check for it"), std::string::npos)
      << r.output;
  auto got = strategies(db);
  ASSERT_EQ(got.size(), route.size() + 2) << ::testing::PrintToString(got.size());
  EXPECT_EQ(got[0], std::make_pair(std::string("table"), parse_design(kTinyDesign)));
  for (size_t i = 0; i < route.size(); ++i) EXPECT_EQ(got[1 + i], std::make_pair(std::string("route"), route[i]));
  EXPECT_NE(got.back().first, "route");
  // A run going on after its budget was spent still measures the route's designs it lacks: a database tuned
  // without them gains them by running the same command again.
  const std::string old_db = (dir / "old.db").string();
  r = run_rlgemm("tune --no-confirm --shapes " + shape + " --no-route-seeds --budget 2 --guesses 2 --strategy random "
                 "--backend synthetic --in-process --db " + old_db);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(r.output.find("what a default handle would check"), std::string::npos) << r.output;
  got = strategies(old_db);
  ASSERT_EQ(got.size(), 2u);
  size_t missing = route.size();
  for (const auto& [strategy, design] : got) {
    EXPECT_NE(strategy, "route");
    if (std::find(route.begin(), route.end(), design) != route.end()) --missing;
  }
  r = run_rlgemm("tune --no-confirm --shapes " + shape + " --budget 2 --guesses 2 --strategy random --backend synthetic "
                 "--in-process --db " + old_db);
  ASSERT_EQ(r.code, 0) << r.output;
  got = strategies(old_db);
  EXPECT_EQ(got.size(), 2u + missing);
  for (const Design& d : route)
    EXPECT_TRUE(std::any_of(got.begin(), got.end(), [&](const auto& row) { return row.second == d; }))
        << to_string(d);
}

// --seed-neighbors: after its own table row, a shape measures the designs of the table's rows nearest to it (its
// own row left out, the other element type's row of its shape first), the first --neighbors it can run, recorded
// as "neighbor"; the budget left goes to the strategy.
TEST(TuneCli, NeighborSeedsMeasureTheNearestRowsDesignsAfterTheShapesOwnRow) {
  // The seeds' order and labels, one measurement each: --no-confirm (tuner_test checks the confirmations).
  TempDir dir;
  const std::string mid = "sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg";
  std::ofstream(dir / "table.csv") << kTableHeader
                                   << kSyntheticGpu << ",4096,4096,4096,tn," << kBigDesign << ",100.0,1.05,,fp16\n"
                                   << kSyntheticGpu << ",4096,4096,4096,tn," << mid << "/bf16,100.0,1.08,,bf16\n"
                                   << kSyntheticGpu << ",4096,4096,2048,tn," << kTinyDesign << ",50.0,1.02,,fp16\n"
                                   << kSyntheticGpu << ",64,64,64,tn," << kBigDesign << ",5.0,1.30,,fp16\n";
  const std::string db = (dir / "n.db").string();
  auto r = run_rlgemm("tune --no-confirm --shapes 4096,4096,4096 --seed-table " + (dir / "table.csv").string() +
                      " --seed-neighbors " + (dir / "table.csv").string() +
                      " --neighbors 2 --guesses 0 --budget 4 --strategy random --backend synthetic --in-process --db " +
                      db);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("each problem measures the designs of its 2 nearest rows of " +
                          (dir / "table.csv").string() + " (4 rows)"),
            std::string::npos)
      << r.output;
  {
    Store store(db);
    const int64_t id = store.gpu_id(store.gpus().at(0).second);
    const auto rows = store.measurements(id, {{4096, 4096, 4096}, Layout::kTN}, TimingMode::kGraph);
    std::vector<std::pair<std::string, std::string>> got;
    for (const auto& row : rows) got.emplace_back(row.strategy, row.design);
    ASSERT_EQ(got.size(), 4u);
    const std::vector<std::pair<std::string, std::string>> first(got.begin(), got.begin() + 3);
    // The shape's own row (big), then its bf16 row as fp16 (mid, distance 0), then the row ln 2 away (tiny); the
    // 64^3 row's design is the shape's own and is not measured twice.
    EXPECT_EQ(first, (std::vector<std::pair<std::string, std::string>>{
                         {"table", kBigDesign}, {"neighbor", mid}, {"neighbor", kTinyDesign}}))
        << ::testing::PrintToString(got);
    EXPECT_NE(got[3].first, "neighbor");  // the fourth evaluation is the strategy's
  }

  // Bad input: no neighbor at all asked for, a table without a row for this GPU.
  r = run_rlgemm("tune --no-confirm --shapes 4096,4096,4096 --seed-neighbors " + (dir / "table.csv").string() +
                 " --neighbors 0 --budget 1 --backend synthetic --in-process --db " + (dir / "z.db").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--neighbors must be >= 1"), std::string::npos) << r.output;
  std::ofstream(dir / "other.csv") << kTableHeader
                                   << "NVIDIA H100 80GB HBM3,4096,4096,4096,tn," << kBigDesign << ",100.0,1.05,,fp16\n";
  r = run_rlgemm("tune --no-confirm --shapes 4096,4096,4096 --seed-neighbors " + (dir / "other.csv").string() +
                 " --budget 1 --backend synthetic --in-process --db " + (dir / "o.db").string());
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--seed-neighbors " + (dir / "other.csv").string() + " has no row for this GPU"),
            std::string::npos)
      << r.output;
}

// scripts/verify-tuned-table, played on the cost model: the table's kernel rows of the GPU (not its cuBLASLt rows,
// not another GPU's) are measured in both modes, and the table is written only once every mode is complete.
TEST(TuneCli, VerifyTunedTableScriptMeasuresEveryKernelRowBeforeWritingTheTable) {
  TempDir dir;
  {
    std::ofstream t(dir / "table.csv");
    t << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto,cublaslt_candidate,dtype\n"
      << kSyntheticGpu << ",4096,4096,4096,tn," << kBigDesign << ",100.0,1.05,,fp16\n"
      // no reference recorded: a kernel row
      << kSyntheticGpu << ",2048,2048,2048,tn," << kBigDesign << ",20.0,,,fp16\n"
      // cuBLASLt serves it: not measured
      << kSyntheticGpu << ",1024,1024,1024,tn," << kBigDesign << ",9.0,0.91,2,fp16\n"
      << "NVIDIA H100 80GB HBM3,512,512,512,tn," << kBigDesign << ",5.0,1.3,,fp16\n";
  }
  const std::string script = std::string(RLGEMM_SOURCE_DIR) + "/scripts/verify-tuned-table";
  const std::string env = "RLGEMM=" + rlgemm_binary() + " BACKEND=synthetic GPU_NAME='" + kSyntheticGpu + "' ";
  const std::string out = (dir / "v").string();
  // No time left: nothing is measured and no table is written (exit 4, to be run again).
  const std::string table = (dir / "table.csv").string();
  auto r = rlgemm::testing::run_command(env + "SECONDS_LIMIT=1 " + script + " " + table + " " + out);
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "v" / "table.csv"));
  r = rlgemm::testing::run_command(env + script + " " + table + " " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(read_text(dir / "v" / "shapes-tn-fp16.csv"), "M,N,K\n4096,4096,4096\n2048,2048,2048\n");
  Store store(dir / "v" / "verify.db");
  const int64_t id = store.gpu_id(store.gpus().at(0).second);
  for (TimingMode mode : {TimingMode::kGraph, TimingMode::kOffline}) {
    EXPECT_EQ(store.count_measurements(id, {{4096, 4096, 4096}, Layout::kTN}, mode), 1);
    EXPECT_EQ(store.count_measurements(id, {{2048, 2048, 2048}, Layout::kTN}, mode), 1);
    EXPECT_EQ(store.count_measurements(id, {{1024, 1024, 1024}, Layout::kTN}, mode), 0);
  }
  EXPECT_TRUE(std::filesystem::exists(dir / "v" / "table.csv"));
  EXPECT_NE(r.output.find("of the 3 rows of"), std::string::npos) << r.output;
  // Run again: everything is in the database, nothing is measured twice.
  const int64_t before = store.count_measurements();
  r = rlgemm::testing::run_command(env + script + " " + table + " " + out);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(store.count_measurements(), before);
}

// scripts/tune-then-bench, tuning on the cost model: one shard per GPU at once, each shape tuned once, the table
// written from every shard's database; a second run finds every shard done, and a run with no time left tunes
// nothing and says to run again.
TEST(TuneCli, TuneThenBenchScriptTunesEveryShardOnceAndWritesTheTable) {
  TempDir dir;
  const std::string shapes = (dir / "shapes.csv").string();
  std::ofstream(shapes) << "M,N,K\n512,4096,4096\n1024,1024,1024\n64,4096,4096\n";
  const std::string script = std::string(RLGEMM_SOURCE_DIR) + "/scripts/tune-then-bench";
  const std::string env = "RLGEMM=" + rlgemm_binary() + " BACKEND=synthetic ";
  const std::string out = (dir / "t").string();
  const std::string args = " " + shapes + " " + out + " --gpus 2 --budget 2 --no-bench --table " + out + "/table.csv";

  auto r = rlgemm::testing::run_command(env + script + " " + shapes + " " + (dir / "late").string() +
                                        " --gpus 2 --seconds 5 --no-bench");
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_NE(r.output.find("run again"), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "late" / "tune-0.db"));

  r = rlgemm::testing::run_command(env + script + args);
  ASSERT_EQ(r.code, 0) << r.output;
  const int64_t per_shape = 2;
  int64_t total = 0;
  for (int shard : {0, 1}) {
    EXPECT_TRUE(std::filesystem::exists(dir / "t" / ("tune-" + std::to_string(shard) + ".done")));
    Store store(dir / "t" / ("tune-" + std::to_string(shard) + ".db"));
    const int64_t gpu = store.gpu_id(SyntheticMeasurer().gpu());
    for (const Shape& shape : {Shape{512, 4096, 4096}, Shape{1024, 1024, 1024}, Shape{64, 4096, 4096}}) {
      const int64_t n = store.count_measurements(gpu, {shape, Layout::kTN}, TimingMode::kGraph);
      EXPECT_TRUE(n == 0 || n == per_shape) << shard << ": " << n;
      total += n;
    }
  }
  EXPECT_EQ(total, 3 * per_shape);  // every shape in exactly one shard
  const std::string table = read_text(dir / "t" / "table.csv");
  EXPECT_NE(table.find("gpu,M,N,K,layout,design"), std::string::npos) << table;

  // Again: every shard is done, nothing is measured twice.
  r = rlgemm::testing::run_command(env + script + args);
  ASSERT_EQ(r.code, 0) << r.output;
  int64_t again = 0;
  for (int shard : {0, 1}) again += Store(dir / "t" / ("tune-" + std::to_string(shard) + ".db")).count_measurements();
  EXPECT_EQ(again, total);

  // More GPUs than shapes: one shard per shape.
  r = rlgemm::testing::run_command(env + script + " " + shapes + " " + (dir / "wide").string() +
                                   " --gpus 5 --budget 1 --no-bench");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("3 shapes: 3 shard(s), not 5"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "wide" / "tune-2.done"));
  EXPECT_FALSE(std::filesystem::exists(dir / "wide" / "tune-3.db"));

  r = rlgemm::testing::run_command(env + script + " " + shapes + " " + out + " --dtype fp32");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("--dtype fp32"), std::string::npos) << r.output;
  // The zero-shot run (--no-tune) measures the library only: with --no-bench too, or a table asked for, it is
  // refused before anything starts.
  for (const std::string& bad : {std::string(" --no-tune --no-bench"), " --no-tune --table " + out + "/t.csv"}) {
    r = rlgemm::testing::run_command(env + script + " " + shapes + " " + (dir / "none").string() + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "none")) << bad;
  }
}

// A retune of a table's shapes with scripts/tune-then-bench: --seed-table makes each shape measure its table row
// first, and --evidence adds the table's earlier verification database to the --table step, whose rows stay
// where the retune does not cover them; an existing table is compared with (--against).
TEST(TuneCli, TuneThenBenchScriptRetunesATableOnItsEvidence) {
  TempDir dir;
  const std::string table_in = (dir / "table.csv").string();
  std::ofstream(table_in) << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto,cublaslt_candidate,dtype\n"
                          << kSyntheticGpu << ",4096,4096,4096,tn," << kBigDesign << ",100.0,1.05,,fp16\n"
                          << kSyntheticGpu << ",8192,4096,4096,tn," << kBigDesign << ",200.0,1.05,,fp16\n";
  // The earlier verification: 8192x4096x4096's row measured again, held.
  const std::string evidence = (dir / "verify.db").string();
  auto r = run_rlgemm("tune --shapes 8192,4096,4096 --seed-table " + table_in +
                      " --guesses 0 --budget 1 --backend synthetic --in-process --db " + evidence);
  ASSERT_EQ(r.code, 0) << r.output;
  {
    Store store(evidence);
    const auto best = store.best_designs();
    ASSERT_EQ(best.size(), 1u) << r.output;
    ASSERT_TRUE(best[0].paired.better()) << r.output;  // the cost model puts the big tile ahead of cuBLASLt
  }

  const std::string shapes = (dir / "shapes.csv").string();
  std::ofstream(shapes) << "M,N,K\n4096,4096,4096\n1024,1024,1024\n";
  const std::string script = std::string(RLGEMM_SOURCE_DIR) + "/scripts/tune-then-bench";
  const std::string env = "RLGEMM=" + rlgemm_binary() + " BACKEND=synthetic ";
  const std::string out = (dir / "t").string(), table_out = (dir / "table-out.csv").string();
  std::filesystem::copy_file(table_in, table_out);
  r = rlgemm::testing::run_command(env + script + " " + shapes + " " + out + " --gpus 2 --budget 2 --no-bench " +
                                   "--seed-table " + table_in + " --seed-neighbors " + table_in + " --neighbors 1 --table " +
                                   table_out + " --evidence " + evidence);
  ASSERT_EQ(r.code, 0) << r.output;
  // 4096^3 started from its row, 1024^3 (no row) from the design of its nearest rows.
  bool seeded = false, neighbor = false;
  for (int shard : {0, 1}) {
    Store store(dir / "t" / ("tune-" + std::to_string(shard) + ".db"));
    const int64_t id = store.gpu_id(SyntheticMeasurer().gpu());
    for (const auto& m : store.measurements(id, {{4096, 4096, 4096}, Layout::kTN}, TimingMode::kGraph))
      seeded = seeded || (m.strategy.starts_with("table") && m.design == kBigDesign);  // or "table (confirmed)"
    for (const auto& m : store.measurements(id, {{1024, 1024, 1024}, Layout::kTN}, TimingMode::kGraph))
      neighbor = neighbor || (m.strategy.starts_with("neighbor") && m.design == kBigDesign);
  }
  EXPECT_TRUE(seeded);
  EXPECT_TRUE(neighbor);
  const std::string text = read_text(table_out);
  // One row from the evidence, one from the retune.
  EXPECT_NE(text.find(kSyntheticGpu + ",8192,4096,4096,tn," + kBigDesign + ","), std::string::npos) << text;
  EXPECT_NE(text.find(kSyntheticGpu + ",4096,4096,4096,tn,"), std::string::npos) << text;
  EXPECT_NE(r.output.find(kSyntheticGpu + ": of the 2 rows of " + table_out), std::string::npos) << r.output;
  EXPECT_FALSE(std::filesystem::exists(table_out + ".new"));

  // Bad input, before any work: evidence without a table, a missing database or table.
  for (const std::string& bad : {" --evidence " + evidence, " --table " + table_out + " --evidence " + out + "/none.db",
                                 " --seed-table " + out + "/none.csv", " --seed-neighbors " + out + "/none.csv"}) {
    r = rlgemm::testing::run_command(env + script + " " + shapes + " " + (dir / "bad").string() + " --no-bench" + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "bad" / "tune-0.db")) << bad;
  }
}

// --seed-designs hands a designs file to every shard's tune: each shape measures the file's designs (strategy
// "seed") before the strategy's own proposals. A missing file, or the option without a tune, is refused before
// anything starts.
TEST(TuneCli, TuneThenBenchScriptSeedsEveryShardWithTheDesignsFile) {
  TempDir dir;
  const std::string shapes = (dir / "shapes.csv").string();
  std::ofstream(shapes) << "M,N,K\n16,4096,4096\n1,14336,4096\n";
  const std::string designs = (dir / "decode.txt").string();
  std::ofstream(designs) << "# decode tiles\n" << kTinyDesign << "\n";
  const std::string script = std::string(RLGEMM_SOURCE_DIR) + "/scripts/tune-then-bench";
  const std::string env = "RLGEMM=" + rlgemm_binary() + " BACKEND=synthetic ";
  auto r = rlgemm::testing::run_command(env + script + " " + shapes + " " + (dir / "t").string() +
                                        " --gpus 2 --budget 4 --no-bench --seed-designs " + designs);
  ASSERT_EQ(r.code, 0) << r.output;
  int seeded = 0;
  for (int shard : {0, 1}) {
    Store store(dir / "t" / ("tune-" + std::to_string(shard) + ".db"));
    const int64_t id = store.gpu_id(SyntheticMeasurer().gpu());
    for (const Shape& shape : {Shape{16, 4096, 4096}, Shape{1, 14336, 4096}})
      for (const auto& m : store.measurements(id, {shape, Layout::kTN}, TimingMode::kGraph))
        seeded += m.strategy.starts_with("seed") && m.design == kTinyDesign;  // or "seed (confirmed)"
  }
  EXPECT_EQ(seeded, 2) << r.output;  // once on each shape, in whichever shard holds it

  for (const std::string& bad : {" --seed-designs " + (dir / "none.txt").string(), " --no-tune --seed-designs " + designs}) {
    r = rlgemm::testing::run_command(env + script + " " + shapes + " " + (dir / "bad").string() + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("--seed-designs"), std::string::npos) << bad << "\n" << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "bad" / "tune-0.db")) << bad;
  }
}

// With CUDA_VISIBLE_DEVICES listing GPUs, tune-then-bench makes one shard per listed GPU and runs shard I on the
// I-th of them (other GPUs are left to other work); more shards than the list holds is refused.
TEST(TuneCli, TuneThenBenchScriptRunsShardIOnTheIthVisibleGpu) {
  TempDir dir;
  const std::string shapes = (dir / "shapes.csv").string();
  std::ofstream(shapes) << "M,N,K\n512,4096,4096\n1024,1024,1024\n64,4096,4096\n";
  const std::string wrapper = (dir / "rlgemm-wrapper").string();
  std::ofstream(wrapper) << "#!/bin/sh\necho \"$CUDA_VISIBLE_DEVICES $*\" >> " << (dir / "devices.txt").string()
                         << "\nexec " << rlgemm_binary() << " \"$@\"\n";
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  const std::string script = std::string(RLGEMM_SOURCE_DIR) + "/scripts/tune-then-bench";
  const std::string env = "RLGEMM=" + wrapper + " BACKEND=synthetic CUDA_VISIBLE_DEVICES=5,7 ";

  auto r = rlgemm::testing::run_command(env + script + " " + shapes + " " + (dir / "t").string() +
                                        " --budget 1 --no-bench");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("2 shard(s)"), std::string::npos) << r.output;
  const std::string devices = read_text(dir / "devices.txt");
  EXPECT_NE(devices.find("5 tune --shapes " + shapes + " --shard 0/2"), std::string::npos) << devices;
  EXPECT_NE(devices.find("7 tune --shapes " + shapes + " --shard 1/2"), std::string::npos) << devices;
  EXPECT_FALSE(std::filesystem::exists(dir / "t" / "tune-2.db"));

  r = rlgemm::testing::run_command(env + script + " " + shapes + " " + (dir / "u").string() + " --gpus 3");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_NE(r.output.find("names only 2"), std::string::npos) << r.output;
}

// --shards splits the shapes whatever the GPUs: on one GPU, two shards run one after the other, never at once, on
// that GPU, each with its own database; a run whose shards were begun on two GPUs goes on on one, with the same
// databases. Fewer shards than GPUs leaves GPUs idle; a bad count is refused.
TEST(TuneCli, TuneThenBenchScriptRunsSeveralShardsOnOneGpuInTurn) {
  TempDir dir;
  const std::string shapes = (dir / "shapes.csv").string();
  std::ofstream(shapes) << "M,N,K\n512,4096,4096\n1024,1024,1024\n64,4096,4096\n";
  // The wrapper notes each start and end, and whether another process was running at its start.
  const std::string wrapper = (dir / "rlgemm-wrapper").string(), trace = (dir / "trace.txt").string(),
                    busy = (dir / "busy").string();
  std::ofstream(wrapper) << "#!/bin/sh\n[ -e " << busy << " ] && echo overlap >> " << trace << "\ntouch " << busy
                         << "\necho \"start $CUDA_VISIBLE_DEVICES $*\" >> " << trace << "\nsleep 0.3\n"
                         << rlgemm_binary() << " \"$@\"\nrc=$?\nrm -f " << busy << "\necho end >> " << trace
                         << "\nexit $rc\n";
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  const std::string script = std::string(RLGEMM_SOURCE_DIR) + "/scripts/tune-then-bench";
  const std::string env = "RLGEMM=" + wrapper + " BACKEND=synthetic CUDA_VISIBLE_DEVICES=3 ";
  const std::string out = (dir / "t").string();

  auto r = rlgemm::testing::run_command(env + script + " " + shapes + " " + out + " --gpus 1 --shards 2 --budget 1 "
                                        "--no-bench");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("2 shard(s) on 1 GPU(s)"), std::string::npos) << r.output;
  std::string text = read_text(trace);
  EXPECT_EQ(text.find("overlap"), std::string::npos) << text;
  EXPECT_NE(text.find("start 3 tune --shapes " + shapes + " --shard 0/2"), std::string::npos) << text;
  EXPECT_NE(text.find("start 3 tune --shapes " + shapes + " --shard 1/2"), std::string::npos) << text;
  int64_t total = 0;
  for (int shard : {0, 1}) {
    EXPECT_TRUE(std::filesystem::exists(dir / "t" / ("tune-" + std::to_string(shard) + ".done")));
    total += Store(dir / "t" / ("tune-" + std::to_string(shard) + ".db")).count_measurements();
  }
  EXPECT_EQ(total, 3);  // every shape in exactly one shard, one evaluation each

  // Begun on two GPUs, shard 1 left undone: one GPU goes on with shard 1 alone, in its database.
  std::filesystem::remove(dir / "t" / "tune-1.done");
  std::filesystem::remove(trace);
  const int64_t before = Store(dir / "t" / "tune-1.db").count_measurements();
  r = rlgemm::testing::run_command(env + script + " " + shapes + " " + out + " --gpus 1 --shards 2 --budget 2 "
                                   "--no-bench");
  ASSERT_EQ(r.code, 0) << r.output;
  text = read_text(trace);
  EXPECT_EQ(text.find("--shard 0/2"), std::string::npos) << text;
  EXPECT_NE(text.find("--db " + out + "/tune-1.db"), std::string::npos) << text;
  EXPECT_GT(Store(dir / "t" / "tune-1.db").count_measurements(), before);

  // One shard on two GPUs: the second GPU stays idle.
  std::filesystem::remove(trace);
  r = rlgemm::testing::run_command("RLGEMM=" + wrapper + " BACKEND=synthetic CUDA_VISIBLE_DEVICES=4,6 " + script +
                                   " " + shapes + " " + (dir / "one").string() + " --shards 1 --budget 1 --no-bench");
  ASSERT_EQ(r.code, 0) << r.output;
  text = read_text(trace);
  EXPECT_NE(text.find("start 4 tune --shapes " + shapes + " --shard 0/1"), std::string::npos) << text;
  EXPECT_EQ(text.find("start 6"), std::string::npos) << text;

  for (const std::string bad : {"0", "two"}) {
    r = rlgemm::testing::run_command(env + script + " " + shapes + " " + (dir / "bad").string() + " --shards " + bad);
    EXPECT_EQ(r.code, 2) << bad << "\n" << r.output;
    EXPECT_NE(r.output.find("--shards " + bad), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "bad")) << bad;
  }
}

// The default space leaves out clusters across the raster's direction; --clusters-any-raster puts them back.
TEST(TuneCli, ClustersAcrossTheRasterOnlyWhenAskedFor) {
  TempDir dir;
  auto across = [&](const std::string& flag) {
    const std::string db = (dir / ("t" + flag + ".db")).string();
    const auto r = run_rlgemm("tune --shapes 2048,4096,4096 --backend synthetic --in-process --guesses 0 --wave-fit 0 "
                              "--strategy random --budget 40 --seed 3 " + flag + " --db " + db);
    EXPECT_EQ(r.code, 0) << r.output;
    Store store(db);
    int count = 0;
    for (const auto& row : store.measurements(store.gpu_id(SyntheticMeasurer().gpu()),
                                              {{2048, 4096, 4096}, Layout::kTN}, TimingMode::kGraph)) {
      count += clusters_across_raster(parse_design(row.design));
    }
    return count;
  };
  EXPECT_EQ(across(""), 0);
  EXPECT_GT(across("--clusters-any-raster"), 0);
}

// A policy trained on an older design space (the built-in one predates the 16- and 32-row tiles and more) warm-
// starts a tune on today's space, its options matched by name; the policy saved after the tune is of today's.
TEST(TuneCli, APolicyOfAnOlderSpaceWarmStartsTheTune) {
  TempDir dir;
  std::filesystem::copy_file(std::string(RLGEMM_SOURCE_DIR) + "/data/policies/h100.txt", dir / "p.txt");
  const auto r = run_rlgemm("tune --shapes 512,4096,4096 --backend synthetic --budget 3 --guesses 0 --strategy rl "
                            "--policy " + (dir / "p.txt").string() + " --in-process --db " + (dir / "t.db").string());
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("trained on another design space"), std::string::npos) << r.output;
  const std::string saved = read_text(dir / "p.txt");
  EXPECT_NE(saved.find("tile_m:16 32 64 128 256"), std::string::npos) << saved.substr(0, 400);
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
