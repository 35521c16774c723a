#include "dispatch/lt_direct.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "bench/fill.h"
#include "core/cuda_util.h"
#include "dispatch/cublaslt_gemm.h"
#include "rlgemm/error.h"
#include "run/driver.h"

namespace rlgemm::dispatch {

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

const char* operand_name(int operand) {
  static const char* const names[kOperandCount] = {"A", "B", "C", "the workspace"};
  return operand >= 0 && operand < kOperandCount ? names[operand] : "?";
}

bool replace_tensor_map_address(unsigned char* map, uint64_t address) {
  CUtensorMap aligned;  // 64-byte aligned, as the driver takes it
  static_assert(sizeof aligned == 128);
  std::memcpy(&aligned, map, sizeof aligned);
  if (driver().cuTensorMapReplaceAddress(&aligned, reinterpret_cast<void*>(address)) != CUDA_SUCCESS) return false;
  std::memcpy(map, &aligned, sizeof aligned);
  return true;
}

namespace {

constexpr size_t kTensorMapBytes = 128, kTensorMapAlign = 64;

uint64_t load64(const std::vector<unsigned char>& bytes, size_t offset) {
  uint64_t v;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

std::string hex_offset(size_t offset) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%zx", offset);
  return text;
}

}  // namespace

LaunchRecipe LaunchRecipe::derive(RecordedLaunch base, const Operands& base_operands, const std::vector<Moved>& moved,
                                  const ReplaceAddress& replace) {
  LaunchRecipe recipe;
  const size_t size = base.params.size();
  std::vector<int> owner(size, -1);  // the rule that explains each byte
  for (const Moved& m : moved) {
    if (m.operand < 0 || m.operand >= kOperandCount)
      throw Error(ErrorKind::kInvalidInput, "a moved operand must be 0 to 3, not " + std::to_string(m.operand));
    const std::string name = operand_name(m.operand);
    if (!m.launch.same_launch(base))
      throw Error(ErrorKind::kRuntime, "moving " + name + " changed the kernel or its launch configuration");
    for (int other = 0; other < kOperandCount; ++other)
      if (other != m.operand && m.operands[size_t(other)] != base_operands[size_t(other)])
        throw Error(ErrorKind::kInvalidInput, "a launch recorded with " + name + " moved has " +
                                                  operand_name(other) + " moved too");
    const uint64_t from = base_operands[size_t(m.operand)], to = m.operands[size_t(m.operand)];
    if (from == to) throw Error(ErrorKind::kInvalidInput, "the launch recorded with " + name + " moved has it in place");
    const std::vector<unsigned char>& after = m.launch.params;
    for (size_t p = 0; p < size; ++p) {
      if (base.params[p] == after[p]) continue;
      if (owner[p] >= 0) {
        const int first = recipe.rules_[size_t(owner[p])].operand;
        if (first == m.operand) continue;
        throw Error(ErrorKind::kRuntime, "parameter byte " + hex_offset(p) + " changes with both " +
                                             operand_name(first) + " and " + name);
      }
      bool explained = false;
      // The operand's address plus a constant, in the 8 aligned bytes around p.
      const size_t q = p & ~size_t(7);
      if (q + 8 <= size) {
        const int64_t d0 = int64_t(load64(base.params, q) - from), d1 = int64_t(load64(after, q) - to);
        if (d0 == d1) {
          recipe.rules_.push_back({PatchRule::Kind::kPointer, q, m.operand, d0});
          explained = true;
        }
      }
      // A tensor map (128 bytes, 64-byte aligned) whose global address is the operand's.
      for (size_t w : {p & ~(kTensorMapAlign - 1), (p & ~(kTensorMapAlign - 1)) - kTensorMapAlign}) {
        if (explained || w > p || w + kTensorMapBytes > size) continue;
        unsigned char map[kTensorMapBytes];
        std::memcpy(map, base.params.data() + w, kTensorMapBytes);
        if (!replace(map, to) || std::memcmp(map, after.data() + w, kTensorMapBytes) != 0) continue;
        // The base map must hold the base address (delta 0), as the moved one holds the moved address.
        std::memcpy(map, base.params.data() + w, kTensorMapBytes);
        if (!replace(map, from) || std::memcmp(map, base.params.data() + w, kTensorMapBytes) != 0) continue;
        recipe.rules_.push_back({PatchRule::Kind::kTensorMap, w, m.operand, 0});
        explained = true;
      }
      if (!explained)
        throw Error(ErrorKind::kRuntime, "parameter byte " + hex_offset(p) + " changes with " + name +
                                             " and is neither its address plus a constant nor a tensor map of it");
      const PatchRule& rule = recipe.rules_.back();
      const size_t end = rule.offset + (rule.kind == PatchRule::Kind::kPointer ? 8 : kTensorMapBytes);
      for (size_t i = rule.offset; i < end; ++i) {
        if (owner[i] >= 0 && recipe.rules_[size_t(owner[i])].operand != rule.operand)
          throw Error(ErrorKind::kRuntime, "parameter bytes at " + hex_offset(i) + " change with both " +
                                               operand_name(recipe.rules_[size_t(owner[i])].operand) + " and " + name);
        owner[i] = int(recipe.rules_.size() - 1);
      }
    }
  }
  recipe.base_ = std::move(base);
  return recipe;
}

bool LaunchRecipe::fill(const Operands& operands, unsigned char* out, const ReplaceAddress& replace) const {
  std::memcpy(out, base_.params.data(), base_.params.size());
  for (const PatchRule& rule : rules_) {
    const uint64_t address = operands[size_t(rule.operand)];
    if (rule.kind == PatchRule::Kind::kPointer) {
      const uint64_t value = address + uint64_t(rule.delta);
      std::memcpy(out + rule.offset, &value, sizeof value);
    } else if (!replace(out + rule.offset, address)) {
      return false;
    }
  }
  return true;
}

bool LaunchRecipe::reproduces(const RecordedLaunch& launch, const Operands& operands, const ReplaceAddress& replace,
                              std::string& why) const {
  if (!launch.same_launch(base_)) {
    why = "with other addresses cuBLASLt launches another kernel or configuration";
    return false;
  }
  std::vector<unsigned char> made(base_.params.size());
  if (!fill(operands, made.data(), replace)) {
    why = "a tensor map refused the address";
    return false;
  }
  for (size_t p = 0; p < made.size(); ++p)
    if (made[p] != launch.params[p]) {
      why = "parameter byte " + hex_offset(p) + " is not what the recipe makes";
      return false;
    }
  return true;
}

// ---- on the GPU ----

namespace {

const ReplaceAddress kReplace = replace_tensor_map_address;

// The attributes a kernel node may carry, read back from the recorded graph (those set to their default are
// left out: a zero value is each one's default).
constexpr CUlaunchAttributeID kNodeAttributes[] = {
    CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE,
    CU_LAUNCH_ATTRIBUTE_COOPERATIVE,       CU_LAUNCH_ATTRIBUTE_PRIORITY,
    CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN,   CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP,
    CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW};

struct Graph {
  cudaGraph_t graph = nullptr;
  ~Graph() {
    if (graph) cudaGraphDestroy(graph);
  }
};

// The one kernel `plan` launches for `operands`, recorded on `stream` (a private one) in a CUDA graph.
std::optional<RecordedLaunch> record(const CublasLtGemm& plan, const Operands& operands, cudaStream_t stream,
                                     std::string& why) {
  Graph g;
  RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    plan.launch(stream, reinterpret_cast<const void*>(operands[0]), reinterpret_cast<const void*>(operands[1]),
                reinterpret_cast<void*>(operands[2]), reinterpret_cast<void*>(operands[3]));
  } catch (...) {
    cudaStreamEndCapture(stream, &g.graph);
    throw;
  }
  RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream, &g.graph));
  size_t count = 0;
  RLGEMM_CUDA_CHECK(cudaGraphGetNodes(g.graph, nullptr, &count));
  if (count != 1) {
    why = "cuBLASLt's call is " + std::to_string(count) + " operations, not one kernel";
    return std::nullopt;
  }
  cudaGraphNode_t node = nullptr;
  RLGEMM_CUDA_CHECK(cudaGraphGetNodes(g.graph, &node, &count));
  cudaGraphNodeType type{};
  RLGEMM_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
  if (type != cudaGraphNodeTypeKernel) {
    why = "cuBLASLt's call is not a kernel launch";
    return std::nullopt;
  }
  const DriverApi& api = driver();
  CUDA_KERNEL_NODE_PARAMS p{};
  RLGEMM_CU_CHECK(api.cuGraphKernelNodeGetParams(reinterpret_cast<CUgraphNode>(node), &p));
  if (!p.func || !p.kernelParams) {
    why = "the recorded launch names no function or no parameter array";
    return std::nullopt;
  }
  RecordedLaunch launch;
  launch.function = p.func;
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
  std::vector<std::pair<size_t, size_t>> layout;  // offset, size of each parameter
  for (size_t i = 0;; ++i) {
    size_t offset = 0, size = 0;
    if (api.cuFuncGetParamInfo(p.func, i, &offset, &size) != CUDA_SUCCESS) break;
    layout.emplace_back(offset, size);
  }
  if (layout.empty()) {
    why = "the driver gives no parameter layout for cuBLASLt's kernel";
    return std::nullopt;
  }
  size_t bytes = 0;
  for (const auto& [offset, size] : layout) bytes = std::max(bytes, offset + size);
  launch.params.assign(bytes, 0);
  for (size_t i = 0; i < layout.size(); ++i)
    std::memcpy(launch.params.data() + layout[i].first, p.kernelParams[i], layout[i].second);
  return launch;
}

