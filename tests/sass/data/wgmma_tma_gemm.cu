// A small Hopper HGEMM compiled for sm_90a: one warpgroup per 64x64 output tile, operands brought into
// shared memory by bulk asynchronous copies (cp.async.bulk, the 1-D form of TMA) that complete on an
// mbarrier, a two-stage pipeline, and wgmma.mma_async m64n64k16 with fp32 accumulation.
// Operand tiles are stored pre-packed in the 8x8 "core matrix" order that a no-swizzle wgmma descriptor
// reads, so a tile is one contiguous block: A as (M/64, K/16) tiles of 64x16, B as (N/64, K/16) tiles.
// It exists to give the SASS tests a representative Hopper schedule (SYNCS, UBLKCP, HGMMA, WARPGROUP, STS/LDS/STG).
#include <cuda_fp16.h>
#include <cstdint>

constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kStages = 2;
constexpr int kTileBytesA = kTileM * kTileK * 2, kTileBytesB = kTileN * kTileK * 2;

__device__ inline unsigned smem_addr(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }

__device__ inline void mbarrier_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ inline void mbarrier_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes));
}
__device__ inline void mbarrier_wait(uint64_t* bar, unsigned parity) {
  asm volatile(
      "{\n .reg .pred done;\n wait_%=:\n"
      " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      " @!done bra wait_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity));
}
__device__ inline void bulk_copy_g2s(void* smem, const void* gmem, unsigned bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          smem_addr(smem)),
      "l"(gmem), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
// wgmma shared-memory matrix descriptor, no swizzle: start address, leading and stride byte offsets (>> 4).
__device__ inline uint64_t make_desc(const void* smem, unsigned lead_bytes, unsigned stride_bytes) {
  uint64_t d = 0;
  d |= uint64_t((smem_addr(smem) & 0x3FFFF) >> 4);
  d |= uint64_t((lead_bytes & 0x3FFFF) >> 4) << 16;
  d |= uint64_t((stride_bytes & 0x3FFFF) >> 4) << 32;
  return d;
}
__device__ inline void wgmma_64x64x16(float (&d)[32], uint64_t desc_a, uint64_t desc_b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
      "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
      "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, 1, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b));
}

// a_packed: (M/64, K/16) tiles of 64x16, b_packed: (N/64, K/16) tiles of 64x16 (B stored N x K), c: M x N.
extern "C" __global__ void __launch_bounds__(128) wgmma_tma_gemm(const half* a_packed, const half* b_packed, half* c,
                                                                 int m, int n, int k) {
  __shared__ alignas(128) half sa[kStages][kTileM * kTileK];  // (BM*BK, stage)
  __shared__ alignas(128) half sb[kStages][kTileN * kTileK];  // (BN*BK, stage)
  __shared__ alignas(8) uint64_t full[kStages];
  const int tid = threadIdx.x;
  const int ktiles = k / kTileK;
  const half* a_tiles = a_packed + size_t(blockIdx.y) * ktiles * kTileM * kTileK;
  const half* b_tiles = b_packed + size_t(blockIdx.x) * ktiles * kTileN * kTileK;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) mbarrier_init(&full[s], 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  auto issue = [&](int kt) {
    const int s = kt % kStages;
    mbarrier_expect_tx(&full[s], kTileBytesA + kTileBytesB);
    bulk_copy_g2s(sa[s], a_tiles + size_t(kt) * kTileM * kTileK, kTileBytesA, &full[s]);
    bulk_copy_g2s(sb[s], b_tiles + size_t(kt) * kTileN * kTileK, kTileBytesB, &full[s]);
  };
  if (tid == 0) issue(0);
  float acc[32] = {};
  for (int kt = 0; kt < ktiles; ++kt) {
    const int s = kt % kStages;
    if (tid == 0 && kt + 1 < ktiles) issue(kt + 1);
    mbarrier_wait(&full[s], (kt / kStages) & 1);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    wgmma_64x64x16(acc, make_desc(sa[s], 128, 256), make_desc(sb[s], 128, 256));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    __syncthreads();  // every thread is done reading stage s before it is refilled
  }
  // Epilogue through shared memory, as CUTLASS-style kernels do: fragments to a padded tile, then 16-byte
  // coalesced rows to global. Accumulator layout of m64nNk16: warp w owns rows 16w..16w+15.
  __shared__ alignas(16) half sc[kTileM][kTileN + 8];  // (BM, BN + pad)
  const int warp = tid / 32, lane = tid % 32;
  const int r0 = warp * 16 + lane / 4;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int col = i * 8 + (lane % 4) * 2;
    *reinterpret_cast<half2*>(&sc[r0][col]) = __floats2half2_rn(acc[4 * i], acc[4 * i + 1]);
    *reinterpret_cast<half2*>(&sc[r0 + 8][col]) = __floats2half2_rn(acc[4 * i + 2], acc[4 * i + 3]);
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kTileM * kTileN / 8 / 128; ++i) {
    const int chunk = tid + i * 128, r = chunk / (kTileN / 8), cc = (chunk % (kTileN / 8)) * 8;
    const uint4 v = *reinterpret_cast<const uint4*>(&sc[r][cc]);
    *reinterpret_cast<uint4*>(c + size_t(blockIdx.y * kTileM + r) * n + blockIdx.x * kTileN + cc) = v;
  }
}
