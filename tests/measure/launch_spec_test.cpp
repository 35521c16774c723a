// The launch SPEC of a foreign kernel: a full SPEC parses, every malformed one is refused naming the file, the
// field and the rule, its parameters are held against a kernel's parameter block, and the fills are a
// function of the seed, the draw and the parameter alone.
#include <gtest/gtest.h>

#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "measure/launch_spec.h"
#include "rlgemm/error.h"

namespace rlgemm::measure {
namespace {

constexpr const char* kMatmulSpec = R"({
  "name": "triton_128x128x64_w4_s4",
  "set": "triton",
  "problem": {"m": 4096, "n": 4096, "k": 4096, "layout": "nn"},
  "grid": [1024],
  "block": [128, 1, 1],
  "shared_bytes": 131072,
  "cluster": [1, 1, 1],
  "params": [
    {"name": "a", "kind": "buffer", "bytes": 33554432, "role": "input",
     "fill": {"rule": "random", "type": "fp16", "min": -1, "max": 1}},
    {"name": "b", "kind": "buffer", "bytes": 33554432, "role": "input",
     "fill": {"rule": "random", "type": "fp16", "min": -1, "max": 1}},
    {"name": "c", "kind": "buffer", "bytes": 33554432, "role": "output", "fill": {"rule": "nan", "type": "fp16"}},
    {"name": "M", "kind": "scalar", "type": "i32", "value": 4096},
    {"name": "N", "kind": "scalar", "type": "i32", "value": 4096},
    {"name": "K", "kind": "scalar", "type": "i32", "value": 4096},
    {"name": "stride_am", "kind": "scalar", "type": "i32", "value": 4096},
    {"name": "stride_bk", "kind": "scalar", "type": "i32", "value": 4096},
    {"name": "stride_cm", "kind": "scalar", "type": "i32", "value": 4096},
    {"name": "global_scratch", "kind": "null"},
    {"name": "profile_scratch", "kind": "null"}
  ]
})";

sass::KernelParams block_of(std::initializer_list<uint32_t> sizes) {
  sass::KernelParams p;
  uint32_t offset = 0;
  int ordinal = 0;
  for (uint32_t size : sizes) {
    offset = (offset + size - 1) / size * size;
    p.params.push_back({ordinal++, offset, size});
    offset += size;
  }
  p.block_bytes = offset;
  return p;
}