// Device memory with room to move an operand within it.
struct Room {
  DeviceScratch<unsigned char> memory;
  explicit Room(size_t bytes) : memory(bytes + 8192) {}
  uint64_t at(size_t offset) const { return reinterpret_cast<uint64_t>(memory.ptr) + offset; }
};

struct PrivateStream {
  cudaStream_t stream = nullptr;
  PrivateStream() { RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~PrivateStream() {
    if (!device_hung()) cudaStreamDestroy(stream);
  }
};

std::vector<unsigned char> to_host(const void* device, size_t bytes) {
  std::vector<unsigned char> host(bytes);
  RLGEMM_CUDA_CHECK(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost));
  return host;
}

}  // namespace

LtDirect::LtDirect(const CublasLtGemm& plan, LaunchRecipe recipe, size_t min_alignment)
    : plan_(plan), recipe_(std::move(recipe)), min_alignment_(min_alignment) {
  const RecordedLaunch& base = recipe_.base();
  const char* name = nullptr;
  if (driver().cuFuncGetName(&name, base.function) != CUDA_SUCCESS || !name) name = "?";
  text_ = std::string(name) + " grid " + std::to_string(base.grid[0]) + "x" + std::to_string(base.grid[1]) + "x" +
          std::to_string(base.grid[2]) + ", " + std::to_string(base.params.size()) + "-byte parameters, " +
          std::to_string(recipe_.rules().size()) + " addresses";
}

