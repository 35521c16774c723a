#include "store/store.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <iterator>
#include <thread>
#include <utility>

#include "core/cuda_util.h"
#include "rlgemm/error.h"

namespace rlgemm {

std::string_view to_string(TimingMode mode) {
  switch (mode) {
    case TimingMode::kOffline: return "offline";
    case TimingMode::kServer: return "server";
    case TimingMode::kGraph: return "graph";
  }
  return "offline";
}

TimingMode parse_timing_mode(std::string_view text) {
  for (TimingMode m : {TimingMode::kOffline, TimingMode::kServer, TimingMode::kGraph})
    if (text == to_string(m)) return m;
  fail("unknown timing mode '" + std::string(text) + "': use offline, server or graph");
}

double PairedGain::speedup() const { return std::exp(log_ratio); }

PhaseSeconds& PhaseSeconds::operator+=(const PhaseSeconds& other) {
  operands += other.operands;
  reference += other.reference;
  check += other.check;
  rounds += other.rounds;
  build += other.build;
  load += other.load;
  return *this;
}

std::string_view to_string(MeasureStatus status) {
  switch (status) {
    case MeasureStatus::kOk: return "ok";
    case MeasureStatus::kWrong: return "wrong";
    case MeasureStatus::kFailed: return "failed";
    case MeasureStatus::kTimeout: return "timeout";
    case MeasureStatus::kCrashed: return "crashed";
  }
  return "failed";
}

MeasureStatus parse_measure_status(std::string_view text) {
  for (auto s : {MeasureStatus::kOk, MeasureStatus::kWrong, MeasureStatus::kFailed, MeasureStatus::kTimeout,
                 MeasureStatus::kCrashed})
    if (to_string(s) == text) return s;
  fail("unknown measurement status '" + std::string(text) + "': use ok, wrong, failed, timeout or crashed");
}

namespace {

// Busy waits up to this long for another tuner's write transaction: writes are single short rows, so a
// wait this long means something is wrong with the other process.
constexpr int kBusyTimeoutMs = 60000;

[[noreturn]] void sql_fail(sqlite3* db, const std::string& what) {
  throw Error(ErrorKind::kRuntime, "tuning database: " + what + ": " + (db ? sqlite3_errmsg(db) : "no handle"));
}

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) sql_fail(db, std::string("prepare ") + sql);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, int64_t v) { check(sqlite3_bind_int64(stmt_, i, v)); return *this; }
  Statement& bind(int i, int v) { return bind(i, int64_t(v)); }
  Statement& bind(int i, double v) { check(sqlite3_bind_double(stmt_, i, v)); return *this; }
  Statement& bind(int i, const std::optional<double>& v) {
    if (v) return bind(i, *v);
    check(sqlite3_bind_null(stmt_, i));
    return *this;
  }
  Statement& bind(int i, std::string_view v) {
    check(sqlite3_bind_text(stmt_, i, v.data(), int(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Statement& bind_blob(int i, const std::vector<uint8_t>& v) {
    check(sqlite3_bind_blob64(stmt_, i, v.data(), sqlite3_uint64(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  // M, N, K, layout, dtype: five parameters from `first` on.
  Statement& bind_problem(int first, const Problem& p) {
    bind(first, p.shape.m).bind(first + 1, p.shape.n).bind(first + 2, p.shape.k);
    return bind(first + 3, to_string(p.layout)).bind(first + 4, to_string(p.dtype));
  }
  // True while a row is available.
  bool step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    sql_fail(db_, std::string("step ") + sqlite3_sql(stmt_));
  }
  int64_t i64(int c) const { return sqlite3_column_int64(stmt_, c); }
  // The problem in columns first..first+4 (M, N, K, layout, dtype), as bind_problem binds it.
  Problem problem(int first) const {
    return Problem{{i64(first), i64(first + 1), i64(first + 2)}, parse_layout(text(first + 3)),
                   parse_dtype(text(first + 4))};
  }
  double f64(int c) const { return sqlite3_column_double(stmt_, c); }
  bool is_null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }
  std::vector<uint8_t> blob(int c) const {
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, c));
    return p ? std::vector<uint8_t>(p, p + sqlite3_column_bytes(stmt_, c)) : std::vector<uint8_t>();
  }
  std::string text(int c) const {
    auto* p = sqlite3_column_text(stmt_, c);
    return p ? std::string(reinterpret_cast<const char*>(p)) : std::string();
  }

 private:
  void check(int rc) { if (rc != SQLITE_OK) sql_fail(db_, "bind"); }
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

void exec(sqlite3* db, const char* sql) {
  char* message = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &message) != SQLITE_OK) {
    std::string text = message ? message : "unknown error";
    sqlite3_free(message);
    throw Error(ErrorKind::kRuntime, std::string("tuning database: ") + text + " in: " + sql);
  }
}

// One IMMEDIATE transaction: takes the write lock up front so that two writers queue on the busy timeout
// instead of failing with a deadlock when both upgrade from read to write.
class WriteTransaction {
 public:
  explicit WriteTransaction(sqlite3* db) : db_(db) { exec(db_, "BEGIN IMMEDIATE"); }
  ~WriteTransaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() { exec(db_, "COMMIT"); done_ = true; }

 private:
  sqlite3* db_;
  bool done_ = false;
};

// Switches the file to write-ahead logging. Switching needs the file to itself, and SQLite answers "busy"
// at once there instead of calling the busy handler: two tuners opening a new file together would see one
// of them fail. The switch is retried until the busy timeout; a file already in WAL mode switches at once.
void use_wal(sqlite3* db) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyTimeoutMs);
  for (int attempt = 0;; ++attempt) {
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db, "PRAGMA journal_mode=WAL", -1, &stmt, nullptr) != SQLITE_OK)
      sql_fail(db, "prepare PRAGMA journal_mode=WAL");
    const int rc = sqlite3_step(stmt);
    std::string mode = rc == SQLITE_ROW ? reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0)) : "";
    sqlite3_finalize(stmt);
    if (rc == SQLITE_ROW) {
      if (mode != "wal")
        throw Error(ErrorKind::kRuntime, "tuning database: cannot use write-ahead logging (journal mode stays " +
                                             mode + "); put the database on a local file system");
      return;
    }
    const int primary = rc & 0xff;
    if ((primary != SQLITE_BUSY && primary != SQLITE_LOCKED) || std::chrono::steady_clock::now() >= deadline)
      sql_fail(db, "step PRAGMA journal_mode=WAL");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(2 + 2 * attempt, 50)));
  }
}

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE gpus (
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL,
  sm_count INTEGER NOT NULL,
  cc_major INTEGER NOT NULL,
  cc_minor INTEGER NOT NULL,
  sm_clock_khz INTEGER NOT NULL,
  mem_clock_khz INTEGER NOT NULL,
  driver_version INTEGER NOT NULL,
  smem_optin INTEGER NOT NULL,
  UNIQUE (name, sm_count, cc_major, cc_minor, sm_clock_khz, mem_clock_khz, driver_version, smem_optin));
