// Warp-specialized, persistent Hopper HGEMM: D[M,N] = A[M,K] * B[K,N], fp16 in, fp32 accumulate, fp16 out.
//
//   warpgroup 0      producer: one thread issues TMA loads of A and B k-blocks into a ring of kStages
//                    shared-memory stages; full[s] completes when a stage's bytes have landed, empty[s]
//                    when every consumer that reads it (in every CTA of the cluster) is done with it.
//   warpgroups 1, 2  consumers: wgmma from the ring into fp32 registers, then the epilogue.
//                    cooperative: both work on one BM x BN tile, BM/2 rows each.
//                    ping-pong:   they take alternate tiles, so one's epilogue overlaps the other's MMAs.
//
// The grid is persistent (at most one CTA per SM); CTAs walk the work units (cluster tile x K slice) with a
// grid stride, in a grouped raster order that keeps the A and B panels of concurrently running tiles in L2.
// A cluster of CM x CN CTAs (CM, CN in 1, 2, 4; at most 4 CTAs): the CTAs of a cluster column (same tile column)
// share B tiles, those of a cluster row share A tiles; each CTA loads its part of a shared tile and multicasts it
// to its row or column. A 2x2 cluster shares both operands, so each CTA loads half of its A and half of its B.
// The producer and the consumers of a CTA walk the same unit sequence (Schedule, work_unit).
//
// K reductions across CTAs, in the epilogue, through an fp32 workspace whose flags are zero between launches:
//   serial split-K    slices of a tile add into one slot in split order, behind a per-tile semaphore. One
//                     cluster per unit (the grid is not persistent), and the unit is the cluster's ticket.
//   parallel split-K  every slice parks its partial; the last to arrive sums all slices in slice order.
//   stream-K          data-parallel waves of whole tiles, then each remaining tile cut at the same k-blocks
//                     into pieces for the clusters (partition in sm90/stream_k.h). A segment that stops
//                     inside a tile (a contributor; only a cluster's last segment can be one) stores its
//                     partial in its cluster's slot and raises the slot's flag (release). The segment that
//                     ends the tile after a cut (the finisher; always its cluster's first stream-K segment)
//                     waits for the flags of the earlier clusters that hold the rest of the tile (acquire),
//                     adds their partials, latest first, zeroes slots and flags, and writes C.
// Waiting CTAs never assume that the CTAs they wait for are resident: a cluster that waits (serial split-K,
// stream-K) takes its place in the schedule from a ticket it draws when it starts (an atomic counter in the
// workspace), and waits only on smaller tickets, whose clusters are already running and wait only on
// smaller tickets still. Other launches sharing the GPU (other streams, other processes) cannot deadlock it.
//
// Ragged edges cost nothing special: TMA loads zero-fill outside the matrices, the TMA store clips, and
// register stores are bounds-checked. K need only be a multiple of 8 (16-byte rows for TMA).
//
// A /pdl design (kPdl) is launched as a programmatic dependent of the previous kernel in its stream: its CTAs
// prefetch the tensor maps (kernel parameters) and set up their barriers while that kernel finishes, and wait
// for it before the first global access (the ticket, TMA loads, the workspace, C): ptx/grid_dependency.cuh.
//
// The configuration is a struct of compile-time constants (see Sm90Config below); the generator writes one
// per design.
#pragma once

#include "common/sync.cuh"
#include "common/tile_order.cuh"
#include "ptx/grid_dependency.cuh"
#include "ptx/sm90.cuh"
#include "sm90/params.h"
#include "sm90/stream_k.h"

namespace rlgemm {
namespace sm90 {

enum SplitMode : int { kSplitNone = 0, kSplitSerial = 1, kSplitParallel = 2, kSplitStreamK = 3 };

// Expected members of a configuration (all static constexpr):
//   int kBM, kBN, kBK, kStages, kClusterM, kClusterN, kGroup, kSplits, kSplitMode;
//   bool kPingpong, kSplitColumns, kAMnMajor, kBMnMajor, kSwapAB, kRasterAlongN, kEpilogueTma;
//   int kStaticM, kStaticN, kStaticK;  // 0: taken from Params at run time
//   bool kPdl;                          // launched as a programmatic dependent
//   bool kBulkTail;                     // epi_tma: the last BN % 64 columns staged too, and stored row by row
//                                       // with bulk copies (else from registers)
//   int kEvictA, kEvictB;               // the L2 eviction hint of the A and B loads: 0 normal, 1 evict_first,
//                                       // 2 evict_last
template <class Cfg>
struct Gemm {
  typedef ptx::u32 u32;
  typedef ptx::u64 u64;

  static constexpr int kBM = Cfg::kBM, kBN = Cfg::kBN, kBK = Cfg::kBK, kStages = Cfg::kStages;
  static constexpr Shape kShape = {kBM, kBN, kBK, kStages, Cfg::kPingpong, Cfg::kEpilogueTma,
                                   Cfg::kSplitColumns};
  static constexpr int kThreads = threads_per_block();
  static constexpr int kWgRows = warpgroup_rows(kShape);  // rows of a tile one consumer warpgroup owns
  static constexpr int kWgCols = warpgroup_cols(kShape);  // and its columns: the wgmma N
  static constexpr int kMmaM = kWgRows / 64;              // m64 wgmma blocks per consumer warpgroup
  static constexpr int kAcc = kWgCols / 2;                // fp32 accumulators per thread per m64 block
  static constexpr int kClusterSize = Cfg::kClusterM * Cfg::kClusterN;
  // Warpgroups that share each tile (and each pipeline stage).
  static constexpr int kWgPerTile = warpgroups_per_tile(kShape);

