// sm80 family: a compile-time Config per design instantiating sm80::Kernel<> (src/kernels/sm80/gemm.cuh),
// the launch plan of its one-block-per-tile grid, and its parameter block.
#include <algorithm>
#include <cstring>
#include <sstream>

#include "generate/families.h"
#include "kernels/sm80/params.h"
#include "rlgemm/error.h"

namespace rlgemm {

Sm80View sm80_view(const Design& d, const Problem& p) {
  Sm80View v;
  v.k = p.shape.k;
  const bool nn = p.layout == Layout::kNN;
  if (d.swap_ab) {
    v.m = p.shape.n, v.n = p.shape.m;
    v.a_kmajor = !nn;  // A' = B^T: from a tn B (N x K) K-contiguous; from an nn B (K x N) N-contiguous
    v.b_kmajor = true;  // B' = A^T: A is M x K, K-contiguous
    v.d_transposed = true;
  } else {
    v.m = p.shape.m, v.n = p.shape.n;
    v.a_kmajor = true;
    v.b_kmajor = !nn;
    v.d_transposed = false;
  }
  return v;
}

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

struct SplitPlan {
  int splits = 1;           // slices actually launched
  int k_tiles_per_split = 0;
};

SplitPlan split_plan(const Design& d, const Sm80View& v) {
  const int k_tiles = int(ceil_div(v.k, d.bk));
  SplitPlan s;
  if (d.split == SplitK::kSerial || d.split == SplitK::kParallel) {
    // Never launch an empty slice: with few k-tiles, fewer slices than asked.
    s.k_tiles_per_split = int(ceil_div(k_tiles, std::max(1, d.splits)));
    s.splits = int(ceil_div(k_tiles, s.k_tiles_per_split));
  } else {
    s.k_tiles_per_split = k_tiles;
  }
  return s;
}

// Workspace: one int per tile (serial flags / parallel arrival counters) and the ticket counter of serial
// split-K, then the fp32 partial tiles (one per tile for serial, one per tile and slice for parallel). Only
// the ints must be zero before the first launch; every launch leaves them zero.
size_t flags_bytes(int64_t tiles) { return align_up(size_t(tiles + 1) * 4, 256); }

class Sm80Family final : public KernelFamily {
 public:
  // The oldest architecture that runs the design: griddepcontrol (/pdl) came with sm_90.
  std::string arch(const Design& d) const override { return d.pdl ? "sm_90" : "sm_80"; }

  std::string source(const Design& d, const Problem& problem, const std::string& kernel_name) const override {
    if (d.family != Family::kSm80) fail("the sm80 family cannot generate " + to_string(d));
    if (auto why = why_invalid(d, problem.layout)) fail("sm80 design cannot be generated: " + *why);
    const Sm80View v = sm80_view(d, problem);
    auto b = [](bool x) { return x ? "true" : "false"; };
    const char* split = d.split == SplitK::kSerial     ? "rlgemm::sm80::kSplitSerial"
                        : d.split == SplitK::kParallel ? "rlgemm::sm80::kSplitParallel"
                                                       : "rlgemm::sm80::kSplitNone";
    std::ostringstream s;
    s << "// " << to_string(d) << ", layout " << to_string(problem.layout);
    if (d.static_shape) s << ", shape " << problem.shape.to_string();
    s << "\n" << element_type_prelude(d) << "#include \"sm80/gemm.cuh\"\n\n"
      << "using Config = rlgemm::sm80::Config<\n"
      << "    /*BM, BN, BK=*/" << d.bm << ", " << d.bn << ", " << d.bk << ",\n"
      << "    /*WM, WN=*/" << d.warp_m << ", " << d.warp_n << ",\n"
      << "    /*STAGES=*/" << d.stages << ", /*SWIZZLE=*/" << b(d.smem == SmemLayout::kSwizzle) << ",\n"
      << "    /*A_KMAJOR=*/" << b(v.a_kmajor) << ", /*B_KMAJOR=*/" << b(v.b_kmajor)
      << ", /*D_TRANSPOSED=*/" << b(v.d_transposed) << ",\n"
      << "    /*SPLIT=*/" << split << ", /*EPI_SMEM=*/" << b(d.epilogue == Epilogue::kSmem) << ",\n"
      << "    /*RASTER_M=*/" << b(d.raster == Raster::kAlongM) << ", /*GROUP=*/" << d.group;
    if (d.static_shape || d.pdl)
      s << ",\n    /*STATIC_M, N, K=*/" << (d.static_shape ? v.m : 0) << ", " << (d.static_shape ? v.n : 0) << ", "
        << (d.static_shape ? v.k : 0);
    if (d.pdl) s << ",\n    /*PDL=*/true";
    s << ">;\n\n"
      << "extern \"C\" __global__ void __launch_bounds__(Config::kThreads)\n"
      << kernel_name << "(const __grid_constant__ rlgemm::sm80::Params params) {\n"
      << "  rlgemm::sm80::Kernel<Config>::run(params);\n"
      << "}\n";
    return s.str();
  }