LtDirect::~LtDirect() = default;

std::unique_ptr<LtDirect> LtDirect::make(const CublasLtGemm& plan, const Problem& problem, std::string& why) {
  const size_t element = 2;
  const size_t a_bytes = size_t(problem.shape.m) * size_t(problem.shape.k) * element;
  const size_t b_bytes = size_t(problem.shape.k) * size_t(problem.shape.n) * element;
  const size_t c_bytes = size_t(problem.shape.m) * size_t(problem.shape.n) * element;
  const size_t ws_bytes = plan.workspace_bytes();
  PrivateStream s;
  Room a(a_bytes), b(b_bytes), c(c_bytes), w(ws_bytes);
  // Every address 256-byte aligned in the base launch (cudaMalloc's alignment), moved by 512 bytes one at a time.
  const Operands base_ops = {a.at(0), b.at(0), c.at(0), ws_bytes ? w.at(0) : 0};
  const auto base = record(plan, base_ops, s.stream, why);
  if (!base) return nullptr;
  std::vector<LaunchRecipe::Moved> moved;
  for (int op = 0; op < kOperandCount; ++op) {
    if (op == 3 && !ws_bytes) continue;
    Operands ops = base_ops;
    ops[size_t(op)] += 512;
    auto launch = record(plan, ops, s.stream, why);
    if (!launch) return nullptr;
    moved.push_back({op, std::move(*launch), ops});
  }
  std::optional<LaunchRecipe> recipe;
  try {
    recipe = LaunchRecipe::derive(*base, base_ops, moved, kReplace);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kRuntime) throw;
    why = e.what();
    return nullptr;
  }
  // Every operand moved at once, 256-byte aligned: must come out as the recipe makes it.
  auto all_moved = [&](size_t by) {
    Operands ops = base_ops;
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i]) ops[i] += by;
    return ops;
  };
  const Operands far = all_moved(4096);
  const auto far_launch = record(plan, far, s.stream, why);
  if (!far_launch) return nullptr;
  std::string not_same;
  if (!recipe->reproduces(*far_launch, far, kReplace, not_same)) {
    why = "every operand moved at once: " + not_same;
    return nullptr;
  }
  // Addresses aligned to 16 bytes only (what the handle accepts): the same kernel and recipe, or the direct
  // launch serves 256-byte aligned calls only.
  size_t min_alignment = 16;
  for (size_t by : {size_t(16), size_t(48), size_t(128)}) {
    const Operands ops = all_moved(by);
    std::string ignored;
    const auto launch = record(plan, ops, s.stream, ignored);
    if (!launch || !recipe->reproduces(*launch, ops, kReplace, ignored)) {
      min_alignment = 256;
      break;
    }
  }
  auto direct = std::unique_ptr<LtDirect>(new LtDirect(plan, std::move(*recipe), min_alignment));
  // The proof: cublasLtMatmul and the direct launch on the same random operands give the same bits (at
  // addresses none of the recordings used, at 16-byte offsets where those are served).
  const bench::ScratchOperands x(problem, s.stream);
  const size_t shift = min_alignment == 16 ? 16 : 0;
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<void*>(a.at(1024 + shift)), x.a.ptr, a_bytes,
                                    cudaMemcpyDeviceToDevice, s.stream));
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<void*>(b.at(1024 + shift)), x.b.ptr, b_bytes,
                                    cudaMemcpyDeviceToDevice, s.stream));
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(x.c.ptr, 0xff, c_bytes, s.stream));
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(reinterpret_cast<void*>(c.at(1024 + shift)), 0x7f, c_bytes, s.stream));
  DeviceScratch<unsigned char> ws(std::max<size_t>(ws_bytes, 16));
  plan.launch(s.stream, x.a.ptr, x.b.ptr, x.c.ptr, ws_bytes ? ws.ptr : nullptr);
  direct->launch(s.stream, reinterpret_cast<const void*>(a.at(1024 + shift)),
                 reinterpret_cast<const void*>(b.at(1024 + shift)), reinterpret_cast<void*>(c.at(1024 + shift)),
                 ws_bytes ? reinterpret_cast<void*>(w.at(1024 + shift)) : nullptr);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  if (to_host(x.c.ptr, c_bytes) != to_host(reinterpret_cast<void*>(c.at(1024 + shift)), c_bytes)) {
    why = "the direct launch's bits differ from cublasLtMatmul's";
    return nullptr;
  }
  return direct;
}

