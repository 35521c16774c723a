// expect: accepted
// Tensor cores through inline PTX: mma.sync.m16n8k16 (fp16 in, fp32 accumulators) on 32x32 tiles of C, four
// warps of 16x16 each (two m16n8 products). A and B are staged through shared memory as M x K and N x K tiles
// with zero padding, so that any M, and N and K that are multiples of 8, work in both layouts.
constexpr int TM = 32, TN = 32, TK = 16, PAD = 8;

// Two consecutive halves of a row in shared memory: the lower index in the lower 16 bits, as mma.sync reads them.
__device__ inline uint32_t half_pair(const half* p) { return *reinterpret_cast<const uint32_t*>(p); }

extern "C" __global__ void __launch_bounds__(128) mma_gemm(const half* a, const half* b, half* c, int64_t m,
                                                           int64_t n, int64_t k, int tn) {
  __shared__ __align__(16) half as[TM][TK + PAD];  // A's tile, rows of K
  __shared__ __align__(16) half bs[TN][TK + PAD];  // B's tile as N x K, whichever layout B has
  const int64_t m0 = int64_t(blockIdx.y) * TM, n0 = int64_t(blockIdx.x) * TN;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = (warp / 2) * 16, wn = (warp % 2) * 16;  // the warp's 16x16 of the tile
  const int g = lane / 4, t = lane % 4;                  // the fragment layouts' group and thread in group
  float acc[2][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += TK) {
    for (int e = threadIdx.x; e < TM * TK; e += 128) {
      const int r = e / TK, q = e % TK;
      const int64_t gm = m0 + r, gn = n0 + r, gk = k0 + q;
      as[r][q] = gm < m && gk < k ? a[gm * k + gk] : __float2half(0.f);
      bs[r][q] = gn < n && gk < k ? (tn ? b[gn * k + gk] : b[gk * n + gn]) : __float2half(0.f);
    }
    __syncthreads();
    // A (16x16, row-major): rows g and g + 8, columns 2t, 2t + 1 and 2t + 8, 2t + 9.
    const uint32_t fa0 = half_pair(&as[wm + g][2 * t]), fa1 = half_pair(&as[wm + g + 8][2 * t]),
                   fa2 = half_pair(&as[wm + g][2 * t + 8]), fa3 = half_pair(&as[wm + g + 8][2 * t + 8]);
    for (int h = 0; h < 2; ++h) {
      // B (16x8, column-major): column g, rows 2t, 2t + 1 and 2t + 8, 2t + 9.
      const int col = wn + h * 8 + g;
      const uint32_t fb0 = half_pair(&bs[col][2 * t]), fb1 = half_pair(&bs[col][2 * t + 8]);
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
          "{%0, %1, %2, %3};\n"
          : "+f"(acc[h][0]), "+f"(acc[h][1]), "+f"(acc[h][2]), "+f"(acc[h][3])
          : "r"(fa0), "r"(fa1), "r"(fa2), "r"(fa3), "r"(fb0), "r"(fb1));
    }
    __syncthreads();
  }
  // C (16x8, fp32): rows g (values 0, 1) and g + 8 (values 2, 3), columns 2t and 2t + 1.
  for (int h = 0; h < 2; ++h)
    for (int v = 0; v < 4; ++v) {
      const int64_t row = m0 + wm + g + (v / 2) * 8, col = n0 + wn + h * 8 + 2 * t + v % 2;
      if (row < m && col < n) c[row * n + col] = __float2half(acc[h][v]);
    }
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  const dim3 grid(unsigned((p->n + TN - 1) / TN), unsigned((p->m + TM - 1) / TM));
  mma_gemm<<<grid, 128, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0);
  return int(cudaGetLastError());
}
