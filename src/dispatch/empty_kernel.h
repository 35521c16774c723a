// A kernel that does nothing: the operation placed before a recorded call (dispatch/lt_direct), so that the
// recording shows how the call's first kernel depends on the work before it.
#pragma once

#include <cuda_runtime.h>

namespace rlgemm::dispatch {

// One block of one thread on `stream`; throws Error on a launch failure.
void launch_empty_kernel(cudaStream_t stream);

}  // namespace rlgemm::dispatch
