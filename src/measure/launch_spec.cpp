#include "measure/launch_spec.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "rlgemm/design.h"
#include "rlgemm/error.h"

namespace rlgemm::measure {
namespace {

using nlohmann::json;

struct Named {
  const char* name;
  int value;
};
constexpr Named kElementTypes[] = {{"fp16", int(ElementType::kF16)}, {"bf16", int(ElementType::kBF16)},
                                   {"f32", int(ElementType::kF32)},  {"i8", int(ElementType::kI8)},
                                   {"u8", int(ElementType::kU8)},    {"i32", int(ElementType::kI32)}};
constexpr Named kScalarTypes[] = {{"i8", int(ScalarType::kI8)},   {"u8", int(ScalarType::kU8)},
                                  {"i16", int(ScalarType::kI16)}, {"u16", int(ScalarType::kU16)},
                                  {"i32", int(ScalarType::kI32)}, {"u32", int(ScalarType::kU32)},
                                  {"i64", int(ScalarType::kI64)}, {"u64", int(ScalarType::kU64)},
                                  {"f32", int(ScalarType::kF32)}, {"f64", int(ScalarType::kF64)}};
constexpr Named kRules[] = {{"zeros", int(FillRule::kZeros)},
                            {"constant", int(FillRule::kConstant)},
                            {"nan", int(FillRule::kNan)},
                            {"random", int(FillRule::kRandom)}};
constexpr Named kRoles[] = {{"input", int(BufferRole::kInput)},
                            {"output", int(BufferRole::kOutput)},
                            {"inout", int(BufferRole::kInOut)},
                            {"scratch", int(BufferRole::kScratch)}};
constexpr Named kKinds[] = {{"buffer", int(ParamKind::kBuffer)}, {"scalar", int(ParamKind::kScalar)},
                            {"null", int(ParamKind::kNull)}};

template <size_t N>
std::string names_of(const Named (&table)[N]) {
  std::string out;
  for (const auto& n : table) out += (out.empty() ? "" : ", ") + std::string(n.name);
  return out;
}

size_t element_size(ElementType t) {
  switch (t) {
    case ElementType::kF16:
    case ElementType::kBF16: return 2;
    case ElementType::kF32:
    case ElementType::kI32: return 4;
    case ElementType::kI8:
    case ElementType::kU8: return 1;
  }
  return 1;
}

uint32_t scalar_size(ScalarType t) {
  switch (t) {
    case ScalarType::kI8:
    case ScalarType::kU8: return 1;
    case ScalarType::kI16:
    case ScalarType::kU16: return 2;
    case ScalarType::kI32:
    case ScalarType::kU32:
    case ScalarType::kF32: return 4;
    case ScalarType::kI64:
    case ScalarType::kU64:
    case ScalarType::kF64: return 8;
  }
  return 4;
}

const char* scalar_name(ScalarType t) {
  for (const auto& n : kScalarTypes)
    if (n.value == int(t)) return n.name;
  return "?";
}

// Reads the spec with every failure naming the file and the field.
class Reader {
 public:
  explicit Reader(std::string origin) : origin_(std::move(origin)) {}

  [[noreturn]] void bad(const std::string& where, const std::string& why) const {
    fail("launch SPEC " + origin_ + ": " + where + ": " + why);
  }

  void only_keys(const json& j, const std::string& where, std::initializer_list<const char*> keys) const {
    if (!j.is_object()) bad(where, "must be a JSON object");
    for (auto it = j.begin(); it != j.end(); ++it) {
      bool known = false;
      for (const char* k : keys) known = known || it.key() == k;
      if (!known) {
        std::string list;
        for (const char* k : keys) list += (list.empty() ? "" : ", ") + std::string(k);
        bad(where, "unknown field '" + it.key() + "' (known: " + list + ")");
      }
    }
  }

  const json& need(const json& j, const char* key, const std::string& where) const {
    if (!j.contains(key)) bad(where, std::string("the field '") + key + "' is missing");
    return j.at(key);
  }

