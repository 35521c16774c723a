// `rlgemm bench` with bad input: a clear message naming the rule and a non-zero exit, before any GPU work.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "bench/results.h"
#include "bench/timing.h"
#include "core/cuda_util.h"
#include "support/cli.h"
#include "support/gpu.h"

namespace {

using Result = rlgemm::testing::CliResult;
using rlgemm::testing::read_text;
using rlgemm::testing::run_rlgemm;

void expect_error(const std::string& args, int code, const std::string& message) {
  const Result r = run_rlgemm(args);
  EXPECT_EQ(r.code, code) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
}

TEST(BenchCli, HelpListsTheOptions) {
  const Result r = run_rlgemm("bench --help");
  EXPECT_EQ(r.code, 0);
  for (const char* flag : {"--shapes", "--layout", "--impl", "--mode", "--out", "--quick"})
    EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

TEST(BenchCli, BadInputIsRejectedClearly) {
  const auto dir = std::filesystem::temp_directory_path();
  std::ofstream(dir / "rlgemm_cli_bad.csv") << "M,N,K\n64,64,64\n64,64\n";
  std::ofstream(dir / "rlgemm_cli_rule.csv") << "64,64,64\n64,64,12\n";
  expect_error("bench --shape 64,64,64 --impl foo", 2, "unknown implementation 'foo'");
  expect_error("bench --shape 64,64,64 --mode fast", 2, "unknown mode 'fast'");
  expect_error("bench --shape 64,64,64 --layout nt", 2, "unknown layout 'nt'");
  expect_error("bench --shape 64,60,64", 2, "N must be a positive multiple of 8");
  expect_error("bench --shape 0,64,64", 2, "M must be >= 1");
  expect_error("bench --shape 64,64", 2, "malformed shape");
  expect_error("bench --shapes /nonexistent.csv", 2, "cannot open shapes file");
  expect_error("bench --shapes " + (dir / "rlgemm_cli_bad.csv").string(), 2, "rlgemm_cli_bad.csv:3:");
  expect_error("bench --shapes " + (dir / "rlgemm_cli_rule.csv").string(), 2, "K must be a positive multiple of 8");
  expect_error("bench", 2, "no shapes");
  expect_error("bench --shape 64,64,64 --shard 3/2", 2, "--shard takes I/N");
  expect_error("bench --shape 64,64,64 --bogus", 2, "bogus");
  expect_error("bench --shape 64,64,64 --dtype fp8", 2, "unsupported element type 'fp8': supported are fp16, bf16");
  expect_error("bench --shape 64,64,64 --impl rlgemm_autotune --rlgemm-autotune-neighbors 9", 2,
               "--rlgemm-autotune-neighbors: Value 9 not in range 0 to 8");
#ifdef RLGEMM_TEST_HAVE_DISPATCH
  // The library's variants are known by name: an unknown one lists them.
  for (const char* name :
       {"rlgemm", "rlgemm_floor", "rlgemm_autotune", "rlgemm_nearest", "rlgemm_no_nearest", "rlgemm_zero_shot"})
    expect_error("bench --shape 64,64,64 --impl foo", 2, name);
#endif
}

// The yardstick's own options, and the paths of a run, are checked before any GPU work (exit 2 naming the
// rule or the path, also on a machine without a GPU).
TEST(BenchCli, SeedControlAndPathsAreCheckedFirst) {
  const auto dir = std::filesystem::temp_directory_path() / ("rlgemm_cli_paths_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string out = " --out " + (dir / "r.csv").string();
  expect_error("bench --shape 64,64,64 --seed abc" + out, 2, "--seed takes a non-negative integer");
  expect_error("bench --shape 64,64,64 --seed 12x" + out, 2, "got '12x'");
  expect_error("bench --shape 64,64,64 --seed -3" + out, 2, "--seed takes a non-negative integer");
  expect_error("bench --shape 64,64,64 --seed 99999999999999999999999" + out, 2, "--seed takes a non-negative integer");
  expect_error("bench --shape 64,64,64 --control --impl lt_heuristic,cublas_tn" + out, 2, "put lt_auto in --impl");
  std::ofstream(dir / "file") << "x";
  const std::string under_file = (dir / "file" / "r.csv").string();
  expect_error("bench --shape 64,64,64 --impl lt_auto --out " + under_file, 2, under_file);
  expect_error("bench --shape 64,64,64 --impl lt_auto --out " + dir.string(), 2, "is a directory");
  std::ofstream(dir / "notes.csv") << "this is not a results file\n";
  expect_error("bench --shape 64,64,64 --impl lt_auto --resume --out " + (dir / "notes.csv").string(), 2,
               "not a results CSV");
  // A run whose offline and graph rows were timed in rounds of another make is not resumed with both modes: its
  // JSON says how (none said so before the modes' turns were grouped), and a run of one mode may go on.
  const std::string header = "M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_best_vendor,speedup_vs_lt_auto,correct\n";
  std::ofstream(dir / "old.csv") << header;
  std::ofstream(dir / "old.json") << R"({"modes": ["offline", "graph"], "timing": {"batches": 7}})";
  const std::string old_run = " --resume --out " + (dir / "old.csv").string();
  expect_error("bench --shape 64,64,64 --impl lt_auto --mode offline,graph" + old_run, 2,
               "turns of both modes shuffled together");
  std::ofstream(dir / "new.csv") << header;
  std::ofstream(dir / "new.json") << R"({"modes": ["graph", "offline"], "timing": {"shared_rounds": "x"}})";
  expect_error("bench --shape 64,64,64 --impl lt_auto --mode graph,offline --resume --out " + (dir / "new.csv").string(),
               2, "timed with x in the rounds");
  // A run timed with each mode in rounds of its own goes on only so (--modes-apart), and the other way round.
  std::ofstream(dir / "apart.csv") << header;
  std::ofstream(dir / "apart.json") << R"({"modes": ["offline", "graph"], "timing": {"shared_rounds": ")"
                                    << rlgemm::bench::kModesApart << R"("}})";
  expect_error("bench --shape 64,64,64 --impl lt_auto --mode offline,graph --resume --out " +
                   (dir / "apart.csv").string(),
               2, "resume it with --modes-apart");
  std::ofstream(dir / "together.json") << R"({"modes": ["offline", "graph"], "timing": {"shared_rounds": ")"
                                       << rlgemm::bench::kSharedRounds << R"("}})";
  std::ofstream(dir / "together.csv") << header;
  expect_error("bench --shape 64,64,64 --impl lt_auto --mode offline,graph --modes-apart --resume --out " +
                   (dir / "together.csv").string(),
               2, std::string("this run times ") + rlgemm::bench::kModesApart);
  if (!rlgemm::cuda_device_available(nullptr)) {  // the same make goes on: past the check, to the missing GPU
    expect_error("bench --shape 64,64,64 --impl lt_auto --mode offline,graph --modes-apart --resume --out " +
                     (dir / "apart.csv").string(),
                 3, "no usable CUDA GPU");
    expect_error("bench --shape 64,64,64 --impl lt_auto --mode offline,graph --resume --out " +
                     (dir / "together.csv").string(),
                 3, "no usable CUDA GPU");
  }
  if (!rlgemm::cuda_device_available(nullptr))  // one mode goes on: past the check, to the missing GPU
    expect_error("bench --shape 64,64,64 --impl lt_auto --mode graph" + old_run, 3, "no usable CUDA GPU");