// The spec with `from` replaced by `to` (which must occur).
std::string edited(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

void expect_refused(const std::string& text, std::initializer_list<const char*> needles) {
  try {
    parse_launch_spec(text, "spec.json");
    ADD_FAILURE() << "accepted: " << text.substr(0, 200);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("spec.json"), std::string::npos) << e.what();
    for (const char* n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(LaunchSpec, AFullSpecParses) {
  const LaunchSpec s = parse_launch_spec(kMatmulSpec, "spec.json");
  EXPECT_EQ(s.name, "triton_128x128x64_w4_s4");
  EXPECT_EQ(s.set, "triton");
  ASSERT_TRUE(s.problem.has_value());
  EXPECT_EQ(s.problem->shape, (Shape{4096, 4096, 4096}));
  EXPECT_EQ(s.problem->layout, Layout::kNN);
  EXPECT_EQ(s.grid, (std::array<unsigned, 3>{1024, 1, 1}));
  EXPECT_EQ(s.block, (std::array<unsigned, 3>{128, 1, 1}));
  EXPECT_EQ(s.shared_bytes, 131072);
  ASSERT_EQ(s.params.size(), 11u);
  EXPECT_EQ(s.params[0].kind, ParamKind::kBuffer);
  EXPECT_EQ(s.params[0].role, BufferRole::kInput);
  EXPECT_EQ(s.params[0].fill.rule, FillRule::kRandom);
  EXPECT_FALSE(s.params[0].compared());
  EXPECT_TRUE(s.params[2].compared());
  EXPECT_EQ(s.params[3].size(), 4u);
  int32_t m;
  std::memcpy(&m, s.params[3].value.data(), 4);
  EXPECT_EQ(m, 4096);
  EXPECT_EQ(s.params[9].kind, ParamKind::kNull);
  EXPECT_EQ(s.params[9].size(), 8u);
  EXPECT_EQ(s.buffer_bytes(), 3u * 33554432u);
  EXPECT_NO_THROW(check_launch_spec(s, block_of({8, 8, 8, 4, 4, 4, 4, 4, 4, 8, 8}), "matmul_kernel"));

  // Scalars of every type keep their bytes; the optional fields take their defaults.
  const LaunchSpec t = parse_launch_spec(R"({"grid": [2, 3], "block": [32], "params": [
      {"kind": "buffer", "bytes": 7, "role": "inout", "fill": {"rule": "constant", "type": "u8", "value": 255}},
      {"kind": "scalar", "type": "i8", "value": -2}, {"kind": "scalar", "type": "u16", "value": 65535},
      {"kind": "scalar", "type": "i64", "value": -5000000000}, {"kind": "scalar", "type": "u64", "value": 18446744073709551615},
      {"kind": "scalar", "type": "f32", "value": 0.5}, {"kind": "scalar", "type": "f64", "value": -0.25},
      {"kind": "buffer", "bytes": 64, "role": "scratch"}]})", "t.json");
  EXPECT_EQ(t.grid, (std::array<unsigned, 3>{2, 3, 1}));
  EXPECT_EQ(t.shared_bytes, 0);
  EXPECT_FALSE(t.problem.has_value());
  EXPECT_EQ(t.params[0].name, "param0");
  EXPECT_EQ(int8_t(t.params[1].value[0]), -2);
  int64_t i64;
  std::memcpy(&i64, t.params[3].value.data(), 8);
  EXPECT_EQ(i64, -5000000000);
  uint64_t u64;
  std::memcpy(&u64, t.params[4].value.data(), 8);
  EXPECT_EQ(u64, ~uint64_t(0));
  float f;
  std::memcpy(&f, t.params[5].value.data(), 4);
  EXPECT_EQ(f, 0.5f);
  double d;
  std::memcpy(&d, t.params[6].value.data(), 8);
  EXPECT_EQ(d, -0.25);
  EXPECT_EQ(t.params[7].role, BufferRole::kScratch);
  EXPECT_EQ(t.params[7].fill.rule, FillRule::kZeros);
}

TEST(LaunchSpec, MalformedSpecsAreRefusedNamingTheRule) {
  expect_refused("{\"grid\": [1], ", {"not valid JSON"});
  expect_refused("[1, 2]", {"JSON object"});
  expect_refused(edited(kMatmulSpec, "\"grid\": [1024],", ""), {"'grid' is missing"});
  expect_refused(edited(kMatmulSpec, "\"block\": [128, 1, 1],", ""), {"'block' is missing"});
  expect_refused(edited(kMatmulSpec, "\"grid\": [1024]", "\"grid\": [0]"), {"grid[0]", "at least 1"});
  expect_refused(edited(kMatmulSpec, "\"grid\": [1024]", "\"grid\": [-4]"), {"grid[0]", "negative"});
  expect_refused(edited(kMatmulSpec, "\"grid\": [1024]", "\"grid\": [1, 1, 1, 1]"), {"grid", "1 to 3"});
  expect_refused(edited(kMatmulSpec, "\"block\": [128, 1, 1]", "\"block\": [64, 32]"), {"1024 threads"});
  expect_refused(edited(kMatmulSpec, "\"shared_bytes\": 131072", "\"shared_bytes\": -1"), {"shared_bytes", "negative"});
  expect_refused(edited(kMatmulSpec, "\"shared_bytes\": 131072", "\"shared_bytes\": 300000"), {"shared_bytes", "larger"});
  expect_refused(edited(kMatmulSpec, "\"cluster\": [1, 1, 1]", "\"cluster\": [3, 1, 1]"), {"cluster", "multiple"});
  expect_refused(edited(kMatmulSpec, "\"grid\": [1024]", "\"grd\": [1024]"), {"unknown field 'grd'"});
  expect_refused(edited(kMatmulSpec, "\"layout\": \"nn\"", "\"layout\": \"tt\""), {"problem.layout"});
  // Buffers.
  expect_refused(edited(kMatmulSpec, "\"bytes\": 33554432, \"role\": \"input\"", "\"bytes\": -8, \"role\": \"input\""),
                 {"params[0] 'a'.bytes", "negative"});
  expect_refused(edited(kMatmulSpec, "\"bytes\": 33554432, \"role\": \"input\"", "\"bytes\": 0, \"role\": \"input\""),
                 {"'a'.bytes", "null"});
  expect_refused(edited(kMatmulSpec, "\"bytes\": 33554432, \"role\": \"input\"", "\"bytes\": 33554433, \"role\": \"input\""),
                 {"'a'.bytes", "2-byte elements"});
  expect_refused(edited(kMatmulSpec, "\"bytes\": 33554432, \"role\": \"input\",", "\"role\": \"input\","),
                 {"'a'", "'bytes' is missing"});
  expect_refused(edited(kMatmulSpec, "\"role\": \"output\"", "\"role\": \"result\""), {"'c'.role", "unknown value 'result'",
                                                                                     "input, output, inout, scratch"});
  expect_refused(edited(kMatmulSpec, "{\"rule\": \"nan\", \"type\": \"fp16\"}", "{\"rule\": \"gaussian\"}"),
                 {"'c'.fill.rule", "unknown value 'gaussian'", "zeros, constant, nan, random"});
  expect_refused(edited(kMatmulSpec, "\"rule\": \"nan\", \"type\": \"fp16\"", "\"rule\": \"nan\", \"type\": \"i8\""),
                 {"'c'.fill.type", "floating-point"});
  expect_refused(edited(kMatmulSpec, "\"min\": -1, \"max\": 1}},\n    {\"name\": \"b\"", "\"min\": 1, \"max\": -1}},\n    {\"name\": \"b\""),
                 {"'a'.fill", "min must not be larger"});
  expect_refused(edited(kMatmulSpec, "\"min\": -1, \"max\": 1}},\n    {\"name\": \"b\"", "\"max\": 1}},\n    {\"name\": \"b\""),
                 {"'a'.fill", "'min' is missing"});
  expect_refused(edited(kMatmulSpec, "\"min\": -1, \"max\": 1}},\n    {\"name\": \"b\"", "\"min\": -1, \"max\": 70000}},\n    {\"name\": \"b\""),
                 {"'a'.fill.max", "fp16 range"});
  expect_refused(edited(kMatmulSpec, ", \"fill\": {\"rule\": \"nan\", \"type\": \"fp16\"}", ""), {"'c'", "'fill' is missing"});
  expect_refused(edited(kMatmulSpec, "\"role\": \"output\"", "\"role\": \"input\""), {"nothing to compare"});
  expect_refused(R"({"grid": [1], "block": [1], "params": [{"kind": "buffer", "bytes": 8, "role": "scratch",
                     "fill": {"rule": "constant", "type": "u8", "value": 1}}, {"kind": "buffer", "bytes": 8, "role": "output",
                     "fill": {"rule": "zeros"}}]})",
                 {"scratch buffers are zeroed"});
  // Scalars.
  expect_refused(edited(kMatmulSpec, "{\"name\": \"M\", \"kind\": \"scalar\", \"type\": \"i32\", \"value\": 4096}",
                        "{\"name\": \"M\", \"kind\": \"scalar\", \"type\": \"i32\"}"),
                 {"'M'", "'value' is missing"});
  expect_refused(edited(kMatmulSpec, "\"type\": \"i32\", \"value\": 4096}", "\"type\": \"int\", \"value\": 4096}"),
                 {"'M'.type", "unknown value 'int'"});
  expect_refused(edited(kMatmulSpec, "\"type\": \"i32\", \"value\": 4096}", "\"type\": \"i32\", \"value\": 4096.5}"),
                 {"'M'.value", "whole number"});
  expect_refused(edited(kMatmulSpec, "\"type\": \"i32\", \"value\": 4096}", "\"type\": \"i32\", \"value\": 4294967296}"),
                 {"'M'.value", "does not fit in i32"});
  expect_refused(edited(kMatmulSpec, "\"type\": \"i32\", \"value\": 4096}", "\"type\": \"u32\", \"value\": -1}"),
                 {"'M'.value", "negative"});
  expect_refused(edited(kMatmulSpec, "{\"name\": \"global_scratch\", \"kind\": \"null\"}",
                        "{\"name\": \"global_scratch\", \"kind\": \"null\", \"bytes\": 8}"),
                 {"'global_scratch'", "no other field"});
  expect_refused(edited(kMatmulSpec, "{\"name\": \"global_scratch\", \"kind\": \"null\"}",
                        "{\"name\": \"global_scratch\", \"kind\": \"pointer\"}"),
                 {"'global_scratch'.kind", "buffer, scalar, null"});
  expect_refused(edited(kMatmulSpec, "\"name\": \"profile_scratch\"", "\"name\": \"global_scratch\""), {"used twice"});
  expect_refused(edited(kMatmulSpec, "\"name\": \"triton_128x128x64_w4_s4\"", "\"name\": \"a,b\""), {"commas"});
  EXPECT_THROW(load_launch_spec("/nonexistent/spec.json"), Error);
}

