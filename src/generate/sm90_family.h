// The sm90 kernel family: warp-specialized, persistent wgmma + TMA HGEMM kernels for sm_90a
// (device code in src/kernels/sm90/gemm.cuh, PTX wrappers in src/kernels/ptx/sm90.cuh).
#pragma once

#include <optional>
#include <string>

#include "generate/kernel_family.h"
#include "rlgemm/design.h"
#include "rlgemm/problem.h"

namespace rlgemm {

const KernelFamily& sm90_family();

// Why the sm90 kernel template cannot express this design for this layout, or nullopt: why_invalid's
// answer (every rule, the template's own limits included, lives there). source() throws with this text.
std::optional<std::string> sm90_unsupported(const Design& design, Layout layout);

}  // namespace rlgemm