#ifdef RLGEMM_TEST_HAVE_DISPATCH
  std::ofstream(dir / "not.db") << "plain text, not SQLite, long enough to have a header page....................";
  expect_error("bench --shape 64,64,64 --impl lt_auto,rlgemm --rlgemm-db " + (dir / "not.db").string() + out, 2,
               (dir / "not.db").string());
#endif
  EXPECT_FALSE(std::filesystem::exists(dir / "r.csv")) << "nothing is written by a run that never started";
  std::filesystem::remove_all(dir);
}

TEST(BenchCli, NoGpuIsAClearError) {
  std::string why;
  if (rlgemm::cuda_device_available(&why)) GTEST_SKIP() << "a GPU is present";
  const auto out = std::filesystem::temp_directory_path() / "rlgemm_cli_nogpu.csv";
  std::filesystem::remove(out);
  expect_error("bench --shape 64,64,64 --out " + out.string(), 3, "no usable CUDA GPU");
  EXPECT_FALSE(std::filesystem::exists(out)) << "nothing may be written when nothing was measured";
}

TEST(BenchCliGpu, ResumeKeepsWhatWasMeasuredAndMeasuresTheRest) {
  RLGEMM_REQUIRE_GPU();
  const auto out = std::filesystem::temp_directory_path() / "rlgemm_cli_resume.csv";
  std::filesystem::remove(out);
  const std::string common = " --layout tn --impl lt_heuristic --quick --no-progress --out " + out.string();
  Result r = run_rlgemm("bench --shape 64,64,64 --shape 128,64,64" + common);
  ASSERT_EQ(r.code, 0) << r.output;
  r = run_rlgemm("bench --resume --shape 64,64,64 --shape 128,64,64 --shape 256,64,64" + common);
  ASSERT_EQ(r.code, 0) << r.output;
  std::ifstream csv(out);
  std::string line, all;
  int lines = 0;
  while (std::getline(csv, line)) ++lines, all += line + "\n";
  EXPECT_EQ(lines, 4) << "one header and one row per problem, none measured twice\n" << all;
  EXPECT_NE(all.find("256,64,64,tn"), std::string::npos) << all;
}

