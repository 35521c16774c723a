// expect: accepted
// Tensor cores through WMMA: one warp per 16x16 tile of C, fp32 accumulators; tiles at the edges of a shape
// that is not a multiple of 16 are staged through shared memory with zero padding.
#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void wmma_gemm(const half* a, const half* b, half* c, int64_t m, int64_t n, int64_t k, int tn) {
  __shared__ __align__(32) half at[16 * 16], bt[16 * 16];
  __shared__ __align__(32) float ct[16 * 16];
  const int64_t m0 = int64_t(blockIdx.y) * 16, n0 = int64_t(blockIdx.x) * 16;
  const int lane = threadIdx.x;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.f);
  for (int64_t k0 = 0; k0 < k; k0 += 16) {
    for (int e = lane; e < 256; e += 32) {
      const int r = e / 16, q = e % 16;
      const int64_t gr = m0 + r, gk = k0 + q, gc = n0 + r;
      at[r * 16 + q] = gr < m && gk < k ? a[gr * k + gk] : __float2half(0.f);
      // bt holds B's tile as 16 (n) x 16 (k): column-major K x N for the fragment.
      bt[r * 16 + q] = gc < n && gk < k ? (tn ? b[gc * k + gk] : b[gk * n + gc]) : __float2half(0.f);
    }
    __syncwarp();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::load_matrix_sync(fa, at, 16);
    wmma::load_matrix_sync(fb, bt, 16);
    wmma::mma_sync(acc, fa, fb, acc);
    __syncwarp();
  }
  wmma::store_matrix_sync(ct, acc, 16, wmma::mem_row_major);
  __syncwarp();
  for (int e = lane; e < 256; e += 32) {
    const int64_t r = m0 + e / 16, col = n0 + e % 16;
    if (r < m && col < n) c[r * n + col] = __float2half(ct[e]);
  }
}

extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void*, size_t,
                             cudaStream_t stream) {
  const dim3 grid(unsigned((p->n + 15) / 16), unsigned((p->m + 15) / 16));
  wmma_gemm<<<grid, 32, 0, stream>>>((const half*)a, (const half*)b, (half*)c, p->m, p->n, p->k, p->layout == 0);
  return int(cudaGetLastError());
}