CREATE TABLE measurements (
  id INTEGER PRIMARY KEY,
  gpu_id INTEGER NOT NULL REFERENCES gpus(id),
  m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
  layout TEXT NOT NULL CHECK (layout IN ('nn', 'tn')),
  design TEXT NOT NULL,
  mode TEXT NOT NULL CHECK (mode IN ('offline', 'server')),
  status TEXT NOT NULL CHECK (status IN ('ok', 'wrong', 'failed', 'timeout', 'crashed')),
  error TEXT NOT NULL DEFAULT '',
  source_hash TEXT NOT NULL DEFAULT '',
  compile_seconds REAL NOT NULL DEFAULT 0,
  correct INTEGER NOT NULL,
  median_us REAL, min_us REAL, max_us REAL, samples INTEGER NOT NULL DEFAULT 0,
  reward REAL NOT NULL,
  strategy TEXT NOT NULL,
  created_at TEXT NOT NULL,
  UNIQUE (gpu_id, m, n, k, layout, design, mode));
CREATE INDEX measurements_by_problem ON measurements (gpu_id, m, n, k, layout, mode, status, median_us);
CREATE TABLE reference_times (
  gpu_id INTEGER NOT NULL REFERENCES gpus(id),
  m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
  layout TEXT NOT NULL CHECK (layout IN ('nn', 'tn')),
  mode TEXT NOT NULL CHECK (mode IN ('offline', 'server')),
  median_us REAL NOT NULL, min_us REAL NOT NULL, max_us REAL NOT NULL, samples INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (gpu_id, m, n, k, layout, mode));
CREATE VIEW best_designs AS
  SELECT b.gpu_id, g.name AS gpu_name, b.m, b.n, b.k, b.layout, b.mode, b.design, b.median_us,
         r.median_us AS reference_us, r.median_us / b.median_us AS speedup, b.measurements
  FROM (SELECT gpu_id, m, n, k, layout, mode, design, median_us,
               ROW_NUMBER() OVER (PARTITION BY gpu_id, m, n, k, layout, mode
                                  ORDER BY median_us ASC, id ASC) AS rank,
               (SELECT COUNT(*) FROM measurements a
                 WHERE a.gpu_id = x.gpu_id AND a.m = x.m AND a.n = x.n AND a.k = x.k
                   AND a.layout = x.layout AND a.mode = x.mode) AS measurements
          FROM measurements x WHERE status = 'ok' AND correct = 1) b
  JOIN gpus g ON g.id = b.gpu_id
  LEFT JOIN reference_times r
    ON r.gpu_id = b.gpu_id AND r.m = b.m AND r.n = b.n AND r.k = b.k AND r.layout = b.layout
   AND r.mode = b.mode
  WHERE b.rank = 1;
)sql";

// Version 2 adds the rescheduled cubins of `rlgemm sass-opt`; a version-1 file gains the table on open.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE optimized_cubins (
  gpu_id INTEGER NOT NULL REFERENCES gpus(id),
  m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
  layout TEXT NOT NULL CHECK (layout IN ('nn', 'tn')),
  design TEXT NOT NULL,
  kernel TEXT NOT NULL,
  source_key TEXT NOT NULL,
  cubin BLOB NOT NULL,
  time_before_us REAL NOT NULL,
  time_after_us REAL NOT NULL,
  gain REAL NOT NULL,
  moves TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (gpu_id, m, n, k, layout, design));
)sql";

// Version 3 adds the element type of the problem (fp16 or bf16; rows of older files are fp16) to the
// measurements, the rescheduled cubins and the reference times, and to the key of the last and of
// best_designs. A measurement's key needs no change: a bf16 design's text ends in /bf16.
constexpr const char* kDtypeColumn = "dtype TEXT NOT NULL DEFAULT 'fp16' CHECK (dtype IN ('fp16', 'bf16'))";
constexpr const char* kReferenceTimesV3 = R"sql(
CREATE TABLE reference_times_v3 (
  gpu_id INTEGER NOT NULL REFERENCES gpus(id),
  m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
  layout TEXT NOT NULL CHECK (layout IN ('nn', 'tn')),
  dtype TEXT NOT NULL DEFAULT 'fp16' CHECK (dtype IN ('fp16', 'bf16')),
  mode TEXT NOT NULL CHECK (mode IN ('offline', 'server')),
  median_us REAL NOT NULL, min_us REAL NOT NULL, max_us REAL NOT NULL, samples INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (gpu_id, m, n, k, layout, dtype, mode));