// kill -9 in the middle of a write leaves a torn last line: --resume drops it (and its problem's other rows)
// with a warning, measures that problem again, and the file ends whole.
TEST(BenchCliGpu, ResumeAfterATornWriteMeasuresThatProblemAgain) {
  RLGEMM_REQUIRE_GPU();
  const auto out = std::filesystem::temp_directory_path() / "rlgemm_cli_torn.csv";
  std::filesystem::remove(out);
  const std::string common = " --layout tn --impl lt_heuristic,lt_auto --quick --no-progress --seed 11 --out " + out.string();
  Result r = run_rlgemm("bench --shape 64,64,64 --shape 128,64,64" + common);
  ASSERT_EQ(r.code, 0) << r.output;
  std::string text = read_text(out);
  const size_t cut = text.rfind("128,64,64,tn,");
  ASSERT_NE(cut, std::string::npos) << text;
  std::ofstream(out, std::ios::binary | std::ios::trunc) << text.substr(0, cut + 20);  // torn mid-row
  r = run_rlgemm("bench --resume --shape 64,64,64 --shape 128,64,64" + common);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("torn write"), std::string::npos) << r.output;
  text = read_text(out);
  int rows_128 = 0, rows_64 = 0;
  for (size_t p = 0; (p = text.find("\n128,64,64,tn,", p)) != std::string::npos; ++p) ++rows_128;
  for (size_t p = 0; (p = text.find("\n64,64,64,tn,", p)) != std::string::npos; ++p) ++rows_64;
  EXPECT_EQ(rows_128, 2) << text;  // lt_heuristic and lt_auto, measured again whole
  EXPECT_EQ(rows_64, 2) << text;   // kept from the first run
  EXPECT_EQ(text.back(), '\n');
  EXPECT_NE(read_text(std::filesystem::path(out).replace_extension(".json")).find("\"seed\": \"11\""), std::string::npos);
}

