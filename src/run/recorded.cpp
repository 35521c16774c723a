#include "run/recorded.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/cuda_util.h"
#include "rlgemm/error.h"
#include "run/driver.h"

namespace rlgemm {

bool RecordedLaunch::same_launch(const RecordedLaunch& other) const {
  if (function != other.function || grid != other.grid || block != other.block || smem_bytes != other.smem_bytes ||
      attributes.size() != other.attributes.size() || params.size() != other.params.size())
    return false;
  for (size_t i = 0; i < attributes.size(); ++i)
    if (attributes[i].id != other.attributes[i].id ||
        std::memcmp(&attributes[i].value, &other.attributes[i].value, sizeof attributes[i].value) != 0)
      return false;
  return true;
}

namespace {

// The attributes a kernel node may carry, read back from the recorded graph (those set to their default are
// left out: a zero value is each one's default).
constexpr CUlaunchAttributeID kNodeAttributes[] = {
    CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
    CU_LAUNCH_ATTRIBUTE_COOPERATIVE,       CU_LAUNCH_ATTRIBUTE_PRIORITY,
    CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,   CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP,
    CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW};

std::optional<RecordedLaunch> read_kernel(cudaGraphNode_t node, bool programmatic, std::string& why) {
  const DriverApi& api = driver();
  CUDA_KERNEL_NODE_PARAMS p{};
  RLGEMM_CU_CHECK(api.cuGraphKernelNodeGetParams(reinterpret_cast<CUgraphNode>(node), &p));
  CUfunction function = p.func;
  if (!function && p.kern) RLGEMM_CU_CHECK(api.cuKernelGetFunction(&function, p.kern));
  if (!function) {
    why = "a recorded kernel launch names no function";
    return std::nullopt;
  }
  // The parameters as a packed buffer (how cuBLASLt launches: the node keeps it in `extra`), or one pointer per
  // parameter.
  const void* buffer = nullptr;
  size_t buffer_size = 0;
  bool buffer_given = false;
  for (void** e = p.extra; e && *e != CU_LAUNCH_PARAM_END; e += 2) {
    if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      buffer = e[1];
      buffer_given = true;
    } else if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE) {
      buffer_size = *static_cast<const size_t*>(e[1]);
    } else {
      why = "a recorded kernel launch has an 'extra' entry not replayed here";
      return std::nullopt;
    }
  }
  if (!p.kernelParams && !(buffer_given && buffer && buffer_size)) {
    why = "a recorded kernel launch has neither parameters nor a parameter buffer";
    return std::nullopt;
  }
  RecordedLaunch launch;
  launch.function = function;
  launch.grid = {p.gridDimX, p.gridDimY, p.gridDimZ};
  launch.block = {p.blockDimX, p.blockDimY, p.blockDimZ};
  launch.smem_bytes = p.sharedMemBytes;
  for (const CUlaunchAttributeID id : kNodeAttributes) {
    CUlaunchAttributeValue value{};
    if (api.cuGraphKernelNodeGetAttribute(reinterpret_cast<CUgraphNode>(node), id, &value) != CUDA_SUCCESS) continue;
    static const CUlaunchAttributeValue zero{};
    if (std::memcmp(&value, &zero, sizeof value) == 0) continue;
    CUlaunchAttribute a{};
    a.id = id;
    a.value = value;
    launch.attributes.push_back(a);
  }
  if (programmatic) {
    // Its edge from the kernel before it was programmatic: it may start before that one ends, and waits itself.
    CUlaunchAttribute a{};
    a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a.value.programmaticStreamSerializationAllowed = 1;
    launch.attributes.push_back(a);
  }
  if (!p.kernelParams) {
    const auto* bytes = static_cast<const unsigned char*>(buffer);
    launch.params.assign(bytes, bytes + buffer_size);
    return launch;
  }
  std::vector<std::pair<size_t, size_t>> layout;  // offset, size of each parameter
  for (size_t i = 0;; ++i) {
    size_t offset = 0, size = 0;
    if (api.cuFuncGetParamInfo(function, i, &offset, &size) != CUDA_SUCCESS) break;
    layout.emplace_back(offset, size);
  }
  size_t bytes = 0;
  for (const auto& [offset, size] : layout) bytes = std::max(bytes, offset + size);
  launch.params.assign(bytes, 0);
  for (size_t i = 0; i < layout.size(); ++i)
    std::memcpy(launch.params.data() + layout[i].first, p.kernelParams[i], layout[i].second);
  return launch;
}

}  // namespace

