// The by-value parameter of every generated sm90 kernel, and the shared-memory budget of a configuration.
// Read by the device code (NVRTC) and by the host code that fills it (src/generate/sm90_family.cpp), so it
// uses nothing but the core language.
#pragma once

// Callable from host code and, under NVRTC or nvcc, from device code.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RLGEMM_SM90_HD __host__ __device__
#else
#define RLGEMM_SM90_HD
#endif

namespace rlgemm {
namespace sm90 {

// Opaque bytes of a CUtensorMap (the driver requires 64-byte alignment).
struct alignas(64) TensorMapBytes {
  unsigned long long words[16];
};

// Everything is in the kernel's view: with swap_ab the kernel computes D = C^T (kernel M = problem N,
// kernel N = problem M) from A' = B^T and B' = A^T, and writes D[i][j] to C[j][i].
struct alignas(64) Params {
  TensorMapBytes a;     // kernel A operand, M x K (K-major box {min(BK,64), rows} or MN-major box {64, k-rows})
  TensorMapBytes b;     // kernel B operand, N x K (K-major) or K x N (MN-major)
  TensorMapBytes c;     // C for the TMA-store epilogue: dims {N, M}, box {64, rows of one consumer warpgroup}
  void* c_ptr;          // fp16 C, row-major M x N in the problem's view
  float* partials;      // split-K fp32 partials per (tile, consumer warpgroup): one slot (serial), one per split
                        // (parallel); stream-K: one per (CTA of the grid, consumer warpgroup that owns rows)
  int* semaphores;      // split-K: one int per (tile, consumer warpgroup); stream-K: one flag per partial slot;
                        // zero between launches
  int* ticket;          // serial split-K, stream-K: the counter clusters draw their tickets from; zero between
                        // launches (the last cluster to draw resets it)
  int m;                // kernel-view rows
  int n;                // kernel-view columns
  int k;
  int ldc;              // elements between rows of C (problem N)
};

// Tile-level constants both sides derive the same way.
struct Shape {
  int bm, bn, bk, stages;
  bool pingpong;
  bool epilogue_tma;
  bool split_columns = false;  // cooperative: the two consumer warpgroups split the tile's columns, not its rows
};

RLGEMM_SM90_HD constexpr int consumer_warpgroups() { return 2; }
RLGEMM_SM90_HD constexpr int threads_per_block() { return 128 * (1 + consumer_warpgroups()); }
// The persistent grid's units of work along one dimension of the kernel's view: tiles of `tile` rounded up to
// whole clusters of `cluster` CTAs (the kernel walks cluster tiles: gemm.cuh's ctiles_m and ctiles_n).
RLGEMM_SM90_HD constexpr long long cluster_tiles_along(long long extent, int tile, int cluster) {
  return ((extent + tile - 1) / tile + cluster - 1) / cluster;
}
// Rows and columns of the tile that one consumer warpgroup owns: a ping-pong warpgroup the whole tile, a
// cooperative one half of its rows, or half of its columns (split_columns).
RLGEMM_SM90_HD constexpr int warpgroup_rows(const Shape& s) { return s.pingpong || s.split_columns ? s.bm : s.bm / 2; }
RLGEMM_SM90_HD constexpr int warpgroup_cols(const Shape& s) { return s.split_columns ? s.bn / 2 : s.bn; }
// Consumer warpgroups that share one tile: each owns a band of its rows (or columns), and a split-K or stream-K
// partial slot of its own.
RLGEMM_SM90_HD constexpr int warpgroups_per_tile(const Shape& s) { return s.pingpong ? 1 : consumer_warpgroups(); }
RLGEMM_SM90_HD constexpr int stage_bytes(const Shape& s) { return (s.bm + s.bn) * s.bk * 2; }
// The opt-in shared memory per block of an H100 or H200 (227 KiB): the budget the kernel's layout is chosen for.
RLGEMM_SM90_HD constexpr int smem_per_block() { return 232448; }
RLGEMM_SM90_HD constexpr int barrier_bytes(const Shape& s) { return 2 * s.stages * 8 + 16 * 4; }
// The TMA-store epilogue stages 64-column chunks of a consumer warpgroup's rows and stores each by TMA. A chunk
// spans the warpgroup's rows, unless the pipeline's stages leave too little room for those chunks: then each
// chunk is one m64 block of rows (a 64x64 piece; more stores, an eighth to a quarter of the staging).
RLGEMM_SM90_HD constexpr int whole_rows_epilogue_buffers(const Shape& s) {
  return s.pingpong || warpgroup_cols(s) < 128 ? 1 : 2;
}
// Where the TMA-store epilogue's staging starts, from the 1024-byte aligned base: past the stages, rounded up to
// 1024 bytes. Its chunks are 128-byte swizzled, and a TMA store reads the swizzle from address bits 4..9, so each
// chunk starts on 1024 bytes. The stages end on 1024 bytes except where BK is 32 (64-byte rows, 512-byte swizzle
// atoms): (BM + BN) x 64 bytes a stage, so a BN of 8 mod 16 with an odd stage count ends 512 bytes short.
RLGEMM_SM90_HD constexpr int epilogue_offset(const Shape& s) {
  return s.epilogue_tma ? (s.stages * stage_bytes(s) + 1023) / 1024 * 1024 : s.stages * stage_bytes(s);
}
// Dynamic shared memory to request with `epilogue` bytes of staging: 1024 bytes of slack to align the swizzled
// tiles to 1024 bytes, the stages (rounded up to 1024 bytes), the staging, the barriers.
RLGEMM_SM90_HD constexpr int smem_bytes_with(const Shape& s, int epilogue) {
  return 1024 + epilogue_offset(s) + epilogue + barrier_bytes(s);
}
RLGEMM_SM90_HD constexpr bool whole_rows_epilogue_fits(const Shape& s) {
  return smem_bytes_with(s, consumer_warpgroups() * whole_rows_epilogue_buffers(s) * warpgroup_rows(s) * 64 * 2) <=
         smem_per_block();
}
// Rows of one staged chunk (and of the TMA-store box).
RLGEMM_SM90_HD constexpr int epilogue_rows(const Shape& s) {
  return whole_rows_epilogue_fits(s) ? warpgroup_rows(s) : 64;
}
// Chunks a consumer warpgroup stages per tile.
RLGEMM_SM90_HD constexpr int epilogue_chunks(const Shape& s) {
  return warpgroup_cols(s) / 64 * (warpgroup_rows(s) / epilogue_rows(s));
}
// Cooperative warpgroups double-buffer the chunks (the store of one overlaps the writing of the next) where they
// stage at least two; ping-pong warpgroups use one buffer each, since the other warpgroup's MMAs already hide
// their epilogue.
RLGEMM_SM90_HD constexpr int epilogue_buffers(const Shape& s) {
  return whole_rows_epilogue_fits(s) ? whole_rows_epilogue_buffers(s) : (s.pingpong || epilogue_chunks(s) < 2 ? 1 : 2);
}
RLGEMM_SM90_HD constexpr int epilogue_bytes(const Shape& s) {
  return s.epilogue_tma ? consumer_warpgroups() * epilogue_buffers(s) * epilogue_rows(s) * 64 * 2 : 0;
}
// Dynamic shared memory to request.
RLGEMM_SM90_HD constexpr int smem_bytes(const Shape& s) { return smem_bytes_with(s, epilogue_bytes(s)); }

// Rows of a K-major operand tile of `tile_rows` rows that each of the `parts` CTAs of a cluster loads and
// multicasts (the rows of its TMA box). A part starts on a whole swizzle atom of 8 rows, so where tile_rows / parts
// is not a multiple of 8 (BN 168: 84) the parts round up to one (88) and the last starts tile_rows - part_rows
// rows in (80): the parts overlap by parts x part_rows - tile_rows rows, which arrive twice with the same bytes.
RLGEMM_SM90_HD constexpr int multicast_part_rows(int tile_rows, int parts) {
  return parts <= 1 ? tile_rows : (tile_rows / parts + 7) / 8 * 8;
}
// The first row of part `part` (part * part_rows where the parts divide the tile evenly).
RLGEMM_SM90_HD constexpr int multicast_part_first_row(int tile_rows, int parts, int part) {
  const int rows = multicast_part_rows(tile_rows, parts);
  return parts * rows == tile_rows || part * rows < tile_rows - rows ? part * rows : tile_rows - rows;
}
// Rows a CTA receives of such a tile per k-atom: the tile's, and the overlap again.
RLGEMM_SM90_HD constexpr int multicast_rows_received(int tile_rows, int parts) {
  return parts * multicast_part_rows(tile_rows, parts);
}

}  // namespace sm90
}  // namespace rlgemm