// --control adds lt_twin, lt_auto's own algorithm, and the best-vendor column is filled.
TEST(BenchCliGpu, ControlMeasuresTheTwinBesideLtAuto) {
  RLGEMM_REQUIRE_GPU();
  const auto out = std::filesystem::temp_directory_path() / "rlgemm_cli_control.csv";
  std::filesystem::remove(out);
  const Result r = run_rlgemm("bench --shape 256,512,1024 --layout tn --impl lt_heuristic,lt_auto --control --quick "
                              "--mode offline,server --samples 5 --no-progress --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string text = read_text(out);
  EXPECT_NE(text.find(",lt_twin,offline,"), std::string::npos) << text;
  EXPECT_NE(text.find(",lt_twin,server,"), std::string::npos) << text;
  EXPECT_NE(text.find("lt_auto's algorithm (candidate "), std::string::npos) << text;
  EXPECT_NE(r.output.find("best vendor"), std::string::npos) << r.output;
  const auto meta = read_text(std::filesystem::path(out).replace_extension(".json"));
  EXPECT_NE(meta.find("fp64, all of C"), std::string::npos) << meta;
  // Where the run's time went, and each row paired with the best vendor call round by round.
  for (const char* phase : {"\"seconds_by_phase\"", "\"prepare and gate: lt_auto\"", "\"timed rounds\"",
                            "\"inputs and references\"", "\"checks after the rounds\""})
    EXPECT_NE(meta.find(phase), std::string::npos) << phase << "\n" << meta;
  for (const rlgemm::bench::Row& row : rlgemm::bench::read_csv(out.string())) {
    EXPECT_EQ(row.timing.rounds_us.size(), size_t(row.timing.samples)) << row.impl;
    EXPECT_EQ(row.paired_vendor.rounds, row.timing.samples) << row.impl;
    EXPECT_LE(row.paired_vendor.low, row.paired_vendor.gain) << row.impl;
    EXPECT_GE(row.paired_vendor.high, row.paired_vendor.gain) << row.impl;
  }
  EXPECT_NE(r.output.find("Paired with the best vendor call"), std::string::npos) << r.output;
  const Result f = run_rlgemm("summarize " + out.string() + " --fairness " +
                              (std::filesystem::temp_directory_path() / "rlgemm_cli_fairness.csv").string());
  ASSERT_EQ(f.code, 0) << f.output;
  const std::string fair = read_text(std::filesystem::temp_directory_path() / "rlgemm_cli_fairness.csv");
  EXPECT_EQ(fair.rfind("mode,with_rlgemm,shapes,geomean_twin_over_auto,max_abs_dev,apart_3pct\noffline,0,1,", 0), 0u) << fair;
}

#ifdef RLGEMM_TEST_HAVE_DISPATCH
// The library's first uses say where their time went, inside its "prepare and gate" phase.
TEST(BenchCliGpu, TheLibrarysFirstUsesSayWhereTheirTimeWent) {
  RLGEMM_REQUIRE_GPU();
  const auto out = std::filesystem::temp_directory_path() / "rlgemm_cli_first_use.csv";
  std::filesystem::remove(out);
  const Result r = run_rlgemm("bench --shape 200,520,776 --layout tn --impl lt_auto,rlgemm --quick --mode offline "
                              "--samples 5 --no-progress --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.output;
  const auto meta = nlohmann::json::parse(read_text(std::filesystem::path(out).replace_extension(".json")));
  ASSERT_TRUE(meta.contains("first_use_seconds")) << meta.dump(1);
  const auto& parts = meta["first_use_seconds"];
  ASSERT_TRUE(parts.contains("rlgemm")) << parts.dump();
  EXPECT_FALSE(parts.contains("lt_auto")) << parts.dump();  // a vendor call does not say
  double sum = 0;
  for (const char* part : {"floor's choice", "kernels built", "route check"}) {
    ASSERT_TRUE(parts["rlgemm"].contains(part)) << part << " " << parts.dump();
    EXPECT_GE(parts["rlgemm"][part].get<double>(), 0) << part;
    sum += parts["rlgemm"][part].get<double>();
  }
  EXPECT_GT(parts["rlgemm"]["floor's choice"].get<double>(), 0) << parts.dump();
  // Within the phase that holds them.
  EXPECT_LE(sum, meta["seconds_by_phase"]["prepare and gate: rlgemm"].get<double>() + 1e-3) << meta.dump(1);
}
#endif

TEST(BenchCliGpu, OutOfDeviceMemoryStopsCleanlyAndSaysSo) {
  RLGEMM_REQUIRE_GPU();
  // This process holds all but ~1.5 GiB of the GPU; the run measures a small shape, then one that needs
  // ~2.5 GiB of operands (16384^3: A, B twice for the gate's two input sets, and C).
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  const size_t keep = size_t(1536) << 20;
  void* hog = nullptr;
  ASSERT_GT(free_bytes, keep);
  ASSERT_EQ(cudaMalloc(&hog, free_bytes - keep), cudaSuccess);
  const auto dir = std::filesystem::temp_directory_path();
  std::ofstream(dir / "rlgemm_cli_oom_shapes.csv") << "M,N,K\n64,64,64\n16384,16384,16384\n";
  const auto out = dir / "rlgemm_cli_oom.csv";
  std::filesystem::remove(out);
  const Result r = run_rlgemm("bench --shapes " + (dir / "rlgemm_cli_oom_shapes.csv").string() +
                              " --layout tn --impl lt_heuristic --no-progress --out " + out.string());
  cudaFree(hog);
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_NE(r.output.find("out of device memory"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kept in"), std::string::npos) << r.output;
  std::ifstream csv(out);
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 2) << "the header and the small shape's row are kept";
  const std::string meta = read_text(std::filesystem::path(out).replace_extension(".json"));
  EXPECT_NE(meta.find("failed (partial results)"), std::string::npos) << meta;
}

// summarize --update-tuned-table: a "tuned" row of the dispatch that ran faster replaces the table's design;
// a slower one, another GPU's row and a cuBLASLt route leave it alone. The table keeps the fastest lt_auto
// time it has seen (time_us * speedup_vs_lt_auto) and that run's candidate: a run whose lt_auto was slower
// records neither its candidate nor a speedup above what the table's lt_auto allows.
TEST(SummarizeCli, UpdateTunedTableTakesOnlyFasterTunedRows) {
  const auto dir = std::filesystem::temp_directory_path() / ("rlgemm-update-table-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const char* a = "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg";
  const char* b = "sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/splitk1/epi_reg";
  {
    std::ofstream table(dir / "h100.csv");
    table << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto,cublaslt_candidate\n";
    table << "GPU X,64,64,64,tn," << a << ",10.000,0.9000,\n";   // lt_auto 9
    table << "GPU X,128,64,64,tn," << a << ",10.000,1.2000,\n";  // lt_auto 12
    table << "GPU X,256,64,64,tn," << a << ",10.000,0.8000,\n";  // lt_auto 8
    table << "GPU X,512,64,64,tn," << a << ",10.000,0.9000,3\n";  // lt_auto 9
    table << "GPU Y,64,64,64,tn," << a << ",10.000,0.5000,\n";
    std::ofstream csv(dir / "run.csv");
    csv << "M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_lt_auto,correct,time_min_us,time_max_us,samples,batch,detail\n";
    csv << "64,64,64,tn,rlgemm,offline,8.0,0.1,1.1000,1,8,8,7,10,tuned " << b << "\n";       // faster: taken
    csv << "128,64,64,tn,rlgemm,offline,11.0,0.1,1.1000,1,11,11,7,10,tuned " << b << "\n";   // slower: kept
    csv << "256,64,64,tn,rlgemm,offline,9.0,0.1,0.9500,1,9,9,7,10,cublaslt\n";              // not a design
    csv << "256,64,64,tn,lt_auto,offline,7.5,0.1,1.0000,1,7,8,7,10,candidate 4 of 9 timed\n";  // faster lt_auto
    // This run's lt_auto (9.9) is slower than the table's (9): the design is taken, faster than the row, but
    // its speedup is 9 / 9, not 1.1; the candidate stays.
    csv << "512,64,64,tn,lt_auto,offline,9.9,0.1,1.0000,1,9,10,7,10,candidate 6 of 9 timed\n";
    csv << "512,64,64,tn,rlgemm,offline,9.0,0.1,1.1000,1,9,9,7,10,tuned " << b << "\n";
    std::ofstream(dir / "run.json") << R"({"gpu": {"name": "GPU X"}})";
  }
  const auto r = run_rlgemm("summarize " + (dir / "run.csv").string() + " --update-tuned-table " +
                            (dir / "h100.csv").string());
  ASSERT_EQ(r.code, 0) << r.output;
  const std::string text = read_text(dir / "h100.csv");
  EXPECT_NE(text.find(std::string("GPU X,64,64,64,tn,") + b + ",8.000,1.1000"), std::string::npos) << text;
  EXPECT_NE(text.find(std::string("GPU X,128,64,64,tn,") + a + ",10.000,1.2000"), std::string::npos) << text;
  EXPECT_NE(text.find(std::string("GPU X,256,64,64,tn,") + a + ",10.000,0.7500,4"), std::string::npos) << text;
  EXPECT_NE(text.find(std::string("GPU X,512,64,64,tn,") + b + ",9.000,1.0000,3"), std::string::npos) << text;
  EXPECT_NE(text.find(std::string("GPU Y,64,64,64,tn,") + a + ",10.000,0.5000,,fp16\n"), std::string::npos) << text;
  EXPECT_NE(r.output.find("candidate recorded for 1 problems"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 of 3 tuned rows"), std::string::npos) << r.output;

  // A design sweep: with --best-of-designs, the fastest correct design of a problem replaces the row when it
  // beats it (a wrong design does not count, however fast).
  const char* c = "sm90.ws.pingpong/64x64x128/s6/c1x1/raster_m.g8/streamk/epi_reg";
  {
    std::ofstream csv(dir / "sweep.csv");
    csv << "M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_lt_auto,correct,time_min_us,time_max_us,samples,batch,detail\n";
    csv << "256,64,64,tn," << b << ",offline,9.5,0.1,0.8400,1,9,9,7,10,\n";
    csv << "256,64,64,tn," << c << ",offline,8.5,0.1,0.9400,1,8,8,7,10,\n";
    csv << "256,64,64,tn,sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg,offline,1.0,0.1,8.0,0,1,1,7,10,\n";
    csv << "128,64,64,tn," << c << ",offline,10.5,0.1,1.0500,1,10,11,7,10,\n";  // slower than 10 us: kept
    std::ofstream(dir / "sweep.json") << R"({"gpu": {"name": "GPU X"}})";
  }
  const auto s = run_rlgemm("summarize " + (dir / "sweep.csv").string() + " --best-of-designs --update-tuned-table " +
                            (dir / "h100.csv").string());
  ASSERT_EQ(s.code, 0) << s.output;
  const std::string updated = read_text(dir / "h100.csv");
  // 8.5 us against lt_auto's best 7.5 us (the sweep's lt_auto took 7.99 us).
  EXPECT_NE(updated.find(std::string("GPU X,256,64,64,tn,") + c + ",8.500,0.8824,4"), std::string::npos) << updated;
  EXPECT_NE(updated.find(std::string("GPU X,128,64,64,tn,") + a + ",10.000,1.2000"), std::string::npos) << updated;
  EXPECT_NE(s.output.find("1 of 2 tuned rows"), std::string::npos) << s.output;
  std::filesystem::remove_all(dir);
}

// Summarize's outputs never overwrite what it reads: an input, or the JSON beside an input (the run's GPU, commit
// and command), named as --fairness, --out (or --out's JSON) or --tuned-table, is refused before anything is
// written, and the file is as it was.
TEST(SummarizeCli, OutputsThatWouldOverwriteAnInputAreRefused) {
  const auto dir = std::filesystem::temp_directory_path() / ("rlgemm-summarize-inputs-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string csv = (dir / "run.csv").string(), json = (dir / "run.json").string();
  std::ofstream(csv) << "M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_lt_auto,correct,time_min_us,time_max_us,"
                        "samples,batch,detail\n64,64,64,tn,lt_auto,offline,7.5,0.1,1.0000,1,7,8,7,10,\n";
  std::ofstream(json) << R"({"gpu": {"name": "GPU X"}})";
  const std::string kept_csv = read_text(csv), kept_json = read_text(json);
  expect_error("summarize " + csv + " --fairness " + json, 2, "--fairness " + json + " is the JSON of the input");
  expect_error("summarize " + csv + " --fairness " + (dir / "." / "run.csv").string(), 2, "is the input " + csv);
  expect_error("summarize " + csv + " --out " + csv, 2, "--out " + csv + " is the input");
  expect_error("summarize " + csv + " --out " + (dir / "run.txt").string(), 2,
               "--out's JSON " + json + " is the JSON of the input");
  expect_error("summarize " + csv + " --best-of-designs --tuned-table " + json, 2, "--tuned-table " + json);
  EXPECT_EQ(read_text(csv), kept_csv);
  EXPECT_EQ(read_text(json), kept_json);
  // Another name is written as before.
  const auto ok = run_rlgemm("summarize " + csv + " --out " + (dir / "merged.csv").string());
  EXPECT_EQ(ok.code, 0) << ok.output;
  EXPECT_TRUE(std::filesystem::exists(dir / "merged.json"));
  std::filesystem::remove_all(dir);
}

}  // namespace
