// Programmatic dependent launch (PTX ISA, "Parallel Synchronization and Communication Instructions:
// griddepcontrol", sm_90 and later), for both kernel families.
//
// A kernel launched with the programmatic stream serialization attribute may start while the previous kernel
// of its stream is still running. Its CTAs then run their prologue early, but must not touch global memory
// (read operands, draw tickets, store C) before wait(): it returns once every grid this one depends on has
// completed and its writes are visible. launch_dependents() lets the next such kernel start: it launches once
// every CTA of this grid has issued it or exited. Without the attribute wait() returns at once.
//
// Both are compiled in only when kEnabled (a design with /pdl), so that kernels without it still build for
// sm_80, which has no griddepcontrol.
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define RLGEMM_GRIDDEPCONTROL 0
#else
#define RLGEMM_GRIDDEPCONTROL 1
#endif

namespace rlgemm {
namespace ptx {

template <bool kEnabled>
struct GridDependency {
  static_assert(!kEnabled || RLGEMM_GRIDDEPCONTROL,
                "a /pdl design needs griddepcontrol, which sm_90 and later provide: compile it for sm_90 or later");

  static __device__ __forceinline__ void wait() {
    if constexpr (kEnabled) asm volatile("griddepcontrol.wait;" ::: "memory");
  }
  static __device__ __forceinline__ void launch_dependents() {
    if constexpr (kEnabled) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  }
  // What every kernel of a /pdl design does before its first global-memory access: wait for the grids it
  // depends on, then let its own dependents launch (their prologues overlap this grid's work).
  static __device__ __forceinline__ void wait_then_launch_dependents() {
    wait();
    launch_dependents();
  }
};

}  // namespace ptx
}  // namespace rlgemm
