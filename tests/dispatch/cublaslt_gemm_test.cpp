// The cache of cuBLASLt choices made on this machine (CPU only): what one handle records, another reads back;
// other GPUs' and other cuBLASLt versions' rows and lines a crash cut short are skipped; an unwritable file
// costs one warning and the choices still serve the process. Which caller's operands a first-use choice may be
// timed on, and how many scratch sets go beside them.
#include "dispatch/cublaslt_gemm.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/cli.h"

namespace rlgemm::dispatch {
namespace {

class CublasLtChoicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rlgemm-lt-choices-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

const Problem kA{{2000, 576, 7168}, Layout::kTN}, kB{{1, 4096, 4096}, Layout::kNN};

TEST_F(CublasLtChoicesTest, WhatOneRecordsAnotherReadsBack) {
  const auto file = dir_ / "sub" / "cublaslt-choices.csv";
  {
    CublasLtChoices choices(file, "GPU X", 130000);
    EXPECT_FALSE(choices.find(kA, 20));
    choices.record(kA, 7, 20);
    choices.record(kB, 0, 3);
    EXPECT_EQ(choices.find(kA, 20), 7);
  }
  CublasLtChoices other_gpu(file, "GPU Y", 130000), other_version(file, "GPU X", 130100);
  EXPECT_FALSE(other_gpu.find(kA, 20));
  EXPECT_FALSE(other_version.find(kA, 20));
  other_gpu.record(kA, 2, 20);  // appended beside GPU X's rows, not over them
  CublasLtChoices again(file, "GPU X", 130000);
  EXPECT_EQ(again.find(kA, 20), 7);
  EXPECT_EQ(again.find(kB, 3), 0);
  EXPECT_FALSE(again.find({{2000, 576, 7168}, Layout::kNN}, 20));
  EXPECT_EQ(testing::read_text(file), std::string(CublasLtChoices::kHeader) + "\n" + "GPU X,130000,2000,576,7168,tn,7,20\n" +
                      "GPU X,130000,1,4096,4096,nn,0,3\n" + "GPU Y,130000,2000,576,7168,tn,2,20\n");
}

// Two objects on one file at once (two handles of one process, a database's and the default): a shape one records
// after the other read the file is found by the other, without a record of the other's own being replaced.
TEST_F(CublasLtChoicesTest, WhatOneRecordsLaterTheOtherFindsOnItsMiss) {
  const auto file = dir_ / "cublaslt-choices.csv";
  CublasLtChoices first(file, "GPU X", 130000), second(file, "GPU X", 130000);
  second.record(kB, 1, 3);
  first.record(kA, 7, 20);
  EXPECT_EQ(second.find(kA, 20), 7);
  first.record(kB, 2, 3);  // the last line of kB now, but `second` built its route on 1
  EXPECT_EQ(second.find(kB, 3), 1);
  EXPECT_EQ(first.find(kB, 3), 2);
  EXPECT_EQ(CublasLtChoices(file, "GPU X", 130000).find(kB, 3), 2);  // a later handle: the last record
  EXPECT_FALSE(second.find({{2000, 576, 7168}, Layout::kNN}, 20));
  CublasLtChoices in_memory({}, "GPU X", 130000);
  EXPECT_FALSE(in_memory.find(kA, 20));
}

// A runoff records what it kept after the screen's choice: the shape's last line is what a later handle finds.
TEST_F(CublasLtChoicesTest, AShapesLastRecordWins) {
  const auto file = dir_ / "cublaslt-choices.csv";
  {
    CublasLtChoices choices(file, "GPU X", 130000);
    choices.record(kA, 1, 8);
    choices.record(kB, 2, 8);
    choices.record(kA, 5, 8);
    EXPECT_EQ(choices.find(kA, 8), 5);
  }
  CublasLtChoices again(file, "GPU X", 130000);
  EXPECT_EQ(again.find(kA, 8), 5);
  EXPECT_EQ(again.find(kB, 8), 2);
}

// A choice indexes the candidate list it was made among: where cuBLASLt now offers another count (another
// rlgemm's list, a heuristic that answers otherwise), the index means another algorithm, and is not found.
TEST_F(CublasLtChoicesTest, AChoiceMadeAmongAnotherCountOfCandidatesIsNotFound) {
  const auto file = dir_ / "cublaslt-choices.csv";
  {
    CublasLtChoices choices(file, "GPU X", 130000);
    choices.record(kA, 3, 8);
    EXPECT_EQ(choices.find(kA, 8), 3);
    EXPECT_FALSE(choices.find(kA, 15));
  }
  CublasLtChoices again(file, "GPU X", 130000);
  EXPECT_FALSE(again.find(kA, 15));
  again.record(kA, 11, 15);  // chosen again among the new list: that is what is found from now on
  EXPECT_EQ(again.find(kA, 15), 11);
  EXPECT_EQ(CublasLtChoices(file, "GPU X", 130000).find(kA, 15), 11);
}

TEST_F(CublasLtChoicesTest, LinesCutShortOrOutOfRangeAreSkipped) {
  std::filesystem::create_directories(dir_);
  const auto file = dir_ / "cublaslt-choices.csv";
  std::ofstream(file) << CublasLtChoices::kHeader << "\n"
                      << "GPU X,130000,2000,576,7168,tn,99,20\n"  // index beyond the candidates: ignored
                      << "GPU X,130000,1,4096,4096,nn,3,4\n"
                      << "GPU X,130000,64,64,64,tn,garbage,4\n"
                      << "GPU X,130000,128,128,1";  // a torn last line
  CublasLtChoices choices(file, "GPU X", 130000);
  EXPECT_FALSE(choices.find(kA, 20));
  EXPECT_EQ(choices.find(kB, 4), 3);
  EXPECT_FALSE(choices.find({{64, 64, 64}, Layout::kTN}, 4));
}

TEST_F(CublasLtChoicesTest, AnUnwritableFileWarnsOnceAndTheChoicesStillServe) {
  std::filesystem::create_directories(dir_);
  std::ofstream(dir_ / "plain") << "x";
  CublasLtChoices choices(dir_ / "plain" / "cublaslt-choices.csv", "GPU X", 1);
  ::testing::internal::CaptureStderr();
  choices.record(kA, 1, 2);
  choices.record(kB, 0, 2);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("cannot write it"), std::string::npos) << warnings;
  EXPECT_EQ(warnings.find("warning"), warnings.rfind("warning")) << warnings;
  EXPECT_EQ(choices.find(kA, 2), 1);
  CublasLtChoices in_memory("", "GPU X", 1);
  in_memory.record(kA, 4, 5);
  EXPECT_EQ(in_memory.find(kA, 5), 4);
}

// A choice timed on a caller's operands writes its C many times: only where C shares no byte with A or B.
TEST(CallerOperands, TakenWhereCSharesNoByteWithAOrB) {
  const Problem p{{4, 8, 16}, Layout::kTN};  // A 128 bytes, B 256, C 64
  alignas(16) static unsigned char memory[4096];
  unsigned char* base = memory;
  const auto taken = caller_operands(p, base, base + 128, base + 384);
  ASSERT_TRUE(taken);
  EXPECT_EQ(taken->a, base);
  EXPECT_EQ(taken->b, base + 128);
  EXPECT_EQ(taken->c, base + 384);
  // C right after B, and A right after C: adjacent, not overlapping.
  EXPECT_TRUE(caller_operands(p, base + 448, base, base + 256 + 128));
  // C over A's last element, over B's first, or C being A: not taken.
  EXPECT_FALSE(caller_operands(p, base, base + 1024, base + 126));
  EXPECT_FALSE(caller_operands(p, base + 1024, base + 128, base + 64 + 2));
  EXPECT_FALSE(caller_operands(p, base, base + 1024, base));
  // B inside C's range.
  EXPECT_FALSE(caller_operands(Problem{{64, 8, 16}, Layout::kNN}, base + 3000, base + 100, base));
  // A missing operand.
  EXPECT_FALSE(caller_operands(p, nullptr, base + 128, base + 384));
  EXPECT_FALSE(caller_operands(p, base, base + 128, nullptr));
}

TEST(CallerOperands, TheCallersSetTakesAScratchSetsPlace) {
  EXPECT_EQ(scratch_set_count(std::nullopt), bench::kLtOperandSets);
  EXPECT_EQ(scratch_set_count(bench::LtOperands{}), bench::kLtOperandSets - 1);
}

}  // namespace
}  // namespace rlgemm::dispatch
