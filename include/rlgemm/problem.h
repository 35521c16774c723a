// The problem rlgemm solves: C[M,N] = A[M,K] * B with A, B, C of one 16-bit element type (fp16 or bf16), fp32
// accumulation, alpha = 1, beta = 0. A and C are row-major. B is either K x N row-major (`nn`) or stored N x K row-major (`tn`, a linear
// layer's weight). M >= 1; N and K are multiples of 8 so that every row starts on a 16-byte boundary.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace rlgemm {

enum class Layout { kNN, kTN };

// The element type of A, B and C. fp16 is the default everywhere a problem or a design does not name one.
enum class DType { kF16, kBF16 };

std::string_view to_string(DType dtype);  // "fp16" | "bf16"
// "fp16" | "bf16"; throws Error(kInvalidInput) listing the supported types.
DType parse_dtype(std::string_view text);
// "fp16" | "bf16" | "both" -> the element types to run, in that order.
std::vector<DType> parse_dtypes(std::string_view text);
// The text of every supported element type, for messages ("fp16, bf16").
std::string supported_dtypes();

std::string_view to_string(Layout layout);
Layout parse_layout(std::string_view text);  // "nn" | "tn"; throws Error naming the accepted values
// "nn" | "tn" | "both" -> the layouts to run, in that order.
std::vector<Layout> parse_layouts(std::string_view text);

struct Shape {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;

  friend bool operator==(const Shape&, const Shape&) = default;
  friend auto operator<=>(const Shape&, const Shape&) = default;

  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
  double mnk() const { return double(m) * double(n) * double(k); }
  std::string to_string() const;  // "M,N,K"
};

struct Problem {
  Shape shape;
  Layout layout = Layout::kTN;
  DType dtype = DType::kF16;

  friend bool operator==(const Problem&, const Problem&) = default;
  // Leading dimensions (elements) of the row-major operands as rlgemm stores them.
  int64_t lda() const { return shape.k; }
  int64_t ldb() const { return layout == Layout::kNN ? shape.n : shape.k; }
  int64_t ldc() const { return shape.n; }
  int64_t a_elems() const { return shape.m * shape.k; }
  int64_t b_elems() const { return shape.k * shape.n; }
  int64_t c_elems() const { return shape.m * shape.n; }
};

// Largest accepted extent: every operand must stay addressable with 32-bit element strides per row and
// below 2^31 elements per matrix, which is what cuBLAS and rlgemm's kernels index with.
inline constexpr int64_t kMaxExtent = int64_t(1) << 20;

// Throws Error (kInvalidInput) naming the broken rule: M >= 1, N and K positive multiples of 8, each
// extent <= 2^20, each matrix < 2^31 elements.
void validate(const Shape& shape);

// "M,N,K" (spaces allowed around numbers) -> validated shape.
Shape parse_shape(std::string_view text);

}  // namespace rlgemm