  // Shared-memory tile layouts, 128-byte (or, for BK = 32, 64-byte) swizzle:
  //   K-major operand, R rows:    [BK/64 k-atoms][R rows][min(BK,64) k]   (one swizzle row = one tile row)
  //   MN-major operand, R cols:   [R/64 atoms][BK k-rows][64 m or n]
  static constexpr int kKRowBytes = (kBK < 64 ? kBK : 64) * 2;
  static constexpr int kKAtoms = kBK < 64 ? 1 : kBK / 64;
  static constexpr int kKSwizzle = kKRowBytes == 128 ? ptx::kSwizzle128B : ptx::kSwizzle64B;
  static constexpr int kATileBytes = kBM * kBK * 2;
  static constexpr int kBTileBytes = kBN * kBK * 2;
  static constexpr int kStageBytes = kATileBytes + kBTileBytes;
  // The TMA-store epilogue's staged chunk: 64 columns of the warpgroup's rows, or of one m64 block of them where
  // the pipeline leaves too little shared memory (params.h's epilogue_rows).
  static constexpr int kEpiRows = epilogue_rows(kShape);
  static constexpr int kEpiBufBytes = kEpiRows * 64 * 2;

  static_assert(kBM % 64 == 0 && kBM <= 256, "BM is a multiple of 64, at most 256");
  static_assert(Cfg::kPingpong || Cfg::kSplitColumns || kBM % 128 == 0,
                "cooperative tiles split BM into two multiples of 64");
  static_assert(!Cfg::kSplitColumns || (!Cfg::kPingpong && kWgCols % 8 == 0),
                "a cooperative tile split by columns gives each warpgroup BN/2 columns, a multiple of 8");
  static_assert(!Cfg::kSplitColumns || !Cfg::kBMnMajor || kWgCols % 64 == 0,
                "an MN-major B tile split by columns: each warpgroup takes whole 64-column swizzle atoms");
  static_assert(kBN % 8 == 0 && kBN >= 8 && kWgCols <= 256 && (Cfg::kSplitColumns || kBN <= 256),
                "BN is a multiple of 8 in [8, 256], or in [16, 512] for a tile split by columns (a wgmma N each)");
  static_assert(Cfg::kBMnMajor || multicast_part_rows(kBN, Cfg::kClusterM) <= 256,
                "a K-major B part is one TMA box of at most 256 rows");
  static_assert(kBK == 32 || kBK == 64 || kBK == 128, "BK is 32, 64 or 128");
  static_assert(kStages >= 2 && kStages <= 16, "2 to 16 stages");
  static_assert(kMmaM * kAcc <= 168, "at most 168 accumulator registers per thread");
  static_assert(!Cfg::kAMnMajor || kBK >= 32, "MN-major A needs k-rows for the swizzle");
  static_assert(!Cfg::kBMnMajor || kBN % 64 == 0, "MN-major B tiles are whole 64-column swizzle atoms");
  static_assert(!Cfg::kEpilogueTma || (kWgCols >= 64 && !Cfg::kSwapAB),
                "the TMA-store epilogue needs a warpgroup's columns at least 64, and no swap");
  // A warpgroup's columns the TMA-store epilogue stores in whole 64-column chunks; the rest (32 of the fitted
  // widths 96, 160, 224; 40 of 168) go out from registers.
  static constexpr int kTmaCols = kWgCols / 64 * 64;
  static constexpr int kEpiBuffers = epilogue_buffers(kShape);
  // /bulktail: those last columns staged in the same buffers (kTailCols x 2 bytes a row, unswizzled: 16-byte pieces)
  // and stored by the warpgroup's threads, one bulk copy per row and a row per thread, in whole 32-byte sectors
  // where a register store writes 16-byte pieces of them.
  static constexpr int kTailCols = kWgCols - kTmaCols;
  static constexpr bool kBulkTail = Cfg::kBulkTail;
  static_assert(!kBulkTail || (Cfg::kEpilogueTma && kTailCols > 0),
                "/bulktail stores the columns past a warpgroup's whole 64-column chunks: epi_tma, BN % 64 != 0");
  static_assert((Cfg::kClusterM == 1 || Cfg::kClusterM == 2 || Cfg::kClusterM == 4) &&
                    (Cfg::kClusterN == 1 || Cfg::kClusterN == 2 || Cfg::kClusterN == 4) && kClusterSize <= 4,
                "clusters of CM x CN CTAs, CM and CN 1, 2 or 4, at most 4 CTAs");

  // Multicast splits a shared tile between the CTAs of the cluster. CTA rank r sits at (r % CM, r / CM).
  static constexpr int kAParts = Cfg::kClusterN;  // A is shared by the CTAs along N (a cluster row)
  static constexpr int kBParts = Cfg::kClusterM;  // B by the CTAs along M (a cluster column)
  // The CTAs of cluster row rank_m, and of cluster column rank_n, as multicast masks.
  static __device__ __forceinline__ unsigned short cluster_row_mask(int rank_m) {
    unsigned short mask = 0;
#pragma unroll
    for (int j = 0; j < Cfg::kClusterN; ++j) mask |= static_cast<unsigned short>(1u << (rank_m + Cfg::kClusterM * j));
    return mask;
  }
  static __device__ __forceinline__ unsigned short cluster_column_mask(int rank_n) {
    return static_cast<unsigned short>(((1u << Cfg::kClusterM) - 1) << (Cfg::kClusterM * rank_n));
  }
  // The CTAs whose producers write into a CTA's stages, the same as those its own producer writes into: its
  // cluster row (A) and its cluster column (B). A stage's empty barrier waits for every consumer warpgroup of
  // each.
  static constexpr int kStageWriters = Cfg::kClusterM + Cfg::kClusterN - 1;
  static __device__ __forceinline__ bool in_row_or_column(int rank, int other) {
    return rank % Cfg::kClusterM == other % Cfg::kClusterM || rank / Cfg::kClusterM == other / Cfg::kClusterM;
  }
  // Bytes a stage's full barrier expects: the tiles, and the rows that overlapping parts of a K-major tile bring
  // twice (multicast_part_rows in sm90/params.h; MN-major tiles split their k-rows, which divide evenly).
  static constexpr int kStageTxBytes =
      kStageBytes +
      (Cfg::kAMnMajor ? 0 : (multicast_rows_received(kBM, kAParts) - kBM) * kKRowBytes * kKAtoms) +
      (Cfg::kBMnMajor ? 0 : (multicast_rows_received(kBN, kBParts) - kBN) * kKRowBytes * kKAtoms);

  static constexpr bool kStreamK = Cfg::kSplitMode == kSplitStreamK;
  static_assert(!kStreamK || Cfg::kSplits == 1, "stream-K divides k-blocks itself: kSplits is 1");

