#include "dispatch/lt_direct.h"

#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "bench/fill.h"
#include "core/cuda_util.h"
#include "dispatch/cublaslt_gemm.h"
#include "dispatch/empty_kernel.h"
#include "rlgemm/error.h"
#include "run/driver.h"

namespace rlgemm::dispatch {

const char* operand_name(int operand) {
  static const char* const names[kOperandCount] = {"A", "B", "C", "the workspace", "the bias"};
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
      throw Error(ErrorKind::kInvalidInput, "a moved operand must be 0 to " + std::to_string(kOperandCount - 1) + ", not " +
                                                std::to_string(m.operand));
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
      // The 8 aligned bytes around it, as recorded and as made, for whoever decodes the parameter.
      const size_t q = p & ~size_t(7);
      why = "parameter byte " + hex_offset(p) + " is not what the recipe makes";
      if (q + 8 <= made.size())
        why += " (bytes " + hex_offset(q) + "-" + hex_offset(q + 7) + ": recorded " + hex_offset(load64(launch.params, q)) +
               ", made " + hex_offset(load64(made, q)) + ")";
      return false;
    }
  return true;
}

MemsetRule MemsetRule::derive(const cudaMemsetParams& base, const Operands& base_operands,
                              const std::vector<Moved>& moved) {
  MemsetRule rule;
  rule.params = base;
  const uint64_t dst = reinterpret_cast<uint64_t>(base.dst);
  for (const Moved& m : moved) {
    if (m.operand < 0 || m.operand >= kOperandCount)
      throw Error(ErrorKind::kInvalidInput, "a moved operand must be 0 to " + std::to_string(kOperandCount - 1) + ", not " +
                                                std::to_string(m.operand));
    const cudaMemsetParams& p = m.params;
    if (p.pitch != base.pitch || p.value != base.value || p.elementSize != base.elementSize || p.width != base.width ||
        p.height != base.height)
      throw Error(ErrorKind::kRuntime, std::string("moving ") + operand_name(m.operand) + " changed a memset's size or value");
    const uint64_t moved_dst = reinterpret_cast<uint64_t>(p.dst);
    if (moved_dst == dst) continue;
    const int64_t d0 = int64_t(dst - base_operands[size_t(m.operand)]);
    const int64_t d1 = int64_t(moved_dst - m.operands[size_t(m.operand)]);
    if (d0 != d1 || (rule.operand >= 0 && rule.operand != m.operand))
      throw Error(ErrorKind::kRuntime, std::string("a memset's destination moves with ") + operand_name(m.operand) +
                                           " but is not its address plus a constant");
    rule.operand = m.operand;
    rule.delta = d0;
  }
  return rule;
}

uint64_t MemsetRule::destination(const Operands& operands) const {
  return operand < 0 ? reinterpret_cast<uint64_t>(params.dst) : operands[size_t(operand)] + uint64_t(delta);
}

bool MemsetRule::reproduces(const cudaMemsetParams& p, const Operands& operands) const {
  return reinterpret_cast<uint64_t>(p.dst) == destination(operands) && p.pitch == params.pitch &&
         p.value == params.value && p.elementSize == params.elementSize && p.width == params.width &&
         p.height == params.height;
}

// ---- on the GPU ----

namespace {

const ReplaceAddress kReplace = replace_tensor_map_address;

struct Graph {
  cudaGraph_t graph = nullptr;
  ~Graph() {
    if (graph) cudaGraphDestroy(graph);
  }
};

}  // namespace

std::optional<std::vector<RecordedOp>> record_call(const CublasLtGemm& plan, const Operands& operands,
                                                   cudaStream_t stream, std::string& why) {
  Graph g;
  RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    // A kernel first, as a call on a busy stream has one before it: the edge from it to cuBLASLt's first kernel
    // says whether cuBLASLt lets that kernel start before the work before it ends (programmatic dependent
    // launch), which a replay then asks for too.
    launch_empty_kernel(stream);
    plan.launch(stream, reinterpret_cast<const void*>(operands[0]), reinterpret_cast<const void*>(operands[1]),
                reinterpret_cast<void*>(operands[2]), reinterpret_cast<void*>(operands[3]),
                reinterpret_cast<const void*>(operands[4]));
  } catch (...) {
    cudaStreamEndCapture(stream, &g.graph);
    throw;
  }
  RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream, &g.graph));
  return read_chain(g.graph, true, why);
}

namespace {

bool same_kinds(const std::vector<RecordedOp>& a, const std::vector<RecordedOp>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].kernel != b[i].kernel) return false;
  return true;
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