std::optional<std::vector<RecordedOp>> read_chain(cudaGraph_t graph, bool first_is_marker, std::string& why) {
  const char* whose = first_is_marker ? "cuBLASLt's call" : "the recorded work";
  const size_t skip = first_is_marker ? 1 : 0;
  size_t count = 0, edge_count = 0;
  RLGEMM_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  RLGEMM_CUDA_CHECK(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &edge_count));
  if (count < 1 + skip || count > 8 + skip || edge_count != count - 1) {
    why = std::string(whose) + " is " + std::to_string(count - std::min(count, skip)) + " operations with " +
          std::to_string(edge_count - std::min(edge_count, skip)) + " dependencies, not a chain";
    return std::nullopt;
  }
  std::vector<cudaGraphNode_t> nodes(count), from(edge_count), to(edge_count);
  std::vector<cudaGraphEdgeData> data(edge_count);
  RLGEMM_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  if (edge_count) RLGEMM_CUDA_CHECK(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &edge_count));
  // The chain's order: the node nothing leads to first, then each edge's head in turn.
  std::vector<cudaGraphNode_t> order;
  std::vector<bool> programmatic;
  for (cudaGraphNode_t n : nodes)
    if (std::find(to.begin(), to.end(), n) == to.end()) order.push_back(n);
  if (order.size() != 1) {
    why = std::string(whose) + " is " + std::to_string(count - skip) + " operations that are not a chain";
    return std::nullopt;
  }
  programmatic.push_back(false);
  while (order.size() < count) {
    const auto e = std::find(from.begin(), from.end(), order.back());
    if (e == from.end() || std::count(from.begin(), from.end(), order.back()) != 1) {
      why = std::string(whose) + " is " + std::to_string(count - skip) + " operations that are not a chain";
      return std::nullopt;
    }
    const cudaGraphEdgeData& d = data[size_t(e - from.begin())];
    const bool early = d.type == cudaGraphDependencyTypeProgrammatic;
    const bool from_marker = first_is_marker && order.size() == 1;
    if (early && d.from_port != cudaGraphKernelNodePortProgrammatic && !from_marker) {
      why = std::string(whose) + " has a dependency of a kind not replayed here (port " + std::to_string(d.from_port) +
            ")";
      return std::nullopt;
    }
    order.push_back(to[size_t(e - from.begin())]);
    // An early start after the work before is replayed only in the form stream serialization gives (the
    // programmatic port); in another form the kernel waits for that work to end, as it always did.
    programmatic.push_back(early && d.from_port == cudaGraphKernelNodePortProgrammatic);
  }
  std::vector<RecordedOp> ops;
  for (size_t i = skip; i < order.size(); ++i) {
    cudaGraphNodeType type{};
    RLGEMM_CUDA_CHECK(cudaGraphNodeGetType(order[i], &type));
    RecordedOp op;
    if (type == cudaGraphNodeTypeKernel) {
      auto launch = read_kernel(order[i], programmatic[i], why);
      if (!launch) return std::nullopt;
      op.launch = std::move(*launch);
    } else if (type == cudaGraphNodeTypeMemset && !programmatic[i]) {
      op.kernel = false;
      RLGEMM_CUDA_CHECK(cudaGraphMemsetNodeGetParams(order[i], &op.memset));
    } else {
      why = std::string(whose) + " holds an operation that is neither a kernel nor a memset (graph node type " +
            std::to_string(int(type)) + ")";
      return std::nullopt;
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

void launch_memset(const cudaMemsetParams& m, uint64_t destination, cudaStream_t stream) {
  const DriverApi& api = driver();
  const CUstream s = reinterpret_cast<CUstream>(stream);
  const CUdeviceptr dst = destination;
  const size_t pitch = m.height > 1 ? m.pitch : m.width * m.elementSize;
  CUresult status = CUDA_ERROR_INVALID_VALUE;
  if (m.elementSize == 1)
    status = api.cuMemsetD2D8Async(dst, pitch, static_cast<unsigned char>(m.value), m.width, m.height, s);
  else if (m.elementSize == 2)
    status = api.cuMemsetD2D16Async(dst, pitch, static_cast<unsigned short>(m.value), m.width, m.height, s);
  else if (m.elementSize == 4)
    status = api.cuMemsetD2D32Async(dst, pitch, m.value, m.width, m.height, s);
  RLGEMM_CU_CHECK(status);
}

void launch_kernel(const RecordedLaunch& launch, const unsigned char* params, cudaStream_t stream) {
  CUlaunchConfig config{};
  config.gridDimX = launch.grid[0], config.gridDimY = launch.grid[1], config.gridDimZ = launch.grid[2];
  config.blockDimX = launch.block[0], config.blockDimY = launch.block[1], config.blockDimZ = launch.block[2];
  config.sharedMemBytes = launch.smem_bytes;
  config.hStream = reinterpret_cast<CUstream>(stream);
  config.attrs = const_cast<CUlaunchAttribute*>(launch.attributes.data());
  config.numAttrs = unsigned(launch.attributes.size());
  size_t size = launch.params.size();
  // The driver reads the block and copies it into the launch.
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<unsigned char*>(params), CU_LAUNCH_PARAM_BUFFER_SIZE,
                   &size, CU_LAUNCH_PARAM_END};
  RLGEMM_CU_CHECK(driver().cuLaunchKernelEx(&config, launch.function, nullptr, extra));
}

void launch_recorded(const std::vector<RecordedOp>& ops, cudaStream_t stream) {
  for (const RecordedOp& op : ops) {
    if (!op.kernel) {
      launch_memset(op.memset, reinterpret_cast<uint64_t>(op.memset.dst), stream);
      continue;
    }
    launch_kernel(op.launch, op.launch.params.data(), stream);
  }
}

}  // namespace rlgemm
