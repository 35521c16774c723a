// The optimized_cubins table (schema version 2; graph gains since version 6): rescheduled cubins stored per (gpu, problem, design), the
// better one kept on a second write, and the migration that adds the table to a version-1 file.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "rlgemm/error.h"
#include "store/store.h"

namespace rlgemm {
namespace {

class OptimizedCubinsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rlgemm-optimized-cubins-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path file() const { return dir_ / "tune.db"; }
  std::filesystem::path dir_;
};

GpuIdentity h100() { return {"NVIDIA H100 80GB HBM3", 132, 9, 0, 1980000, 2619000, 13000, 232448}; }

const char* kDesign = "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma";

OptimizedCubin record(int64_t gpu, const Problem& p, double before, double after, uint8_t fill) {
  OptimizedCubin r;
  r.gpu_id = gpu;
  r.problem = p;
  r.design = kDesign;
  r.kernel = "rlgemm_kernel_tn";
  r.source_key = "0123abcd";
  // Bytes that a text column would cut short: NUL and high bytes must survive.
  r.cubin = {0x7f, 'E', 'L', 'F', 0x00, 0xff, fill, 0x00};
  r.time_before_us = before;
  r.time_after_us = after;
  r.gain = before / after - 1.0;
  r.moves = "LDS.128 R4,[R2] up\nLDG.E.128 R8,desc[UR4][R6.64] down";
  return r;
}

TEST_F(OptimizedCubinsTest, StoresAndReadsBackEveryField) {
  Store store(file());
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  const int64_t gpu = store.gpu_id(h100());
  const Problem p{{4096, 4096, 4096}, Layout::kTN};
  EXPECT_FALSE(store.optimized_cubin(gpu, p, kDesign));
  const OptimizedCubin in = record(gpu, p, 100.0, 90.0, 0x11);
  EXPECT_TRUE(store.put_optimized_cubin(in));
  const auto out = store.optimized_cubin(gpu, p, kDesign);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->cubin, in.cubin);
  EXPECT_EQ(out->kernel, in.kernel);
  EXPECT_EQ(out->source_key, in.source_key);
  EXPECT_DOUBLE_EQ(out->time_before_us, 100.0);
  EXPECT_DOUBLE_EQ(out->time_after_us, 90.0);
  EXPECT_DOUBLE_EQ(out->gain, in.gain);
  EXPECT_EQ(out->moves, in.moves);
  EXPECT_FALSE(out->created_at.empty());
  EXPECT_FALSE(out->graph_gain.has_value());  // not re-timed in CUDA graphs
  EXPECT_FALSE(out->graph_gain_low.has_value());
  // Another layout, shape or design is another key.
  EXPECT_FALSE(store.optimized_cubin(gpu, {{4096, 4096, 4096}, Layout::kNN}, kDesign));
  EXPECT_FALSE(store.optimized_cubin(gpu, {{4096, 4096, 2048}, Layout::kTN}, kDesign));
  EXPECT_FALSE(store.optimized_cubin(gpu, p, "sm90.ws.coop/128x256x64/s4/c1x1/raster_m.g8/splitk1/epi_tma"));
  EXPECT_EQ(store.integrity_check(), "ok");
}

// Schema version 6: the gain re-timed in CUDA graphs and its interval's lower bound, read back as written.
TEST_F(OptimizedCubinsTest, TheGraphGainIsStoredAndReadBack) {
  Store store(file());
  const int64_t gpu = store.gpu_id(h100());
  OptimizedCubin in = record(gpu, {{64, 4096, 4096}, Layout::kTN}, 10.0, 9.0, 0x22);
  in.graph_gain = 0.07;
  in.graph_gain_low = -0.002;
  ASSERT_TRUE(store.put_optimized_cubin(in));
  const auto out = store.optimized_cubin(gpu, in.problem, kDesign);
  ASSERT_TRUE(out);
  ASSERT_TRUE(out->graph_gain.has_value());
  EXPECT_DOUBLE_EQ(*out->graph_gain, 0.07);
  ASSERT_TRUE(out->graph_gain_low.has_value());
  EXPECT_DOUBLE_EQ(*out->graph_gain_low, -0.002);
  ASSERT_EQ(store.optimized_cubins(h100().name).size(), 1u);
  EXPECT_TRUE(store.optimized_cubins(h100().name)[0].graph_gain_low.has_value());
}

TEST_F(OptimizedCubinsTest, KeepsTheLargerGainOnASecondWrite) {
  Store store(file());
  const int64_t gpu = store.gpu_id(h100());
  const Problem p{{2048, 1024, 8192}, Layout::kNN};
  ASSERT_TRUE(store.put_optimized_cubin(record(gpu, p, 100.0, 95.0, 1)));
  EXPECT_FALSE(store.put_optimized_cubin(record(gpu, p, 100.0, 98.0, 2)));  // smaller gain: kept the first
  EXPECT_EQ(store.optimized_cubin(gpu, p, kDesign)->cubin[6], 1);
  EXPECT_TRUE(store.put_optimized_cubin(record(gpu, p, 100.0, 80.0, 3)));  // larger gain: replaced
  const auto now = store.optimized_cubin(gpu, p, kDesign);
  EXPECT_EQ(now->cubin[6], 3);
  EXPECT_DOUBLE_EQ(now->time_after_us, 80.0);
}

