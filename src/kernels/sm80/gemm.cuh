// The sm80 HGEMM kernel: mma.sync m16n8k16 (fp16 in, fp32 accumulate) fed by ldmatrix from a multi-stage
// cp.async shared-memory ring. Runs on sm_80 and later, so it also serves small shapes on Hopper.
//
// One block computes one BM x BN tile of D (or one K-slice of it, with split-K):
//   prologue   issue cp.async for the first STAGES-1 k-tiles (zero-filled outside M, N, K)
//   main loop  per k-tile: BK/16 k-steps; each step loads the next step's fragments with ldmatrix
//              (register double buffer) while issuing the current step's mma.sync. At step 0 the copy of
//              k-tile kt+STAGES-1 is issued into the stage freed by k-tile kt-1; before the last step
//              one cp.async wait + one __syncthreads make k-tile kt+1 visible.
//   split-K    serial: slices add into D in turn, ordered by a per-tile flag; parallel: slices write fp32
//              partials, the last one to arrive sums them. A serial slice waits for the slice before it,
//              so its (tile, slice) is not its block index but a ticket it draws when it starts, slice-major:
//              the slice it waits for drew a smaller ticket, so it is running already and waits only on
//              smaller tickets still. Other launches sharing the GPU cannot deadlock it.
//   epilogue   fp32 -> fp16 straight from registers, or staged in shared memory for 16-byte stores.
// A /pdl design (kPdl) waits for the grids it depends on before its first global access (the serial ticket or
// the first cp.async): see ptx/grid_dependency.cuh.
#pragma once

#include "common/sync.cuh"
#include "common/tile_order.cuh"
#include "common/types.cuh"
#include "ptx/grid_dependency.cuh"
#include "ptx/sm80.cuh"
#include "sm80/params.h"
#include "sm80/smem_tile.cuh"

namespace rlgemm::sm80 {

enum SplitMode { kSplitNone = 0, kSplitSerial = 1, kSplitParallel = 2 };

template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_, bool SWIZZLE_, bool A_KMAJOR_, bool B_KMAJOR_,
          bool D_TRANSPOSED_, int SPLIT_, bool EPI_SMEM_, bool RASTER_M_, int GROUP_, int STATIC_M_ = 0,
          int STATIC_N_ = 0, int STATIC_K_ = 0, bool PDL_ = false>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;  // block tile
  static constexpr int WM = WM_, WN = WN_;              // warp tile
  static constexpr int kStages = STAGES_;
  static constexpr bool kSwizzle = SWIZZLE_;
  static constexpr bool kAKMajor = A_KMAJOR_;  // A stored K-contiguous (else M-contiguous)
  static constexpr bool kBKMajor = B_KMAJOR_;  // B stored K-contiguous (else N-contiguous)
  static constexpr bool kDTransposed = D_TRANSPOSED_;
  static constexpr int kSplit = SPLIT_;
  static constexpr bool kEpiSmem = EPI_SMEM_;
  static constexpr bool kRasterM = RASTER_M_;
  static constexpr int kGroup = GROUP_;
  static constexpr int kStaticM = STATIC_M_, kStaticN = STATIC_N_, kStaticK = STATIC_K_;  // 0: run-time
  static constexpr bool kPdl = PDL_;  // launched as a programmatic dependent (sm_90+)

  static constexpr int kWarpsM = BM / WM, kWarpsN = BN / WN;
  static constexpr int kThreads = kWarpsM * kWarpsN * 32;
  static constexpr int kMmaM = WM / 16;  // m16 tiles per warp
  static constexpr int kMmaN = WN / 8;   // n8 tiles per warp
  static constexpr int kSteps = BK / 16;  // k16 steps per k-tile

  static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must divide the block tile");
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: m16 rows, pairs of n8 columns (ldmatrix.x4)");
  static_assert(BK % 32 == 0, "BK: an even number of k16 steps keeps the fragment double buffer in phase");
  static_assert(kStages >= 2, "a pipeline needs two stages");
  static_assert(kThreads <= 512, "at most 16 warps");
};