INSERT INTO reference_times_v3 (gpu_id, m, n, k, layout, dtype, mode, median_us, min_us, max_us, samples, created_at)
  SELECT gpu_id, m, n, k, layout, 'fp16', mode, median_us, min_us, max_us, samples, created_at FROM reference_times;
DROP TABLE reference_times;
ALTER TABLE reference_times_v3 RENAME TO reference_times;
)sql";
constexpr const char* kBestDesignsV3 = R"sql(
CREATE VIEW best_designs AS
  SELECT b.gpu_id, g.name AS gpu_name, b.m, b.n, b.k, b.layout, b.dtype, b.mode, b.design, b.median_us,
         r.median_us AS reference_us, r.median_us / b.median_us AS speedup, b.measurements
  FROM (SELECT gpu_id, m, n, k, layout, dtype, mode, design, median_us,
               ROW_NUMBER() OVER (PARTITION BY gpu_id, m, n, k, layout, dtype, mode
                                  ORDER BY median_us ASC, id ASC) AS rank,
               (SELECT COUNT(*) FROM measurements a
                 WHERE a.gpu_id = x.gpu_id AND a.m = x.m AND a.n = x.n AND a.k = x.k
                   AND a.layout = x.layout AND a.dtype = x.dtype AND a.mode = x.mode) AS measurements
          FROM measurements x WHERE status = 'ok' AND correct = 1) b
  JOIN gpus g ON g.id = b.gpu_id
  LEFT JOIN reference_times r
    ON r.gpu_id = b.gpu_id AND r.m = b.m AND r.n = b.n AND r.k = b.k AND r.layout = b.layout
   AND r.dtype = b.dtype AND r.mode = b.mode
  WHERE b.rank = 1;
)sql";

bool has_column(sqlite3* db, const std::string& table, const std::string& column) {
  Statement s(db, ("SELECT COUNT(*) FROM pragma_table_info('" + table + "') WHERE name = ?").c_str());
  s.bind(1, std::string_view(column));
  s.step();
  return s.i64(0) > 0;
}

// Version 2 (or a newer file taken back to it) -> 3: each step only where it is still missing.
void migrate_to_v3(sqlite3* db) {
  for (const char* table : {"measurements", "optimized_cubins"})
    if (!has_column(db, table, "dtype"))
      exec(db, (std::string("ALTER TABLE ") + table + " ADD COLUMN " + kDtypeColumn).c_str());
  exec(db, "DROP VIEW IF EXISTS best_designs");
  if (!has_column(db, "reference_times", "dtype")) exec(db, kReferenceTimesV3);
  exec(db, kBestDesignsV3);
}

// Version 4 adds the evaluation service's records (env/): one row per submission evaluated, whatever the verdict.
constexpr const char* kSchemaV4 = R"sql(
CREATE TABLE evaluations (
  id INTEGER PRIMARY KEY,
  gpu_id INTEGER REFERENCES gpus(id),
  m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
  layout TEXT NOT NULL CHECK (layout IN ('nn', 'tn')),
  dtype TEXT NOT NULL DEFAULT 'fp16' CHECK (dtype IN ('fp16', 'bf16')),
  kind TEXT NOT NULL CHECK (kind IN ('source', 'design')),
  submission TEXT NOT NULL,
  submission_sha256 TEXT NOT NULL,
  verdict TEXT NOT NULL CHECK (verdict IN ('accepted', 'rejected')),
  reason TEXT NOT NULL,
  time_us REAL,
  speedup REAL,
  record TEXT NOT NULL,
  created_at TEXT NOT NULL);
CREATE INDEX evaluations_by_problem ON evaluations (m, n, k, layout, verdict);
)sql";

// Version 5: graph mode (replays of calls captured in a CUDA graph) joins offline and server, and every
// measurement says whether it was paired: timed side by side with the reference in the same interleaved rounds,
// with the reference's time of those rounds, the mean log ratio (the reward) and its 95% interval. Rows of older
// files are unpaired (their reference was timed once per problem, apart): they keep their failures (a wrong
// kernel is wrong whenever it was timed), but their times are trusted by nothing (measured(), find(),
// measurements() and best_designs leave them out, and a paired measurement of the same key replaces them).
// SQLite cannot widen a CHECK constraint in place: the two tables with a mode column are rebuilt.
constexpr const char* kMeasurementsV5 = R"sql(
CREATE TABLE measurements_v5 (
  id INTEGER PRIMARY KEY,
  gpu_id INTEGER NOT NULL REFERENCES gpus(id),
  m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
  layout TEXT NOT NULL CHECK (layout IN ('nn', 'tn')),
  design TEXT NOT NULL,
  mode TEXT NOT NULL CHECK (mode IN ('offline', 'server', 'graph')),
  status TEXT NOT NULL CHECK (status IN ('ok', 'wrong', 'failed', 'timeout', 'crashed')),
  error TEXT NOT NULL DEFAULT '',
  source_hash TEXT NOT NULL DEFAULT '',
  compile_seconds REAL NOT NULL DEFAULT 0,
  correct INTEGER NOT NULL,
  median_us REAL, min_us REAL, max_us REAL, samples INTEGER NOT NULL DEFAULT 0,
  reward REAL NOT NULL,
  strategy TEXT NOT NULL,
  created_at TEXT NOT NULL,
  dtype TEXT NOT NULL DEFAULT 'fp16' CHECK (dtype IN ('fp16', 'bf16')),
  paired INTEGER NOT NULL DEFAULT 0,
  reference_us REAL, log_ratio REAL, gain_low REAL, gain_high REAL, rounds INTEGER NOT NULL DEFAULT 0,
  UNIQUE (gpu_id, m, n, k, layout, design, mode));