LtDirect::LtDirect(const CublasLtGemm& plan, std::vector<Step> steps, size_t min_alignment)
    : plan_(plan), steps_(std::move(steps)), min_alignment_(min_alignment) {
  for (const Step& step : steps_) {
    if (!text_.empty()) text_ += "; ";
    if (!step.kernel) {
      text_ += "memset of " + std::to_string(step.memset.params.width * step.memset.params.height *
                                             step.memset.params.elementSize) + " bytes";
      continue;
    }
    const RecordedLaunch& base = step.recipe.base();
    const char* name = nullptr;
    if (driver().cuFuncGetName(&name, base.function) != CUDA_SUCCESS || !name) name = "?";
    text_ += std::string(name) + " grid " + std::to_string(base.grid[0]) + "x" + std::to_string(base.grid[1]) + "x" +
             std::to_string(base.grid[2]) + ", " + std::to_string(base.params.size()) + "-byte parameters, " +
             std::to_string(step.recipe.rules().size()) + " addresses";
    const bool early = std::any_of(base.attributes.begin(), base.attributes.end(), [](const CUlaunchAttribute& a) {
      return a.id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    });
    if (early) text_ += ", may start before the operation before it ends";
  }
}

LtDirect::~LtDirect() = default;

std::unique_ptr<LtDirect> LtDirect::make(const CublasLtGemm& plan, const Problem& problem, std::string& why) {
  const size_t element = sizeof(half);  // fp16 and bf16 alike
  const size_t a_bytes = size_t(problem.a_elems()) * element, b_bytes = size_t(problem.b_elems()) * element,
               c_bytes = size_t(problem.c_elems()) * element;
  const size_t ws_bytes = plan.workspace_bytes();
  const size_t bias_bytes = plan.takes_bias() ? size_t(problem.shape.n) * element : 0;
  PrivateStream s;
  // Every address 256-byte aligned in the base call (cudaMalloc's alignment), then moved one at a time by 512
  // bytes plus 1 MiB less 4 KiB, so that low and high address bits change at once.
  constexpr size_t kMove = 512 + (size_t(1) << 20) - 4096;
  Room a(a_bytes + kMove), b(b_bytes + kMove), c(c_bytes + kMove), w(ws_bytes ? ws_bytes + kMove : 0),
      bias(bias_bytes ? bias_bytes + kMove : 0);
  const Operands base_ops = {a.at(0), b.at(0), c.at(0), ws_bytes ? w.at(0) : 0, bias_bytes ? bias.at(0) : 0};
  const auto base = record_call(plan, base_ops, s.stream, why);
  if (!base) return nullptr;
  struct MovedCall {
    int operand;
    std::vector<RecordedOp> ops;
    Operands operands;
  };
  std::vector<MovedCall> moved;
  for (int op = 0; op < kOperandCount; ++op) {
    if (!base_ops[size_t(op)]) continue;  // no workspace, or no bias
    Operands ops = base_ops;
    ops[size_t(op)] += kMove;
    auto call = record_call(plan, ops, s.stream, why);
    if (!call) return nullptr;
    if (!same_kinds(*call, *base)) {
      why = std::string("moving ") + operand_name(op) + " changed cuBLASLt's operations";
      return nullptr;
    }
    moved.push_back({op, std::move(*call), ops});
  }
  std::vector<Step> steps;
  try {
    for (size_t i = 0; i < base->size(); ++i) {
      Step step;
      step.kernel = (*base)[i].kernel;
      if (step.kernel) {
        std::vector<LaunchRecipe::Moved> each;
        for (const MovedCall& m : moved) each.push_back({m.operand, m.ops[i].launch, m.operands});
        step.recipe = LaunchRecipe::derive((*base)[i].launch, base_ops, each, kReplace);
      } else {
        std::vector<MemsetRule::Moved> each;
        for (const MovedCall& m : moved) each.push_back({m.operand, m.ops[i].memset, m.operands});
        step.memset = MemsetRule::derive((*base)[i].memset, base_ops, each);
      }
      steps.push_back(std::move(step));
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kRuntime) throw;
    why = e.what();
    return nullptr;
  }
  // Whether a call recorded with `ops` is what the steps make; why not in `not_same`.
  auto reproduces = [&](const Operands& ops, std::string& not_same) {
    std::optional<std::vector<RecordedOp>> call;
    try {
      call = record_call(plan, ops, s.stream, not_same);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kRuntime) throw;
      not_same = std::string("cuBLASLt refuses the call: ") + e.what();  // an address less aligned than it takes
      return false;
    }
    if (!call) return false;
    if (!same_kinds(*call, *base)) {
      not_same = "cuBLASLt's operations change";
      return false;
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      if (steps[i].kernel ? !steps[i].recipe.reproduces((*call)[i].launch, ops, kReplace, not_same)
                          : !steps[i].memset.reproduces((*call)[i].memset, ops)) {
        not_same = "operation " + std::to_string(i + 1) + " of " + std::to_string(steps.size()) + ": " +
                   (steps[i].kernel ? not_same : "a memset is not where the rule puts it");
        return false;
      }
    }
    return true;
  };
  auto all_moved = [&](size_t by) {
    Operands ops = base_ops;
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i]) ops[i] += by;
    return ops;
  };
  // Every operand moved at once, 256-byte aligned: must come out as the steps make it.
  std::string not_same;
  if (!reproduces(all_moved(4096), not_same)) {
    why = "every operand moved at once: " + not_same;
    return nullptr;
  }
  // Addresses aligned to 16 bytes only (what the handle accepts): the same operations, or the direct launch
  // serves 256-byte aligned calls only.
  size_t min_alignment = 16;
  for (size_t by : {size_t(16), size_t(48), size_t(128)}) {
    std::string ignored;
    if (!reproduces(all_moved(by), ignored)) {
      min_alignment = 256;
      break;
    }
  }
  auto direct = std::unique_ptr<LtDirect>(new LtDirect(plan, std::move(steps), min_alignment));
  // The proof: cublasLtMatmul and the direct launch on the same random operands give the same bits (at
  // addresses none of the recordings used, at 16-byte offsets where those are served).
  const bench::ScratchOperands x(problem, s.stream);
  const size_t at = 1024 + (min_alignment == 16 ? 16 : 0);
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<void*>(a.at(at)), x.a.ptr, a_bytes, cudaMemcpyDeviceToDevice, s.stream));
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<void*>(b.at(at)), x.b.ptr, b_bytes, cudaMemcpyDeviceToDevice, s.stream));
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(x.c.ptr, 0xff, c_bytes, s.stream));
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(reinterpret_cast<void*>(c.at(at)), 0x7f, c_bytes, s.stream));
  DeviceScratch<unsigned char> ws(std::max<size_t>(ws_bytes, 16));
  DeviceScratch<half> bias_values(bias_bytes ? size_t(problem.shape.n) : 0);
  if (bias_bytes) {
    bench::fill_random(bias_values.ptr, size_t(problem.shape.n), bench::Fill::kNormal, 3, s.stream, problem.dtype);
    RLGEMM_CUDA_CHECK(cudaMemcpyAsync(reinterpret_cast<void*>(bias.at(at)), bias_values.ptr, bias_bytes,
                                      cudaMemcpyDeviceToDevice, s.stream));
  }
  plan.launch(s.stream, x.a.ptr, x.b.ptr, x.c.ptr, ws_bytes ? ws.ptr : nullptr, bias_bytes ? bias_values.ptr : nullptr);
  direct->launch(s.stream, reinterpret_cast<const void*>(a.at(at)), reinterpret_cast<const void*>(b.at(at)),
                 reinterpret_cast<void*>(c.at(at)), ws_bytes ? reinterpret_cast<void*>(w.at(at)) : nullptr,
                 bias_bytes ? reinterpret_cast<const void*>(bias.at(at)) : nullptr);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  if (to_host(x.c.ptr, c_bytes) != to_host(reinterpret_cast<void*>(c.at(at)), c_bytes)) {
    why = "the direct launch's bits differ from cublasLtMatmul's";
    return nullptr;
  }
  return direct;
}