  // Serial split-K and stream-K clusters wait on each other: their place in the schedule is a ticket.
  static constexpr bool kTickets = kStreamK || Cfg::kSplitMode == kSplitSerial;

  // Draws this cluster's ticket (thread 0 of CTA rank 0; the caller synchronizes the cluster after it) into
  // `slot`, a word of CTA rank 0's shared memory. The cluster that draws the last ticket of the launch resets
  // the counter for the next launch: every cluster has drawn by then.
  static __device__ __forceinline__ void draw_ticket(int* counter, int clusters, u32 slot) {
    const int ticket = atomicAdd(counter, 1);
    if (ticket == clusters - 1) atomicExch(counter, 0);
    asm volatile("st.shared.u32 [%0], %1;" ::"r"(slot), "r"(ticket) : "memory");
  }

  // This CTA's cluster index in the schedule: its ticket, or its place in the grid. Read afresh (volatile)
  // wherever it is used, so that it need not stay live in a register across the main loop.
  static __device__ __forceinline__ int this_cluster(u32 ticket_slot) {
    if constexpr (kTickets) {
      if constexpr (kClusterSize > 1)
        return static_cast<int>(ptx::ld_shared_cluster_u32(ptx::map_to_cta(ticket_slot, 0)));
      else
        return static_cast<int>(ptx::ld_shared_u32(ticket_slot));
    } else {
      u32 cta;
      asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(cta));
      return static_cast<int>(cta) / kClusterSize;
    }
  }

  struct Work {
    int tile_m, tile_n;  // tile coordinates of this CTA
    int ctile;           // linear cluster-tile index, before the raster order
    int split;
    int kb_begin, kb_end;
  };

  // The work units one cluster walks, in order; the producer and both consumers walk the same sequence.
  //   split-K modes: units (cluster tile x K slice) with a grid stride;
  //   stream-K:      data-parallel tiles, then this cluster's stream-K segments (sm90/stream_k.h).
  struct Schedule {
    int ctiles_m, ctiles_n, k_blocks;
    int cluster_id;
    int units;          // units of this cluster
    StreamKCluster sk;  // stream-K only: this cluster's share
  };

  static __device__ __forceinline__ Schedule schedule(int ctiles_m, int ctiles_n, int k_blocks, int cluster_id,
                                                      int clusters) {
    Schedule s;
    s.ctiles_m = ctiles_m;
    s.ctiles_n = ctiles_n;
    s.k_blocks = k_blocks;
    s.cluster_id = cluster_id;
    if constexpr (kStreamK) {
      s.sk = stream_k_cluster(stream_k_partition(ctiles_m * ctiles_n, k_blocks, clusters), cluster_id);
      s.units = s.sk.units;
    } else {
      const int all = ctiles_m * ctiles_n * Cfg::kSplits;
      s.units = cluster_id < all ? (all - 1 - cluster_id) / clusters + 1 : 0;
    }
    return s;
  }

  // Unit `local` of this cluster. Grouped raster over cluster tiles (common/tile_order.cuh), so a wave of
  // CTAs covers a compact block of C; split-major, so that every tile's earlier slices come before its
  // later ones.
  static __device__ __forceinline__ Work work_unit(const Schedule& s, int local, int clusters, int rank_m,
                                                    int rank_n) {
    Work w;
    if constexpr (kStreamK) {
      const StreamKSegment seg = stream_k_unit(s.sk, s.cluster_id, local, s.k_blocks, clusters);
      w.ctile = seg.tile;
      w.split = 0;
      w.kb_begin = seg.kb_begin;
      w.kb_end = seg.kb_end;
    } else {
      const int ctiles = s.ctiles_m * s.ctiles_n;
      const int unit = s.cluster_id + local * clusters;
      w.split = unit / ctiles;
      w.ctile = unit - w.split * ctiles;
      w.kb_begin = static_cast<int>((static_cast<long long>(w.split) * s.k_blocks) / Cfg::kSplits);
      w.kb_end = static_cast<int>((static_cast<long long>(w.split + 1) * s.k_blocks) / Cfg::kSplits);
    }
    const TileCoord c = tile_of_block<!Cfg::kRasterAlongN>(w.ctile, s.ctiles_m, s.ctiles_n, Cfg::kGroup);
    w.tile_m = c.m * Cfg::kClusterM + rank_m;
    w.tile_n = c.n * Cfg::kClusterN + rank_n;
    return w;
  }

  // ---- producer -------------------------------------------------------------------------------------

  // One TMA load of an operand, with the operand's L2 eviction policy where it has one (kEvict 1 or 2).
  template <int kEvict, int kParts>
  static __device__ __forceinline__ void load_box(u32 to, const void* map, u32 bar, int c0, int c1,
                                                   unsigned short sharers, u64 policy) {
    if constexpr (kEvict != 0) {
      if constexpr (kParts > 1) ptx::tma_load_2d_multicast_hint(to, map, bar, c0, c1, sharers, policy);
      else ptx::tma_load_2d_hint(to, map, bar, c0, c1, policy);
    } else {
      if constexpr (kParts > 1) ptx::tma_load_2d_multicast(to, map, bar, c0, c1, sharers);
      else ptx::tma_load_2d(to, map, bar, c0, c1);
    }
  }

  // The policy of an operand's loads (l2_evict_policy), made once by the producer; 0 where it has none.
  template <int kEvict>
  static __device__ __forceinline__ u64 evict_policy() {
    if constexpr (kEvict != 0) return ptx::l2_evict_policy<kEvict>();
    else return 0;
  }

