// The by-value parameter of the fault-injection kernels (host and device; core language only).
#pragma once

namespace rlgemm {
namespace test {

struct Params {
  unsigned short* d;  // fp16 M x N row-major output
  int m, n, ldd;
};

}  // namespace test
}  // namespace rlgemm
