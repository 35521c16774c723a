// cuBLASLt's kernels, launched directly. A cublasLtMatmul call costs the host several microseconds before its
// kernel is launched (about 9.5 us on an H200 machine, where launching a kernel costs about 2): on small shapes
// an eager call's time is that host work, not the GPU's. Where a plan's call is a chain of kernels and memsets
// (one kernel; split-K's kernel and its reduction; a zeroing first), the handle records the call once, in a
// CUDA graph on a private stream (nothing runs), learns which bytes of each kernel's parameter block hold the
// operands' addresses -- raw pointers, or the global address inside a TMA descriptor -- and from then on makes
// the same launches, with the same configurations and parameters, with the call's addresses written in: the
// same GPU work, without cuBLASLt's host path.
//
// Nothing is assumed about the parameter blocks. Each operand is moved on its own and the call recorded again;
// every byte that changes must be explained as that operand's address plus a constant, or as a tensor map whose
// address cuTensorMapReplaceAddress rewrites to exactly the recorded bytes. Calls recorded with every operand
// moved at once (256- and 16-byte aligned) must then come out byte for byte as the recipe makes them, and the
// direct launch must give cublasLtMatmul's bits on random operands. Anything else (operations that are not a
// chain of kernels and memsets, an unexplained byte, a kernel that changes with an address, other bits) leaves
// the plan as it is and says why.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rlgemm/problem.h"
#include "run/recorded.h"

namespace rlgemm::dispatch {

class CublasLtGemm;

// The addresses a call hands over: A, B, C, the workspace and the bias (0 where the plan takes none; a bias
// only with cuBLASLt's bias epilogue).
using Operands = std::array<uint64_t, 5>;
inline constexpr int kOperandCount = 5;
const char* operand_name(int operand);

// The operations `plan` makes for `operands` (A, B, C, workspace, bias), recorded on `stream` (a private one, never
// one being captured) in a CUDA graph, in order, after an empty kernel whose edge to the first of them says
// whether cuBLASLt lets it start before the work before it ends (then its launch asks for that too); nothing
// runs. nullopt with `why` where they are not a chain of
// kernels and memsets. LtDirect::make's recordings, open to diagnostics (bench/probes/lt_direct_probe).
std::optional<std::vector<RecordedOp>> record_call(const CublasLtGemm& plan, const Operands& operands,
                                                   cudaStream_t stream, std::string& why);

// Rewrites the global address of the 128-byte tensor map at `map`; false where it is refused.
using ReplaceAddress = std::function<bool(unsigned char* map, uint64_t address)>;
// cuTensorMapReplaceAddress.
bool replace_tensor_map_address(unsigned char* map, uint64_t address);

struct PatchRule {
  enum class Kind { kPointer, kTensorMap };
  Kind kind = Kind::kPointer;
  size_t offset = 0;  // in the parameter block
  int operand = 0;    // index into Operands
  int64_t delta = 0;  // kPointer: the 8 bytes hold the operand's address + delta
};

// How to make a launch's parameter block for any operands from one recorded launch.
class LaunchRecipe {
 public:
  // From `base`, recorded with `base_operands`, and for each operand that moves, a launch recorded with that
  // operand alone moved (`moved[i].operand`). Throws Error(kRuntime) saying which byte nothing explains, or
  // that moving an operand changed the kernel or its configuration.
  struct Moved {
    int operand = 0;
    RecordedLaunch launch;
    Operands operands{};
  };
  static LaunchRecipe derive(RecordedLaunch base, const Operands& base_operands, const std::vector<Moved>& moved,
                             const ReplaceAddress& replace);

  // The parameter block for `operands`, written to `out` (params().size() bytes); false where a tensor map
  // refused an address.
  bool fill(const Operands& operands, unsigned char* out, const ReplaceAddress& replace) const;
  // Whether `launch`, recorded with `operands`, is what the recipe makes for them; why not in `why`.
  bool reproduces(const RecordedLaunch& launch, const Operands& operands, const ReplaceAddress& replace,
                  std::string& why) const;

  const RecordedLaunch& base() const { return base_; }
  const std::vector<PatchRule>& rules() const { return rules_; }

 private:
  RecordedLaunch base_;
  std::vector<PatchRule> rules_;
};

// A memset a recorded call makes: its parameters, and where its destination comes from (an operand's address
// plus a constant, or, operand -1, a fixed address such as cuBLASLt's own).
struct MemsetRule {
  cudaMemsetParams params{};
  int operand = -1;
  int64_t delta = 0;
  // From the memset recorded with `base_operands` and the same memset in launches with one operand moved each
  // (Moved's operand and operands; its launch unused). Throws Error(kRuntime) where the destination moved
  // otherwise than one operand, or another parameter changed.
  struct Moved {
    int operand = 0;
    cudaMemsetParams params{};
    Operands operands{};
  };
  static MemsetRule derive(const cudaMemsetParams& base, const Operands& base_operands, const std::vector<Moved>& moved);
  uint64_t destination(const Operands& operands) const;
  // Whether `recorded`, recorded with `operands`, is this memset there.
  bool reproduces(const cudaMemsetParams& recorded, const Operands& operands) const;
};

// A cuBLASLt plan's kernels, launched directly (see the top of this file): the call's operations in order, each
// a kernel (its recipe) or a memset (its rule).
class LtDirect {
 public:
  // Records `plan`'s launch for `problem` (the plan's problem) and proves the recipe; a plan with cuBLASLt's
  // bias epilogue takes the bias (N elements) as its fifth operand. Needs a GPU; must not be called while this
  // thread captures a CUDA graph. nullptr, with the reason in `why`, where the plan cannot be launched directly.
  static std::unique_ptr<LtDirect> make(const CublasLtGemm& plan, const Problem& problem, std::string& why);
  ~LtDirect();

  // C = A B (+ bias, for a plan with the bias epilogue, which then takes one) as `plan` computes it, on
  // `stream`: the kernel launched directly where every address has the alignment the recipe was proven at
  // (min_alignment()), else through cublasLtMatmul. No allocation.
  void launch(cudaStream_t stream, const void* a, const void* b, void* c, void* workspace,
              const void* bias = nullptr) const;

  size_t min_alignment() const { return min_alignment_; }
  // The kernels' names and launches, for describe().
  const std::string& text() const { return text_; }

 private:
  struct Step {
    bool kernel = true;
    LaunchRecipe recipe;  // kernel
    MemsetRule memset;    // otherwise
  };
  LtDirect(const CublasLtGemm& plan, std::vector<Step> steps, size_t min_alignment);
  const CublasLtGemm& plan_;
  std::vector<Step> steps_;
  size_t min_alignment_;
  std::string text_;
};

}  // namespace rlgemm::dispatch
