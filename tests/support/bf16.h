// bf16 on the host, for the tests' references: the upper 16 bits of an fp32, rounded to nearest even (finite
// values), and back.
#pragma once

#include <cstdint>
#include <cstring>

namespace rlgemm::test {

inline uint16_t bf16_bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float bf16_float_of(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace rlgemm::test