  LaunchPlan plan(const Design& d, const Problem& problem, const DeviceInfo&) const override {
    validate(problem.shape);
    const Sm80View v = sm80_view(d, problem);
    const int64_t tiles = ceil_div(v.m, d.bm) * ceil_div(v.n, d.bn);
    const SplitPlan sp = split_plan(d, v);
    LaunchPlan plan;
    plan.grid[0] = unsigned(tiles);
    plan.grid[2] = unsigned(sp.splits);
    plan.block[0] = unsigned((d.bm / d.warp_m) * (d.bn / d.warp_n) * 32);
    plan.smem_bytes = int(sm80_smem_bytes(d, problem.layout));
    if (d.split == SplitK::kSerial) {
      // The flags, then one fp32 tile per output tile for the slices' running sum.
      plan.workspace_bytes = flags_bytes(tiles) + size_t(tiles) * size_t(d.bm) * d.bn * 4;
      plan.workspace_zero_bytes = flags_bytes(tiles);
      plan.workspace_must_be_zero = true;
    } else if (d.split == SplitK::kParallel) {
      plan.workspace_bytes = flags_bytes(tiles) + size_t(sp.splits) * size_t(tiles) * size_t(d.bm) * d.bn * 4;
      plan.workspace_zero_bytes = flags_bytes(tiles);
      plan.workspace_must_be_zero = true;
    }
    return plan;
  }

  void params(const Design& d, const Problem& problem, const GemmOperands& ops, const LaunchPlan& plan,
              ParamBlock& out) const override {
    if (ops.workspace_bytes < plan.workspace_bytes)
      fail("workspace too small for " + to_string(d) + ": " + std::to_string(plan.workspace_bytes) +
           " bytes needed, " + std::to_string(ops.workspace_bytes) + " given");
    for (const void* ptr : {ops.a, ops.b, static_cast<const void*>(ops.c)})
      if (reinterpret_cast<uintptr_t>(ptr) % 16 != 0) fail("operands must be 16-byte aligned (16-byte cp.async)");
    if (plan.workspace_bytes && reinterpret_cast<uintptr_t>(ops.workspace) % 16 != 0)
      fail("the workspace must be 16-byte aligned");
    const Sm80View v = sm80_view(d, problem);
    const SplitPlan sp = split_plan(d, v);
    sm80::Params p{};
    const auto* a = static_cast<const unsigned short*>(ops.a);
    const auto* b = static_cast<const unsigned short*>(ops.b);
    p.a = d.swap_ab ? b : a;
    p.b = d.swap_ab ? a : b;
    p.d = static_cast<unsigned short*>(ops.c);
    p.m = int(v.m), p.n = int(v.n), p.k = int(v.k);
    p.lda = int(d.swap_ab ? problem.ldb() : problem.lda());
    p.ldb = int(d.swap_ab ? problem.lda() : problem.ldb());
    p.ldd = int(problem.ldc());
    p.tiles_m = int(ceil_div(v.m, d.bm));
    p.tiles_n = int(ceil_div(v.n, d.bn));
    p.splits = sp.splits;
    p.k_tiles_per_split = sp.k_tiles_per_split;
    if (plan.workspace_bytes) {
      p.flags = static_cast<int*>(ops.workspace);
      p.ticket = p.flags + int64_t(p.tiles_m) * p.tiles_n;
      p.partials = reinterpret_cast<float*>(static_cast<char*>(ops.workspace) +
                                            flags_bytes(int64_t(p.tiles_m) * p.tiles_n));
    }
    static_assert(sizeof(p) <= sizeof(out.bytes));
    std::memcpy(out.bytes, &p, sizeof(p));
    out.size = sizeof(p);
  }
};

}  // namespace

const KernelFamily& sm80_family() {
  static const Sm80Family family;
  return family;
}

}  // namespace rlgemm
