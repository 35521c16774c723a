// sm90 family: one compile-time configuration struct per design, instantiating Gemm<> of
// src/kernels/sm90/gemm.cuh; the launch plan of its persistent grid; and its parameter block, whose TMA
// descriptors are encoded here through the driver API.
#include "generate/sm90_family.h"
#include "generate/families.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "design/sm90_shape.h"
#include "kernels/sm90/params.h"
#include "run/driver.h"

namespace rlgemm {
namespace {

// The kernel's view of a problem: with swap_ab it computes C^T = B^T A^T, so its A operand comes from B.
struct KernelView {
  int64_t m = 0, n = 0, k = 0;
  bool a_mn_major = false;  // A' = B^T of an nn problem: stored K x M', rows of M'
  bool b_mn_major = false;  // B' = B of an nn problem: stored K x N
};

KernelView kernel_view(const Design& d, const Problem& p) {
  KernelView v;
  v.k = p.shape.k;
  const bool nn = p.layout == Layout::kNN;
  if (d.swap_ab) {
    v.m = p.shape.n;
    v.n = p.shape.m;
    v.a_mn_major = nn;
    v.b_mn_major = false;
  } else {
    v.m = p.shape.m;
    v.n = p.shape.n;
    v.a_mn_major = false;
    v.b_mn_major = nn;
  }
  return v;
}

int splits_of(const Design& d) {
  return (d.split == SplitK::kSerial || d.split == SplitK::kParallel) ? std::max(1, d.splits) : 1;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The cluster-tile grid: tiles of BM x BN rounded up to whole clusters along M and N.
struct ClusterTiles {
  int64_t m = 0, n = 0;
  int64_t count() const { return m * n; }
};

ClusterTiles cluster_tiles(const Design& d, const KernelView& v) {
  return {sm90::cluster_tiles_along(v.m, d.bm, d.cluster_m), sm90::cluster_tiles_along(v.n, d.bn, d.cluster_n)};
}

// The workspace: ints first (split-K semaphores, or stream-K flags; one per partial slot; then the ticket
// counter of serial split-K and stream-K), then the fp32 partial slots of one consumer warpgroup's band of a
// tile each. Only the ints must be zero before the first launch; every launch leaves them zero.
//   serial split-K:   one slot per (tile, band), the running sum;
//   parallel split-K: one slot per (tile, band, slice);
//   stream-K:         one slot per (CTA of the grid, band): a cluster parks at most one partial.
struct WorkspaceLayout {
  size_t flag_bytes = 0;  // rounded up to 256 bytes, so the partials stay aligned
  size_t ticket_offset = 0;
  size_t total_bytes = 0;
};

WorkspaceLayout workspace_layout(const Design& d, const KernelView& v, int64_t grid_ctas) {
  WorkspaceLayout w;
  if (d.split == SplitK::kNone) return w;
  const int bands = sm90::warpgroups_per_tile(sm90_shape(d));
  const int64_t band_floats = int64_t(d.bm) / bands * d.bn;
  int64_t owners = 0, slots = 0;  // ints, and partial slots
  if (d.split == SplitK::kStreamK) {
    owners = slots = grid_ctas * bands;
  } else {
    const ClusterTiles ct = cluster_tiles(d, v);
    owners = ct.count() * d.cluster_m * d.cluster_n * bands;
    slots = owners * (d.split == SplitK::kParallel ? splits_of(d) : 1);
  }
  const int64_t ints = owners + 1;  // the ticket counter after the flags
  w.flag_bytes = (static_cast<size_t>(ints) * sizeof(int) + 255) / 256 * 256;
  w.ticket_offset = static_cast<size_t>(owners) * sizeof(int);
  w.total_bytes = w.flag_bytes + static_cast<size_t>(slots * band_floats) * sizeof(float);
  return w;
}

// The TMA element type of a design's operands (both 16 bits wide: the boxes and swizzles are the same).
CUtensorMapDataType tensor_map_type(DType dtype) {
  return dtype == DType::kBF16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
}

void expect(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

class Sm90Family final : public KernelFamily {
 public:
  std::string arch(const Design&) const override { return "sm_90a"; }

  std::string source(const Design& d, const Problem& problem, const std::string& kernel_name) const override {
    if (auto why = why_invalid(d, problem.layout)) fail("sm90 design cannot be generated: " + *why);
    if (auto why = sm90_unsupported(d, problem.layout)) fail("sm90 design cannot be generated: " + *why);
    const KernelView v = kernel_view(d, problem);
    const int splits = splits_of(d);
    const char* split_mode = d.split == SplitK::kSerial     ? "rlgemm::sm90::kSplitSerial"
                             : d.split == SplitK::kParallel ? "rlgemm::sm90::kSplitParallel"
                             : d.split == SplitK::kStreamK  ? "rlgemm::sm90::kSplitStreamK"
                                                            : "rlgemm::sm90::kSplitNone";
    auto b = [](bool x) { return x ? "true" : "false"; };
    std::ostringstream s;
    s << element_type_prelude(d) << "#include \"sm90/gemm.cuh\"\n\n"
      << "struct Sm90Config {\n"
      << "  static constexpr int kBM = " << d.bm << ", kBN = " << d.bn << ", kBK = " << d.bk
      << ", kStages = " << d.stages << ";\n"
      << "  static constexpr int kClusterM = " << d.cluster_m << ", kClusterN = " << d.cluster_n << ";\n"
      << "  static constexpr bool kPingpong = " << b(d.schedule == Sm90Schedule::kPingpong)
      << ", kSplitColumns = " << b(d.schedule == Sm90Schedule::kCooperativeColumns) << ";\n"
      << "  static constexpr bool kAMnMajor = " << b(v.a_mn_major) << ", kBMnMajor = " << b(v.b_mn_major)
      << ", kSwapAB = " << b(d.swap_ab) << ";\n"
      << "  static constexpr bool kRasterAlongN = " << b(d.raster == Raster::kAlongN) << ";\n"
      << "  static constexpr int kGroup = " << std::max(1, d.group) << ";\n"
      << "  static constexpr int kSplits = " << splits << ", kSplitMode = " << split_mode << ";\n"
      << "  static constexpr bool kEpilogueTma = " << b(d.epilogue == Epilogue::kTma) << ";\n"
      << "  static constexpr int kStaticM = " << (d.static_shape ? v.m : 0) << ", kStaticN = "
      << (d.static_shape ? v.n : 0) << ", kStaticK = " << (d.static_shape ? v.k : 0) << ";\n"
      << "  static constexpr bool kPdl = " << b(d.pdl) << ";\n"
      << "  static constexpr bool kBulkTail = " << b(d.bulk_tail) << ";\n"
      // The L2 eviction hint of the kernel's A' and B' loads (the problem's B and A when swapped): 0 normal,
      // 1 evict_first, 2 evict_last.
      << "  static constexpr int kEvictA = " << int(d.swap_ab ? d.evict_b : d.evict_a)
      << ", kEvictB = " << int(d.swap_ab ? d.evict_a : d.evict_b) << ";\n"
      << "};\n\n"
      << "extern \"C\" __global__ void __launch_bounds__(" << sm90::threads_per_block() << ", 1)\n"
      << kernel_name << "(const __grid_constant__ rlgemm::sm90::Params params) {\n"
      << "  extern __shared__ __align__(1024) char smem[];\n"
      << "  rlgemm::sm90::Gemm<Sm90Config>::run(params, smem);\n"
      << "}\n";
    return s.str();
  }

  LaunchPlan plan(const Design& d, const Problem& problem, const DeviceInfo& device) const override {
    const KernelView v = kernel_view(d, problem);
    const int cluster = d.cluster_m * d.cluster_n;
    if (auto why = why_unfit(d, problem)) fail("design " + to_string(d) + " cannot run " + problem.shape.to_string() + ": " + *why);
    const int64_t tiles = cluster_tiles(d, v).count();
    // Units of work: cluster tiles x K slices; for stream-K, k-blocks (every cluster gets at least one).
    const int64_t units = d.split == SplitK::kStreamK ? tiles * ceil_div(v.k, d.bk) : tiles * splits_of(d);
    // Persistent: at most one CTA per SM, whole clusters only. Stream-K's owners wait for peers in other
    // clusters, so every CTA of its grid must be resident at once. One CTA per SM is, for single CTAs; for
    // clusters of two it is where the SMs pair up within their GPCs, which max_active_clusters
    // (src/run/driver.h) answers for a loaded kernel. A launch may use fewer clusters than planned (the
    // kernel partitions by gridDim, and the workspace still fits), never more.
    // Serial split-K is not persistent: one cluster per unit, the unit its ticket, so that a slice waits
    // only on slices of clusters that started before it (see src/kernels/sm90/gemm.cuh).
    const int64_t max_clusters = std::max<int64_t>(1, device.sm_count / cluster);
    const int64_t clusters = d.split == SplitK::kSerial ? units : std::min(units, max_clusters);
    LaunchPlan plan;
    plan.grid[0] = static_cast<unsigned>(clusters * cluster);
    plan.block[0] = static_cast<unsigned>(sm90::threads_per_block());
    plan.cluster[0] = static_cast<unsigned>(cluster);
    plan.smem_bytes = sm90::smem_bytes(sm90_shape(d));
    if (d.split != SplitK::kNone) {
      const WorkspaceLayout w = workspace_layout(d, v, plan.grid[0]);
      plan.workspace_bytes = w.total_bytes;
      plan.workspace_zero_bytes = w.flag_bytes;
      plan.workspace_must_be_zero = true;
    }
    return plan;
  }

  void params(const Design& d, const Problem& problem, const GemmOperands& ops, const LaunchPlan& plan,
              ParamBlock& out) const override {
    static_assert(sizeof(sm90::Params) <= sizeof(out.bytes), "Params must fit the parameter block");
    expect(ops.a && ops.b && ops.c, "sm90 kernels need the A, B and C device pointers");
    expect(ops.workspace_bytes >= plan.workspace_bytes,
           "the workspace is smaller than the launch plan's workspace_bytes (" + std::to_string(plan.workspace_bytes) + ")");
    const KernelView v = kernel_view(d, problem);
    const sm90::Shape shape = sm90_shape(d);
    const DriverApi& api = driver();
    sm90::Params p;
    std::memset(&p, 0, sizeof(p));

    // A problem operand as the kernel's A' (rows = kernel M) or B' (rows = kernel N).
    const void* a_src = d.swap_ab ? ops.b : ops.a;
    const void* b_src = d.swap_ab ? ops.a : ops.b;
    const CUtensorMapDataType type = tensor_map_type(d.dtype);
    const CUtensorMapL2promotion promotion = l2_promotion(d.l2_promotion);
    encode_operand(api, &p.a, type, a_src, v.a_mn_major, v.m, v.k, d.bm, d.bk, d.cluster_n, promotion);
    encode_operand(api, &p.b, type, b_src, v.b_mn_major, v.n, v.k, d.bn, d.bk, d.cluster_m, promotion);
    if (d.epilogue == Epilogue::kTma) {
      // C in the problem's view (row-major M x N): dims {N, M}; box = 64 columns x the rows of one staged chunk
      // (a warpgroup's rows, or one m64 block of them).
      encode(api, &p.c, type, ops.c, problem.shape.n, problem.shape.m, problem.shape.n, 64,
             sm90::epilogue_rows(shape), CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
    }
    p.c_ptr = ops.c;
    p.m = static_cast<int>(v.m);
    p.n = static_cast<int>(v.n);
    p.k = static_cast<int>(v.k);
    p.ldc = static_cast<int>(problem.shape.n);
    if (plan.workspace_bytes > 0) {
      p.semaphores = static_cast<int*>(ops.workspace);
      const WorkspaceLayout w = workspace_layout(d, v, plan.grid[0]);
      p.partials = reinterpret_cast<float*>(static_cast<char*>(ops.workspace) + w.flag_bytes);
      p.ticket = reinterpret_cast<int*>(static_cast<char*>(ops.workspace) + w.ticket_offset);
    }
    std::memcpy(out.bytes, &p, sizeof(p));
    out.size = sizeof(p);
  }

  void rebind(const Design& d, const Problem& problem, const GemmOperands& ops, const LaunchPlan& plan,
              ParamBlock& inout) const override {
    if (!ops.a || !ops.b || !ops.c) fail("sm90 kernels need the A, B and C device pointers");
    if (ops.workspace_bytes < plan.workspace_bytes)
      fail("the workspace is smaller than the launch plan's workspace_bytes (" + std::to_string(plan.workspace_bytes) + ")");
    auto* p = reinterpret_cast<sm90::Params*>(inout.bytes);
    const DriverApi& api = driver();
    auto replace = [&](sm90::TensorMapBytes* map, const void* base) {
      RLGEMM_CU_CHECK(api.cuTensorMapReplaceAddress(reinterpret_cast<CUtensorMap*>(map), const_cast<void*>(base)));
    };
    replace(&p->a, d.swap_ab ? ops.b : ops.a);
    replace(&p->b, d.swap_ab ? ops.a : ops.b);
    if (d.epilogue == Epilogue::kTma) replace(&p->c, ops.c);
    p->c_ptr = ops.c;
    if (plan.workspace_bytes > 0) {
      const WorkspaceLayout w = workspace_layout(d, kernel_view(d, problem), plan.grid[0]);
      char* const ws = static_cast<char*>(ops.workspace);
      p->semaphores = reinterpret_cast<int*>(ws);
      p->partials = reinterpret_cast<float*>(ws + w.flag_bytes);
      p->ticket = reinterpret_cast<int*>(ws + w.ticket_offset);
    }
  }

 private:
  // Design::l2_promotion (bytes) as the driver's enumerator.
  static CUtensorMapL2promotion l2_promotion(int bytes) {
    switch (bytes) {
      case 0: return CU_TENSOR_MAP_L2_PROMOTION_NONE;
      case 64: return CU_TENSOR_MAP_L2_PROMOTION_L2_64B;
      case 128: return CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
      case 256: return CU_TENSOR_MAP_L2_PROMOTION_L2_256B;
    }
    fail("L2 promotion of " + std::to_string(bytes) + " bytes: 0, 64, 128 or 256");
  }

  // 2D tensor map of 16-bit elements over a row-major matrix of `rows` x `inner` elements with `ld` elements
  // per row.
  static void encode(const DriverApi& api, sm90::TensorMapBytes* map, CUtensorMapDataType type, const void* base,
                     int64_t inner, int64_t rows, int64_t ld, int box_inner, int box_rows, CUtensorMapSwizzle swizzle,
                     CUtensorMapL2promotion promotion) {
    static_assert(sizeof(sm90::TensorMapBytes) == sizeof(CUtensorMap), "tensor map size");
    const cuuint64_t dims[2] = {static_cast<cuuint64_t>(inner), static_cast<cuuint64_t>(rows)};
    const cuuint64_t strides[1] = {static_cast<cuuint64_t>(ld) * 2};
    const cuuint32_t box[2] = {static_cast<cuuint32_t>(box_inner), static_cast<cuuint32_t>(box_rows)};
    const cuuint32_t element_strides[2] = {1, 1};
    RLGEMM_CU_CHECK(api.cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(map), type,
                                               2, const_cast<void*>(base), dims, strides, box, element_strides,
                                               CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                               promotion,
                                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  }

  // A kernel operand with `rows` rows (M' or N') and depth k. K-major: stored rows x k, box {min(BK,64), the
  // rows of one part} (sm90::multicast_part_rows: tile_rows / parts, rounded up to whole swizzle atoms). MN-major:
  // stored k x rows, box {64, BK / parts}. `parts` CTAs of a cluster share it.
  static void encode_operand(const DriverApi& api, sm90::TensorMapBytes* map, CUtensorMapDataType type,
                             const void* base, bool mn_major, int64_t rows, int64_t k, int tile_rows, int bk, int parts,
                             CUtensorMapL2promotion promotion) {
    if (!mn_major) {
      const int box_k = std::min(bk, 64);
      encode(api, map, type, base, k, rows, k, box_k, sm90::multicast_part_rows(tile_rows, parts),
             box_k * 2 == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B, promotion);
    } else {
      encode(api, map, type, base, rows, k, rows, 64, bk / parts, CU_TENSOR_MAP_SWIZZLE_128B, promotion);
    }
  }
};

}  // namespace

const KernelFamily& sm90_family() {
  static const Sm90Family family;
  return family;
}

std::optional<std::string> sm90_unsupported(const Design& d, Layout layout) {
  // Every rule lives in why_invalid (src/design), where the search and the dispatcher see it too.
  return why_invalid(d, layout);
}

}  // namespace rlgemm
