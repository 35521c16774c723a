// The handle's use of SASS-rescheduled cubins (HandleOptions::optimized_cubins) on a GPU (skipped without
// one): a recorded cubin serves exactly the (shape, layout, design) it was measured on, and one derived from
// another build of the kernel is refused as stale, and one whose gain did not hold in CUDA graphs (or was never
// re-timed there) is not used.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/cuda_util.h"
#include "rlgemm/rlgemm.h"
#include "run/gemm_kernel.h"
#include "store/store.h"
#include "support/gpu.h"

namespace rlgemm {
namespace {

class HandleSassGpu : public test::GpuTestWithDir {};

// Runs C = A * B through the handle on random inputs; returns the largest error against an fp64 reference,
// relative to the reference's largest magnitude.
double run_relative_error(Handle& handle, const Problem& p) {
  const int64_t M = p.shape.m, N = p.shape.n, K = p.shape.k;
  std::mt19937_64 rng(M * 7 + N);
  std::normal_distribution<float> normal;
  std::vector<half> a(M * K), b(K * N), c(M * N);
  for (auto& x : a) x = __float2half(normal(rng));
  for (auto& x : b) x = __float2half(normal(rng));
  void *da, *db, *dc;
  RLGEMM_CUDA_CHECK(cudaMalloc(&da, a.size() * 2));
  RLGEMM_CUDA_CHECK(cudaMalloc(&db, b.size() * 2));
  RLGEMM_CUDA_CHECK(cudaMalloc(&dc, c.size() * 2));
  RLGEMM_CUDA_CHECK(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  RLGEMM_CUDA_CHECK(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  RLGEMM_CUDA_CHECK(cudaMemset(dc, 0xff, c.size() * 2));  // NaN: every element must be written
  handle.hgemm(nullptr, M, N, K, static_cast<half*>(da), static_cast<half*>(db), p.layout, static_cast<half*>(dc));
  RLGEMM_CUDA_CHECK(cudaMemcpy(c.data(), dc, c.size() * 2, cudaMemcpyDeviceToHost));
  cudaFree(da), cudaFree(db), cudaFree(dc);
  double worst = 0, scale = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double ref = 0;
      for (int64_t k = 0; k < K; ++k)
        ref += double(__half2float(a[m * K + k])) *
               __half2float(p.layout == Layout::kNN ? b[k * N + n] : b[n * K + k]);
      const double got = __half2float(c[m * N + n]);
      worst = std::max(worst, std::isfinite(got) ? std::abs(got - ref) : INFINITY);
      scale = std::max(scale, std::abs(ref));
    }
  return worst / scale;
}

TEST_F(HandleSassGpu, UsesTheRecordedCubinOnlyWhereItWasMeasuredHeldInGraphsAndIsNotStale) {
  const bool hopper = device_.cc_major == 9 && device_.cc_minor == 0;
  const std::string text = hopper ? "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg"
                                  : "sm80/128x128x32/w64x64/s3/swz/raster_m.g8/splitk1/epi_reg";
  const Design design = parse_design(text);
  const Problem measured{{256, 384, 512}, Layout::kTN};
  const Problem stale{{256, 384, 1024}, Layout::kTN};
  const Problem other{{512, 384, 512}, Layout::kTN};
  // Rescheduled cubins whose gain did not hold in CUDA graphs: recorded without a graph re-time (as before
  // schedules were re-timed there), and with a graph interval that reaches below zero.
  const Problem offline_only{{256, 768, 512}, Layout::kTN};
  const Problem lost_in_graphs{{256, 1152, 512}, Layout::kTN};

  // The compiled kernel's own cubin stands in for a rescheduled one: what matters here is which cubin the
  // handle loads, and that it launches it with the design's plan.
  const GemmKernel compiled(design, measured, device_);
  const auto db = dir_ / "sass.db";
  {
    Store store(db);
    OptimizedCubin record;
    record.gpu_id = store.gpu_id(identity_of(device_));
    record.problem = measured;
    record.design = to_string(design);
    record.kernel = compiled.compiled().name;
    record.source_key = compiled.compiled().cache_key;
    record.cubin.assign(compiled.compiled().cubin.begin(), compiled.compiled().cubin.end());
    record.time_before_us = 10.0;
    record.time_after_us = 9.5;
    record.gain = 10.0 / 9.5 - 1;
    record.graph_gain = 0.04;
    record.graph_gain_low = 0.03;
    ASSERT_TRUE(store.put_optimized_cubin(record));
    record.problem = lost_in_graphs;
    record.graph_gain_low = -0.01;
    ASSERT_TRUE(store.put_optimized_cubin(record));
    record.problem = offline_only;
    record.graph_gain.reset();
    record.graph_gain_low.reset();
    ASSERT_TRUE(store.put_optimized_cubin(record));
    record.problem = stale;
    record.graph_gain = 0.04;
    record.graph_gain_low = 0.03;
    record.source_key = "from another build";
    ASSERT_TRUE(store.put_optimized_cubin(record));
  }
  const auto table = dir_ / "tuned.csv";
  {
    std::ofstream out(table);
    out << "gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto\n";
    for (const Problem& p : {measured, stale, other, offline_only, lost_in_graphs})
      out << device_.name << "," << p.shape.to_string() << ",tn," << text << ",10,1.1\n";
  }
  HandleOptions options;
  options.tuned_table = table.string();
  options.optimized_cubins = db.string();
  options.check_routes = false;  // the table's kernel on every shape: which cubin it loads is the question here
  Handle handle(options);

  EXPECT_EQ(handle.describe(256, 384, 512, Layout::kTN), "tuned " + text + " sass +5.3%");
  EXPECT_NE(handle.describe(256, 384, 1024, Layout::kTN).find("stale"), std::string::npos);
  EXPECT_EQ(handle.describe(512, 384, 512, Layout::kTN), "tuned " + text);
  EXPECT_EQ(handle.describe(256, 768, 512, Layout::kTN), "tuned " + text);
  EXPECT_EQ(handle.describe(256, 1152, 512, Layout::kTN), "tuned " + text);
  for (const Problem& p : {measured, stale, other, offline_only, lost_in_graphs})
    EXPECT_LT(run_relative_error(handle, p), 2e-3) << p.shape.to_string();
  const Stats s = handle.stats();
  EXPECT_EQ(s.tuned, 5u);
  EXPECT_EQ(s.sass_optimized, 1u);

  // "none" turns them off; a database that does not exist is refused by name.
  options.optimized_cubins = "none";
  EXPECT_EQ(Handle(options).describe(256, 384, 512, Layout::kTN), "tuned " + text);
  options.optimized_cubins = (dir_ / "missing.db").string();
  try {
    Handle missing(options);
    FAIL() << "a missing database was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("missing.db"), std::string::npos);
  }
}

}  // namespace
}  // namespace rlgemm
