#include "rlgemm/problem.h"

#include <charconv>
#include <string>

#include "rlgemm/error.h"

namespace rlgemm {

std::string_view to_string(Layout layout) { return layout == Layout::kNN ? "nn" : "tn"; }

Layout parse_layout(std::string_view text) {
  if (text == "nn") return Layout::kNN;
  if (text == "tn") return Layout::kTN;
  fail("unknown layout '" + std::string(text) +
       "': use 'nn' (B is K x N, row-major) or 'tn' (B stored N x K, row-major)");
}

std::vector<Layout> parse_layouts(std::string_view text) {
  if (text == "both") return {Layout::kNN, Layout::kTN};
  if (text == "nn" || text == "tn") return {parse_layout(text)};
  fail("unknown layout '" + std::string(text) + "': use nn, tn or both");
}

std::string_view to_string(DType dtype) { return dtype == DType::kBF16 ? "bf16" : "fp16"; }

std::string supported_dtypes() { return "fp16, bf16"; }

DType parse_dtype(std::string_view text) {
  if (text == "fp16") return DType::kF16;
  if (text == "bf16") return DType::kBF16;
  fail("unsupported element type '" + std::string(text) + "': supported are " + supported_dtypes());
}

std::vector<DType> parse_dtypes(std::string_view text) {
  if (text == "both") return {DType::kF16, DType::kBF16};
  if (text == "fp16" || text == "bf16") return {parse_dtype(text)};
  fail("unsupported element type '" + std::string(text) + "': supported are " + supported_dtypes() + " (or both)");
}

std::string Shape::to_string() const {
  return std::to_string(m) + "," + std::to_string(n) + "," + std::to_string(k);
}

void validate(const Shape& s) {
  // The message is built only when a rule is broken: the library validates every call.
  auto broken = [&](const std::string& rule) { fail("shape " + s.to_string() + ": " + rule); };
  if (s.m < 1) broken("M must be >= 1");
  if (s.n < 8 || s.n % 8 != 0) broken("N must be a positive multiple of 8 (rows of 16 bytes)");
  if (s.k < 8 || s.k % 8 != 0) broken("K must be a positive multiple of 8 (rows of 16 bytes)");
  if (s.m > kMaxExtent || s.n > kMaxExtent || s.k > kMaxExtent)
    broken("each of M, N, K must be <= " + std::to_string(kMaxExtent));
  constexpr int64_t kMaxElems = (int64_t(1) << 31) - 1;
  if (s.m * s.k > kMaxElems || s.k * s.n > kMaxElems || s.m * s.n > kMaxElems)
    broken("each matrix must hold fewer than 2^31 elements");
}

namespace {

int64_t parse_int(std::string_view field, std::string_view whole) {
  while (!field.empty() && (field.front() == ' ' || field.front() == '\t')) field.remove_prefix(1);
  while (!field.empty() && (field.back() == ' ' || field.back() == '\t' || field.back() == '\r'))
    field.remove_suffix(1);
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (field.empty() || ec != std::errc() || ptr != field.data() + field.size())
    fail("malformed shape '" + std::string(whole) + "': expected three integers M,N,K");
  return value;
}

}  // namespace

Shape parse_shape(std::string_view text) {
  const auto c1 = text.find(',');
  const auto c2 = c1 == std::string_view::npos ? c1 : text.find(',', c1 + 1);
  if (c1 == std::string_view::npos || c2 == std::string_view::npos ||
      text.find(',', c2 + 1) != std::string_view::npos)
    fail("malformed shape '" + std::string(text) + "': expected three integers M,N,K");
  Shape s{parse_int(text.substr(0, c1), text), parse_int(text.substr(c1 + 1, c2 - c1 - 1), text),
          parse_int(text.substr(c2 + 1), text)};
  validate(s);
  return s;
}

}  // namespace rlgemm