TEST_F(OptimizedCubinsTest, RefusesEmptyOrUnimprovedCubins) {
  Store store(file());
  const int64_t gpu = store.gpu_id(h100());
  const Problem p{{512, 512, 512}, Layout::kTN};
  OptimizedCubin empty = record(gpu, p, 100.0, 90.0, 0);
  empty.cubin.clear();
  EXPECT_THROW(store.put_optimized_cubin(empty), Error);
  try {
    store.put_optimized_cubin(record(gpu, p, 100.0, 100.0, 0));
    FAIL() << "a cubin with no gain was stored";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  }
  EXPECT_THROW(store.put_optimized_cubin(record(gpu, p, 100.0, 110.0, 0)), Error);
  EXPECT_FALSE(store.optimized_cubin(gpu, p, kDesign));
}

TEST_F(OptimizedCubinsTest, ListsEveryCubinOfAGpuByName) {
  Store store(file());
  const int64_t h100_id = store.gpu_id(h100());
  GpuIdentity other = h100();
  other.name = "NVIDIA H200";
  const int64_t h200_id = store.gpu_id(other);
  const Problem small{{1024, 1024, 1024}, Layout::kTN}, large{{8192, 8192, 8192}, Layout::kNN};
  ASSERT_TRUE(store.put_optimized_cubin(record(h100_id, large, 100.0, 90.0, 1)));
  ASSERT_TRUE(store.put_optimized_cubin(record(h100_id, small, 10.0, 9.0, 2)));
  ASSERT_TRUE(store.put_optimized_cubin(record(h200_id, small, 10.0, 8.0, 3)));

  const auto mine = store.optimized_cubins(h100().name);
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_EQ(mine[0].problem, small);  // ordered by shape
  EXPECT_EQ(mine[0].cubin[6], 2);
  EXPECT_EQ(mine[1].problem, large);
  EXPECT_EQ(mine[1].gpu_id, h100_id);
  EXPECT_EQ(mine[1].design, kDesign);
  EXPECT_DOUBLE_EQ(mine[1].gain, 100.0 / 90.0 - 1);
  EXPECT_EQ(store.optimized_cubins("NVIDIA H200").size(), 1u);
  EXPECT_TRUE(store.optimized_cubins("NVIDIA A100").empty());
}

TEST_F(OptimizedCubinsTest, MigratesAVersionOneFileKeepingItsRows) {
  int64_t gpu = 0;
  const Problem p{{1024, 1024, 1024}, Layout::kTN};
  {
    Store store(file());
    gpu = store.gpu_id(h100());
    MeasurementRecord m;
    m.gpu_id = gpu;
    m.problem = p;
    m.design = kDesign;
    m.measurement.status = MeasureStatus::kOk;
    m.measurement.timing = {10.0, 9.9, 10.5, 20};
    m.strategy = "rl";
    ASSERT_TRUE(store.record(m));
  }
  // A version-1 file is this schema without the table (and without the evaluations of version 4).
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE optimized_cubins; DROP TABLE evaluations; UPDATE schema_version SET version = 1", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  Store store(file());
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  EXPECT_EQ(store.count_measurements(), 1);
  EXPECT_EQ(store.gpu_id(h100()), gpu);
  EXPECT_TRUE(store.put_optimized_cubin(record(gpu, p, 50.0, 45.0, 7)));
  EXPECT_TRUE(store.optimized_cubin(gpu, p, kDesign));
  EXPECT_EQ(store.integrity_check(), "ok");
}

// A version-5 file's cubins were never re-timed in CUDA graphs: they come back without a graph gain.
TEST_F(OptimizedCubinsTest, AVersion5FileGainsTheGraphColumnsEmpty) {
  const Problem p{{1024, 1024, 1024}, Layout::kTN};
  int64_t gpu = 0;
  {
    Store store(file());
    gpu = store.gpu_id(h100());
    ASSERT_TRUE(store.put_optimized_cubin(record(gpu, p, 50.0, 45.0, 7)));
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db,
                         "ALTER TABLE optimized_cubins DROP COLUMN graph_gain; "
                         "ALTER TABLE optimized_cubins DROP COLUMN graph_gain_low; UPDATE schema_version SET version = 5",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);

  Store store(file());
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  const auto out = store.optimized_cubin(gpu, p, kDesign);
  ASSERT_TRUE(out);
  EXPECT_DOUBLE_EQ(out->time_after_us, 45.0);
  EXPECT_FALSE(out->graph_gain.has_value());
  EXPECT_FALSE(out->graph_gain_low.has_value());
  EXPECT_EQ(store.integrity_check(), "ok");
}

}  // namespace
}  // namespace rlgemm
