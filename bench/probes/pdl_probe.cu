// How much of a small kernel's time in a CUDA graph is the gap between kernels, and how much programmatic
// dependent launch (PDL) takes back. A chain of N launches of one small kernel is captured in a graph,
// plainly and as programmatic dependents; each replay is timed with events, per launch.
//
//   nvcc -O3 -arch=sm_90a -o pdl_probe bench/probes/pdl_probe.cu && ./pdl_probe
//
// The kernel does `before` iterations of register work, waits for the previous grid (griddepcontrol.wait),
// lets the next grid launch (griddepcontrol.launch_dependents), then does `after` iterations and writes one
// word per thread: `before` stands for a GEMM's prologue (barrier setup, descriptor prefetch), `after` for its
// main loop and epilogue.
// A second table puts each launch after another small kernel that knows nothing of PDL (as a GEMM in a model
// follows a norm or an activation): there only the launch, not the neighbour's tail, can be overlapped.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda_check.h"

__global__ void work(float* out, int before, int after, int pdl) {
  float x = threadIdx.x * 1e-3f;
  for (int i = 0; i < before; ++i) x = x * 0.999f + 1e-4f;
  if (pdl) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;");
  }
  x += out[blockIdx.x * blockDim.x + threadIdx.x] * 1e-9f;
  for (int i = 0; i < after; ++i) x = x * 0.999f + 1e-4f;
  out[blockIdx.x * blockDim.x + threadIdx.x] = x;
}

__global__ void spin(long long ns) {
  long long t0 = clock64();
  while (clock64() - t0 < ns * 2) {
  }
}

// A kernel that does not trigger its dependents early: the next grid may start only as its blocks exit.
__global__ void other(float* out) { out[(1 << 21) + blockIdx.x * blockDim.x + threadIdx.x] += 1.0f; }

// `between`: an `other` launch (plain) before each launch of `work`.
float time_chain(cudaStream_t s, float* out, int blocks, int before, int after, bool pdl, int n, bool between = false) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < n; ++i) {
    if (between) other<<<blocks, 128, 0, s>>>(out);
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(128);
    cfg.stream = s;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr.val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = pdl ? 1 : 0;
    CHECK(cudaLaunchKernelEx(&cfg, work, out, before, after, int(pdl)));
  }
  CHECK(cudaStreamEndCapture(s, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  std::vector<float> per;
  for (int r = 0; r < 12; ++r) {
    spin<<<1, 1, 0, s>>>(30000);
    CHECK(cudaEventRecord(a, s));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaEventRecord(b, s));
    CHECK(cudaStreamSynchronize(s));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    if (r >= 2) per.push_back(ms * 1000.f / n);  // with `between`: per pair of launches
  }
  std::sort(per.begin(), per.end());
  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  return per[per.size() / 2];
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# %s, %d SMs; us per launch in a graph of 200 launches, median of 10 replays\n", prop.name,
              prop.multiProcessorCount);
  float* out;
  CHECK(cudaMalloc(&out, 1 << 24));
  CHECK(cudaMemset(out, 0, 1 << 24));
  cudaStream_t s;
  CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::printf("blocks,before,after,plain_us,pdl_us,ratio\n");
  const int blocks_list[] = {1, 16, 132, 264};
  const int work_list[][2] = {{0, 0}, {0, 200}, {200, 200}, {500, 500}, {0, 2000}};
  for (int blocks : blocks_list)
    for (auto& w : work_list) {
      // Interleaved: plain, pdl, plain, pdl; the medians of each kind.
      float p[2], q[2];
      for (int rep = 0; rep < 2; ++rep) {
        p[rep] = time_chain(s, out, blocks, w[0], w[1], false, 200);
        q[rep] = time_chain(s, out, blocks, w[0], w[1], true, 200);
      }
      const float plain = std::min(p[0], p[1]), pdl = std::min(q[0], q[1]);
      std::printf("%d,%d,%d,%.3f,%.3f,%.3f\n", blocks, w[0], w[1], plain, pdl, plain / pdl);
    }
  std::printf("\n# each launch of work after a plain small kernel (us per pair)\n");
  std::printf("blocks,before,after,plain_us,pdl_us,ratio\n");
  for (int blocks : blocks_list)
    for (auto& w : work_list) {
      float p[2], q[2];
      for (int rep = 0; rep < 2; ++rep) {
        p[rep] = time_chain(s, out, blocks, w[0], w[1], false, 200, true);
        q[rep] = time_chain(s, out, blocks, w[0], w[1], true, 200, true);
      }
      const float plain = std::min(p[0], p[1]), pdl = std::min(q[0], q[1]);
      std::printf("%d,%d,%d,%.3f,%.3f,%.3f\n", blocks, w[0], w[1], plain, pdl, plain / pdl);
    }
  return 0;
}
