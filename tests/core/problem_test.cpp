#include "rlgemm/problem.h"

#include <gtest/gtest.h>

#include "rlgemm/error.h"

namespace rlgemm {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_shape(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    return e.what();
  }
  return "";
}

TEST(Problem, ParsesValidShapes) {
  EXPECT_EQ(parse_shape("1,8,8"), (Shape{1, 8, 8}));
  EXPECT_EQ(parse_shape(" 4096 , 4096,4096 "), (Shape{4096, 4096, 4096}));
  EXPECT_EQ(parse_shape("7,200,136"), (Shape{7, 200, 136}));
}

TEST(Problem, RejectsShapesBreakingTheRules) {
  EXPECT_NE(error_of("0,8,8").find("M must be >= 1"), std::string::npos);
  EXPECT_NE(error_of("8,12,8").find("N must be a positive multiple of 8"), std::string::npos);
  EXPECT_NE(error_of("8,8,20").find("K must be a positive multiple of 8"), std::string::npos);
  EXPECT_NE(error_of("8,-8,8").find("N must be"), std::string::npos);
  EXPECT_NE(error_of("2097152,8,8").find("<= 1048576"), std::string::npos);
  EXPECT_NE(error_of("1048576,1048576,8").find("2^31"), std::string::npos);
}

TEST(Problem, RejectsMalformedText) {
  for (const char* bad : {"", "1,2", "1,2,3,4", "a,8,8", "8,,8", "8,8,8x", "1.5,8,8"})
    EXPECT_NE(error_of(bad).find("malformed shape"), std::string::npos) << bad;
}

TEST(Problem, LayoutsAndLeadingDimensions) {
  EXPECT_EQ(parse_layout("nn"), Layout::kNN);
  EXPECT_EQ(parse_layouts("both").size(), 2u);
  EXPECT_THROW(parse_layout("nt"), Error);
  EXPECT_THROW(parse_layouts("all"), Error);
  Problem nn{{100, 72, 24}, Layout::kNN};
  Problem tn{{100, 72, 24}, Layout::kTN};
  EXPECT_EQ(nn.ldb(), 72);
  EXPECT_EQ(tn.ldb(), 24);
  EXPECT_EQ(nn.lda(), 24);
  EXPECT_EQ(nn.ldc(), 72);
  EXPECT_DOUBLE_EQ(nn.shape.flops(), 2.0 * 100 * 72 * 24);
}

TEST(Problem, ElementTypes) {
  EXPECT_EQ(parse_dtype("fp16"), DType::kF16);
  EXPECT_EQ(parse_dtype("bf16"), DType::kBF16);
  EXPECT_EQ(to_string(DType::kBF16), "bf16");
  EXPECT_EQ(to_string(DType::kF16), "fp16");
  EXPECT_EQ(parse_dtypes("both"), (std::vector<DType>{DType::kF16, DType::kBF16}));
  EXPECT_EQ(parse_dtypes("bf16"), std::vector<DType>{DType::kBF16});
  EXPECT_EQ(Problem{}.dtype, DType::kF16);  // fp16 unless a problem names another type
  for (const char* bad : {"fp8", "fp32", "both", ""}) {
    try {
      parse_dtype(bad);
      ADD_FAILURE() << bad << " parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find("supported are fp16, bf16"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_dtypes("fp8"), Error);
}

}  // namespace
}  // namespace rlgemm