  std::string text(const json& j, const std::string& where) const {
    if (!j.is_string()) bad(where, "must be a string");
    return j.get<std::string>();
  }

  double number(const json& j, const std::string& where) const {
    if (!j.is_number()) bad(where, "must be a number");
    const double v = j.get<double>();
    if (!std::isfinite(v)) bad(where, "must be finite");
    return v;
  }

  // A non-negative integer no larger than `max`.
  uint64_t count(const json& j, const std::string& where, uint64_t max) const {
    if (j.is_number_integer() && !j.is_number_unsigned() && j.get<int64_t>() < 0) bad(where, "must not be negative");
    if (j.is_number_float()) {
      const double v = j.get<double>();
      if (v < 0) bad(where, "must not be negative");
      bad(where, "must be a whole number");
    }
    if (!j.is_number_unsigned() && !j.is_number_integer()) bad(where, "must be a whole number");
    const uint64_t v = j.get<uint64_t>();
    if (v > max) bad(where, std::to_string(v) + " is larger than " + std::to_string(max));
    return v;
  }

  template <size_t N>
  int pick(const json& j, const Named (&table)[N], const std::string& where) const {
    const std::string name = text(j, where);
    for (const auto& n : table)
      if (name == n.name) return n.value;
    bad(where, "unknown value '" + name + "' (known: " + names_of(table) + ")");
  }

  std::array<unsigned, 3> extents(const json& j, const std::string& where, unsigned max_each) const {
    if (!j.is_array() || j.empty() || j.size() > 3) bad(where, "must be a list of 1 to 3 whole numbers");
    std::array<unsigned, 3> out{1, 1, 1};
    for (size_t i = 0; i < j.size(); ++i) {
      const std::string at = where + "[" + std::to_string(i) + "]";
      out[i] = unsigned(count(j[i], at, max_each));
      if (out[i] == 0) bad(at, "must be at least 1");
    }
    return out;
  }

  BufferFill fill(const json& j, const std::string& where) const {
    only_keys(j, where, {"rule", "type", "value", "min", "max"});
    BufferFill f;
    f.rule = FillRule(pick(need(j, "rule", where), kRules, where + ".rule"));
    auto type = [&] {
      f.type = ElementType(pick(need(j, "type", where), kElementTypes, where + ".type"));
    };
    auto fits = [&](double v, const std::string& at) {
      if (f.type == ElementType::kI8 && (v < -128 || v > 127)) bad(at, "does not fit in i8");
      if (f.type == ElementType::kU8 && (v < 0 || v > 255)) bad(at, "does not fit in u8");
      if (f.type == ElementType::kI32 && (v < -2147483648.0 || v > 2147483647.0)) bad(at, "does not fit in i32");
      if (f.type == ElementType::kF16 && std::fabs(v) > 65504) bad(at, "is outside the fp16 range");
      const bool integral = f.type == ElementType::kI8 || f.type == ElementType::kU8 || f.type == ElementType::kI32;
      if (integral && v != std::floor(v)) bad(at, "must be a whole number for an integer type");
    };
    switch (f.rule) {
      case FillRule::kZeros:
        if (j.contains("value") || j.contains("min") || j.contains("max")) bad(where, "zeros takes no value, min or max");
        break;
      case FillRule::kConstant:
        type();
        f.value = number(need(j, "value", where), where + ".value");
        fits(f.value, where + ".value");
        break;
      case FillRule::kNan:
        type();
        if (f.type != ElementType::kF16 && f.type != ElementType::kBF16 && f.type != ElementType::kF32)
          bad(where + ".type", "nan needs a floating-point type (fp16, bf16, f32)");
        break;
      case FillRule::kRandom:
        type();
        f.min = number(need(j, "min", where), where + ".min");
        f.max = number(need(j, "max", where), where + ".max");
        fits(f.min, where + ".min");
        fits(f.max, where + ".max");
        if (!(f.min <= f.max)) bad(where, "min must not be larger than max");
        break;
    }
    return f;
  }