// One operand's share of a block tile: MN rows (of A: M, of B: N) by BK, copied from global memory into
// one pipeline stage. K-major operands are stored in shared memory as MN rows of BK; MN-major ones as BK
// rows of MN, so that every 16-byte chunk is contiguous in global memory and copied by one cp.async.
template <int MN, int BK, bool KMAJOR, bool SWIZZLE, int THREADS>
struct OperandTile {
  using Tile = SmemTile<KMAJOR ? MN : BK, (KMAJOR ? BK : MN) / 8, SWIZZLE>;
  static constexpr int kRows = KMAJOR ? MN : BK;               // rows of the shared-memory tile
  static constexpr int kChunksPerRow = (KMAJOR ? BK : MN) / 8;  // 16-byte chunks per row
  static_assert(THREADS % kChunksPerRow == 0, "a thread copies the same chunk column of several rows");
  // Thread t copies chunk t % kChunksPerRow of rows t / kChunksPerRow + i * kRowStep.
  static constexpr int kRowStep = THREADS / kChunksPerRow;
  static constexpr int kPerThread = ceil_div(kRows, kRowStep);

  const element_bits* src;    // this thread's first chunk in k-tile 0 of the slice
  int64_t k_step;    // elements from one k-tile to the next
  int row_stride;    // elements from one of this thread's rows to the next (kRowStep rows)
  int row0;          // this thread's first row in the tile
  int chunk;         // this thread's chunk column
  int mn_left;       // rows (K-major) or columns (MN-major) of the operand from the tile's start to its end
  uint32_t smem0;    // byte offset of this thread's first chunk within a stage

  __device__ __forceinline__ void init(const element_bits* operand, int ld, int mn0, int mn_extent, int k_begin) {
    row0 = int(threadIdx.x) / kChunksPerRow;
    chunk = int(threadIdx.x) % kChunksPerRow;
    const element_bits* base = operand + (KMAJOR ? int64_t(mn0) * ld + k_begin : int64_t(k_begin) * ld + mn0);
    src = base + int64_t(row0) * ld + chunk * 8;
    k_step = KMAJOR ? int64_t(BK) : int64_t(BK) * ld;
    row_stride = kRowStep * ld;
    mn_left = mn_extent - mn0;
    smem0 = uint32_t(Tile::offset(row0, chunk));
  }

  // Issues the copies of k-tile `kt` of this slice into the stage at shared address `stage`. `k_left`:
  // columns of K from this k-tile's start to the end of K. Chunks beyond it, or beyond mn_left, are
  // zero-filled without reading global memory.
  __device__ __forceinline__ void load(uint32_t stage, int kt, int k_left) const {
    const element_bits* tile_src = src + kt * k_step;
#pragma unroll
    for (int i = 0; i < kPerThread; ++i) {
      const int row = row0 + i * kRowStep;
      if (kRows % kRowStep != 0 && row >= kRows) break;
      const int mn = KMAJOR ? row : chunk * 8;
      const int k = KMAJOR ? chunk * 8 : row;
      const bool valid = mn < mn_left && k < k_left;
      // Rows kRowStep apart share their swizzle phase when kRowStep is a multiple of 8.
      const uint32_t offset = kRowStep % 8 == 0 ? smem0 + uint32_t(i * kRowStep * Tile::kRowBytes)
                                                : uint32_t(Tile::offset(row, chunk));
      // With valid == false no byte is read (src-size 0), so the address may lie outside the operand.
      ptx::cp_async_16_zfill(stage + offset, tile_src + i * row_stride, valid);
    }
  }
};

template <class Cfg>
struct Kernel {
  using ATile = OperandTile<Cfg::BM, Cfg::BK, Cfg::kAKMajor, Cfg::kSwizzle, Cfg::kThreads>;
  using BTile = OperandTile<Cfg::BN, Cfg::BK, Cfg::kBKMajor, Cfg::kSwizzle, Cfg::kThreads>;
  static constexpr int kStageBytes = ATile::Tile::kBytes + BTile::Tile::kBytes;

  using Accumulators = float[Cfg::kMmaM][Cfg::kMmaN][4];  // (m16 tile, n8 tile, mma D register)

