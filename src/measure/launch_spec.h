// How to launch a kernel rlgemm did not write: the launch SPEC of `rlgemm sass-opt --cubin F --kernel K
// --launch SPEC`, a JSON file.
//
//   {
//     "name": "triton_128x256x64_w8_s3",   optional: the kernel column of the CSV (default: the kernel's name)
//     "set": "triton",                     optional: the set column of the CSV (--set overrides it)
//     "problem": {"m": 4096, "n": 4096, "k": 4096, "layout": "nn"},   optional: the CSV's M,N,K,layout
//     "grid": [512, 1, 1],                 blocks (1 to 3 extents; missing ones are 1)
//     "block": [256, 1, 1],                threads per block
//     "shared_bytes": 98304,               dynamic shared memory per block (default 0)
//     "cluster": [1, 1, 1],                optional: thread-block cluster extents
//     "params": [                          every kernel parameter, in the kernel's order
//       {"name": "a", "kind": "buffer", "bytes": 33554432, "role": "input",
//        "fill": {"rule": "random", "type": "fp16", "min": -1, "max": 1}},
//       {"name": "c", "kind": "buffer", "bytes": 33554432, "role": "output", "fill": {"rule": "nan", "type": "fp16"}},
//       {"name": "M", "kind": "scalar", "type": "i32", "value": 4096},
//       {"name": "global_scratch", "kind": "null"}
//     ]
//   }
//
// Parameter kinds: "buffer" (a device pointer to `bytes` bytes), "scalar" (by value: i8 u8 i16 u16 i32 u32 i64
// u64 f32 f64) and "null" (a pointer parameter passed as 0, e.g. the scratch pointers Triton appends to its
// kernels when they need no scratch memory).
// Buffer roles: "input" (filled before every run), "output" (filled before every run -- prefer "nan", so that
// an element a schedule forgets to write shows -- and compared bit for bit between the original and each
// candidate), "inout" (both), "scratch" (zeroed before every run, never compared; its fill may be left out).
// Fill rules: {"rule": "zeros"}, {"rule": "constant", "type": T, "value": v}, {"rule": "nan", "type": F} and
// {"rule": "random", "type": T, "min": lo, "max": hi} (uniform; integers inclusive), with T one of fp16 bf16
// f32 i8 u8 i32 and F one of fp16 bf16 f32. Random fills are a function of the seed, the input draw and the
// parameter's position alone, so the same seed fills the same bytes on every run and machine.
//
// Every rule is checked before anything runs; each failure is an Error(kInvalidInput) naming the file, the
// field and the rule. check_launch_spec() then holds the parameters against the kernel's parameter block as
// the cubin records it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rlgemm/problem.h"
#include "sass/cubin.h"

namespace rlgemm::measure {

enum class ElementType { kF16, kBF16, kF32, kI8, kU8, kI32 };
enum class FillRule { kZeros, kConstant, kNan, kRandom };
enum class BufferRole { kInput, kOutput, kInOut, kScratch };
enum class ParamKind { kBuffer, kScalar, kNull };
enum class ScalarType { kI8, kU8, kI16, kU16, kI32, kU32, kI64, kU64, kF32, kF64 };

struct BufferFill {
  FillRule rule = FillRule::kZeros;
  ElementType type = ElementType::kU8;
  double value = 0;  // kConstant
  double min = 0;    // kRandom
  double max = 0;
};

struct LaunchParam {
  std::string name;
  ParamKind kind = ParamKind::kBuffer;
  // kBuffer
  uint64_t bytes = 0;
  BufferRole role = BufferRole::kInput;
  BufferFill fill;
  // kScalar: the value's bytes (little-endian, scalar_size() of them)
  ScalarType scalar = ScalarType::kI32;
  std::array<uint8_t, 8> value{};

  uint32_t size() const;  // bytes in the parameter block: 8 for pointers, the scalar's size otherwise
  bool compared() const { return kind == ParamKind::kBuffer && (role == BufferRole::kOutput || role == BufferRole::kInOut); }
  std::string describe() const;  // "a (buffer, 8 bytes)", "M (i32, 4 bytes)"
};

struct LaunchSpec {
  std::string origin;  // the file, for messages
  std::string name;
  std::string set;
  std::optional<Problem> problem;
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
  std::array<unsigned, 3> cluster{1, 1, 1};
  int shared_bytes = 0;
  std::vector<LaunchParam> params;
  uint64_t buffer_bytes() const;  // all buffers together
};

LaunchSpec parse_launch_spec(const std::string& json_text, const std::string& origin);
LaunchSpec load_launch_spec(const std::string& path);

// Throws Error(kInvalidInput) unless the spec's parameters are the kernel's, one for one and of the same
// sizes; the message lists both.
void check_launch_spec(const LaunchSpec& spec, const sass::KernelParams& params, const std::string& kernel);

// The bytes `fill` writes into a buffer of `bytes` bytes on input draw `draw` (random fills: a function of
// seed, draw and `stream`, the parameter's position). A trailing part smaller than an element is zero.
std::vector<uint8_t> fill_bytes(const BufferFill& fill, uint64_t bytes, uint64_t seed, uint64_t draw, uint64_t stream);

}  // namespace rlgemm::measure
