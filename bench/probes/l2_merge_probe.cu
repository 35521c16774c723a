// Which SMs' reads of the same bytes does the L2 side merge? One CTA per SM (persistent, as the GEMM kernels
// run) streams a region of global memory into shared memory with bulk async copies (the TMA engine, as the
// GEMM's loads), a ring of four 16 KiB chunks in flight. Which region a CTA reads is set by a rule on its SM
// number or its block index, so that chosen groups of SMs read the same region at about the same moment:
//
//   smid_div G    region = smid / G      (G = 1: every SM its own; 2: the two SMs of a TPC share one)
//   smid_mod S    region = smid % S      (SMs S apart share one)
//   block_div G   region = blockIdx / G  (consecutive blocks share one; with --cluster 2 a cluster's pair)
//   gpc_div G     region = (the SM's GPC on an H100 SXM: TPCs 16 apart below SM 64, 14 apart above, as clusters
//                 of 8 show) x 64 + (the SM's rank in its GPC) / G: G SMs of one GPC share a region
//   cluster_mod V region = (cluster index % V) x C + rank in the cluster: clusters V apart read the same regions,
//                 as a GEMM's clusters V apart read the same A tiles under raster_m.gV
//   ticket_div G  region = ticket / G    (the ticket is the CTA's place in the order of arrival, an atomic
//                                          counter: CTAs that start together share one)
//
// --cluster C launches clusters of C CTAs; --spread adds the cluster scheduling policy "spread". --tensor loads
// with 2D tensor-map copies as the GEMM loads a K-major A tile: a region is 128 rows of a 4096-column fp16 matrix
// (1 MiB), read in boxes of 64 columns x 128 rows with the 128-byte swizzle (16 KiB), k-block after k-block.
//
// Under Nsight Compute, the L2's sector reads for the SMs (lts__t_sectors_srcunit_tex_op_read) and what the L2
// request coalescer read (lrc__lts2lrc_sectors_op_read) against the bytes delivered say which sharing the
// hardware merges. The program prints the SM of each block, the rule's group sizes, and the kernel's time.
//
//   nvcc -O3 -arch=sm_90a -o l2_merge_probe bench/probes/l2_merge_probe.cu -lcuda
//   ncu --metrics lts__t_sectors_srcunit_tex_op_read.sum,lrc__lts2lrc_sectors_op_read.sum,gpu__time_duration.sum \
//       --launch-skip 1 --launch-count 1 ./l2_merge_probe smid_div 2
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cuda_check.h"

constexpr int kChunk = 16384;  // bytes per bulk copy
constexpr int kSlots = 4;      // copies in flight per CTA
constexpr int kSmemBytes = 120 * 1024;  // more than half an SM's shared memory: one CTA per SM

enum Rule { kSmidDiv = 0, kSmidMod = 1, kBlockDiv = 2, kTicketDiv = 3, kGpcDiv = 4, kClusterMod = 5 };
constexpr int kTensorRows = 128, kTensorCols = 4096, kTensorBoxCols = 64;  // --tensor: a region, and one box

