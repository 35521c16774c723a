// GPU tests (skipped without a GPU): a CUDA graph's chain of kernels and memsets read back and launched again
// as recorded (run/recorded.h) does the recorded work -- a memset and a parallel split-K kernel's launches give
// the call's bits on the buffers they were recorded with -- and graphs that are not such a chain (work
// forked onto a second stream, a copy) are refused with the reason.
#include "run/recorded.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "run/gemm_kernel.h"
#include "support/gpu.h"

namespace rlgemm {
namespace {

struct Buffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit Buffer(size_t n) : bytes(n) { RLGEMM_CUDA_CHECK(cudaMalloc(&ptr, n)); }
  ~Buffer() { cudaFree(ptr); }
  Buffer(const Buffer&) = delete;
  std::vector<unsigned char> host() const {
    std::vector<unsigned char> out(bytes);
    RLGEMM_CUDA_CHECK(cudaMemcpy(out.data(), ptr, bytes, cudaMemcpyDeviceToHost));
    return out;
  }
};

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
};

struct Graph {
  cudaGraph_t g = nullptr;
  ~Graph() {
    if (g) cudaGraphDestroy(g);
  }
};

uint16_t fp16_bits(float x) {
  _Float16 h = _Float16(x);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}

TEST(GpuRecordedWork, AMemsetAndAKernelsLaunchesMadeAsRecordedGiveTheCallsBits) {
  RLGEMM_REQUIRE_GPU();
  const DeviceInfo device = open_device();
  CompileOptions options;
  const auto cache = std::filesystem::temp_directory_path() / ("rlgemm-recorded-test-" + std::to_string(::getpid()));
  options.cache_dir = cache;
  const Problem problem{{100, 200, 1000}, Layout::kTN};
  const GemmKernel kernel(parse_design("sm80/64x64x32/w32x32/s4/pad/raster_n.g8/splitk4.parallel/epi_smem"), problem,
                          device, options);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> a(size_t(problem.a_elems())), b(size_t(problem.b_elems()));
  for (auto& v : a) v = fp16_bits(normal(rng));
  for (auto& v : b) v = fp16_bits(normal(rng));
  Buffer da(a.size() * 2), db(b.size() * 2), dc(size_t(problem.c_elems()) * 2), marker(256);
  Buffer ws(std::max<size_t>(kernel.workspace_bytes(problem), 16));
  RLGEMM_CUDA_CHECK(cudaMemcpy(da.ptr, a.data(), da.bytes, cudaMemcpyHostToDevice));
  RLGEMM_CUDA_CHECK(cudaMemcpy(db.ptr, b.data(), db.bytes, cudaMemcpyHostToDevice));
  RLGEMM_CUDA_CHECK(cudaMemset(ws.ptr, 0, ws.bytes));
  const GemmOperands operands{da.ptr, db.ptr, dc.ptr, ws.ptr, ws.bytes};
  Stream stream;

  RLGEMM_CUDA_CHECK(cudaMemset(dc.ptr, 0x7f, dc.bytes));  // NaN in every element
  kernel.launch(stream.s, problem, operands);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.s));
  const std::vector<unsigned char> want = dc.host();

  Graph graph;
  RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream.s, cudaStreamCaptureModeThreadLocal));
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(marker.ptr, 0x5a, marker.bytes, stream.s));
  kernel.launch(stream.s, problem, operands);
  RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream.s, &graph.g));
  size_t nodes = 0;
  RLGEMM_CUDA_CHECK(cudaGraphGetNodes(graph.g, nullptr, &nodes));
  ASSERT_GE(nodes, 2u);
  std::string why;
  const auto ops = read_chain(graph.g, false, why);
  ASSERT_TRUE(ops) << why;
  ASSERT_EQ(ops->size(), nodes);
  EXPECT_FALSE((*ops)[0].kernel);
  for (size_t i = 1; i < ops->size(); ++i) {
    EXPECT_TRUE((*ops)[i].kernel);
    EXPECT_NE((*ops)[i].launch.function, nullptr);
    EXPECT_FALSE((*ops)[i].launch.params.empty());
  }
  // Capturing ran nothing: the marker and C are as they were.
  EXPECT_EQ(marker.host(), std::vector<unsigned char>(marker.bytes, 0)) << "capturing ran the memset";

  RLGEMM_CUDA_CHECK(cudaMemset(dc.ptr, 0x7f, dc.bytes));
  RLGEMM_CUDA_CHECK(cudaMemset(marker.ptr, 0, marker.bytes));
  launch_recorded(*ops, stream.s);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream.s));
  EXPECT_EQ(marker.host(), std::vector<unsigned char>(marker.bytes, 0x5a));
  EXPECT_TRUE(dc.host() == want) << "the recorded kernels' C differs from the call's";
  std::error_code ec;
  std::filesystem::remove_all(cache, ec);
}

TEST(GpuRecordedWork, WorkForkedOntoAnotherStreamIsNotAChain) {
  RLGEMM_REQUIRE_GPU();
  Buffer x(1024), y(1024);
  Stream main, side;
  cudaEvent_t fork = nullptr, join = nullptr;
  RLGEMM_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
  RLGEMM_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
  Graph graph;
  RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(main.s, cudaStreamCaptureModeThreadLocal));
  RLGEMM_CUDA_CHECK(cudaEventRecord(fork, main.s));
  RLGEMM_CUDA_CHECK(cudaStreamWaitEvent(side.s, fork));
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(x.ptr, 1, x.bytes, main.s));
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(y.ptr, 2, y.bytes, side.s));
  RLGEMM_CUDA_CHECK(cudaEventRecord(join, side.s));
  RLGEMM_CUDA_CHECK(cudaStreamWaitEvent(main.s, join));
  RLGEMM_CUDA_CHECK(cudaStreamEndCapture(main.s, &graph.g));
  std::string why;
  EXPECT_FALSE(read_chain(graph.g, false, why));
  EXPECT_NE(why.find("not a chain"), std::string::npos) << why;
  cudaEventDestroy(fork);
  cudaEventDestroy(join);
}

TEST(GpuRecordedWork, ACopyIsRefusedByName) {
  RLGEMM_REQUIRE_GPU();
  Buffer x(1024), y(1024);
  Stream stream;
  Graph graph;
  RLGEMM_CUDA_CHECK(cudaStreamBeginCapture(stream.s, cudaStreamCaptureModeThreadLocal));
  RLGEMM_CUDA_CHECK(cudaMemsetAsync(x.ptr, 1, x.bytes, stream.s));
  RLGEMM_CUDA_CHECK(cudaMemcpyAsync(y.ptr, x.ptr, x.bytes, cudaMemcpyDeviceToDevice, stream.s));
  RLGEMM_CUDA_CHECK(cudaStreamEndCapture(stream.s, &graph.g));
  std::string why;
  EXPECT_FALSE(read_chain(graph.g, false, why));
  EXPECT_NE(why.find("neither a kernel nor a memset"), std::string::npos) << why;
}

}  // namespace
}  // namespace rlgemm
