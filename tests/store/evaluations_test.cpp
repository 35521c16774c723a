// The evaluations table (schema version 4): the evaluation service's records, appended and read back newest
// first, a rejection before any GPU without a gpu_id, and the migration that adds the table to a version-2 file.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <filesystem>

#include "store/store.h"

namespace rlgemm {
namespace {

std::filesystem::path fresh_file(const std::string& name) {
  auto path = std::filesystem::temp_directory_path() / ("rlgemm-evaluations-" + name + "-" + std::to_string(::getpid()) + ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
  return path;
}

EvaluationRecord row(std::optional<int64_t> gpu, const std::string& verdict, const std::string& reason) {
  EvaluationRecord r;
  r.gpu_id = gpu;
  r.problem = Problem{{512, 768, 1024}, Layout::kNN};
  r.kind = "source";
  r.submission = "extern \"C\" ...";
  r.submission_sha256 = std::string(64, 'a');
  r.verdict = verdict;
  r.reason = reason;
  if (verdict == "accepted") r.time_us = 41.5, r.speedup = 0.93;
  r.record = "{\"verdict\":\"" + verdict + "\"}";
  return r;
}

TEST(Evaluations, AppendedAndReadBackNewestFirst) {
  const auto file = fresh_file("roundtrip");
  Store store(file);
  const int64_t gpu = store.gpu_id({"NVIDIA H100 80GB HBM3", 132, 9, 0, 1980000, 2619000, 13000, 232448});
  const int64_t first = store.record_evaluation(row(std::nullopt, "rejected", "compile_error"));
  const int64_t second = store.record_evaluation(row(gpu, "accepted", ""));
  EXPECT_GT(second, first);
  const auto rows = store.evaluations(10);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id, second);
  EXPECT_EQ(rows[0].gpu_id, gpu);
  EXPECT_EQ(rows[0].problem, (Problem{{512, 768, 1024}, Layout::kNN}));
  EXPECT_DOUBLE_EQ(*rows[0].time_us, 41.5);
  EXPECT_DOUBLE_EQ(*rows[0].speedup, 0.93);
  EXPECT_FALSE(rows[1].gpu_id);
  EXPECT_FALSE(rows[1].time_us);
  EXPECT_EQ(rows[1].reason, "compile_error");
  EXPECT_FALSE(rows[1].created_at.empty());
  EXPECT_EQ(store.evaluations(1).size(), 1u);
  // A verdict other than accepted or rejected breaks the table's rule.
  EXPECT_ANY_THROW(store.record_evaluation(row(gpu, "maybe", "")));
}

TEST(Evaluations, AVersionThreeFileGainsTheTable) {
  const auto file = fresh_file("migrate");
  { Store store(file); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE evaluations; UPDATE schema_version SET version = 3", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  Store store(file);
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  store.record_evaluation(row(std::nullopt, "rejected", "too_large"));
  EXPECT_EQ(store.evaluations(5).size(), 1u);
  EXPECT_EQ(store.integrity_check(), "ok");
}

}  // namespace
}  // namespace rlgemm