  // Loads one operand tile of R rows (K-major) or R columns (MN-major) for k-block kb, this CTA's part of
  // it when the tile is shared across the cluster.
  template <bool kMnMajor, int kRows, int kParts, int kEvict>
  static __device__ __forceinline__ void load_operand(u32 dst, const void* map, u32 bar, int row0, int k0,
                                                       int part, unsigned short sharers, u64 policy) {
    if constexpr (!kMnMajor) {
      // Parts start on whole swizzle atoms; where kRows / kParts is not a multiple of 8 they overlap
      // (multicast_part_rows in sm90/params.h), and the stage's expected bytes count the overlap (kStageTxBytes).
      const int first = multicast_part_first_row(kRows, kParts, part);
#pragma unroll
      for (int atom = 0; atom < kKAtoms; ++atom) {
        const u32 to = dst + atom * kRows * kKRowBytes + first * kKRowBytes;
        const int c0 = k0 + atom * 64, c1 = row0 + first;
        load_box<kEvict, kParts>(to, map, bar, c0, c1, sharers, policy);
      }
    } else {
      constexpr int kPartK = kBK / kParts;
#pragma unroll
      for (int atom = 0; atom < kRows / 64; ++atom) {
        const u32 to = dst + atom * kBK * 128 + part * kPartK * 128;
        const int c0 = row0 + atom * 64, c1 = k0 + part * kPartK;
        load_box<kEvict, kParts>(to, map, bar, c0, c1, sharers, policy);
      }
    }
  }

  // ---- consumer: MMA ----------------------------------------------------------------------------------

  // Descriptor of the 64 x 16 A block at rows [row0, row0+64) and the first k16 step of a stage; the other blocks
  // and steps add desc_a_step to it.
  static __device__ __forceinline__ u64 desc_a(u32 a_tile, int row0) {
    if constexpr (!Cfg::kAMnMajor)
      return ptx::smem_descriptor(a_tile + row0 * kKRowBytes, 16, 8 * kKRowBytes, kKSwizzle);
    else
      return ptx::smem_descriptor(a_tile + (row0 / 64) * kBK * 128, kBK * 128, 1024, ptx::kSwizzle128B);
  }

  // Descriptor of the 16 x kWgCols B block at columns [col0, col0 + kWgCols) and the first k16 step of a stage;
  // the other steps add desc_b_step to it.
  static __device__ __forceinline__ u64 desc_b(u32 b_tile, int col0) {
    if constexpr (!Cfg::kBMnMajor)
      return ptx::smem_descriptor(b_tile + col0 * kKRowBytes, 16, 8 * kKRowBytes, kKSwizzle);
    else
      return ptx::smem_descriptor(b_tile + (col0 / 64) * kBK * 128, kBK * 128, 1024, ptx::kSwizzle128B);
  }

  // What the m64 block mi and the k16 step kk add to desc_a(a, row0), and the step kk to desc_b(b, col0). A
  // descriptor's address field is the byte address >> 4 in bits 0-13, and shared memory lies below 256 KiB, so a
  // byte offset that is a multiple of 16 adds its >> 4 to the descriptor with no carry out of the field: each
  // k-block builds two descriptors, and each MMA adds a constant to them (the compiler folds nothing through the
  // field's mask).
  static constexpr u64 desc_a_step(int mi, int kk) {
    if constexpr (!Cfg::kAMnMajor) {
      const int k = kk * 16;
      return static_cast<u64>((k / 64) * kBM * kKRowBytes + mi * 64 * kKRowBytes + (k % 64) * 2) >> 4;
    } else {
      return static_cast<u64>(mi * kBK * 128 + kk * 16 * 128) >> 4;
    }
  }
  static constexpr u64 desc_b_step(int kk) {
    if constexpr (!Cfg::kBMnMajor) {
      const int k = kk * 16;
      return static_cast<u64>((k / 64) * kBN * kKRowBytes + (k % 64) * 2) >> 4;
    } else {
      return static_cast<u64>(kk * 16 * 128) >> 4;
    }
  }

  // ---- consumer: epilogue helpers ---------------------------------------------------------------------

  // Element (row, col) of D in the kernel's view, as an offset into C.
  static __device__ __forceinline__ long long c_offset(int row, int col, int ldc) {
    if constexpr (Cfg::kSwapAB) return static_cast<long long>(col) * ldc + row;
    else return static_cast<long long>(row) * ldc + col;
  }


