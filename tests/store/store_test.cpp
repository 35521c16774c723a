// The tuning database: schema and version, WAL, the best-design view, resume queries, and two processes
// writing one file at once.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "rlgemm/error.h"
#include "store/store.h"

namespace rlgemm {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rlgemm-store-test-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path file(const std::string& name = "tune.db") const { return dir_ / name; }
  std::filesystem::path dir_;
};

GpuIdentity h100() { return {"NVIDIA H100 80GB HBM3", 132, 9, 0, 1980000, 2619000, 13000, 232448}; }

// A measurement timed side by side with a reference of `ref` us in the same 15 rounds (an interval of +-1%).
MeasurementRecord ok_record(int64_t gpu, const Problem& p, const std::string& design, double us, double ref) {
  MeasurementRecord r;
  r.gpu_id = gpu;
  r.problem = p;
  r.design = design;
  r.measurement.status = MeasureStatus::kOk;
  r.measurement.source_hash = "abc";
  r.measurement.compile_seconds = 0.5;
  r.measurement.timing = {us, us * 0.99, us * 1.1, 50};
  r.reward = std::log(ref / us);
  r.measurement.paired = PairedGain{ref, r.reward, ref / us * 0.99 - 1, ref / us * 1.01 - 1, 15};
  r.strategy = "rl";
  return r;
}

// What an older tuner recorded: a time with no reference beside it.
MeasurementRecord unpaired_record(int64_t gpu, const Problem& p, const std::string& design, double us, double ref) {
  MeasurementRecord r = ok_record(gpu, p, design, us, ref);
  r.measurement.paired.reset();
  return r;
}

TEST_F(StoreTest, CreatesTheSchemaWithItsVersionInWalMode) {
  Store store(file());
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  EXPECT_EQ(store.journal_mode(), "wal");
  EXPECT_EQ(store.integrity_check(), "ok");
  // Reopening an existing database keeps it.
  const int64_t gpu = store.gpu_id(h100());
  Store again(file());
  EXPECT_EQ(again.gpu_id(h100()), gpu);
}

// The element type is part of a problem: the same shape in fp16 and bf16 keeps two references, two best
// designs and two sets of measurements.
TEST_F(StoreTest, Fp16AndBf16OfOneShapeAreTwoProblems) {
  Store store(file());
  const int64_t gpu = store.gpu_id(h100());
  const Problem fp16{{256, 512, 1024}, Layout::kTN};
  const Problem bf16{{256, 512, 1024}, Layout::kTN, DType::kBF16};
  const std::string design = "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg";
  store.put_reference(gpu, fp16, TimingMode::kOffline, {10, 10, 10, 5});
  store.put_reference(gpu, bf16, TimingMode::kOffline, {12, 12, 12, 5});
  EXPECT_TRUE(store.record(ok_record(gpu, fp16, design, 8, 10)));
  EXPECT_TRUE(store.record(ok_record(gpu, bf16, design + "/bf16", 6, 12)));
  EXPECT_DOUBLE_EQ(store.reference(gpu, fp16, TimingMode::kOffline)->median_us, 10);
  EXPECT_DOUBLE_EQ(store.reference(gpu, bf16, TimingMode::kOffline)->median_us, 12);
  EXPECT_EQ(store.count_measurements(gpu, fp16, TimingMode::kOffline), 1);
  EXPECT_EQ(store.count_measurements(gpu, bf16, TimingMode::kOffline), 1);
  EXPECT_FALSE(store.measured(gpu, fp16, design + "/bf16", TimingMode::kOffline));
  EXPECT_TRUE(store.measured(gpu, bf16, design + "/bf16", TimingMode::kOffline));
  const auto best = store.best(gpu, bf16, TimingMode::kOffline);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->problem, bf16);
  EXPECT_EQ(best->design, design + "/bf16");
  EXPECT_DOUBLE_EQ(*best->speedup, 2.0);
  EXPECT_EQ(store.measurements(gpu, bf16, TimingMode::kOffline).at(0).problem.dtype, DType::kBF16);
  EXPECT_EQ(store.best_designs().size(), 2u);
}

