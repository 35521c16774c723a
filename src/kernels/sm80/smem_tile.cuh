// A shared-memory tile of ROWS rows, each CHUNKS 16-byte chunks (8 fp16) long, laid out so that the
// accesses the kernel makes are free of bank conflicts:
//   - 8 lanes of an ldmatrix phase read the same logical chunk of 8 consecutive rows;
//   - 8 consecutive threads of a cp.async phase write consecutive chunks of a row (or of adjacent rows).
// Swizzled: the chunk index is XOR-ed with a function of the row so that those 8 reads land in 8
// distinct 16-byte bank groups of a 128-byte line. Padded: each row is one chunk longer, which shifts
// successive rows by one bank group.
#pragma once

#include "common/types.cuh"

namespace rlgemm::sm80 {

template <int ROWS, int CHUNKS, bool SWIZZLE>
struct SmemTile {
  static_assert(CHUNKS >= 1 && (CHUNKS & (CHUNKS - 1)) == 0, "chunks per row must be a power of two");
  static constexpr int kRowBytes = CHUNKS * 16 + (SWIZZLE ? 0 : 16);
  static constexpr int kBytes = ROWS * kRowBytes;
  // Rows that share one 128-byte line, and how many chunk positions the XOR permutes.
  static constexpr int kRowsPerLine = CHUNKS >= 8 ? 1 : 8 / CHUNKS;
  static constexpr int kXorSpan = CHUNKS >= 8 ? 8 : CHUNKS;

  // Byte offset of logical (row, chunk).
  __device__ __forceinline__ static int offset(int row, int chunk) {
    if (SWIZZLE) chunk ^= (row / kRowsPerLine) % kXorSpan;
    return row * kRowBytes + chunk * 16;
  }
};

}  // namespace rlgemm::sm80