  // A fragments of k-step `kk` for this warp's kMmaM m16 tiles, from the stage at `stage`.
  __device__ __forceinline__ static void load_a(uint32_t (&a)[Cfg::kMmaM][4], uint32_t stage, int kk, int warp_m0,
                                                int lane) {
    const int q = lane >> 3, r = lane & 7;
#pragma unroll
    for (int i = 0; i < Cfg::kMmaM; ++i) {
      if constexpr (Cfg::kAKMajor) {
        // lanes 0-15: rows 0-15 at k 0-7; lanes 16-31: rows 0-15 at k 8-15 -> a0..a3 in mma order
        const int row = warp_m0 + i * 16 + (lane & 15);
        ptx::ldmatrix_x4(a[i], stage + ATile::Tile::offset(row, kk * 2 + (lane >> 4)));
      } else {
        // stored [k][m]: matrix q holds k-half q/2 of m-half q%2, transposed into the row-major fragment
        const int k = kk * 16 + (q >> 1) * 8 + r;
        const int m = warp_m0 + i * 16 + (q & 1) * 8;
        ptx::ldmatrix_x4_trans(a[i], stage + ATile::Tile::offset(k, m / 8));
      }
    }
  }

  // B fragments of k-step `kk` for this warp's kMmaN n8 tiles (two per ldmatrix.x4).
  __device__ __forceinline__ static void load_b(uint32_t (&b)[Cfg::kMmaN][2], uint32_t stage, int kk, int warp_n0,
                                                int lane) {
    const int q = lane >> 3, r = lane & 7;
    stage += ATile::Tile::kBytes;
#pragma unroll
    for (int j = 0; j < Cfg::kMmaN / 2; ++j) {
      uint32_t t[4];
      if constexpr (Cfg::kBKMajor) {
        // stored [n][k]: matrix q = (n-half q/2, k-half q%2)
        const int n = warp_n0 + j * 16 + (q >> 1) * 8 + r;
        ptx::ldmatrix_x4(t, stage + BTile::Tile::offset(n, kk * 2 + (q & 1)));
      } else {
        // stored [k][n]: matrix q = (k-half q%2, n-half q/2), transposed
        const int k = kk * 16 + (q & 1) * 8 + r;
        const int n = warp_n0 + j * 16 + (q >> 1) * 8;
        ptx::ldmatrix_x4_trans(t, stage + BTile::Tile::offset(k, n / 8));
      }
      b[2 * j][0] = t[0], b[2 * j][1] = t[1];
      b[2 * j + 1][0] = t[2], b[2 * j + 1][1] = t[3];
    }
  }

  __device__ __forceinline__ static void mma_step(Accumulators& acc, const uint32_t (&a)[Cfg::kMmaM][4],
                                                  const uint32_t (&b)[Cfg::kMmaN][2]) {
#pragma unroll
    for (int i = 0; i < Cfg::kMmaM; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::kMmaN; ++j) ptx::mma_m16n8k16_f32(acc[i][j], a[i], b[j]);
  }

  // acc += A[m0.., k-tiles kt_begin..kt_end) * B[.., n0..]
  __device__ __forceinline__ static void mainloop(Accumulators& acc, const ATile& a_tile, const BTile& b_tile,
                                                  uint32_t smem, int k_tiles, int k_left0, int warp_m0,
                                                  int warp_n0, int lane) {
    constexpr int S = Cfg::kStages;
    auto stage_addr = [&](int s) { return smem + uint32_t(s * kStageBytes); };
    auto load_tile = [&](int s, int kt) {
      const int k_left = k_left0 - kt * Cfg::BK;
      a_tile.load(stage_addr(s), kt, k_left);
      b_tile.load(stage_addr(s) + ATile::Tile::kBytes, kt, k_left);
    };

#pragma unroll
    for (int s = 0; s < S - 1; ++s) {
      if (s < k_tiles) load_tile(s, s);
      ptx::cp_async_commit();
    }
    ptx::cp_async_wait<S - 2>();
    __syncthreads();

    uint32_t a[2][Cfg::kMmaM][4];  // fragment double buffer, indexed by k-step parity
    uint32_t b[2][Cfg::kMmaN][2];
    int read_stage = 0;
    int write_stage = S - 1;
    load_a(a[0], stage_addr(read_stage), 0, warp_m0, lane);
    load_b(b[0], stage_addr(read_stage), 0, warp_n0, lane);

    for (int kt = 0; kt < k_tiles; ++kt) {
#pragma unroll
      for (int kk = 0; kk < Cfg::kSteps; ++kk) {
        if (kk == Cfg::kSteps - 1) {
          // k-tile kt+1 must have landed (and every warp be done with k-tile kt-1's stage) before the
          // next step's fragments come from it.
          ptx::cp_async_wait<S - 2>();
          __syncthreads();
          read_stage = read_stage + 1 == S ? 0 : read_stage + 1;
        }
        const int next_kk = kk + 1 == Cfg::kSteps ? 0 : kk + 1;
        load_a(a[(kk + 1) & 1], stage_addr(read_stage), next_kk, warp_m0, lane);
        load_b(b[(kk + 1) & 1], stage_addr(read_stage), next_kk, warp_n0, lane);
        if (kk == 0) {
          // Refill the stage k-tile kt-1 used; every warp passed the barrier after reading it.
          const int next_tile = kt + S - 1;
          if (next_tile < k_tiles) load_tile(write_stage, next_tile);
          ptx::cp_async_commit();
          write_stage = write_stage + 1 == S ? 0 : write_stage + 1;
        }
        mma_step(acc, a[kk & 1], b[kk & 1]);
      }
    }
    ptx::cp_async_wait<0>();
  }