void LtDirect::launch(cudaStream_t stream, const void* a, const void* b, void* c, void* workspace,
                      const void* bias) const {
  if (plan_.takes_bias() != (bias != nullptr))
    throw Error(ErrorKind::kInvalidInput, plan_.takes_bias() ? "a direct launch with a bias epilogue was given no bias"
                                                             : "a direct launch without a bias epilogue was given a bias");
  const Operands ops = {reinterpret_cast<uint64_t>(a), reinterpret_cast<uint64_t>(b), reinterpret_cast<uint64_t>(c),
                        reinterpret_cast<uint64_t>(workspace), reinterpret_cast<uint64_t>(bias)};
  if (((ops[0] | ops[1] | ops[2] | ops[3] | ops[4]) & (min_alignment_ - 1)) != 0) {
    plan_.launch(stream, a, b, c, workspace, bias);
    return;
  }
  for (const Step& step : steps_) {
    if (!step.kernel) {
      launch_memset(step.memset.params, step.memset.destination(ops), stream);
      continue;
    }
    const RecordedLaunch& base = step.recipe.base();
    // The parameter block on the stack (4 KiB covers cuBLASLt's kernels; a larger one is built on the heap).
    alignas(64) unsigned char local[4096];
    std::vector<unsigned char> heap;
    unsigned char* params = local;
    if (base.params.size() > sizeof local) {
      heap.resize(base.params.size());
      params = heap.data();
    }
    if (!step.recipe.fill(ops, params, kReplace))
      throw Error(ErrorKind::kInvalidInput, "the TMA descriptor of cuBLASLt's kernel refused an operand's address");
    launch_kernel(base, params, stream);
  }
}

}  // namespace rlgemm::dispatch