INSERT INTO measurements_v5 (id, gpu_id, m, n, k, layout, design, mode, status, error, source_hash, compile_seconds,
                             correct, median_us, min_us, max_us, samples, reward, strategy, created_at, dtype)
  SELECT id, gpu_id, m, n, k, layout, design, mode, status, error, source_hash, compile_seconds, correct, median_us,
         min_us, max_us, samples, reward, strategy, created_at, dtype FROM measurements;
DROP TABLE measurements;
ALTER TABLE measurements_v5 RENAME TO measurements;
CREATE INDEX measurements_by_problem ON measurements (gpu_id, m, n, k, layout, mode, status, median_us);
CREATE TABLE reference_times_v5 (
  gpu_id INTEGER NOT NULL REFERENCES gpus(id),
  m INTEGER NOT NULL, n INTEGER NOT NULL, k INTEGER NOT NULL,
  layout TEXT NOT NULL CHECK (layout IN ('nn', 'tn')),
  dtype TEXT NOT NULL DEFAULT 'fp16' CHECK (dtype IN ('fp16', 'bf16')),
  mode TEXT NOT NULL CHECK (mode IN ('offline', 'server', 'graph')),
  median_us REAL NOT NULL, min_us REAL NOT NULL, max_us REAL NOT NULL, samples INTEGER NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (gpu_id, m, n, k, layout, dtype, mode));
INSERT INTO reference_times_v5 SELECT gpu_id, m, n, k, layout, dtype, mode, median_us, min_us, max_us, samples,
                                      created_at FROM reference_times;
DROP TABLE reference_times;
ALTER TABLE reference_times_v5 RENAME TO reference_times;
)sql";
// The best design of a (GPU, problem, mode): the highest paired log ratio over the reference (never a time
// compared with a time taken at another moment), with that row's own reference time and interval.
constexpr const char* kBestDesignsV5 = R"sql(
CREATE VIEW best_designs AS
  SELECT b.gpu_id, g.name AS gpu_name, b.m, b.n, b.k, b.layout, b.dtype, b.mode, b.design, b.median_us,
         b.reference_us, b.log_ratio, b.measurements, b.gain_low, b.gain_high, b.rounds
  FROM (SELECT gpu_id, m, n, k, layout, dtype, mode, design, median_us, reference_us, log_ratio, gain_low, gain_high,
               rounds,
               ROW_NUMBER() OVER (PARTITION BY gpu_id, m, n, k, layout, dtype, mode
                                  ORDER BY log_ratio DESC, id ASC) AS rank,
               (SELECT COUNT(*) FROM measurements a
                 WHERE a.gpu_id = x.gpu_id AND a.m = x.m AND a.n = x.n AND a.k = x.k
                   AND a.layout = x.layout AND a.dtype = x.dtype AND a.mode = x.mode) AS measurements
          FROM measurements x WHERE status = 'ok' AND correct = 1 AND paired = 1) b
  JOIN gpus g ON g.id = b.gpu_id
  WHERE b.rank = 1;
)sql";

void migrate_to_v5(sqlite3* db) {
  exec(db, "DROP VIEW IF EXISTS best_designs");
  exec(db, kMeasurementsV5);
  exec(db, kBestDesignsV5);
}

// Version 6 records a rescheduled cubin's gain re-timed in CUDA graphs (empty in older rows).
void migrate_to_v6(sqlite3* db) {
  for (const char* column : {"graph_gain", "graph_gain_low"})
    if (!has_column(db, "optimized_cubins", column))
      exec(db, (std::string("ALTER TABLE optimized_cubins ADD COLUMN ") + column + " REAL").c_str());
}

// The steps from each schema version to the next: kMigrations[v - 1] takes version v to v + 1. A new database
// runs kSchemaV1 and then every step, so that both ways end in the same schema.
constexpr void (*kMigrations[])(sqlite3*) = {
    [](sqlite3* db) { exec(db, kSchemaV2); },
    migrate_to_v3,
    [](sqlite3* db) { exec(db, kSchemaV4); },
    migrate_to_v5,
    migrate_to_v6,
};
static_assert(std::size(kMigrations) == size_t(Store::kSchemaVersion) - 1,
              "every schema version but the first has its migration step");

// The rows whose time may be used: paired measurements, and every failure (unpaired or not).
constexpr const char* kTrusted = " AND (paired = 1 OR status <> 'ok')";

constexpr const char* kMeasurementColumns =
    "gpu_id, m, n, k, layout, dtype, design, mode, status, error, source_hash, compile_seconds, median_us, min_us, "
    "max_us, samples, reward, strategy, created_at, paired, reference_us, log_ratio, gain_low, gain_high, rounds";

