// What autotuning kept, on this machine (CPU only): per way of calling (eager, CUDA graphs) a kernel's design or
// "no kernel", read back by another
// handle of the same GPU and library build; rows of another GPU or build, lines cut short, designs of another
// element type than their shape's are skipped; an unwritable file costs one warning and still serves.
#include "dispatch/autotune_choices.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/cli.h"

namespace rlgemm::dispatch {
namespace {

class AutotuneChoicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rlgemm-autotune-choices-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

const Problem kA{{2000, 576, 7168}, Layout::kTN}, kB{{1, 4096, 4096}, Layout::kNN, DType::kBF16};
const char* kDesign = "sm90.ws.pingpong/128x128x64/s4/c1x1/raster_m.g8/splitk3.serial/epi_reg";

TEST_F(AutotuneChoicesTest, WhatOneRecordsAnotherReadsBack) {
  const auto file = dir_ / "cache" / "autotune-choices.csv";
  {
    AutotuneChoices choices(file, "GPU X", "0.1.0-abc");
    EXPECT_FALSE(choices.find(kA));
    // A kernel that wins eager calls only (by its lighter launch); none that wins either way.
    choices.record(kA, AutotuneChoice{parse_design(kDesign), 1.234, std::nullopt, 0.97, 4});
    choices.record(kB, AutotuneChoice{std::nullopt, 0.97, std::nullopt, 0.99, 3});
    ASSERT_TRUE(choices.find(kA));
  }
  AutotuneChoices again(file, "GPU X", "0.1.0-abc");
  const auto a = again.find(kA), b = again.find(kB);
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->eager);
  EXPECT_EQ(to_string(*a->eager), kDesign);
  EXPECT_NEAR(a->eager_gain, 1.234, 1e-9);
  EXPECT_FALSE(a->graph);
  EXPECT_NEAR(a->graph_gain, 0.97, 1e-9);
  EXPECT_EQ(a->candidates, 4);
  EXPECT_FALSE(b->eager);
  EXPECT_FALSE(b->graph);
  EXPECT_EQ(b->candidates, 3);
  // fp16 and bf16 of one shape are two problems.
  EXPECT_FALSE(again.find(Problem{kB.shape, kB.layout, DType::kF16}));
  EXPECT_FALSE(AutotuneChoices(file, "GPU Y", "0.1.0-abc").find(kA));
  EXPECT_FALSE(AutotuneChoices(file, "GPU X", "0.1.0-def").find(kA));
  EXPECT_EQ(testing::read_text(file), std::string(AutotuneChoices::kHeader) + "\n" + "GPU X,0.1.0-abc,2000,576,7168,tn,fp16," +
                                          kDesign + ",1.2340,cublaslt,0.9700,4\n" +
                                          "GPU X,0.1.0-abc,1,4096,4096,nn,bf16,cublaslt,0.9700,cublaslt,0.9900,3\n");
}

TEST_F(AutotuneChoicesTest, CorruptLinesAreSkipped) {
  std::filesystem::create_directories(dir_);
  const auto file = dir_ / "autotune-choices.csv";
  std::ofstream(file) << AutotuneChoices::kHeader << "\n"
                      << "GPU X,b,2000,576,7168,tn,fp16," << kDesign << ",1.2,cublaslt\n"  // cut short
                      << "GPU X,b,1,4096,4096,nn,bf16,cublaslt,1,"  << kDesign << ",1.5,4\n"  // fp16 design, bf16 shape
                      << "GPU X,b,8,8,8,tn,fp16,sm90.nonsense,1.5,cublaslt,1,4\n"            // not a design
                      << "GPU X,b,16,16,16,tn,fp16,cublaslt,-1,cublaslt,1,4\n"               // no gain
                      << "GPU X,b,64,64,64,tn,fp16,cublaslt,0.9,2\n"                         // the earlier format
                      << "GPU X,b,32,32,32,tn,fp16,cublaslt,0.9,cublaslt,0.95,2\n";          // fine
  AutotuneChoices choices(file, "GPU X", "b");
  EXPECT_FALSE(choices.find(kA));
  EXPECT_FALSE(choices.find(kB));
  EXPECT_FALSE(choices.find(Problem{{8, 8, 8}, Layout::kTN}));
  EXPECT_FALSE(choices.find(Problem{{16, 16, 16}, Layout::kTN}));
  EXPECT_FALSE(choices.find(Problem{{64, 64, 64}, Layout::kTN}));
  EXPECT_TRUE(choices.find(Problem{{32, 32, 32}, Layout::kTN}));
}

TEST_F(AutotuneChoicesTest, AnUnwritableFileWarnsOnceAndTheChoicesStillServe) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "plain") << "a file where the cache directory should be";
  AutotuneChoices choices(dir_ / "plain" / "autotune-choices.csv", "GPU X", "b");
  ::testing::internal::CaptureStderr();
  choices.record(kA, AutotuneChoice{std::nullopt, 0.9, std::nullopt, 0.9, 2});
  choices.record(kB, AutotuneChoice{std::nullopt, 0.9, std::nullopt, 0.9, 2});
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("the autotuning cache"), std::string::npos) << warnings;
  EXPECT_NE(warnings.find("cannot write it"), std::string::npos) << warnings;
  EXPECT_EQ(warnings.find("warning"), warnings.rfind("warning")) << warnings;
  EXPECT_TRUE(choices.find(kA));
}

}  // namespace
}  // namespace rlgemm::dispatch