// A version-2 file (no element types, no evaluations) opens at the current version with its rows as fp16.
TEST_F(StoreTest, MigratesAVersion2FileToElementTypes) {
  const Problem p{{64, 128, 256}, Layout::kNN};
  const std::string design = "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg";
  int64_t gpu = 0;
  {
    Store store(file());
    gpu = store.gpu_id(h100());
    store.put_reference(gpu, p, TimingMode::kOffline, {10, 10, 10, 5});
    store.record(ok_record(gpu, p, design, 5, 10));
  }
  // Version 2's tables: no dtype column anywhere, the reference keyed without it.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file().c_str(), &db), SQLITE_OK);
  const char* to_v2 =
      "DROP VIEW best_designs;"
      "ALTER TABLE measurements DROP COLUMN dtype;"
      "ALTER TABLE optimized_cubins DROP COLUMN dtype;"
      "CREATE TABLE r2 (gpu_id INTEGER NOT NULL, m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,"
      "  layout TEXT NOT NULL, mode TEXT NOT NULL, median_us REAL NOT NULL, min_us REAL NOT NULL,"
      "  max_us REAL NOT NULL, samples INTEGER NOT NULL, created_at TEXT NOT NULL,"
      "  PRIMARY KEY (gpu_id, m, n, k, layout, mode));"
      "INSERT INTO r2 SELECT gpu_id, m, n, k, layout, mode, median_us, min_us, max_us, samples, created_at"
      "  FROM reference_times;"
      "DROP TABLE reference_times; ALTER TABLE r2 RENAME TO reference_times;"
      "DROP TABLE evaluations;"
      "UPDATE schema_version SET version = 2;";
  char* message = nullptr;
  ASSERT_EQ(sqlite3_exec(db, to_v2, nullptr, nullptr, &message), SQLITE_OK) << (message ? message : "");
  sqlite3_close(db);

  Store store(file());
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  EXPECT_EQ(store.integrity_check(), "ok");
  // The old row was timed apart from its reference: kept, but trusted by nothing.
  EXPECT_EQ(store.count_measurements(gpu, p, TimingMode::kOffline), 1);
  EXPECT_FALSE(store.best(gpu, p, TimingMode::kOffline));
  store.record(ok_record(gpu, p, design, 5, 10));
  const auto best = store.best(gpu, p, TimingMode::kOffline);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->problem.dtype, DType::kF16);
  EXPECT_DOUBLE_EQ(*best->speedup, 2.0);
  const Problem bf16{p.shape, p.layout, DType::kBF16};
  EXPECT_FALSE(store.reference(gpu, bf16, TimingMode::kOffline));
  store.put_reference(gpu, bf16, TimingMode::kOffline, {7, 7, 7, 5});
  EXPECT_DOUBLE_EQ(store.reference(gpu, p, TimingMode::kOffline)->median_us, 10);
}

