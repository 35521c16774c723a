// What cuBLASLt's launches hold, for decoding a plan the direct launch refuses (dispatch/lt_direct.h). For each
// shape and heuristic candidate, the call is recorded (nothing runs) with its operands at a base, each moved
// alone, pairs and all of them moved by several amounts, and the base again; for every operation, each 8-byte
// parameter word that differs between recordings is printed: its value at the base, then each recording's
// value less the base's (in hex, "=" where equal). Small parameter blocks (at most 512 bytes) are printed whole.
//
//   lt_direct_probe [--layout tn|nn] [--dtype fp16|bf16] [--candidates C] M,N,K [M,N,K ...]
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/cuda_util.h"
#include "dispatch/cublaslt_gemm.h"
#include "dispatch/lt_direct.h"
#include "rlgemm/error.h"
#include "rlgemm/problem.h"
#include "run/driver.h"
#include "probe_cli.h"

using namespace rlgemm;
using namespace rlgemm::dispatch;

namespace {

struct Recording {
  std::string name;
  Operands operands{};
  std::vector<RecordedOp> ops;
};

uint64_t word(const std::vector<unsigned char>& bytes, size_t offset) {
  uint64_t v = 0;
  std::memcpy(&v, bytes.data() + offset, std::min<size_t>(8, bytes.size() - offset));
  return v;
}

// The launch attributes each recording's operation `i` carries (those not at their default): an access policy
// window by its fields (its base as an offset from each recording's operands, where it lies in one), the others
// as their value's first 16 bytes.
void print_attributes(const std::vector<Recording>& recs, size_t i) {
  for (const Recording& r : recs) {
    for (const CUlaunchAttribute& a : r.ops[i].launch.attributes) {
      std::printf("    attribute %-14s id %d:", r.name.c_str(), int(a.id));
      if (a.id == CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW) {
        const CUaccessPolicyWindow& w = a.value.accessPolicyWindow;
        const uint64_t at = reinterpret_cast<uint64_t>(w.base_ptr);
        std::printf(" access policy window base 0x%" PRIx64 " bytes %zu hit ratio %.3f hit %d miss %d", at,
                    w.num_bytes, double(w.hitRatio), int(w.hitProp), int(w.missProp));
        static const char* kNames = "ABCW";
        for (size_t k = 0; k < r.operands.size(); ++k)
          if (r.operands[k] && at >= r.operands[k] && at < r.operands[k] + (size_t(1) << 32))
            std::printf(" (%c + 0x%" PRIx64 ")", kNames[k], at - r.operands[k]);
      } else {
        unsigned char bytes[16];
        std::memcpy(bytes, &a.value, sizeof bytes);
        for (unsigned char b : bytes) std::printf(" %02x", b);
      }
      std::printf("\n");
    }
  }
}

void probe(const CublasLtContext& context, const Problem& problem, int candidate, cudaStream_t stream) {
  CublasLtGemm plan(context, problem, candidate);
  const size_t ws_bytes = plan.workspace_bytes();
  const size_t a_bytes = size_t(problem.a_elems()) * 2, b_bytes = size_t(problem.b_elems()) * 2,
               c_bytes = size_t(problem.c_elems()) * 2;
  constexpr size_t kRoom = size_t(4) << 20;
  DeviceScratch<unsigned char> a(a_bytes + kRoom), b(b_bytes + kRoom), c(c_bytes + kRoom), w(ws_bytes + kRoom);
  const Operands base = {reinterpret_cast<uint64_t>(a.ptr), reinterpret_cast<uint64_t>(b.ptr),
                         reinterpret_cast<uint64_t>(c.ptr), ws_bytes ? reinterpret_cast<uint64_t>(w.ptr) : 0};
  auto moved = [&](const char* which, size_t by) {
    Operands o = base;
    for (const char* p = which; *p; ++p) {
      const int i = *p == 'A' ? 0 : *p == 'B' ? 1 : *p == 'C' ? 2 : 3;
      if (o[size_t(i)]) o[size_t(i)] += by;
    }
    return o;
  };
  struct Ask {
    std::string name;
    Operands operands;
  };
  const size_t kMove = 512 + (size_t(1) << 20) - 4096;
  const std::vector<Ask> asks = {
      {"base", base},
      {"A+kMove", moved("A", kMove)},
      {"B+kMove", moved("B", kMove)},
      {"C+kMove", moved("C", kMove)},
      {"W+kMove", moved("W", kMove)},
      {"all+4096", moved("ABCW", 4096)},
      {"all+4096again", moved("ABCW", 4096)},
      {"all+8192", moved("ABCW", 8192)},
      {"all+1MiB", moved("ABCW", size_t(1) << 20)},
      {"all+kMove", moved("ABCW", kMove)},
      {"AB+4096", moved("AB", 4096)},
      {"CW+4096", moved("CW", 4096)},
      {"C+4096", moved("C", 4096)},
      {"W+4096", moved("W", 4096)},
      {"A+4096", moved("A", 4096)},
      {"B+4096", moved("B", 4096)},
      {"base-again", base},
  };
  std::vector<Recording> recs;
  for (const Ask& ask : asks) {
    std::string why;
    auto ops = record_call(plan, ask.operands, stream, why);
    if (!ops) {
      std::printf("  %s: not recorded: %s\n", ask.name.c_str(), why.c_str());
      return;
    }
    recs.push_back({ask.name, ask.operands, std::move(*ops)});
  }
  std::printf("== %s %s %s candidate %d: workspace %zu bytes, %zu operations\n", problem.shape.to_string().c_str(),
              std::string(to_string(problem.layout)).c_str(), std::string(to_string(problem.dtype)).c_str(),
              candidate, ws_bytes, recs[0].ops.size());
  std::printf("  base operands: A 0x%" PRIx64 " B 0x%" PRIx64 " C 0x%" PRIx64 " W 0x%" PRIx64 "\n", base[0], base[1],
              base[2], base[3]);
  for (size_t i = 0; i < recs[0].ops.size(); ++i) {
    const RecordedOp& op0 = recs[0].ops[i];
    if (!op0.kernel) {
      std::printf("  operation %zu: memset of %zu x %zu elements of %u bytes, value 0x%x\n", i + 1, op0.memset.width,
                  op0.memset.height, op0.memset.elementSize, op0.memset.value);
      for (const Recording& r : recs)
        std::printf("    %-14s dst - base dst = %" PRId64 "\n", r.name.c_str(),
                    int64_t(reinterpret_cast<uint64_t>(r.ops[i].memset.dst) - reinterpret_cast<uint64_t>(op0.memset.dst)));
      continue;
    }
    const char* fname = nullptr;
    if (driver().cuFuncGetName(&fname, op0.launch.function) != CUDA_SUCCESS || !fname) fname = "?";
    print_attributes(recs, i);
    const auto& p0 = op0.launch.params;
    std::printf("  operation %zu: %s grid %ux%ux%u block %ux%ux%u smem %u, %zu-byte parameters\n", i + 1, fname,
                op0.launch.grid[0], op0.launch.grid[1], op0.launch.grid[2], op0.launch.block[0], op0.launch.block[1],
                op0.launch.block[2], op0.launch.smem_bytes, p0.size());
    for (const Recording& r : recs)
      if (!r.ops[i].launch.same_launch(op0.launch)) std::printf("    %s: another kernel or configuration\n", r.name.c_str());
    std::printf("    %-6s %-18s", "offset", "base");
    for (size_t k = 1; k < recs.size(); ++k) std::printf(" %s", recs[k].name.c_str());
    std::printf("\n");
    for (size_t q = 0; q < p0.size(); q += 8) {
      bool differs = false;
      for (const Recording& r : recs)
        differs = differs || (r.ops[i].launch.params.size() == p0.size() && word(r.ops[i].launch.params, q) != word(p0, q));
      if (!differs && p0.size() > 512) continue;
      std::printf("    0x%04zx 0x%016" PRIx64, q, word(p0, q));
      for (size_t k = 1; k < recs.size(); ++k) {
        const auto& pk = recs[k].ops[i].launch.params;
        if (pk.size() != p0.size()) {
          std::printf(" size%zu", pk.size());
          continue;
        }
        const int64_t d = int64_t(word(pk, q) - word(p0, q));
        if (d == 0)
          std::printf(" =");
        else
          std::printf(" %s0x%" PRIx64, d < 0 ? "-" : "+", uint64_t(d < 0 ? -d : d));
      }
      std::printf("\n");
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string layout_text = "tn", dtype_text = "fp16";
  int candidates = 2;
  CLI::App app("What cuBLASLt's launches hold, word by word", "lt_direct_probe");
  app.add_option("--layout", layout_text, "tn or nn")->check(CLI::IsMember({"tn", "nn"}));
  app.add_option("--dtype", dtype_text, "fp16 or bf16")->check(CLI::IsMember({"fp16", "bf16"}));
  app.add_option("--candidates", candidates, "heuristic candidates per shape")->check(CLI::PositiveNumber);
  std::vector<Shape> shapes;
  if (const int status = probes::parse_command_line(app, argc, argv, shapes); status >= 0) return status;
  const Layout layout = parse_layout(layout_text);
  const DType dtype = parse_dtype(dtype_text);
  try {
    cudaStream_t stream = nullptr;
    RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const CublasLtContext context;
    for (const Shape& s : shapes)
      for (int c = 0; c < candidates; ++c) probe(context, Problem{s, layout, dtype}, c, stream);
  } catch (const Error& e) {
    std::fprintf(stderr, "lt_direct_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
