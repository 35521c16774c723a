// gpu_spin (bench/timing.h): one thread that waits on the global timer, so that the GPU stays busy while the
// host submits the work a timed region is about to hold.
#include <cuda_runtime.h>

#include <algorithm>

#include "bench/timing.h"
#include "core/cuda_util.h"

namespace rlgemm::bench {
namespace {

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) {
  }
}

}  // namespace

void gpu_spin(cudaStream_t stream, double microseconds) {
  const double ns = std::clamp(microseconds, 0.0, 1e6) * 1e3;
  spin_kernel<<<1, 1, 0, stream>>>(static_cast<unsigned long long>(ns));
  RLGEMM_CHECK_LAUNCH();
}

}  // namespace rlgemm::bench
