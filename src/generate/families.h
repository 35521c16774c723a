// The kernel families generated in this folder (sm90's is declared in sm90_family.h).
#pragma once

#include "generate/kernel_family.h"

namespace rlgemm {

const KernelFamily& sm80_family();
const KernelFamily& test_family();

// The lines a generated translation unit opens with to choose its element type before any kernel header:
// "#define RLGEMM_BF16 1" for a bf16 design (src/kernels/common/types.cuh), nothing for fp16.
std::string element_type_prelude(const Design& design);

// The sm80 kernel's view of a problem: with swap_ab it computes C^T = B^T A^T, so its A is the problem's B.
struct Sm80View {
  int64_t m = 0, n = 0, k = 0;
  bool a_kmajor = true;   // A' stored K-contiguous (else M'-contiguous: B of an nn problem, swapped)
  bool b_kmajor = true;   // B' stored K-contiguous (else N-contiguous: B of an nn problem)
  bool d_transposed = false;
};
Sm80View sm80_view(const Design& design, const Problem& problem);

}  // namespace rlgemm