  // Writes this thread's fragment of the warpgroup's columns [kFirstCol, kWgCols) to C, bounds-checked; pairs
  // of columns go out as one 4-byte store when C is not transposed.
  template <int kFirstCol = 0>
  static __device__ __forceinline__ void store_c(const float (&acc)[kMmaM][kAcc], element_bits* c, int row_base,
                                                 int col_base, int m, int n, int ldc, int lane) {
    static_assert(kFirstCol % 8 == 0, "whole 8-column blocks");
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi) {
#pragma unroll
      for (int j = kFirstCol / 8; j < kWgCols / 8; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = row_base + mi * 64 + h * 8;
          const int col = col_base + j * 8 + (lane % 4) * 2;
          const float v0 = acc[mi][4 * j + 2 * h], v1 = acc[mi][4 * j + 2 * h + 1];
          if constexpr (!Cfg::kSwapAB) {
            // n is a multiple of 8 and col even, so col < n implies col + 1 < n.
            if (row < m && col < n)
              *reinterpret_cast<u32*>(c + c_offset(row, col, ldc)) = pack_elements(v0, v1);
          } else {
            if (row < m && col < n) c[c_offset(row, col, ldc)] = to_element(v0);
            if (row < m && col + 1 < n) c[c_offset(row, col + 1, ldc)] = to_element(v1);
          }
        }
      }
    }
  }

  // stmatrix each whole 64-column chunk of the warpgroup's rows (or of each m64 block of them: kEpiRows) into a
  // swizzled buffer, then one thread stores it with TMA. A buffer is reused once the store kEpiBuffers chunks
  // back has read it. Columns past the last whole chunk (kTmaCols) are the caller's to store.
  static __device__ __forceinline__ void store_c_tma(const float (&acc)[kMmaM][kAcc], const Params& p, u32 bufs,
                                                     int row0, int col0, int m, int n, int wg_thread, u32 bar_id) {
    const int warp = wg_thread / 32, lane = wg_thread % 32;
    const int j = lane / 8;  // which of the four 8x8 matrices this lane addresses
    constexpr int kRowChunks = kWgRows / kEpiRows, kBlocksPerChunk = kMmaM / kRowChunks;
    constexpr int kChunks = kTmaCols / 64 * kRowChunks;
    static_assert(kChunks == epilogue_chunks(kShape), "the chunks params.h counts");
    constexpr int kAllChunks = kChunks + (kBulkTail ? kRowChunks : 0);  // a tile's staged chunks, the tail's too
    // Before chunk `chunk_index` is written into its buffer: thread 0 (whose bulk groups are one per chunk) waits
    // for the store kEpiBuffers - 1 chunks back, or for every store where the tile's first chunk reuses the buffer
    // of the previous tile's last one; the other threads (bulk groups of tail rows only) for all of theirs.
    auto wait_for_buffer = [&](int chunk_index) {
      if (wg_thread == 0) {
        if (chunk_index == 0 && kAllChunks % kEpiBuffers != 0) ptx::tma_store_wait_read<0>();
        else ptx::tma_store_wait_read<kEpiBuffers - 1>();
      } else if (kBulkTail) {
        ptx::tma_store_wait_read<0>();
      }
      ptx::named_barrier_sync(bar_id, 128);
    };
#pragma unroll
    for (int q = 0; q < kWgCols / 64; ++q) {
#pragma unroll
      for (int r = 0; r < kRowChunks; ++r) {
        const int chunk_index = q * kRowChunks + r;
        const u32 buf = bufs + (chunk_index % kEpiBuffers) * kEpiBufBytes;
        // Before a buffer is written again, the TMA store that last read it must be done reading. Within a
        // tile that store is kEpiBuffers - 1 groups back; the first chunk of a tile follows the previous
        // tile's last chunk, which used the same buffer when the chunk count is not a multiple of the buffer
        // count (3 chunks: buffers 0, 1, 0 | 0 ...): then every store must be done reading.
        wait_for_buffer(chunk_index);
#pragma unroll
        for (int b = 0; b < kBlocksPerChunk; ++b) {
          const int mi = r * kBlocksPerChunk + b;
          const int row = b * 64 + warp * 16 + (j & 1) * 8 + lane % 8;  // in the chunk
#pragma unroll
          for (int pair = 0; pair < 4; ++pair) {
            const int c = q * 8 + pair * 2;  // first of the two 8-column blocks
            const int col16 = pair * 2 + (j >> 1);
            const u32 addr = buf + row * 128 + ((col16 ^ (row % 8)) * 16);
            ptx::stmatrix_x4(addr, pack_elements(acc[mi][4 * c], acc[mi][4 * c + 1]),
                             pack_elements(acc[mi][4 * c + 2], acc[mi][4 * c + 3]),
                             pack_elements(acc[mi][4 * c + 4], acc[mi][4 * c + 5]),
                             pack_elements(acc[mi][4 * c + 6], acc[mi][4 * c + 7]));
          }
        }
        ptx::fence_proxy_async_smem();
        ptx::named_barrier_sync(bar_id, 128);
        if (wg_thread == 0) {
          ptx::tma_store_2d(&p.c, buf, col0 + q * 64, row0 + r * kEpiRows);
          ptx::tma_store_commit();
        }
      }
    }
    if constexpr (kBulkTail) {
      constexpr int kPitch = kTailCols * 2;  // bytes per staged row; conflict-free where kTailCols / 8 is odd
      constexpr int kBlocks = kTailCols / 8, kFirst = kTmaCols / 8;  // the tail's 8-column blocks
      const int col = col0 + kTmaCols;
#pragma unroll
      for (int r = 0; r < kRowChunks; ++r) {
        const u32 buf = bufs + ((kChunks + r) % kEpiBuffers) * kEpiBufBytes;
        wait_for_buffer(kChunks + r);
#pragma unroll
        for (int b = 0; b < kBlocksPerChunk; ++b) {
          const int mi = r * kBlocksPerChunk + b;
          const int row = b * 64 + warp * 16 + (j & 1) * 8 + lane % 8;  // in the chunk
#pragma unroll
          for (int t = 0; t + 1 < kBlocks; t += 2) {
            const int c = kFirst + t;
            ptx::stmatrix_x4(buf + row * kPitch + (t + (j >> 1)) * 16,
                             pack_elements(acc[mi][4 * c], acc[mi][4 * c + 1]),
                             pack_elements(acc[mi][4 * c + 2], acc[mi][4 * c + 3]),
                             pack_elements(acc[mi][4 * c + 4], acc[mi][4 * c + 5]),
                             pack_elements(acc[mi][4 * c + 6], acc[mi][4 * c + 7]));
          }
          if constexpr (kBlocks % 2 != 0) {
            const int c = kFirst + kBlocks - 1;
            ptx::stmatrix_x2(buf + row * kPitch + (kBlocks - 1) * 16,
                             pack_elements(acc[mi][4 * c], acc[mi][4 * c + 1]),
                             pack_elements(acc[mi][4 * c + 2], acc[mi][4 * c + 3]));
          }
        }
        ptx::fence_proxy_async_smem();
        ptx::named_barrier_sync(bar_id, 128);
        if (col < n) {
          // n and col are multiples of 8: whole 16-byte pieces, the part of the tail inside C.
          const u32 bytes = static_cast<u32>((n - col < kTailCols ? n - col : kTailCols) * 2);
          element_bits* const out = static_cast<element_bits*>(p.c_ptr);
          for (int rr = wg_thread; rr < kEpiRows; rr += 128) {
            const int grow = row0 + r * kEpiRows + rr;
            if (grow < m) ptx::bulk_store(out + c_offset(grow, col, p.ldc), buf + rr * kPitch, bytes);
          }
        }
        ptx::tma_store_commit();
      }
    }
  }

  // ---- the kernel body --------------------------------------------------------------------------------

  static __device__ __forceinline__ void run(const Params& p, char* smem_raw) {
    const int m = Cfg::kStaticM > 0 ? Cfg::kStaticM : p.m;
    const int n = Cfg::kStaticN > 0 ? Cfg::kStaticN : p.n;
    const int k = Cfg::kStaticK > 0 ? Cfg::kStaticK : p.k;

    // 1024-byte aligned base: the swizzle pattern is a function of address bits 4..9.
    const u32 raw = ptx::smem_addr(smem_raw);
    const u32 base = (raw + 1023u) & ~1023u;
    char* const base_ptr = smem_raw + (base - raw);
    const u32 epi_base = base + epilogue_offset(kShape);  // 1024-byte aligned: the staging is 128-byte swizzled
    const u32 bar_base = epi_base + epilogue_bytes(kShape);
    // Parallel split-K's "arrived last", one per consumer warpgroup.
    int* const flags = reinterpret_cast<int*>(base_ptr + (bar_base - base) + 2 * kStages * 8);
    // The cluster's ticket (serial split-K, stream-K), in CTA rank 0's copy of this word.
    const u32 ticket_slot = bar_base + 2 * kStages * 8 + 32;
    // Ping-pong: the two consumer warpgroups take turns at the main loop (turn_bar(w) completes when the
    // other warpgroup has finished its main loop). Besides keeping one warpgroup's MMAs from competing with
    // the other's, this keeps a warpgroup that skips the other's tile from running more than one ring ahead,
    // where a parity wait on a full barrier could not tell its phase from an older one.
    auto turn_bar = [&](int w) { return bar_base + 2 * kStages * 8 + 16 + w * 8; };
    auto full_bar = [&](int s) { return bar_base + s * 8; };
    auto empty_bar = [&](int s) { return bar_base + (kStages + s) * 8; };
    auto a_tile = [&](int s) { return base + s * kStageBytes; };
    auto b_tile = [&](int s) { return base + s * kStageBytes + kATileBytes; };

    const int warpgroup = threadIdx.x / 128;
    const int wg_thread = threadIdx.x % 128;
    const u32 rank = kClusterSize > 1 ? ptx::cluster_ctarank() : 0;
    // This CTA's place (rank % CM, rank / CM) in the cluster, said without arithmetic where the cluster is a line.
    const int rank_m = Cfg::kClusterM == 1 ? 0 : static_cast<int>(Cfg::kClusterN == 1 ? rank : rank % Cfg::kClusterM);
    const int rank_n = Cfg::kClusterN == 1 ? 0 : static_cast<int>(Cfg::kClusterM == 1 ? rank : rank / Cfg::kClusterM);

    if (threadIdx.x == 0) {
      ptx::prefetch_tensor_map(&p.a);
      ptx::prefetch_tensor_map(&p.b);
      if constexpr (Cfg::kEpilogueTma) ptx::prefetch_tensor_map(&p.c);
#pragma unroll
      for (int s = 0; s < kStages; ++s) {
        ptx::mbarrier_init(full_bar(s), 1);
        ptx::mbarrier_init(empty_bar(s), kWgPerTile * kStageWriters);
      }
      if constexpr (Cfg::kPingpong) {
        ptx::mbarrier_init(turn_bar(0), 1);
        ptx::mbarrier_init(turn_bar(1), 1);
      }
    }
    // Up to here only shared memory and the kernel parameters: the ticket is the first global access.
    ptx::GridDependency<Cfg::kPdl>::wait_then_launch_dependents();
    if (threadIdx.x == 0) {
      if constexpr (kTickets)
        if (rank == 0) draw_ticket(p.ticket, static_cast<int>(gridDim.x) / kClusterSize, ticket_slot);
      ptx::fence_mbarrier_init();
    }
    if constexpr (kClusterSize > 1) ptx::cluster_sync();
    else __syncthreads();

    const int tiles_m = (m + kBM - 1) / kBM, tiles_n = (n + kBN - 1) / kBN;
    const int ctiles_m = (tiles_m + Cfg::kClusterM - 1) / Cfg::kClusterM;
    const int ctiles_n = (tiles_n + Cfg::kClusterN - 1) / Cfg::kClusterN;
    const int k_blocks = (k + kBK - 1) / kBK;
    const int cluster_id = this_cluster(ticket_slot);
    const int clusters = gridDim.x / kClusterSize;
    const Schedule sched = schedule(ctiles_m, ctiles_n, k_blocks, cluster_id, clusters);

    if (warpgroup == 0) {
      // ---------------- producer ----------------
      ptx::setmaxnreg_dec<40>();
      if (wg_thread == 0) {
        const unsigned short a_sharers = cluster_row_mask(rank_m), b_sharers = cluster_column_mask(rank_n);
        const u64 a_policy = evict_policy<Cfg::kEvictA>(), b_policy = evict_policy<Cfg::kEvictB>();
        int stage = 0;
        u32 phase = 0;
        for (int local = 0; local < sched.units; ++local) {
          const Work w = work_unit(sched, local, clusters, rank_m, rank_n);
          for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {
            ptx::mbarrier_wait(empty_bar(stage), phase ^ 1);
            ptx::mbarrier_arrive_expect_tx(full_bar(stage), kStageTxBytes);
            load_operand<Cfg::kAMnMajor, kBM, kAParts, Cfg::kEvictA>(a_tile(stage), &p.a, full_bar(stage),
                                                                     w.tile_m * kBM, kb * kBK, rank_n, a_sharers,
                                                                     a_policy);
            load_operand<Cfg::kBMnMajor, kBN, kBParts, Cfg::kEvictB>(b_tile(stage), &p.b, full_bar(stage),
                                                                     w.tile_n * kBN, kb * kBK, rank_m, b_sharers,
                                                                     b_policy);
            if (++stage == kStages) { stage = 0; phase ^= 1; }
          }
        }
      }
    } else {
      // ---------------- consumers ----------------
      ptx::setmaxnreg_inc<232>();
      const int consumer = warpgroup - 1;
      const int warp = wg_thread / 32, lane = wg_thread % 32;
      // The consumer's index again, the same in every thread of a warp and said so by the shuffle, for what decides
      // the main loop's stages and rows of A: the compiler then keeps those in uniform registers and builds the
      // wgmma descriptors there, where wgmma reads them, instead of moving them there before every MMA. (All of
      // the consumer's code on it costs registers elsewhere: some designs spilled.)
      const int uniform_consumer = __shfl_sync(0xffffffffu, consumer, 0);
      const int row_in_tile = Cfg::kPingpong || Cfg::kSplitColumns ? 0 : uniform_consumer * kWgRows;
      const int col_in_tile = Cfg::kSplitColumns ? uniform_consumer * kWgCols : 0;
      const u32 epi_bar = 1 + consumer;  // named barrier of this warpgroup
      element_bits* const c = static_cast<element_bits*>(p.c_ptr);
      float acc[kMmaM][kAcc];

      int stage = 0;
      u32 phase = 0;
      u32 turn_phase = consumer == 0 ? 1 : 0;  // warpgroup 0 has the first turn
      for (int local = 0; local < sched.units; ++local) {
        const Work w = work_unit(sched, local, clusters, rank_m, rank_n);
        const int k_iters = w.kb_end - w.kb_begin;
        if (Cfg::kPingpong && (local % 2) != uniform_consumer) {
          // The other warpgroup's tile: skip its stages in the ring.
          stage += k_iters;
          phase ^= (stage / kStages) & 1;
          stage %= kStages;
          continue;
        }

#pragma unroll
        for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
          for (int i = 0; i < kAcc; ++i) acc[mi][i] = 0.f;

        if constexpr (Cfg::kPingpong) {
          // A wait on a phase the compiler takes for a per-thread value would put everything after it back in
          // vector registers. Stream-K keeps it so: its tile bookkeeping fills the uniform registers, and with
          // this wait uniform too the 128x128 tile spilled.
          if constexpr (kStreamK) ptx::mbarrier_wait(turn_bar(consumer), turn_phase);
          else ptx::mbarrier_wait(turn_bar(uniform_consumer), __shfl_sync(0xffffffffu, turn_phase, 0));
          turn_phase ^= 1;
        }
        int prev_stage = 0;
        for (int it = 0; it < k_iters; ++it) {
          ptx::mbarrier_wait(full_bar(stage), phase);
          ptx::wgmma_fence();
          const u64 da = desc_a(a_tile(stage), row_in_tile);
          const u64 db = desc_b(b_tile(stage), col_in_tile);
#pragma unroll
          for (int kk = 0; kk < kBK / 16; ++kk) {
#pragma unroll
            for (int mi = 0; mi < kMmaM; ++mi)
              ptx::Wgmma<kWgCols>::template mma<Cfg::kAMnMajor ? 1 : 0, Cfg::kBMnMajor ? 1 : 0>(
                  acc[mi], da + desc_a_step(mi, kk), db + desc_b_step(kk), 1);
          }
          ptx::wgmma_commit_group();
          if (it > 0) {
            // The previous k-block's MMAs are done: hand its stage back to the producers.
            ptx::wgmma_wait_group<1>();
            if (releases_to(rank, wg_thread)) release(empty_bar(prev_stage), wg_thread);
          }
          prev_stage = stage;
          if (++stage == kStages) { stage = 0; phase ^= 1; }
        }
        // Every full barrier of this tile has been waited on: the other warpgroup may start issuing its
        // MMAs right behind these.
        if constexpr (Cfg::kPingpong)
          if (wg_thread == 0) ptx::mbarrier_arrive(turn_bar(1 - consumer));
        // Unconditional, so that no path reaches the accumulators with MMAs in flight.
        ptx::wgmma_wait_group<0>();
        if (k_iters > 0 && releases_to(rank, wg_thread)) release(empty_bar(prev_stage), wg_thread);
#pragma unroll
        for (int mi = 0; mi < kMmaM; ++mi) ptx::fence_registers(acc[mi]);

        // ---------------- epilogue ----------------
        const int tile_index = (w.tile_m * (ctiles_n * Cfg::kClusterN) + w.tile_n) * kWgPerTile +
                               (Cfg::kPingpong ? 0 : consumer);
        bool write_c = true;
        if constexpr (Cfg::kSplitMode == kSplitSerial) {
          // Slices take the tile in split order (the semaphore holds the next slice's index) and carry the
          // running sum in an fp32 slot of the workspace, in fragment order: only the last slice rounds to
          // fp16, once, so the result is an fp32 accumulation whatever the number of slices.
          int* sem = p.semaphores + tile_index;
          float* const slot = p.partials + static_cast<long long>(tile_index) * kFragFloats;
          if (wg_thread == 0)
            while (load_acquire_gpu(sem) != w.split) {
            }
          ptx::named_barrier_sync(epi_bar, 128);
          if (w.split > 0) add_fragment(acc, slot, wg_thread);
          if (w.split + 1 < Cfg::kSplits) {
            store_fragment(acc, slot, wg_thread);
            __threadfence();
            ptx::named_barrier_sync(epi_bar, 128);
            if (wg_thread == 0) store_release_gpu(sem, w.split + 1);
            write_c = false;
          } else if (wg_thread == 0) {
            store_release_gpu(sem, 0);  // the last slice leaves the semaphore zeroed for the next launch
          }
        } else if constexpr (Cfg::kSplitMode == kSplitParallel) {
          // Every slice parks its fp32 fragment; the last to arrive sums all of them, in slice order, and
          // writes C. Whichever slice arrives last, the additions happen in the same order, so the output is
          // the same bits on every launch.
          float* const mine = p.partials + (static_cast<long long>(tile_index) * Cfg::kSplits + w.split) * kFragFloats;
          store_fragment(acc, mine, wg_thread);
          __threadfence();
          ptx::named_barrier_sync(epi_bar, 128);
          if (wg_thread == 0) {
            int* counter = p.semaphores + tile_index;
            const int arrived = atom_add_acq_rel_gpu(counter, 1);
            const int last = arrived == Cfg::kSplits - 1;
            if (last) *counter = 0;
            flags[consumer] = last;
          }
          ptx::named_barrier_sync(epi_bar, 128);
          write_c = flags[consumer] != 0;
          ptx::named_barrier_sync(epi_bar, 128);
          if (write_c) {
            // Sum the slices (this one's own slot too: its thread wrote it), and leave every slot zeroed:
            // the workspace must be all zeros between launches, whatever shape uses it next.
            __threadfence();
            float* const slots = p.partials + static_cast<long long>(tile_index) * Cfg::kSplits * kFragFloats;
            load_fragment(acc, slots, wg_thread);
            zero_fragment(slots, wg_thread);
            for (int s = 1; s < Cfg::kSplits; ++s) {
              add_fragment(acc, slots + static_cast<long long>(s) * kFragFloats, wg_thread);
              zero_fragment(slots + static_cast<long long>(s) * kFragFloats, wg_thread);
            }
          }
        } else if constexpr (kStreamK) {
          // Slot and flag of (cluster, CTA rank, warpgroup band): a cluster has at most one contributor segment.
          auto slot_of = [&](int cluster) {
            return (cluster * kClusterSize + static_cast<int>(rank)) * kWgPerTile + (Cfg::kPingpong ? 0 : consumer);
          };
          if (w.kb_end < k_blocks) {
            // A contributor: park the partial sum for the tile's finisher and publish it.
            const int mine = slot_of(this_cluster(ticket_slot));
            store_fragment(acc, p.partials + static_cast<long long>(mine) * kFragFloats, wg_thread);
            __threadfence();
            ptx::named_barrier_sync(epi_bar, 128);
            if (wg_thread == 0) store_release_gpu(p.semaphores + mine, 1);
            write_c = false;
          } else if (w.kb_begin > 0) {
            // The finisher: add the earlier clusters' partials, latest first, so the sum is the same bits on
            // every launch, and leave their slots and flags zeroed for the next launch. They drew smaller
            // tickets, so they are running already.
            // Worked out again here rather than kept from the start: held live across the main loop, it
            // makes ptxas spill in the larger tiles.
            const StreamK sk = stream_k_partition(ctiles_m * ctiles_n, k_blocks, clusters);
            for (int g = this_cluster(ticket_slot) - 1; stream_k_holds_earlier_part_of(sk, g, w.ctile); --g) {
              if (stream_k_idle(sk, g)) continue;
              const int peer = slot_of(g);
              if (wg_thread == 0) {
                while (load_acquire_gpu(p.semaphores + peer) != 1) {
                }
                p.semaphores[peer] = 0;
              }
              ptx::named_barrier_sync(epi_bar, 128);
              __threadfence();
              float* const slot = p.partials + static_cast<long long>(peer) * kFragFloats;
              add_fragment(acc, slot, wg_thread);
              zero_fragment(slot, wg_thread);
            }
          }
        }
        if (write_c) {
          // Computed here, after the fixups, so that they are not live (in registers) across them.
          const int row0 = w.tile_m * kBM + row_in_tile;  // first row of this warpgroup's part of the tile
          const int col0 = w.tile_n * kBN + col_in_tile;
          const int row_base = row0 + warp * 16 + lane / 4;
          if constexpr (Cfg::kEpilogueTma) {
            store_c_tma(acc, p, epi_base + consumer * kEpiBuffers * kEpiBufBytes, row0, col0, m, n, wg_thread,
                        epi_bar);
            // A fitted width's last BN % 64 columns: from registers, while the TMA stores drain (staged and
            // stored with the chunks under /bulktail).
            if constexpr (kTmaCols < kWgCols && !kBulkTail)
              store_c<kTmaCols>(acc, c, row_base, col0, m, n, p.ldc, lane);
          } else {
            store_c(acc, c, row_base, col0, m, n, p.ldc, lane);
          }
        }
      }
      // Every bulk group (every thread's tail rows too) done before the CTA's shared memory goes.
      if constexpr (Cfg::kEpilogueTma)
        if (kBulkTail || wg_thread == 0) ptx::tma_store_wait_all<0>();
    }
    // No CTA may leave while a peer can still multicast into its shared memory or arrive on its barriers.
    if constexpr (kClusterSize > 1) ptx::cluster_sync();
  }

  // The fp32 fragment of one consumer warpgroup in a workspace slot: thread t owns float4 t of every
  // 128-float4 row, so a slot is written and read back by the same threads with coalesced 16-byte accesses.
  static constexpr int kFragFloats = kMmaM * kAcc * 128;
  static __device__ __forceinline__ void store_fragment(const float (&acc)[kMmaM][kAcc], float* slot, int t) {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
      for (int i = 0; i < kAcc; i += 4)
        __stcg(reinterpret_cast<float4*>(slot + ((mi * kAcc + i) * 128 + t * 4)),
               make_float4(acc[mi][i], acc[mi][i + 1], acc[mi][i + 2], acc[mi][i + 3]));
  }
  static __device__ __forceinline__ void zero_fragment(float* slot, int t) {
    for (int i = 0; i < kMmaM * kAcc; i += 4)
      __stcg(reinterpret_cast<float4*>(slot + (i * 128 + t * 4)), make_float4(0.f, 0.f, 0.f, 0.f));
  }
  // Reads a slot back into the fragment: in place of its values (kAdd false) or added to them.
  template <bool kAdd>
  static __device__ __forceinline__ void read_fragment(float (&acc)[kMmaM][kAcc], const float* slot, int t) {
#pragma unroll
    for (int mi = 0; mi < kMmaM; ++mi)
#pragma unroll
      for (int i = 0; i < kAcc; i += 4) {
        const float4 v = __ldcg(reinterpret_cast<const float4*>(slot + ((mi * kAcc + i) * 128 + t * 4)));
        const float x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[mi][i + j] = kAdd ? acc[mi][i + j] + x[j] : x[j];
      }
  }
  static __device__ __forceinline__ void load_fragment(float (&acc)[kMmaM][kAcc], const float* slot, int t) {
    read_fragment<false>(acc, slot, t);
  }
  static __device__ __forceinline__ void add_fragment(float (&acc)[kMmaM][kAcc], const float* slot, int t) {
    read_fragment<true>(acc, slot, t);
  }

  // A consumer warpgroup is done reading a stage: one arrival on that stage's empty barrier in every CTA
  // whose producer writes into this CTA's copy of the stage (its cluster row and column). Thread r of the
  // warpgroup signals CTA r, so the arrivals go out in parallel.
  static __device__ __forceinline__ bool releases_to(u32 rank, int thread) {
    if constexpr (kClusterSize == 1) return thread == 0;
    else if constexpr (kStageWriters == kClusterSize) return thread < kClusterSize;  // a cluster row or column
    else return thread < kClusterSize && in_row_or_column(static_cast<int>(rank), thread);
  }
  static __device__ __forceinline__ void release(u32 empty, int rank) {
    if constexpr (kClusterSize == 1) ptx::mbarrier_arrive(empty);
    else ptx::mbarrier_arrive_cluster(empty, static_cast<u32>(rank));
  }
};

}  // namespace sm90
}  // namespace rlgemm

// The generated translation unit defines Sm90Config and then writes
//   extern "C" __global__ void __launch_bounds__(384, 1) NAME(const __grid_constant__ rlgemm::sm90::Params p) {
//     extern __shared__ char smem[]; rlgemm::sm90::Gemm<Sm90Config>::run(p, smem); }