  void scalar_value(LaunchParam& p, const json& j, const std::string& where) const {
    const bool is_float = p.scalar == ScalarType::kF32 || p.scalar == ScalarType::kF64;
    if (is_float) {
      const double v = number(j, where);
      if (p.scalar == ScalarType::kF32) {
        const float f = float(v);
        std::memcpy(p.value.data(), &f, 4);
      } else {
        std::memcpy(p.value.data(), &v, 8);
      }
      return;
    }
    if (!j.is_number_integer()) bad(where, std::string("must be a whole number for ") + scalar_name(p.scalar));
    const bool is_signed = p.scalar == ScalarType::kI8 || p.scalar == ScalarType::kI16 || p.scalar == ScalarType::kI32 ||
                           p.scalar == ScalarType::kI64;
    const int bits = int(scalar_size(p.scalar)) * 8;
    uint64_t raw = 0;
    if (is_signed) {
      if (j.is_number_unsigned() && j.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        bad(where, std::string("does not fit in ") + scalar_name(p.scalar));
      const int64_t v = j.get<int64_t>();
      if (bits < 64 && (v < -(int64_t(1) << (bits - 1)) || v >= (int64_t(1) << (bits - 1))))
        bad(where, std::to_string(v) + " does not fit in " + scalar_name(p.scalar));
      raw = uint64_t(v);
    } else {
      if (!j.is_number_unsigned() && j.get<int64_t>() < 0)
        bad(where, std::string("must not be negative for ") + scalar_name(p.scalar));
      const uint64_t v = j.get<uint64_t>();
      if (bits < 64 && v >= (uint64_t(1) << bits)) bad(where, std::to_string(v) + " does not fit in " + scalar_name(p.scalar));
      raw = v;
    }
    std::memcpy(p.value.data(), &raw, 8);  // little-endian: the low bytes are the value
  }

  LaunchParam param(const json& j, size_t index) const {
    const std::string where = "params[" + std::to_string(index) + "]";
    only_keys(j, where, {"name", "kind", "bytes", "role", "fill", "type", "value"});
    LaunchParam p;
    p.name = j.contains("name") ? text(j.at("name"), where + ".name") : "param" + std::to_string(index);
    const std::string at = where + " '" + p.name + "'";
    p.kind = ParamKind(pick(need(j, "kind", at), kKinds, at + ".kind"));
    switch (p.kind) {
      case ParamKind::kBuffer: {
        if (j.contains("type") || j.contains("value")) bad(at, "a buffer takes bytes, role and fill, not type or value");
        p.bytes = count(need(j, "bytes", at), at + ".bytes", uint64_t(1) << 40);
        if (p.bytes == 0) bad(at + ".bytes", "must be at least 1 (a pointer passed as 0 is kind \"null\")");
        p.role = BufferRole(pick(need(j, "role", at), kRoles, at + ".role"));
        if (j.contains("fill")) {
          p.fill = fill(j.at("fill"), at + ".fill");
        } else if (p.role != BufferRole::kScratch) {
          bad(at, "the field 'fill' is missing (inputs and outputs are filled before every run)");
        }
        if (p.role == BufferRole::kScratch && p.fill.rule != FillRule::kZeros)
          bad(at + ".fill", "scratch buffers are zeroed before every run");
        if (p.fill.rule != FillRule::kZeros && p.bytes % element_size(p.fill.type) != 0)
          bad(at + ".bytes", std::to_string(p.bytes) + " is not a whole number of " +
                                 std::to_string(element_size(p.fill.type)) + "-byte elements of its fill type");
        break;
      }
      case ParamKind::kScalar:
        if (j.contains("bytes") || j.contains("role") || j.contains("fill"))
          bad(at, "a scalar takes type and value, not bytes, role or fill");
        p.scalar = ScalarType(pick(need(j, "type", at), kScalarTypes, at + ".type"));
        scalar_value(p, need(j, "value", at), at + ".value");
        break;
      case ParamKind::kNull:
        if (j.size() > (j.contains("name") ? 2u : 1u)) bad(at, "a null pointer takes no other field");
        break;
    }
    return p;
  }

 private:
  std::string origin_;
};

// splitmix64: a counter-based generator, so that element i of a fill needs no state from element i-1.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

void store(uint8_t* at, ElementType type, double v) {
  switch (type) {
    case ElementType::kF16: {
      const __half h = __float2half_rn(float(v));
      std::memcpy(at, &h, 2);
      break;
    }
    case ElementType::kBF16: {
      const __nv_bfloat16 h = __float2bfloat16_rn(float(v));
      std::memcpy(at, &h, 2);
      break;
    }
    case ElementType::kF32: {
      const float f = float(v);
      std::memcpy(at, &f, 4);
      break;
    }
    case ElementType::kI8: *at = uint8_t(int8_t(v)); break;
    case ElementType::kU8: *at = uint8_t(v); break;
    case ElementType::kI32: {
      const int32_t i = int32_t(v);
      std::memcpy(at, &i, 4);
      break;
    }
  }
}

}  // namespace

uint32_t LaunchParam::size() const { return kind == ParamKind::kScalar ? scalar_size(scalar) : 8; }

std::string LaunchParam::describe() const {
  const std::string what = kind == ParamKind::kBuffer ? "buffer" : kind == ParamKind::kNull ? "null pointer" : scalar_name(scalar);
  return "'" + name + "' (" + what + ", " + std::to_string(size()) + " bytes)";
}

uint64_t LaunchSpec::buffer_bytes() const {
  uint64_t total = 0;
  for (const auto& p : params)
    if (p.kind == ParamKind::kBuffer) total += p.bytes;
  return total;
}

LaunchSpec parse_launch_spec(const std::string& json_text, const std::string& origin) {
  const Reader r(origin);
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::parse_error& e) {
    r.bad("not valid JSON", e.what());
  }
  r.only_keys(j, "the top level", {"name", "set", "problem", "grid", "block", "shared_bytes", "cluster", "params"});
  LaunchSpec s;
  s.origin = origin;
  if (j.contains("name")) s.name = r.text(j.at("name"), "name");
  if (j.contains("set")) s.set = r.text(j.at("set"), "set");
  if (s.name.find_first_of(",\"\n") != std::string::npos || s.set.find_first_of(",\"\n") != std::string::npos)
    r.bad("name and set", "must not hold commas, quotes or line breaks (they are CSV fields)");
  if (j.contains("problem")) {
    const json& p = j.at("problem");
    r.only_keys(p, "problem", {"m", "n", "k", "layout"});
    Problem problem;
    problem.shape = {int64_t(r.count(r.need(p, "m", "problem"), "problem.m", 1u << 30)),
                     int64_t(r.count(r.need(p, "n", "problem"), "problem.n", 1u << 30)),
                     int64_t(r.count(r.need(p, "k", "problem"), "problem.k", 1u << 30))};
    if (p.contains("layout")) {
      try {
        problem.layout = parse_layout(r.text(p.at("layout"), "problem.layout"));
      } catch (const Error& e) {
        r.bad("problem.layout", e.what());
      }
    }
    s.problem = problem;
  }
  s.grid = r.extents(r.need(j, "grid", "the top level"), "grid", 0x7fffffffu);
  s.block = r.extents(r.need(j, "block", "the top level"), "block", 1024);
  if (uint64_t(s.block[0]) * s.block[1] * s.block[2] > 1024) r.bad("block", "more than 1024 threads per block");
  if (j.contains("shared_bytes"))
    s.shared_bytes = int(r.count(j.at("shared_bytes"), "shared_bytes", uint64_t(kHopperSmemPerBlock)));
  if (j.contains("cluster")) {
    s.cluster = r.extents(j.at("cluster"), "cluster", 16);
    if (s.cluster[0] * s.cluster[1] * s.cluster[2] > 16) r.bad("cluster", "more than 16 blocks per cluster");
    for (int d = 0; d < 3; ++d)
      if (s.grid[d] % s.cluster[d] != 0)
        r.bad("cluster", "the grid's extent " + std::to_string(d) + " (" + std::to_string(s.grid[d]) +
                             ") is not a multiple of the cluster's (" + std::to_string(s.cluster[d]) + ")");
  }
  const json& params = r.need(j, "params", "the top level");
  if (!params.is_array()) r.bad("params", "must be a list");
  std::set<std::string> names;
  bool compared = false;
  for (size_t i = 0; i < params.size(); ++i) {
    s.params.push_back(r.param(params[i], i));
    if (!names.insert(s.params.back().name).second) r.bad("params", "the name '" + s.params.back().name + "' is used twice");
    compared = compared || s.params.back().compared();
  }
  if (!compared)
    r.bad("params", "no buffer has role output or inout: there would be nothing to compare between schedules");
  return s;
}

LaunchSpec load_launch_spec(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot read launch SPEC '" + path + "': the file does not exist or is not readable");
  return parse_launch_spec(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()), path);
}