// An H100 SXM's SM numbering as clusters of 8 CTAs reveal it (a cluster stays in one GPC): below SM 64 a GPC's
// TPCs are 16 apart (SMs 2g, 2g+1, 2g+16, ...), from SM 64 on 14 apart.
__device__ __forceinline__ int gpc_of(int smid) { return smid < 64 ? (smid / 2) % 8 : 8 + ((smid - 64) / 2) % 7; }
__device__ __forceinline__ int rank_in_gpc(int smid) {
  return smid < 64 ? (smid / 16) * 2 + smid % 2 : ((smid - 64) / 14) * 2 + smid % 2;
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ unsigned cluster_size() {
  unsigned n;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
  return n;
}

__global__ void read_regions(const char* src, long long region_bytes, int regions, int passes, int rule,
                             int value, int* smid_out, int* region_out, unsigned long long* start_out, int* ticket,
                             const __grid_constant__ CUtensorMap map, int tensor) {
  extern __shared__ __align__(1024) char smem_raw[];
  // 1024-byte aligned slots: the 128-byte swizzle of a tensor copy is a function of address bits 4..9.
  char* const smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  __shared__ __align__(8) unsigned long long bars[kSlots];
  if (threadIdx.x != 0) return;
  unsigned smid;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
  unsigned long long start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  int region = rule == kSmidDiv    ? static_cast<int>(smid) / value
             : rule == kSmidMod    ? static_cast<int>(smid) % value
             : rule == kBlockDiv   ? static_cast<int>(blockIdx.x) / value
             : rule == kGpcDiv     ? gpc_of(static_cast<int>(smid)) * 64 + rank_in_gpc(static_cast<int>(smid)) / value
             : rule == kClusterMod ? static_cast<int>(blockIdx.x / cluster_size() % value * cluster_size() +
                                                      blockIdx.x % cluster_size())
                                   : atomicAdd(ticket, 1) / value;
  region %= regions;
  smid_out[blockIdx.x] = static_cast<int>(smid);
  region_out[blockIdx.x] = region;
  start_out[blockIdx.x] = start;
  for (int s = 0; s < kSlots; ++s)
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bars[s])));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const char* base = src + static_cast<long long>(region) * region_bytes;
  const long long per_pass = tensor ? kTensorCols / kTensorBoxCols : region_bytes / kChunk;
  const long long chunks = per_pass * passes;
  unsigned phase[kSlots] = {0, 0, 0, 0};
  for (long long c = 0; c < chunks + kSlots; ++c) {
    const int slot = static_cast<int>(c % kSlots);
    const unsigned bar = smem_addr(&bars[slot]);
    if (c >= kSlots) {  // the copy issued kSlots chunks ago into this slot has landed
      asm volatile(
          "{\n.reg .pred p;\nWAIT:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT;\n}" ::"r"(bar),
          "r"(phase[slot])
          : "memory");
      phase[slot] ^= 1;
    }
    if (c < chunks) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(kChunk) : "memory");
      if (tensor) {
        const int col = static_cast<int>(c % per_pass) * kTensorBoxCols, row = region * kTensorRows;
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
                smem_addr(smem + slot * kChunk)),
            "l"(&map), "r"(bar), "r"(col), "r"(row)
            : "memory");
      } else {
        const char* from = base + (c % per_pass) * kChunk;
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                smem_addr(smem + slot * kChunk)),
            "l"(from), "r"(kChunk), "r"(bar)
            : "memory");
      }
    }
  }
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s smid_div|smid_mod|block_div|gpc_div|cluster_mod|ticket_div VALUE [--cluster C] [--spread] "
                 "[--tensor] [--region-kib K] [--passes P]\n",
                 argv[0]);
    return 2;
  }
  const std::string rule_name = argv[1];
  const int value = std::atoi(argv[2]);
  const int rule = rule_name == "smid_div" ? kSmidDiv : rule_name == "smid_mod" ? kSmidMod
                 : rule_name == "block_div" ? kBlockDiv : rule_name == "ticket_div" ? kTicketDiv
                 : rule_name == "gpc_div" ? kGpcDiv : rule_name == "cluster_mod" ? kClusterMod : -1;
  if (rule < 0 || value < 1) {
    std::fprintf(stderr, "unknown rule '%s' or VALUE < 1\n", argv[1]);
    return 2;
  }
  int cluster = 1, region_kib = 512, passes = 8;
  bool spread = false, tensor = false;
  for (int i = 3; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--spread")) spread = true;
    else if (!std::strcmp(argv[i], "--tensor")) tensor = true;
    else if (i + 1 < argc && !std::strcmp(argv[i], "--cluster")) cluster = std::atoi(argv[++i]);
    else if (i + 1 < argc && !std::strcmp(argv[i], "--region-kib")) region_kib = std::atoi(argv[++i]);
    else if (i + 1 < argc && !std::strcmp(argv[i], "--passes")) passes = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "unknown or incomplete option '%s'\n", argv[i]);
      return 2;
    }
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int blocks = prop.multiProcessorCount / cluster * cluster;
  const long long region_bytes =
      tensor ? static_cast<long long>(kTensorRows) * kTensorCols * 2 : static_cast<long long>(region_kib) * 1024;
  const int regions = 16 * 64;  // every SM its own, whichever rule
  char* src;
  int *smid, *region, *ticket;
  unsigned long long* start_ns;
  CHECK(cudaMalloc(&src, region_bytes * regions));
  CHECK(cudaMemset(src, 1, region_bytes * regions));
  CUtensorMap map{};
  if (tensor) {
    const cuuint64_t dims[2] = {kTensorCols, static_cast<cuuint64_t>(kTensorRows) * regions};
    const cuuint64_t strides[1] = {kTensorCols * 2};
    const cuuint32_t box[2] = {kTensorBoxCols, kTensorRows}, element_strides[2] = {1, 1};
    const CUresult r = cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, src, dims, strides, box,
                                              element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                              CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                              CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
      std::fprintf(stderr, "cuTensorMapEncodeTiled failed: %d\n", static_cast<int>(r));
      return 1;
    }
  }
  CHECK(cudaMalloc(&smid, blocks * sizeof(int)));
  CHECK(cudaMalloc(&region, blocks * sizeof(int)));
  CHECK(cudaMalloc(&start_ns, blocks * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&ticket, sizeof(int)));
  CHECK(cudaFuncSetAttribute(read_regions, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));

  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(128);
  config.dynamicSmemBytes = kSmemBytes;
  cudaLaunchAttribute attributes[2];
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = cluster;
  attributes[0].val.clusterDim.y = 1;
  attributes[0].val.clusterDim.z = 1;
  attributes[1].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
  attributes[1].val.clusterSchedulingPolicyPreference = cudaClusterSchedulingPolicySpread;
  config.attrs = attributes;
  config.numAttrs = cluster > 1 ? (spread ? 2 : 1) : 0;
  cudaEvent_t start, stop;
  CHECK(cudaEventCreate(&start));
  CHECK(cudaEventCreate(&stop));
  std::vector<float> ms;
  for (int launch = 0; launch < 6; ++launch) {  // the first warms up
    CHECK(cudaMemset(ticket, 0, sizeof(int)));
    CHECK(cudaEventRecord(start));
    CHECK(cudaLaunchKernelEx(&config, read_regions, static_cast<const char*>(src), region_bytes, regions, passes, rule,
                             value, smid, region, start_ns, ticket, map, tensor ? 1 : 0));
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, start, stop));
    if (launch > 0) ms.push_back(t);
  }
  std::vector<int> h_smid(blocks), h_region(blocks);
  std::vector<unsigned long long> h_start(blocks);
  CHECK(cudaMemcpy(h_start.data(), start_ns, blocks * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(h_smid.data(), smid, blocks * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(h_region.data(), region, blocks * sizeof(int), cudaMemcpyDeviceToHost));
  std::map<int, int> readers;  // region -> CTAs reading it
  for (int r : h_region) ++readers[r];
  std::map<int, int> group_sizes;  // readers per region -> regions
  for (auto [r, n] : readers) ++group_sizes[n];
  std::sort(ms.begin(), ms.end());
  const double delivered_mb = double(blocks) * region_bytes * passes / 1e6;
  std::printf("rule %s %d cluster %d%s%s: %d blocks, %.1f MB delivered, median %.3f ms (%.0f GB/s delivered)\n",
              rule_name.c_str(), value, cluster, spread ? " spread" : "", tensor ? " tensor" : "", blocks, delivered_mb, ms[ms.size() / 2],
              delivered_mb / ms[ms.size() / 2]);
  std::printf("  regions by readers:");
  for (auto [n, count] : group_sizes) std::printf(" %d regions x %d", count, n);
  const unsigned long long first = *std::min_element(h_start.begin(), h_start.end());
  std::printf("\n  block:smid:region:start_ns");
  for (int b = 0; b < blocks; ++b) std::printf(" %d:%d:%d:%llu", b, h_smid[b], h_region[b], h_start[b] - first);
  std::printf("\n");
  return 0;
}