  // Visits every accumulator pair: f(i, j, h, row, col) with (row, col) the tile-relative position of
  // acc[i][j][2h] (and col+1 of acc[i][j][2h+1]).
  template <class F>
  __device__ __forceinline__ static void for_each_pair(int warp_m0, int warp_n0, int lane, F&& f) {
#pragma unroll
    for (int i = 0; i < Cfg::kMmaM; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::kMmaN; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          f(i, j, h, warp_m0 + i * 16 + (lane >> 2) + h * 8, warp_n0 + j * 8 + (lane & 3) * 2);
  }

  __device__ __forceinline__ static void store_from_registers(const Accumulators& acc, const Params& p, int M, int N,
                                                              int m0, int n0, int warp_m0, int warp_n0, int lane) {
    for_each_pair(warp_m0, warp_n0, lane, [&](int i, int j, int h, int row, int col) {
      const int gm = m0 + row, gn = n0 + col;
      if (gm >= M || gn >= N) return;
      const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
      if constexpr (!Cfg::kDTransposed) {
        // N is a multiple of 8 here, so gn + 1 < N too
        *reinterpret_cast<uint32_t*>(p.d + int64_t(gm) * p.ldd + gn) = pack_elements(v0, v1);
      } else {
        p.d[int64_t(gn) * p.ldd + gm] = to_element(v0);
        if (gn + 1 < N) p.d[int64_t(gn + 1) * p.ldd + gm] = to_element(v1);
      }
    });
  }

  // Stages the tile as fp16 in shared memory (in D's memory order), then writes whole 16-byte chunks.
  __device__ __forceinline__ static void store_through_smem(const Accumulators& acc, const Params& p, int M, int N,
                                                            int m0, int n0, int warp_m0, int warp_n0, int lane,
                                                            uint8_t* smem) {
    constexpr int kRows = Cfg::kDTransposed ? Cfg::BN : Cfg::BM;  // rows of D's memory inside the tile
    constexpr int kCols = Cfg::kDTransposed ? Cfg::BM : Cfg::BN;
    constexpr int kStride = kCols + 8;  // elements; the extra chunk spreads rows over the banks
    element_bits* staging = reinterpret_cast<element_bits*>(smem);
    __syncthreads();  // every warp is done reading the pipeline's stages
    for_each_pair(warp_m0, warp_n0, lane, [&](int i, int j, int h, int row, int col) {
      const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
      if constexpr (!Cfg::kDTransposed) {
        *reinterpret_cast<uint32_t*>(staging + row * kStride + col) = pack_elements(v0, v1);
      } else {
        staging[col * kStride + row] = to_element(v0);
        staging[(col + 1) * kStride + row] = to_element(v1);
      }
    });
    __syncthreads();
    const int row_extent = Cfg::kDTransposed ? N : M;
    const int col_extent = Cfg::kDTransposed ? M : N;  // a multiple of 8
    const int row0 = Cfg::kDTransposed ? n0 : m0;
    const int col0 = Cfg::kDTransposed ? m0 : n0;
    constexpr int kChunksPerRow = kCols / 8;
    for (int c = int(threadIdx.x); c < kRows * kChunksPerRow; c += Cfg::kThreads) {
      const int row = c / kChunksPerRow, chunk = c % kChunksPerRow;
      const int gr = row0 + row, gc = col0 + chunk * 8;
      if (gr >= row_extent || gc >= col_extent) continue;
      uint32_t x, y, z, w;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(x), "=r"(y), "=r"(z), "=r"(w)
                   : "r"(ptx::smem_addr(staging + row * kStride + chunk * 8)));
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p.d + int64_t(gr) * p.ldd + gc), "r"(x), "r"(y),
                   "r"(z), "r"(w)
                   : "memory");
    }
  }

  __device__ __forceinline__ static void store(const Accumulators& acc, const Params& p, int M, int N, int m0, int n0,
                                               int warp_m0, int warp_n0, int lane, uint8_t* smem) {
    if constexpr (Cfg::kEpiSmem)
      store_through_smem(acc, p, M, N, m0, n0, warp_m0, warp_n0, lane, smem);
    else
      store_from_registers(acc, p, M, N, m0, n0, warp_m0, warp_n0, lane);
  }

  // Parallel split-K: publishes this slice's partial tile; returns true in the block that arrives last,
  // with `acc` replaced by the sum of every slice's partial in slice order (its own re-read too), so the
  // output does not depend on which slice came last.
  // A block's fp32 accumulators as one BM x BN partial tile in the workspace, laid out [pair][thread] so
  // that each pair store of a warp covers 256 contiguous bytes; written and read by the same threads.
  static constexpr int kTileFloats = Cfg::BM * Cfg::BN;
  static_assert(Cfg::kMmaM * Cfg::kMmaN * 2 * Cfg::kThreads * 2 == kTileFloats, "partials cover the tile exactly");
  __device__ __forceinline__ static void store_partial(const Accumulators& acc, float* tile) {
    const int t = int(threadIdx.x);
#pragma unroll
    for (int i = 0; i < Cfg::kMmaM; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::kMmaN; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int pair = (i * Cfg::kMmaN + j) * 2 + h;
          float* dst = tile + (int64_t(pair) * Cfg::kThreads + t) * 2;
          asm volatile("st.global.cg.v2.f32 [%0], {%1, %2};" ::"l"(dst), "f"(acc[i][j][2 * h]), "f"(acc[i][j][2 * h + 1])
                       : "memory");
        }
  }
  __device__ __forceinline__ static void zero(Accumulators& acc) {
#pragma unroll
    for (int i = 0; i < Cfg::kMmaM; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::kMmaN; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
  }
  __device__ __forceinline__ static void add_partial(Accumulators& acc, const float* tile) {
    const int t = int(threadIdx.x);
#pragma unroll
    for (int i = 0; i < Cfg::kMmaM; ++i)
#pragma unroll
      for (int j = 0; j < Cfg::kMmaN; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int pair = (i * Cfg::kMmaN + j) * 2 + h;
          float x, y;
          load_cg_f32x2(tile + (int64_t(pair) * Cfg::kThreads + t) * 2, x, y);
          acc[i][j][2 * h] += x;
          acc[i][j][2 * h + 1] += y;
        }
  }

  __device__ __forceinline__ static bool reduce_parallel(Accumulators& acc, const Params& p, int tiles) {
    const int tile = int(blockIdx.x), slice = int(blockIdx.z);
    const int t = int(threadIdx.x);
    // [slice][tile][pair][thread]: each pair store of a warp covers 256 contiguous bytes.
    auto partial = [&](int s) { return p.partials + (int64_t(s) * tiles + tile) * kTileFloats; };
    store_partial(acc, partial(slice));
    __threadfence();
    __syncthreads();
    __shared__ int arrived_last;
    if (t == 0) {
      const int before = atomicAdd(p.flags + tile, 1);
      arrived_last = before == p.splits - 1;
      if (arrived_last) p.flags[tile] = 0;  // every slice has arrived: leave the counter zeroed
    }
    __syncthreads();
    if (!arrived_last) return false;
    __threadfence();
    zero(acc);
    for (int s = 0; s < p.splits; ++s) add_partial(acc, partial(s));
    return true;
  }

  // Draws this block's ticket (one thread; handed to the others through the first word of shared memory,
  // before the pipeline uses it). The block that draws the launch's last ticket resets the counter for the
  // next launch: every block has drawn by then.
  __device__ __forceinline__ static int draw_ticket(int* counter, int tickets, uint8_t* smem) {
    int* const word = reinterpret_cast<int*>(smem);
    if (threadIdx.x == 0) {
      const int ticket = atomicAdd(counter, 1);
      if (ticket == tickets - 1) atomicExch(counter, 0);
      *word = ticket;
    }
    __syncthreads();
    const int ticket = *word;
    __syncthreads();  // every thread has read it before the pipeline overwrites it
    return ticket;
  }

  __device__ __forceinline__ static void run(const Params& p) {
    extern __shared__ __align__(128) uint8_t smem[];
    // A /pdl kernel waits here for the previous kernel in its stream, which may still be writing A, B or the
    // workspace, or reading C: nothing above touches global memory.
    ptx::GridDependency<Cfg::kPdl>::wait_then_launch_dependents();
    const int M = Cfg::kStaticM ? Cfg::kStaticM : p.m;
    const int N = Cfg::kStaticN ? Cfg::kStaticN : p.n;
    const int K = Cfg::kStaticK ? Cfg::kStaticK : p.k;
    const int tiles_m = Cfg::kStaticM ? ceil_div(Cfg::kStaticM, Cfg::BM) : p.tiles_m;
    const int tiles_n = Cfg::kStaticN ? ceil_div(Cfg::kStaticN, Cfg::BN) : p.tiles_n;

    // This block's tile (linear index before the raster order) and K-slice.
    int tile_index = int(blockIdx.x), slice = int(blockIdx.z);
    if constexpr (Cfg::kSplit == kSplitSerial) {
      const int ticket = draw_ticket(p.ticket, int(gridDim.x * gridDim.z), smem);
      slice = ticket / int(gridDim.x);
      tile_index = ticket - slice * int(gridDim.x);
    }
    const TileCoord tile = tile_of_block<Cfg::kRasterM>(tile_index, tiles_m, tiles_n, Cfg::kGroup);
    const int m0 = tile.m * Cfg::BM, n0 = tile.n * Cfg::BN;

    // This block's K-slice, in BK-tiles.
    const int k_tiles_total = ceil_div(K, Cfg::BK);
    int kt_begin = 0, kt_end = k_tiles_total;
    if constexpr (Cfg::kSplit != kSplitNone) {
      kt_begin = slice * p.k_tiles_per_split;
      kt_end = min_of(kt_begin + p.k_tiles_per_split, k_tiles_total);
    }

    ATile a_tile;
    BTile b_tile;
    a_tile.init(p.a, p.lda, m0, M, kt_begin * Cfg::BK);
    b_tile.init(p.b, p.ldb, n0, N, kt_begin * Cfg::BK);

    const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
    const int warp_m0 = (warp % Cfg::kWarpsM) * Cfg::WM;
    const int warp_n0 = (warp / Cfg::kWarpsM) * Cfg::WN;

    Accumulators acc;
    zero(acc);

    mainloop(acc, a_tile, b_tile, ptx::smem_addr(smem), kt_end - kt_begin, K - kt_begin * Cfg::BK, warp_m0, warp_n0,
             lane);

    if constexpr (Cfg::kSplit == kSplitSerial) {
      // Slices take turns on the tile, in slice order: slice s waits for flag == s, adds the running sum
      // the slices before it left in the tile's fp32 slot, and hands over; only the last slice rounds to
      // fp16 and writes D (so the result is an fp32 accumulation), and leaves the flag zeroed.
      int* flag = p.flags + tile_index;
      float* slot = p.partials + int64_t(tile_index) * kTileFloats;
      if (slice > 0) {
        block_wait_flag(flag, slice);
        add_partial(acc, slot);
      }
      if (slice + 1 < p.splits) {
        store_partial(acc, slot);
        block_set_flag(flag, slice + 1);
      } else {
        store(acc, p, M, N, m0, n0, warp_m0, warp_n0, lane, smem);
        block_set_flag(flag, 0);
      }
    } else if constexpr (Cfg::kSplit == kSplitParallel) {
      if (reduce_parallel(acc, p, tiles_m * tiles_n)) store(acc, p, M, N, m0, n0, warp_m0, warp_n0, lane, smem);
    } else {
      store(acc, p, M, N, m0, n0, warp_m0, warp_n0, lane, smem);
    }
  }
};

}  // namespace rlgemm::sm80