TEST(LaunchSpec, ParametersMustBeTheKernels) {
  const LaunchSpec s = parse_launch_spec(kMatmulSpec, "spec.json");
  auto refused = [&](const sass::KernelParams& kernel, std::initializer_list<const char*> needles) {
    try {
      check_launch_spec(s, kernel, "matmul_kernel");
      ADD_FAILURE() << "accepted against " << kernel.to_string();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      for (const char* n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  };
  // Triton 3.2's ABI: one scratch pointer, not two.
  refused(block_of({8, 8, 8, 4, 4, 4, 4, 4, 4, 8}), {"lists 11 parameters", "'matmul_kernel' takes 10",
                                                      "9: 8 bytes at 48", "10: 'profile_scratch' (null pointer, 8 bytes)"});
  // An i64 stride where the SPEC says i32.
  refused(block_of({8, 8, 8, 4, 4, 4, 8, 4, 4, 8, 8}),
          {"parameter 6 'stride_am' (i32, 4 bytes)", "kernel's parameter 6 (8 bytes at offset"});
}

uint16_t half_bits(float v) {
  const __half h = __float2half_rn(v);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

float half_value(const uint8_t* at) {
  __half h;
  std::memcpy(&h, at, 2);
  return __half2float(h);
}

TEST(LaunchSpec, FillsAreAFunctionOfSeedDrawAndParameter) {
  BufferFill random{FillRule::kRandom, ElementType::kF16, 0, -2.0, 3.0};
  const auto a = fill_bytes(random, 4096, 1, 0, 0);
  ASSERT_EQ(a.size(), 4096u);
  EXPECT_EQ(a, fill_bytes(random, 4096, 1, 0, 0)) << "the same seed, draw and parameter give the same bytes";
  EXPECT_NE(a, fill_bytes(random, 4096, 2, 0, 0));
  EXPECT_NE(a, fill_bytes(random, 4096, 1, 1, 0));
  EXPECT_NE(a, fill_bytes(random, 4096, 1, 0, 1));
  // A prefix of a larger buffer: element i depends on i alone.
  const auto longer = fill_bytes(random, 8192, 1, 0, 0);
  EXPECT_TRUE(std::equal(a.begin(), a.end(), longer.begin()));
  float lo = 1e9, hi = -1e9, sum = 0;
  for (size_t i = 0; i < a.size(); i += 2) {
    const float v = half_value(a.data() + i);
    lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
  }
  EXPECT_GE(lo, -2.0f);
  EXPECT_LE(hi, 3.0f);
  EXPECT_LT(lo, -1.9f) << "uniform over the range";
  EXPECT_GT(hi, 2.9f);
  EXPECT_NEAR(sum / 2048, 0.5, 0.15);

  // Integers: inclusive bounds, every value reached.
  BufferFill ints{FillRule::kRandom, ElementType::kI32, 0, -1, 2};
  const auto i32 = fill_bytes(ints, 4000, 9, 0, 3);
  std::set<int32_t> seen;
  for (size_t i = 0; i < i32.size(); i += 4) {
    int32_t v;
    std::memcpy(&v, i32.data() + i, 4);
    seen.insert(v);
  }
  EXPECT_EQ(seen, (std::set<int32_t>{-1, 0, 1, 2}));

  // Constants, NaN and zeros; a trailing partial element stays zero.
  const auto constant = fill_bytes({FillRule::kConstant, ElementType::kF16, 0.5, 0, 0}, 7, 1, 0, 0);
  for (size_t i = 0; i + 1 < 6; i += 2) EXPECT_EQ(constant[i] | constant[i + 1] << 8, half_bits(0.5f));
  EXPECT_EQ(constant[6], 0);
  const auto nan = fill_bytes({FillRule::kNan, ElementType::kF32, 0, 0, 0}, 8, 1, 0, 0);
  float f;
  std::memcpy(&f, nan.data() + 4, 4);
  EXPECT_TRUE(std::isnan(f));
  const auto bf16_nan = fill_bytes({FillRule::kNan, ElementType::kBF16, 0, 0, 0}, 4, 1, 0, 0);
  EXPECT_EQ(bf16_nan, (std::vector<uint8_t>{0xff, 0x7f, 0xff, 0x7f}));
  EXPECT_EQ(fill_bytes({}, 5, 1, 0, 0), std::vector<uint8_t>(5, 0));
}

}  // namespace
}  // namespace rlgemm::measure