// A database read as a record (a committed result, brought back whole in rollback-journal mode) is read from a
// private copy: the file stays byte for byte as it was, the copy is gone afterwards, and a missing file is an
// error rather than a new empty database.
TEST_F(StoreTest, AReadCopyLeavesTheFileAsItWas) {
  const Problem p{{64, 128, 256}, Layout::kTN};
  const std::string design = "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg";
  {
    Store store(file());
    store.record(ok_record(store.gpu_id(h100()), p, design, 5, 10));
  }
  {
    // As a file comes back from another machine: checkpointed, in rollback-journal mode, without -wal or -shm.
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(file().c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr), SQLITE_OK);
    sqlite3_close(db);
  }
  auto bytes = [](const std::filesystem::path& f) {
    std::ifstream in(f, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string before = bytes(file());
  const auto entries = [&] {
    return std::distance(std::filesystem::directory_iterator(dir_), std::filesystem::directory_iterator());
  };
  const auto files_before = entries();
  std::filesystem::path copy_dir;
  {
    StoreReadCopy copy(file());
    const auto best = copy->best_designs();
    ASSERT_EQ(best.size(), 1u);
    EXPECT_EQ(best[0].design, design);
    EXPECT_DOUBLE_EQ(*best[0].speedup, 2.0);
    copy_dir = copy->path().parent_path();
    EXPECT_NE(copy_dir, dir_);
    EXPECT_TRUE(std::filesystem::exists(copy_dir));
  }
  EXPECT_FALSE(std::filesystem::exists(copy_dir));
  EXPECT_EQ(bytes(file()), before);
  EXPECT_EQ(entries(), files_before);  // no -wal or -shm beside it either
  // Opening it as a Store, by contrast, switches the file to WAL: what the copy is for.
  { Store store(file()); }
  EXPECT_NE(bytes(file()), before);
  try {
    StoreReadCopy missing(file("missing.db"));
    FAIL() << "a missing database was opened";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("does not exist"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(file("missing.db")));
}

TEST_F(StoreTest, RejectsANewerSchemaAndForeignDatabases) {
  { Store store(file()); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file().c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE schema_version SET version = 99", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  try {
    Store store(file());
    FAIL() << "a newer schema was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
  }
  ASSERT_EQ(sqlite3_open(file("other.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t (x)", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  EXPECT_THROW(Store store(file("other.db")), Error);
}

TEST_F(StoreTest, RecordsOnceAndAnswersResumeQueries) {
  Store store(file());
  const int64_t gpu = store.gpu_id(h100());
  const Problem p{{1024, 2048, 512}, Layout::kTN};
  const std::string d = "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma";
  EXPECT_FALSE(store.measured(gpu, p, d, TimingMode::kOffline));
  EXPECT_TRUE(store.record(ok_record(gpu, p, d, 10.0, 12.0)));
  EXPECT_TRUE(store.measured(gpu, p, d, TimingMode::kOffline));
  EXPECT_FALSE(store.measured(gpu, p, d, TimingMode::kServer));
  EXPECT_FALSE(store.measured(gpu, {{1024, 2048, 512}, Layout::kNN}, d, TimingMode::kOffline));
  EXPECT_FALSE(store.record(ok_record(gpu, p, d, 9.0, 12.0)));  // same key: kept once, first value
  auto found = store.find(gpu, p, d, TimingMode::kOffline);
  ASSERT_TRUE(found);
  EXPECT_DOUBLE_EQ(found->measurement.timing.median_us, 10.0);
  EXPECT_EQ(found->measurement.status, MeasureStatus::kOk);
  EXPECT_EQ(found->strategy, "rl");
  EXPECT_FALSE(found->created_at.empty());
  EXPECT_EQ(store.count_measurements(gpu, p, TimingMode::kOffline), 1);
}

// A second measurement of a recorded design: the weaker of the two stands (the lower bound of the gain), its row
// marked confirmed; a second measurement that failed stands as the failure; nothing to confirm is refused.
TEST_F(StoreTest, AConfirmationKeepsTheWeakerMeasurement) {
  Store store(file());
  const int64_t gpu = store.gpu_id(h100());
  const Problem p{{1024, 2048, 512}, Layout::kTN};
  const std::string d = "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma";
  MeasurementRecord first = ok_record(gpu, p, d, 10.0, 12.0);  // 1.2x, against a reference in a slow state
  first.mode = TimingMode::kGraph;
  first.strategy = "route";
  ASSERT_TRUE(store.record(first));
  MeasurementRecord again = ok_record(gpu, p, d, 10.0, 10.3);   // 1.03x
  again.mode = TimingMode::kGraph;
  again.strategy = "confirm";
  const MeasurementRecord kept = store.confirm(again);
  EXPECT_DOUBLE_EQ(kept.measurement.paired->reference_us, 10.3);
  EXPECT_EQ(kept.strategy, std::string("route") + Store::kConfirmedSuffix);
  EXPECT_EQ(store.count_measurements(gpu, p, TimingMode::kGraph), 1);
  // A stronger second measurement leaves the first standing; the mark is not repeated.
  MeasurementRecord stronger = ok_record(gpu, p, d, 9.0, 12.0);
  stronger.mode = TimingMode::kGraph;
  EXPECT_DOUBLE_EQ(store.confirm(stronger).measurement.paired->reference_us, 10.3);
  EXPECT_EQ(store.find(gpu, p, d, TimingMode::kGraph)->strategy, std::string("route") + Store::kConfirmedSuffix);
  auto best = store.best(gpu, p, TimingMode::kGraph);
  ASSERT_TRUE(best);
  EXPECT_NEAR(best->paired.speedup(), 1.03, 1e-9);
  // A second measurement that failed: the design does not stand.
  MeasurementRecord failed = again;
  failed.measurement.status = MeasureStatus::kWrong;
  failed.measurement.paired.reset();
  EXPECT_EQ(store.confirm(failed).measurement.status, MeasureStatus::kWrong);
  EXPECT_FALSE(store.best(gpu, p, TimingMode::kGraph).has_value());
  // Nothing paired to confirm, or an unpaired second time.
  EXPECT_THROW(store.confirm(again), Error);
  MeasurementRecord other = again;
  other.design = "sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma";
  EXPECT_THROW(store.confirm(other), Error);
  ASSERT_TRUE(store.record(other));
  MeasurementRecord unpaired = other;
  unpaired.measurement.paired.reset();
  EXPECT_THROW(store.confirm(unpaired), Error);
}

TEST_F(StoreTest, BestViewPicksTheFastestCorrectDesignWithItsSpeedup) {
  Store store(file());
  const int64_t gpu = store.gpu_id(h100());
  const Problem p{{4096, 4096, 4096}, Layout::kTN};
  store.put_reference(gpu, p, TimingMode::kOffline, {200, 198, 210, 100});
  store.record(ok_record(gpu, p, "a", 190, 200));
  store.record(ok_record(gpu, p, "b", 170, 200));
  auto wrong = ok_record(gpu, p, "c", 100, 200);  // fast but wrong: never the best
  wrong.measurement.status = MeasureStatus::kWrong;
  store.record(wrong);
  auto crashed = ok_record(gpu, p, "d", 0, 200);
  crashed.measurement.status = MeasureStatus::kCrashed;
  crashed.measurement.error = "worker died on signal 11";
  crashed.reward = -1;
  store.record(crashed);
  store.record(ok_record(gpu, {{64, 64, 64}, Layout::kTN}, "a", 5, 6));
  auto best = store.best(gpu, p, TimingMode::kOffline);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->design, "b");
  EXPECT_DOUBLE_EQ(best->median_us, 170);
  ASSERT_TRUE(best->speedup);
  EXPECT_NEAR(*best->speedup, 200.0 / 170.0, 1e-12);
  EXPECT_EQ(best->measurements, 4);
  EXPECT_EQ(best->gpu_name, h100().name);
  const auto all = store.best_designs();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_NEAR(*all[0].speedup, 6.0 / 5.0, 1e-12);  // 64,64,64: its own reference, no reference_times row
  auto rows = store.measurements(gpu, p, TimingMode::kOffline);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[3].measurement.status, MeasureStatus::kCrashed);
  EXPECT_EQ(rows[3].measurement.error, "worker died on signal 11");
}

// Rows whose reference was timed apart (an older tuner's) keep their failures, but their times count for
// nothing: not measured, not found, not history, never the best; a paired measurement of the key replaces them.
TEST_F(StoreTest, UnpairedTimesAreTrustedByNothing) {
  Store store(file());
  const int64_t gpu = store.gpu_id(h100());
  const Problem p{{2048, 8192, 8192}, Layout::kTN};
  const std::string fast = "sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma";
  const std::string broken = "sm90.ws.coop/128x128x64/s4/c1x1/raster_m.g8/splitk1/epi_tma";
  // The drift an unpaired ratio takes for a gain: 357 us for the reference, 350 us for the design minutes later.
  EXPECT_TRUE(store.record(unpaired_record(gpu, p, fast, 350, 397)));
  auto wrong = unpaired_record(gpu, p, broken, 100, 397);
  wrong.measurement.status = MeasureStatus::kWrong;
  wrong.reward = -1;
  EXPECT_TRUE(store.record(wrong));
  EXPECT_FALSE(store.measured(gpu, p, fast, TimingMode::kOffline));
  EXPECT_FALSE(store.find(gpu, p, fast, TimingMode::kOffline));
  EXPECT_TRUE(store.measured(gpu, p, broken, TimingMode::kOffline));
  const auto usable = store.measurements(gpu, p, TimingMode::kOffline);
  ASSERT_EQ(usable.size(), 1u);
  EXPECT_EQ(usable[0].design, broken);
  EXPECT_FALSE(store.best(gpu, p, TimingMode::kOffline));
  EXPECT_TRUE(store.best_designs().empty());

  // Measured again, paired: 360 us beside the reference's 357 in the same rounds.
  EXPECT_TRUE(store.record(ok_record(gpu, p, fast, 360, 357)));
  const auto found = store.find(gpu, p, fast, TimingMode::kOffline);
  ASSERT_TRUE(found && found->measurement.paired);
  EXPECT_DOUBLE_EQ(found->measurement.paired->reference_us, 357);
  EXPECT_EQ(found->measurement.paired->rounds, 15);
  const auto best = store.best(gpu, p, TimingMode::kOffline);
  ASSERT_TRUE(best);
  EXPECT_NEAR(*best->speedup, 357.0 / 360.0, 1e-12);
  EXPECT_FALSE(best->paired.better());
  EXPECT_EQ(store.count_measurements(gpu, p, TimingMode::kOffline), 2);
  EXPECT_FALSE(store.record(ok_record(gpu, p, fast, 300, 357)));  // a paired row stays as it was
}

// Graph mode is a mode of its own, and the best design is the highest paired gain, not the lowest time: a time
// of another moment may be lower on a faster GPU state.
TEST_F(StoreTest, GraphModeAndTheBestByPairedGain) {
  Store store(file());
  const int64_t gpu = store.gpu_id(h100());
  const Problem p{{64, 128, 4096}, Layout::kTN};
  EXPECT_TRUE(store.record([&] {
    auto r = ok_record(gpu, p, "slow-moment", 5.9, 6.1);  // 1.034x
    r.mode = TimingMode::kGraph;
    return r;
  }()));
  EXPECT_TRUE(store.record([&] {
    auto r = ok_record(gpu, p, "fast-moment", 5.5, 5.4);  // lower time, but 0.98x its own reference
    r.mode = TimingMode::kGraph;
    return r;
  }()));
  EXPECT_FALSE(store.best(gpu, p, TimingMode::kOffline));
  const auto best = store.best(gpu, p, TimingMode::kGraph);
  ASSERT_TRUE(best);
  EXPECT_EQ(best->design, "slow-moment");
  EXPECT_EQ(best->mode, TimingMode::kGraph);
  EXPECT_TRUE(best->paired.better());
  EXPECT_EQ(parse_timing_mode("graph"), TimingMode::kGraph);
  EXPECT_THROW(parse_timing_mode("replay"), Error);
}

TEST_F(StoreTest, TwoProcessesWritingAtOnceLeaveAConsistentDatabase) {
  { Store store(file()); }
  constexpr int kRows = 300;
  auto writer = [&](int which) {
    Store store(file());
    const int64_t gpu = store.gpu_id(h100());
    // Overlapping keys: both processes write designs 0..kRows-1 of the same problem.
    for (int i = 0; i < kRows; ++i) {
      const int d = which == 0 ? i : kRows - 1 - i;
      store.record(ok_record(gpu, {{256, 256, 256}, Layout::kTN}, "d" + std::to_string(d), 10 + d, 20));
      store.record(ok_record(gpu, {{512, 512, 256 + 8 * which}, Layout::kTN}, "d" + std::to_string(i), 10, 20));
    }
  };
  pid_t children[2];
  for (int w = 0; w < 2; ++w) {
    children[w] = ::fork();
    ASSERT_GE(children[w], 0);
    if (children[w] == 0) {
      int code = 0;
      try { writer(w); } catch (const std::exception& e) { std::fprintf(stderr, "%s\n", e.what()); code = 1; }
      ::_exit(code);
    }
  }
  for (pid_t child : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  Store store(file());
  EXPECT_EQ(store.integrity_check(), "ok");
  EXPECT_EQ(store.count_measurements(), 3 * kRows);
  const int64_t gpu = store.gpu_id(h100());
  EXPECT_EQ(store.count_measurements(gpu, {{256, 256, 256}, Layout::kTN}, TimingMode::kOffline), kRows);
}

// Processes that open one new file at the same moment all get it: switching a new file to WAL needs it to
// itself, and SQLite answers "busy" at once there instead of waiting.
TEST_F(StoreTest, ProcessesOpeningANewFileTogetherAllGetIt) {
  constexpr int kRounds = 20, kProcesses = 4;
  for (int round = 0; round < kRounds; ++round) {
    const auto db = file("new-" + std::to_string(round) + ".db");
    pid_t children[kProcesses];
    for (int w = 0; w < kProcesses; ++w) {
      children[w] = ::fork();
      ASSERT_GE(children[w], 0);
      if (children[w] == 0) {
        int code = 0;
        try {
          Store store(db);
          store.gpu_id(h100());
        } catch (const std::exception& e) {
          std::fprintf(stderr, "round %d, process %d: %s\n", round, w, e.what());
          code = 1;
        }
        ::_exit(code);
      }
    }
    for (pid_t child : children) {
      int status = 0;
      ASSERT_EQ(::waitpid(child, &status, 0), child);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "round " << round;
    }
    Store store(db);
    EXPECT_EQ(store.journal_mode(), "wal");
    EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
    EXPECT_EQ(store.integrity_check(), "ok");
  }
}

TEST(StoreNames, StatusAndModeRoundTrip) {
  for (auto s : {MeasureStatus::kOk, MeasureStatus::kWrong, MeasureStatus::kFailed, MeasureStatus::kTimeout,
                 MeasureStatus::kCrashed})
    EXPECT_EQ(parse_measure_status(to_string(s)), s);
  EXPECT_EQ(parse_timing_mode("server"), TimingMode::kServer);
  EXPECT_THROW(parse_timing_mode("fast"), Error);
  EXPECT_THROW(parse_measure_status("meh"), Error);
}

}  // namespace
}  // namespace rlgemm
