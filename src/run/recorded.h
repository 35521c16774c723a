// A CUDA graph's work read back as launches: a chain of kernels and memsets, each kernel with its function,
// configuration, launch attributes and parameter block, which can then be launched again as recorded -- the same
// GPU work without the host code that made it (dispatch::LtDirect: cuBLASLt's host path; env's evaluator: a
// submission's launch function).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace rlgemm {

// One kernel launch as a CUDA graph recorded it: the function, its configuration, the launch attributes that
// differ from the defaults, and the parameter block (each parameter at its offset).
struct RecordedLaunch {
  CUfunction function = nullptr;
  std::array<unsigned, 3> grid{}, block{};
  unsigned smem_bytes = 0;
  std::vector<CUlaunchAttribute> attributes;
  std::vector<unsigned char> params;
  // The same kernel with the same configuration and attributes (the parameters aside).
  bool same_launch(const RecordedLaunch& other) const;
};

// One operation of a recorded call.
struct RecordedOp {
  bool kernel = true;
  RecordedLaunch launch;      // kernel
  cudaMemsetParams memset{};  // otherwise
};

// The operations of a recorded `graph` in order, where they are a chain of at most 8 kernels and memsets (each
// after the one before; a kernel allowed to start before the one before it ends asks for that in its launch):
// nullopt with `why` otherwise. `first_is_marker`: the graph's first node is a kernel put there to learn how the
// next one depends on the work before it (record_call's empty kernel), left out of the result.
std::optional<std::vector<RecordedOp>> read_chain(cudaGraph_t graph, bool first_is_marker, std::string& why);
// Makes `ops` on `stream` as they were recorded: the same kernels, configurations, attributes and parameter
// blocks, the same memsets. No host code of whoever recorded them runs.
void launch_recorded(const std::vector<RecordedOp>& ops, cudaStream_t stream);
// One memset of a recorded call at `destination`; one recorded kernel with the parameter block `params`
// (launch.params.size() bytes).
void launch_memset(const cudaMemsetParams& memset, uint64_t destination, cudaStream_t stream);
void launch_kernel(const RecordedLaunch& launch, const unsigned char* params, cudaStream_t stream);

}  // namespace rlgemm