void check_launch_spec(const LaunchSpec& spec, const sass::KernelParams& kernel_params, const std::string& kernel) {
  auto listing = [&] {
    std::string spec_list;
    for (size_t i = 0; i < spec.params.size(); ++i)
      spec_list += (i ? ", " : "") + std::to_string(i) + ": " + spec.params[i].describe();
    return "; the kernel's parameter block: " + kernel_params.to_string() + "; the SPEC's: " +
           (spec_list.empty() ? std::string("none") : spec_list);
  };
  const auto& want = kernel_params.params;
  if (spec.params.size() != want.size())
    fail("launch SPEC " + spec.origin + " lists " + std::to_string(spec.params.size()) + " parameters, kernel '" +
         kernel + "' takes " + std::to_string(want.size()) + listing());
  for (size_t i = 0; i < want.size(); ++i)
    if (spec.params[i].size() != want[i].size)
      fail("launch SPEC " + spec.origin + ": parameter " + std::to_string(i) + " " + spec.params[i].describe() +
           " does not match the kernel's parameter " + std::to_string(i) + " (" + std::to_string(want[i].size) +
           " bytes at offset " + std::to_string(want[i].offset) + ")" + listing());
}

std::vector<uint8_t> fill_bytes(const BufferFill& f, uint64_t bytes, uint64_t seed, uint64_t draw, uint64_t stream) {
  std::vector<uint8_t> out(bytes, 0);
  if (f.rule == FillRule::kZeros) return out;
  const size_t size = element_size(f.type);
  const uint64_t elems = bytes / size;
  if (f.rule == FillRule::kNan) {
    const uint32_t nan32 = 0x7fffffffu;
    const uint16_t nan16 = 0x7fff;  // a NaN in fp16 and in bf16 alike
    for (uint64_t i = 0; i < elems; ++i)
      std::memcpy(out.data() + i * size, size == 4 ? static_cast<const void*>(&nan32) : &nan16, size);
    return out;
  }
  if (f.rule == FillRule::kConstant) {
    uint8_t one[4];
    store(one, f.type, f.value);
    for (uint64_t i = 0; i < elems; ++i) std::memcpy(out.data() + i * size, one, size);
    return out;
  }
  const uint64_t key = mix(mix(mix(seed) ^ draw) ^ stream);
  const bool integral = f.type == ElementType::kI8 || f.type == ElementType::kU8 || f.type == ElementType::kI32;
  for (uint64_t i = 0; i < elems; ++i) {
    const uint64_t bits = mix(key + i);
    double v;
    if (integral) {
      const uint64_t span = uint64_t(f.max - f.min) + 1;
      v = f.min + double(bits % span);
    } else {
      v = f.min + (f.max - f.min) * (double(bits >> 11) * 0x1.0p-53);
    }
    store(out.data() + i * size, f.type, v);
  }
  return out;
}

}  // namespace rlgemm::measure
