// `rlgemm bench` with bad input: a clear message naming the rule and a non-zero exit, before any GPU work.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/cuda_util.h"
#include "support/cli.h"
#include "support/gpu.h"

namespace {

using Result = rlgemm::testing::CliResult;
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
}

TEST(BenchCli, NoGpuIsAClearError) {
  std::string why;
  if (rlgemm::cuda_device_available(&why)) GTEST_SKIP() << "a GPU is present";
  const auto out = std::filesystem::temp_directory_path() / "rlgemm_cli_nogpu.csv";
  std::filesystem::remove(out);
  expect_error("bench --shape 64,64,64 --out " + out.string(), 3, "no usable CUDA GPU");
  EXPECT_FALSE(std::filesystem::exists(out)) << "nothing may be written when nothing was measured";
}

TEST(BenchCliGpu, OutOfDeviceMemoryStopsCleanlyAndSaysSo) {
  RLGEMM_REQUIRE_GPU();
  // A small shape is measured first, then one whose C alone (2^18 x 2^18 fp16 = 128 GiB) exceeds any GPU.
  const auto dir = std::filesystem::temp_directory_path();
  std::ofstream(dir / "rlgemm_cli_oom_shapes.csv") << "M,N,K\n64,64,64\n262144,262144,64\n";
  const auto out = dir / "rlgemm_cli_oom.csv";
  std::filesystem::remove(out);
  const Result r = run_rlgemm("bench --shapes " + (dir / "rlgemm_cli_oom_shapes.csv").string() +
                              " --layout tn --impl lt_heuristic --no-progress --out " + out.string());
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_NE(r.output.find("out of device memory"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kept in"), std::string::npos) << r.output;
  std::ifstream csv(out);
  std::string line;
  int lines = 0;
  while (std::getline(csv, line)) ++lines;
  EXPECT_EQ(lines, 2) << "the header and the small shape's row are kept";
  std::ifstream json(std::filesystem::path(out).replace_extension(".json"));
  const std::string meta((std::istreambuf_iterator<char>(json)), std::istreambuf_iterator<char>());
  EXPECT_NE(meta.find("failed (partial results)"), std::string::npos) << meta;
}

}  // namespace