MeasurementRecord read_record(const Statement& s) {
  MeasurementRecord r;
  r.gpu_id = s.i64(0);
  r.problem = s.problem(1);
  r.design = s.text(6);
  r.mode = parse_timing_mode(s.text(7));
  r.measurement.status = parse_measure_status(s.text(8));
  r.measurement.error = s.text(9);
  r.measurement.source_hash = s.text(10);
  r.measurement.compile_seconds = s.f64(11);
  r.measurement.timing = {s.f64(12), s.f64(13), s.f64(14), int(s.i64(15))};
  r.reward = s.f64(16);
  r.strategy = s.text(17);
  r.created_at = s.text(18);
  if (s.i64(19) != 0)
    r.measurement.paired = PairedGain{s.f64(20), s.f64(21), s.f64(22), s.f64(23), int(s.i64(24))};
  return r;
}

constexpr const char* kBestColumns =
    "SELECT gpu_id, gpu_name, m, n, k, layout, dtype, mode, design, median_us, reference_us, log_ratio, measurements, "
    "gain_low, gain_high, rounds FROM best_designs ";

BestDesign read_best(const Statement& s) {
  BestDesign b;
  b.gpu_id = s.i64(0);
  b.gpu_name = s.text(1);
  b.problem = s.problem(2);
  b.mode = parse_timing_mode(s.text(7));
  b.design = s.text(8);
  b.median_us = s.f64(9);
  b.paired = PairedGain{s.f64(10), s.f64(11), s.f64(13), s.f64(14), int(s.i64(15))};
  b.reference_us = b.paired.reference_us;
  b.speedup = b.paired.speedup();
  b.measurements = s.i64(12);
  return b;
}

}  // namespace