void LtDirect::launch(cudaStream_t stream, const void* a, const void* b, void* c, void* workspace) const {
  const Operands ops = {reinterpret_cast<uint64_t>(a), reinterpret_cast<uint64_t>(b), reinterpret_cast<uint64_t>(c),
                        reinterpret_cast<uint64_t>(workspace)};
  if (((ops[0] | ops[1] | ops[2] | ops[3]) & (min_alignment_ - 1)) != 0) {
    plan_.launch(stream, a, b, c, workspace);
    return;
  }
  const RecordedLaunch& base = recipe_.base();
  // The parameter block on the stack (4 KiB covers cuBLASLt's kernels; a larger one is built on the heap).
  alignas(64) unsigned char local[4096];
  std::vector<unsigned char> heap;
  unsigned char* params = local;
  size_t size = base.params.size();
  if (size > sizeof local) {
    heap.resize(size);
    params = heap.data();
  }
  if (!recipe_.fill(ops, params, kReplace)) {
    plan_.launch(stream, a, b, c, workspace);
    return;
  }
  CUlaunchConfig config{};
  config.gridDimX = base.grid[0], config.gridDimY = base.grid[1], config.gridDimZ = base.grid[2];
  config.blockDimX = base.block[0], config.blockDimY = base.block[1], config.blockDimZ = base.block[2];
  config.sharedMemBytes = base.smem_bytes;
  config.hStream = reinterpret_cast<CUstream>(stream);
  config.attrs = const_cast<CUlaunchAttribute*>(base.attributes.data());
  config.numAttrs = unsigned(base.attributes.size());
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, params, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  RLGEMM_CU_CHECK(driver().cuLaunchKernelEx(&config, base.function, nullptr, extra));
}

}  // namespace rlgemm::dispatch
