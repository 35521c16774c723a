// The device headers of src/kernels, compiled into the library (see embed_headers.cmake) and handed to
// NVRTC by name, so that generating and compiling kernels needs no source tree at run time.
#pragma once

#include <span>

namespace rlgemm {

struct EmbeddedHeader {
  const char* name;  // path under src/kernels, as kernel sources include it: "sm80/gemm.cuh"
  const char* text;
};

std::span<const EmbeddedHeader> embedded_headers();

}  // namespace rlgemm