Store::Store(const std::filesystem::path& file) : path_(file) {
  if (sqlite3_open_v2(file.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw Error(ErrorKind::kRuntime, "cannot open tuning database " + file.string() + ": " + why);
  }
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
  try {
    use_wal(db_);
    // In WAL mode NORMAL loses at most the last commits on power loss, never consistency; a killed process
    // loses nothing that was committed.
    exec(db_, "PRAGMA synchronous=NORMAL");
    exec(db_, "PRAGMA foreign_keys=ON");
    migrate();
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

Store::~Store() { sqlite3_close(db_); }

StoreReadCopy::StoreReadCopy(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(ErrorKind::kInvalidInput, "tuning database '" + path.string() + "' does not exist");
  static std::atomic<int> copies{0};
  dir_ = std::filesystem::temp_directory_path() /
         ("rlgemm-store-" + std::to_string(::getpid()) + "-" + std::to_string(copies++));
  try {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const auto copy = dir_ / "store.db";
    std::filesystem::copy_file(path, copy);
    for (const char* suffix : {"-wal", "-shm"}) {
      const std::filesystem::path side = path.string() + suffix;
      if (std::filesystem::exists(side, ec)) std::filesystem::copy_file(side, copy.string() + suffix);
    }
    store_ = std::make_unique<Store>(copy);
  } catch (const std::filesystem::filesystem_error& e) {
    std::filesystem::remove_all(dir_, ec);
    throw Error(ErrorKind::kRuntime, "cannot copy tuning database " + path.string() + " to read it: " + e.what());
  } catch (...) {
    std::filesystem::remove_all(dir_, ec);
    throw;
  }
}

StoreReadCopy::~StoreReadCopy() {
  store_.reset();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

void Store::migrate() {
  WriteTransaction tx(db_);
  bool has_version_table = false;
  {
    Statement s(db_, "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'");
    s.step();
    has_version_table = s.i64(0) == 1;
  }
  if (!has_version_table) {
    int64_t objects = 0;
    {
      // Finalized before the schema changes: a pending read blocks DROP TABLE ("database table is locked").
      Statement s(db_, "SELECT COUNT(*) FROM sqlite_master WHERE type IN ('table', 'view')");
      s.step();
      objects = s.i64(0);
    }
    if (objects != 0)
      fail("tuning database " + path_.string() +
           " holds tables but no schema_version: it is not an rlgemm tuning database; use another --db file");
    exec(db_, kSchemaV1);
    for (const auto& step : kMigrations) step(db_);
    Statement v(db_, "INSERT INTO schema_version (version) VALUES (?)");
    v.bind(1, kSchemaVersion).step();
    tx.commit();
    return;
  }
  int64_t version = 0;
  {
    Statement s(db_, "SELECT MAX(version) FROM schema_version");
    s.step();
    version = s.i64(0);
  }
  // Migrations from older versions, one step per version, inside this transaction.
  for (; version >= 1 && version < kSchemaVersion; ++version) {
    kMigrations[size_t(version) - 1](db_);
    exec(db_, ("UPDATE schema_version SET version = " + std::to_string(version + 1)).c_str());
  }
  if (version != kSchemaVersion)
    fail("tuning database " + path_.string() + " has schema version " + std::to_string(version) +
         ", this rlgemm reads version " + std::to_string(kSchemaVersion) +
         (version > kSchemaVersion ? ": update rlgemm" : ": no migration from that version exists"));
  tx.commit();
}

int Store::schema_version() {
  Statement s(db_, "SELECT MAX(version) FROM schema_version");
  s.step();
  return int(s.i64(0));
}

std::string Store::journal_mode() {
  Statement s(db_, "PRAGMA journal_mode");
  s.step();
  return s.text(0);
}

int64_t Store::gpu_id(const GpuIdentity& g) {
  auto bind_all = [&](Statement& s) {
    s.bind(1, std::string_view(g.name)).bind(2, g.sm_count).bind(3, g.cc_major).bind(4, g.cc_minor);
    s.bind(5, g.sm_clock_khz).bind(6, g.mem_clock_khz).bind(7, g.driver_version).bind(8, g.smem_per_block_optin);
  };
  WriteTransaction tx(db_);
  {
    Statement insert(db_,
                     "INSERT OR IGNORE INTO gpus (name, sm_count, cc_major, cc_minor, sm_clock_khz, mem_clock_khz, "
                     "driver_version, smem_optin) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
    bind_all(insert);
    insert.step();
  }
  Statement select(db_,
                   "SELECT id FROM gpus WHERE name = ? AND sm_count = ? AND cc_major = ? AND cc_minor = ? AND "
                   "sm_clock_khz = ? AND mem_clock_khz = ? AND driver_version = ? AND smem_optin = ?");
  bind_all(select);
  if (!select.step()) sql_fail(db_, "gpu row vanished");
  const int64_t id = select.i64(0);
  tx.commit();
  return id;
}

std::vector<std::pair<int64_t, GpuIdentity>> Store::gpus() {
  Statement s(db_,
              "SELECT id, name, sm_count, cc_major, cc_minor, sm_clock_khz, mem_clock_khz, driver_version, smem_optin "
              "FROM gpus ORDER BY id");
  std::vector<std::pair<int64_t, GpuIdentity>> out;
  while (s.step())
    out.push_back({s.i64(0), GpuIdentity{s.text(1), int(s.i64(2)), int(s.i64(3)), int(s.i64(4)), int(s.i64(5)),
                                         int(s.i64(6)), int(s.i64(7)), int(s.i64(8))}});
  return out;
}

std::optional<TimingStats> Store::reference(int64_t gpu, const Problem& p, TimingMode mode) {
  Statement s(db_,
              "SELECT median_us, min_us, max_us, samples FROM reference_times "
              "WHERE gpu_id = ? AND m = ? AND n = ? AND k = ? AND layout = ? AND dtype = ? AND mode = ?");
  s.bind(1, gpu).bind_problem(2, p).bind(7, to_string(mode));
  if (!s.step()) return std::nullopt;
  return TimingStats{s.f64(0), s.f64(1), s.f64(2), int(s.i64(3))};
}

void Store::put_reference(int64_t gpu, const Problem& p, TimingMode mode, const TimingStats& t) {
  WriteTransaction tx(db_);
  Statement s(db_,
              "INSERT OR REPLACE INTO reference_times (gpu_id, m, n, k, layout, dtype, mode, median_us, min_us, "
              "max_us, samples, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  s.bind(1, gpu).bind_problem(2, p).bind(7, to_string(mode));
  s.bind(8, t.median_us).bind(9, t.min_us).bind(10, t.max_us).bind(11, t.samples).bind(12, utc_now());
  s.step();
  tx.commit();
}

bool Store::measured(int64_t gpu, const Problem& p, const std::string& design, TimingMode mode) {
  Statement s(db_,
              (std::string("SELECT 1 FROM measurements WHERE gpu_id = ? AND m = ? AND n = ? AND k = ? AND layout = ? AND "
                           "dtype = ? AND design = ? AND mode = ?") + kTrusted).c_str());
  s.bind(1, gpu).bind_problem(2, p).bind(7, std::string_view(design)).bind(8, to_string(mode));
  return s.step();
}

std::optional<MeasurementRecord> Store::find(int64_t gpu, const Problem& p, const std::string& design,
                                             TimingMode mode) {
  const std::string sql = std::string("SELECT ") + kMeasurementColumns +
                          " FROM measurements WHERE gpu_id = ? AND m = ? AND n = ? AND k = ? AND layout = ? AND "
                          "dtype = ? AND design = ? AND mode = ?" + kTrusted;
  Statement s(db_, sql.c_str());
  s.bind(1, gpu).bind_problem(2, p).bind(7, std::string_view(design)).bind(8, to_string(mode));
  if (!s.step()) return std::nullopt;
  return read_record(s);
}

bool Store::record(const MeasurementRecord& r) {
  WriteTransaction tx(db_);
  const bool inserted = insert_measurement(r);
  tx.commit();
  return inserted;
}

bool Store::insert_measurement(const MeasurementRecord& r) {
  const auto& m = r.measurement;
  const bool ok = m.status == MeasureStatus::kOk;
  {
    // An unpaired time of the same key (an older file's) gives way to this measurement.
    Statement old(db_,
                  "DELETE FROM measurements WHERE gpu_id = ? AND m = ? AND n = ? AND k = ? AND layout = ? AND "
                  "dtype = ? AND design = ? AND mode = ? AND paired = 0 AND status = 'ok'");
    old.bind(1, r.gpu_id).bind_problem(2, r.problem).bind(7, std::string_view(r.design)).bind(8, to_string(r.mode));
    old.step();
  }
  const std::string sql = std::string("INSERT OR IGNORE INTO measurements (") + kMeasurementColumns +
                          ", correct) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
  Statement s(db_, sql.c_str());
  s.bind(1, r.gpu_id).bind_problem(2, r.problem).bind(7, std::string_view(r.design)).bind(8, to_string(r.mode));
  s.bind(9, to_string(m.status)).bind(10, std::string_view(m.error)).bind(11, std::string_view(m.source_hash));
  s.bind(12, m.compile_seconds);
  if (ok) {
    s.bind(13, m.timing.median_us).bind(14, m.timing.min_us).bind(15, m.timing.max_us);
  }
  s.bind(16, ok ? m.timing.samples : 0).bind(17, r.reward).bind(18, std::string_view(r.strategy));
  s.bind(19, utc_now());
  const bool paired = ok && m.paired;
  s.bind(20, int64_t(paired ? 1 : 0));
  if (paired) {
    s.bind(21, m.paired->reference_us).bind(22, m.paired->log_ratio).bind(23, m.paired->low);
    s.bind(24, m.paired->high);
  }
  s.bind(25, paired ? m.paired->rounds : 0).bind(26, int64_t(ok ? 1 : 0));
  s.step();
  return sqlite3_changes(db_) == 1;
}

MeasurementRecord Store::confirm(const MeasurementRecord& again) {
  const std::string what = again.problem.shape.to_string() + " " + again.design;
  if (again.measurement.status == MeasureStatus::kOk && !again.measurement.paired)
    throw Error(ErrorKind::kInvalidInput, "confirm " + what + ": the second measurement is an unpaired time");
  std::optional<MeasurementRecord> first = find(again.gpu_id, again.problem, again.design, again.mode);
  if (!first || first->measurement.status != MeasureStatus::kOk || !first->measurement.paired)
    throw Error(ErrorKind::kInvalidInput, "confirm " + what + ": no paired measurement of it to confirm");
  std::string strategy = first->strategy;
  if (!strategy.ends_with(kConfirmedSuffix)) strategy += kConfirmedSuffix;
  // A second measurement that failed (wrong, crashed...) is the weaker: the design does not stand.
  const bool again_weaker = again.measurement.status != MeasureStatus::kOk ||
                            again.measurement.paired->low < first->measurement.paired->low;
  MeasurementRecord kept = again_weaker ? again : *first;
  kept.strategy = strategy;
  WriteTransaction tx(db_);  // the row is replaced at once or not at all, in its place (its id: the order measured)
  const char* key = " WHERE gpu_id = ? AND m = ? AND n = ? AND k = ? AND layout = ? AND dtype = ? AND design = ? AND mode = ?";
  const auto bind_key = [&](Statement& s) -> Statement& {
    s.bind(1, again.gpu_id).bind_problem(2, again.problem).bind(7, std::string_view(again.design));
    s.bind(8, to_string(again.mode));
    return s;
  };
  int64_t row_id = 0;
  {
    Statement id(db_, (std::string("SELECT id FROM measurements") + key).c_str());
    if (!bind_key(id).step()) throw Error(ErrorKind::kRuntime, "confirm " + what + ": its row went missing");
    row_id = id.i64(0);
  }
  Statement old(db_, (std::string("DELETE FROM measurements") + key).c_str());
  bind_key(old).step();
  insert_measurement(kept);
  Statement place(db_, "UPDATE measurements SET id = ? WHERE id = ?");
  place.bind(1, row_id).bind(2, int64_t(sqlite3_last_insert_rowid(db_)));
  place.step();
  tx.commit();
  return *find(again.gpu_id, again.problem, again.design, again.mode);
}

std::vector<MeasurementRecord> Store::measurements(int64_t gpu, const Problem& p, TimingMode mode) {
  const std::string sql = std::string("SELECT ") + kMeasurementColumns +
                          " FROM measurements WHERE gpu_id = ? AND m = ? AND n = ? AND k = ? AND layout = ? AND "
                          "dtype = ? AND mode = ?" + kTrusted + " ORDER BY id";
  Statement s(db_, sql.c_str());
  s.bind(1, gpu).bind_problem(2, p).bind(7, to_string(mode));
  std::vector<MeasurementRecord> out;
  while (s.step()) out.push_back(read_record(s));
  return out;
}

int64_t Store::count_measurements() {
  Statement s(db_, "SELECT COUNT(*) FROM measurements");
  s.step();
  return s.i64(0);
}

int64_t Store::count_measurements(int64_t gpu, const Problem& p, TimingMode mode) {
  Statement s(db_,
              "SELECT COUNT(*) FROM measurements WHERE gpu_id = ? AND m = ? AND n = ? AND k = ? AND layout = ? "
              "AND dtype = ? AND mode = ?");
  s.bind(1, gpu).bind_problem(2, p).bind(7, to_string(mode));
  s.step();
  return s.i64(0);
}

std::optional<BestDesign> Store::best(int64_t gpu, const Problem& p, TimingMode mode) {
  const std::string sql = std::string(kBestColumns) +
                          "WHERE gpu_id = ? AND m = ? AND n = ? AND k = ? AND layout = ? AND dtype = ? AND mode = ?";
  Statement s(db_, sql.c_str());
  s.bind(1, gpu).bind_problem(2, p).bind(7, to_string(mode));
  if (!s.step()) return std::nullopt;
  return read_best(s);
}

std::vector<BestDesign> Store::best_designs() {
  const std::string sql = std::string(kBestColumns) + "ORDER BY gpu_id, m, n, k, layout, dtype, mode";
  Statement s(db_, sql.c_str());
  std::vector<BestDesign> out;
  while (s.step()) out.push_back(read_best(s));
  return out;
}

bool Store::put_optimized_cubin(const OptimizedCubin& r) {
  if (r.cubin.empty()) fail("an optimized cubin of design " + r.design + " must not be empty");
  if (!(r.gain > 0) || !(r.time_after_us > 0) || !(r.time_before_us > r.time_after_us))
    fail("an optimized cubin is stored only when it is faster than the compiled one (design " + r.design +
         ", gain " + std::to_string(r.gain) + ")");
  WriteTransaction tx(db_);
  Statement s(db_,
              "INSERT INTO optimized_cubins (gpu_id, m, n, k, layout, dtype, design, kernel, source_key, cubin, "
              "time_before_us, time_after_us, gain, moves, created_at, graph_gain, graph_gain_low) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
              "ON CONFLICT (gpu_id, m, n, k, layout, design) DO UPDATE SET kernel = excluded.kernel, "
              "source_key = excluded.source_key, cubin = excluded.cubin, time_before_us = excluded.time_before_us, "
              "time_after_us = excluded.time_after_us, gain = excluded.gain, moves = excluded.moves, "
              "created_at = excluded.created_at, graph_gain = excluded.graph_gain, "
              "graph_gain_low = excluded.graph_gain_low WHERE excluded.gain > optimized_cubins.gain");
  s.bind(1, r.gpu_id).bind_problem(2, r.problem).bind(7, std::string_view(r.design));
  s.bind(8, std::string_view(r.kernel)).bind(9, std::string_view(r.source_key)).bind_blob(10, r.cubin);
  s.bind(11, r.time_before_us).bind(12, r.time_after_us).bind(13, r.gain).bind(14, std::string_view(r.moves));
  s.bind(15, utc_now()).bind(16, r.graph_gain).bind(17, r.graph_gain_low);
  s.step();
  const bool stored = sqlite3_changes(db_) == 1;
  tx.commit();
  return stored;
}

namespace {

constexpr const char* kOptimizedColumns =
    "SELECT o.gpu_id, o.m, o.n, o.k, o.layout, o.dtype, o.design, o.kernel, o.source_key, o.cubin, "
    "o.time_before_us, o.time_after_us, o.gain, o.moves, o.created_at, o.graph_gain, o.graph_gain_low "
    "FROM optimized_cubins o ";

OptimizedCubin read_optimized(const Statement& s) {
  OptimizedCubin r;
  r.gpu_id = s.i64(0);
  r.problem = s.problem(1);
  r.design = s.text(6);
  r.kernel = s.text(7);
  r.source_key = s.text(8);
  r.cubin = s.blob(9);
  r.time_before_us = s.f64(10);
  r.time_after_us = s.f64(11);
  r.gain = s.f64(12);
  r.moves = s.text(13);
  r.created_at = s.text(14);
  if (!s.is_null(15)) r.graph_gain = s.f64(15);
  if (!s.is_null(16)) r.graph_gain_low = s.f64(16);
  return r;
}

}  // namespace

std::optional<OptimizedCubin> Store::optimized_cubin(int64_t gpu, const Problem& p, const std::string& design) {
  const std::string sql = std::string(kOptimizedColumns) +
                          "WHERE o.gpu_id = ? AND o.m = ? AND o.n = ? AND o.k = ? AND o.layout = ? AND o.dtype = ? AND "
                          "o.design = ?";
  Statement s(db_, sql.c_str());
  s.bind(1, gpu).bind_problem(2, p).bind(7, std::string_view(design));
  if (!s.step()) return std::nullopt;
  return read_optimized(s);
}

std::vector<OptimizedCubin> Store::optimized_cubins(const std::string& gpu_name) {
  const std::string sql = std::string(kOptimizedColumns) +
                          "JOIN gpus g ON g.id = o.gpu_id WHERE g.name = ? ORDER BY o.m, o.n, o.k, o.layout, o.dtype, o.design";
  Statement s(db_, sql.c_str());
  s.bind(1, std::string_view(gpu_name));
  std::vector<OptimizedCubin> out;
  while (s.step()) out.push_back(read_optimized(s));
  return out;
}

GpuIdentity identity_of(const DeviceInfo& d) {
  return {d.name, d.sm_count, d.cc_major, d.cc_minor, d.sm_clock_khz, d.mem_clock_khz, d.driver_version,
          d.smem_per_block_optin};
}

std::string Store::integrity_check() {
  Statement s(db_, "PRAGMA integrity_check");
  std::string report;
  while (s.step()) report += (report.empty() ? "" : "\n") + s.text(0);
  return report;
}

}  // namespace rlgemm

namespace rlgemm {

int64_t Store::record_evaluation(const EvaluationRecord& r) {
  WriteTransaction tx(db_);
  Statement s(db_,
              "INSERT INTO evaluations (gpu_id, m, n, k, layout, dtype, kind, submission, submission_sha256, verdict, "
              "reason, time_us, speedup, record, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  if (r.gpu_id) s.bind(1, *r.gpu_id);
  s.bind_problem(2, r.problem).bind(7, std::string_view(r.kind)).bind(8, std::string_view(r.submission));
  s.bind(9, std::string_view(r.submission_sha256)).bind(10, std::string_view(r.verdict));
  s.bind(11, std::string_view(r.reason));
  if (r.time_us) s.bind(12, *r.time_us);
  if (r.speedup) s.bind(13, *r.speedup);
  s.bind(14, std::string_view(r.record)).bind(15, utc_now());
  s.step();
  const int64_t id = sqlite3_last_insert_rowid(db_);
  tx.commit();
  return id;
}

std::vector<EvaluationRecord> Store::evaluations(int64_t limit) {
  Statement s(db_,
              "SELECT id, gpu_id, m, n, k, layout, dtype, kind, submission, submission_sha256, verdict, reason, "
              "time_us, speedup, record, created_at FROM evaluations ORDER BY id DESC LIMIT ?");
  s.bind(1, limit);
  std::vector<EvaluationRecord> out;
  while (s.step()) {
    EvaluationRecord r;
    r.id = s.i64(0);
    if (!s.is_null(1)) r.gpu_id = s.i64(1);
    r.problem = s.problem(2);
    r.kind = s.text(7), r.submission = s.text(8), r.submission_sha256 = s.text(9);
    r.verdict = s.text(10), r.reason = s.text(11);
    if (!s.is_null(12)) r.time_us = s.f64(12);
    if (!s.is_null(13)) r.speedup = s.f64(13);
    r.record = s.text(14), r.created_at = s.text(15);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace rlgemm
