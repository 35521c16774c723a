// Reading measurements: harness CSVs with their run JSON, and tuning databases.
#include "predict/sources.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "rlgemm/error.h"
#include "store/store.h"

namespace rlgemm::predict {
namespace {

struct Dir {
  Dir() : path(std::filesystem::temp_directory_path() / ("rlgemm-sources-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~Dir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

const char* kHeader = "M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_lt_auto,correct,time_min_us,time_max_us,samples,batch,detail\n";
const char* kDesign = "sm90.ws.coop/128x128x64/s5/c1x1/raster_m.g8/splitk1/epi_reg";

TEST(Sources, HarnessRowsWithTheirGpuAndLtAuto) {
  Dir dir;
  const auto csv = dir.path / "run.csv";
  std::ofstream(csv) << kHeader
                     << "64,64,64,tn,lt_auto,offline,8.000,0.06,1.0000,1,7,9,7,68,candidate 0 of 3 timed\n"
                     << "64,64,64,tn," << kDesign << ",offline,4.000,0.13,2.0000,1,4,4,7,131,regs=168\n"
                     << "64,64,64,tn,sm90.ws.coop/128x192x64/s4/c2x1/raster_m.g8/splitk1/epi_tma,offline,,,,0,0,0,0,1,wrong\n"
                     << "64,64,128,tn,rlgemm,server,5.000,0.2,1.6000,1,5,5,15,1,tuned " << kDesign << "\n"
                     << "64,64,256,tn,rlgemm,offline,5.000,0.2,1.5000,1,5,5,7,1,tuned " << kDesign << " sass +0.8%\n"
                     << "64,64,512,tn,rlgemm,offline,5.000,0.2,1.0000,1,5,5,7,1,cublaslt candidate 2\n"
                     << "64,128,64,tn,rlgemm,offline,6.000,0.2,0.5000,1,5,5,7,1,nearest " << kDesign << " (from 64;64;64)\n"
                     << "64,128,64,tn,cublas_tn,offline,9.000,0.2,0.9000,1,5,5,7,1,\n";
  EXPECT_THROW(samples_from_harness_csv(csv.string(), std::nullopt), Error);  // no JSON, no fallback
  std::ofstream(dir.path / "run.json") << R"({"gpu": {"name": "NVIDIA H100 80GB HBM3", "sm_count": 132, "compute_capability": "9.0"}})";
  const auto samples = samples_from_harness_csv(csv.string(), std::nullopt);
  ASSERT_EQ(samples.size(), 4u);  // lt_auto, the design, the server row, the nearest route
  EXPECT_EQ(samples[0].impl, "lt_auto");
  EXPECT_EQ(samples[0].gpu.name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(samples[0].gpu.cc_major, 9);
  EXPECT_EQ(samples[1].impl, kDesign);
  EXPECT_DOUBLE_EQ(samples[1].lt_us, 8.0);
  EXPECT_EQ(samples[2].mode, "server");
  EXPECT_EQ(samples[2].impl, kDesign);
  EXPECT_EQ(samples[3].problem.shape, (Shape{64, 128, 64}));
  EXPECT_DOUBLE_EQ(samples[3].lt_us, 3.0);
  // A run merged by `rlgemm summarize --out` names its GPU through the runs it merged.
  std::filesystem::copy_file(csv, dir.path / "merged.csv");
  std::ofstream(dir.path / "merged.json") << R"({"merged_from": [{"csv": "run.csv", "rows": 8, "run": {"gpu":
      {"name": "NVIDIA H200", "sm_count": 132, "compute_capability": "9.0"}}}]})";
  EXPECT_EQ(samples_from_harness_csv((dir.path / "merged.csv").string(), std::nullopt)[0].gpu.name, "NVIDIA H200");
  // The merged view: lt_auto of 64,128,64 comes from the design row's speedup.
  TrainReport report;
  const auto merged = merge_samples(samples, "offline", &report);
  EXPECT_EQ(report.other_mode_samples, 1u);
  EXPECT_EQ(report.lt_from_designs, 1u);
  EXPECT_EQ(merged.size(), 4u);
}

// Paired rows only: each design's sample carries lt_auto's time of its own rounds; an unpaired row (a reference
// timed apart) teaches nothing.
TEST(Sources, TuningDatabaseRowsWithTheReference) {
  Dir dir;
  const auto db = dir.path / "t.db";
  {
    Store store(db);
    GpuIdentity gpu{"NVIDIA H100 80GB HBM3", 132, 9, 0, 1980000, 2619000, 13000, 232448};
    const int64_t id = store.gpu_id(gpu);
    const Problem p{{256, 512, 1024}, Layout::kTN};
    store.put_reference(id, p, TimingMode::kOffline, TimingStats{12.0, 11.0, 13.0, 7});  // apart: never used
    MeasurementRecord r;
    r.gpu_id = id;
    r.problem = p;
    r.design = kDesign;
    r.measurement.status = MeasureStatus::kOk;
    r.measurement.timing = TimingStats{8.0, 7.5, 9.0, 7};
    r.measurement.paired = PairedGain{10.0, std::log(10.0 / 8.0), 0.2, 0.3, 15};
    store.record(r);
    r.design = "sm90.ws.pingpong/64x64x64/s8/c1x1/raster_m.g8/splitk1/epi_reg";
    r.measurement.status = MeasureStatus::kWrong;
    r.measurement.paired.reset();
    store.record(r);
    r.design = "sm90.ws.pingpong/128x64x64/s6/c1x1/raster_m.g8/splitk1/epi_reg";
    r.measurement.status = MeasureStatus::kOk;
    r.measurement.timing = TimingStats{6.0, 6.0, 6.0, 7};  // unpaired
    store.record(r);
  }
  const auto before = std::filesystem::last_write_time(db);
  const auto size = std::filesystem::file_size(db);
  const auto samples = samples_from_store(db.string());
  EXPECT_EQ(std::filesystem::last_write_time(db), before);  // read from a copy: the record stays as it was
  EXPECT_EQ(std::filesystem::file_size(db), size);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[0].impl, "lt_auto");
  EXPECT_DOUBLE_EQ(samples[0].time_us, 10.0);
  EXPECT_EQ(samples[1].impl, kDesign);
  EXPECT_DOUBLE_EQ(samples[1].lt_us, 10.0);
  EXPECT_EQ(samples[1].gpu.sm_count, 132);
  EXPECT_EQ(load_samples({db.string()}, std::nullopt).size(), 2u);
  EXPECT_THROW(samples_from_store((dir.path / "missing.db").string()), Error);
}

}  // namespace
}  // namespace rlgemm::predict
