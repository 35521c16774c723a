// The dispatcher's choices on the CPU: tuned-table parsing (errors name the line), the built-in tables,
// tuning databases, exact / policy / floor routes (and nearest / default when cuBLASLt is not wanted), layout
// and architecture filtering, and the rows where cuBLASLt measured faster.
#include "dispatch/dispatcher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "dispatch/tuned_table.h"
#include "store/store.h"

namespace rlgemm::dispatch {
namespace {

const std::string kH100 = "NVIDIA H100 80GB HBM3";
const std::string kSm90Big = "sm90.ws.coop/128x256x64/s4/c2x1/raster_m.g8/splitk1/epi_tma";
const std::string kSm90Small = "sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk2.serial/epi_reg/swap/static";
const std::string kSm80 = "sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg";

Target h100() { return Target{kH100, 9, 0, 232448}; }

std::vector<TunedRow> parse(const std::string& text, const std::string& source = "t.csv") {
  std::istringstream in(text);
  return parse_tuned_table(in, source);
}

std::string header() { return std::string(kTunedTableHeader) + "\n"; }

std::string row(const std::string& gpu, const std::string& mnk, const std::string& layout, const std::string& design,
                const std::string& speedup = "1.1", const std::string& candidate = "", const std::string& dtype = "fp16") {
  return gpu + "," + mnk + "," + layout + "," + design + ",12.5," + speedup + "," + candidate + "," + dtype + "\n";
}

std::string error_of(const std::string& text) {
  try {
    parse(text);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    return e.what();
  }
  return "(no error)";
}

TEST(TunedTable, ParsesRowsSkippingCommentsAndBlankLines) {
  const auto rows = parse("# tuned on one H100\n" + header() + "\n" + row(kH100, "4096,4096,4096", "tn", kSm90Big) +
                          "  # a comment\n" + row(kH100, "1,4096,4096", "nn", kSm90Small, ""));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].gpu, kH100);
  EXPECT_EQ(rows[0].problem, (Problem{{4096, 4096, 4096}, Layout::kTN}));
  EXPECT_EQ(to_string(rows[0].design), kSm90Big);
  EXPECT_DOUBLE_EQ(rows[0].time_us, 12.5);
  EXPECT_DOUBLE_EQ(*rows[0].speedup_vs_lt_auto, 1.1);
  EXPECT_EQ(rows[0].source, "t.csv:4");
  EXPECT_FALSE(rows[1].speedup_vs_lt_auto.has_value());
  EXPECT_EQ(rows[1].problem.layout, Layout::kNN);
}

TEST(TunedTable, ErrorsNameTheFileTheLineAndTheRule) {
  const std::string ok = row(kH100, "64,64,64", "tn", kSm80);
  auto has = [](const std::string& message, const std::string& part) {
    return message.find(part) != std::string::npos;
  };
  std::string e = error_of("M,N,K\n" + ok);
  EXPECT_TRUE(has(e, "t.csv:1:") && has(e, "header")) << e;
  e = error_of(header() + ok + kH100 + ",64,64,64,tn," + kSm80 + ",12.5\n");
  EXPECT_TRUE(has(e, "t.csv:3:") && has(e, "expected 10 columns")) << e;
  e = error_of(header() + row(kH100, "64,64,64", "tn", kSm80, "0.9", "-1"));
  EXPECT_TRUE(has(e, "t.csv:2:") && has(e, "cublaslt_candidate")) << e;
  e = error_of(header() + row(kH100, "64,64,64", "tn", kSm80, "0.9", "2.5"));
  EXPECT_TRUE(has(e, "t.csv:2:") && has(e, "cublaslt_candidate")) << e;
  e = error_of(header() + "\n" + row(kH100, "64,60,64", "tn", kSm80));
  EXPECT_TRUE(has(e, "t.csv:3:") && has(e, "multiple of 8")) << e;
  e = error_of(header() + row(kH100, "64,64,64", "nt", kSm80));
  EXPECT_TRUE(has(e, "t.csv:2:") && has(e, "nn")) << e;
  e = error_of(header() + row(kH100, "64,64,64", "tn", "sm80/64x64/w32x32"));
  EXPECT_TRUE(has(e, "t.csv:2:")) << e;
  e = error_of(header() + kH100 + ",64,64,64,tn," + kSm80 + ",fast,1.0,,fp16\n");
  EXPECT_TRUE(has(e, "t.csv:2:") && has(e, "time_us")) << e;
  e = error_of(header() + row(kH100, "64,64,64", "tn", kSm80, "-1"));
  EXPECT_TRUE(has(e, "t.csv:2:") && has(e, "speedup_vs_lt_auto")) << e;
  e = error_of(header() + row("", "64,64,64", "tn", kSm80));
  EXPECT_TRUE(has(e, "t.csv:2:") && has(e, "gpu")) << e;
  e = error_of(header() + row(kH100, "64,64,64", "tn", "test.wrong"));
  EXPECT_TRUE(has(e, "t.csv:2:") && has(e, "test designs")) << e;
  e = error_of(header() + ok + "\n" + row(kH100, "64,64,64", "tn", kSm90Big));
  EXPECT_TRUE(has(e, "t.csv:4:") && has(e, "duplicate") && has(e, "t.csv:2")) << e;
  e = error_of("# only a comment\n");
  EXPECT_TRUE(has(e, "empty tuned table")) << e;
  // The same shape in the other layout, or on another GPU, is not a duplicate.
  EXPECT_EQ(parse(header() + ok + row(kH100, "64,64,64", "nn", kSm80) + row("NVIDIA H200", "64,64,64", "tn", kSm80))
                .size(),
            3u);
}

TEST(TunedTable, ReadsTheCublasLtCandidateAndTablesWrittenWithoutIt) {
  const auto rows = parse(header() + row(kH100, "64,64,64", "tn", kSm80, "0.9", "7") +
                          row(kH100, "128,64,64", "tn", kSm80, "1.2", "0") + row(kH100, "256,64,64", "tn", kSm80));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].cublaslt_candidate, 7);
  EXPECT_EQ(rows[1].cublaslt_candidate, 0);
  EXPECT_FALSE(rows[2].cublaslt_candidate.has_value());
  const auto old = parse(std::string(kTunedTableHeaderWithoutCandidate) + "\n" + kH100 + ",64,64,64,tn," + kSm80 +
                         ",12.5,0.9\n");
  ASSERT_EQ(old.size(), 1u);
  EXPECT_FALSE(old[0].cublaslt_candidate.has_value());
  EXPECT_DOUBLE_EQ(*old[0].speedup_vs_lt_auto, 0.9);
}

TEST(TunedTable, TheDtypeColumnKeysRowsAndOlderTablesAreFp16) {
  const auto rows = parse(header() + row(kH100, "64,64,64", "tn", kSm80) +
                          row(kH100, "64,64,64", "tn", kSm80 + "/bf16", "1.3", "2", "bf16"));
  ASSERT_EQ(rows.size(), 2u);  // the same shape and layout in two element types: two problems
  EXPECT_EQ(rows[0].problem.dtype, DType::kF16);
  EXPECT_EQ(rows[1].problem.dtype, DType::kBF16);
  EXPECT_EQ(rows[1].design.dtype, DType::kBF16);
  const auto old = parse(std::string(kTunedTableHeaderWithoutDtype) + "\n" + kH100 + ",64,64,64,tn," + kSm80 +
                         ",12.5,0.9,3\n");
  ASSERT_EQ(old.size(), 1u);
  EXPECT_EQ(old[0].problem.dtype, DType::kF16);
  EXPECT_EQ(old[0].cublaslt_candidate, 3);
  // A design of the other type, an unknown type, a duplicate of one type: refused with the rule.
  EXPECT_NE(error_of(header() + row(kH100, "64,64,64", "tn", kSm80, "1.1", "", "bf16"))
                .find("a design's element type must be its problem's"),
            std::string::npos);
  EXPECT_NE(error_of(header() + row(kH100, "64,64,64", "tn", kSm80, "1.1", "", "fp8")).find("supported are fp16, bf16"),
            std::string::npos);
  EXPECT_NE(error_of(header() + row(kH100, "64,64,64", "tn", kSm80 + "/bf16", "1.1", "", "bf16") +
                     row(kH100, "64,64,64", "tn", kSm80 + "/bf16", "1.2", "", "bf16"))
                .find("duplicate row for " + kH100 + " 64,64,64 tn bf16"),
            std::string::npos);
  // Saved and read back with the column.
  const auto file = std::filesystem::temp_directory_path() / ("rlgemm-dtype-table-" + std::to_string(::getpid()) + ".csv");
  save_tuned_table(file, rows);
  const auto back = load_tuned_table(file);
  std::filesystem::remove(file);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[1].problem, rows[1].problem);
  EXPECT_EQ(back[1].design, rows[1].design);
}

TEST(Dispatcher, ABf16ProblemTakesBf16RowsOnly) {
  const auto rows = parse(header() + row(kH100, "512,512,512", "tn", kSm90Big, "1.2") +
                          row(kH100, "1024,1024,1024", "tn", kSm80 + "/bf16", "1.3", "", "bf16"));
  const Dispatcher floor(rows, h100());
  Problem p{{512, 512, 512}, Layout::kTN, DType::kBF16};
  Choice c = floor.choose(p);  // the fp16 row of this shape does not serve bf16: the floor, in bf16
  EXPECT_EQ(c.path, Path::kCublasLt);
  EXPECT_TRUE(c.floor);
  p.shape = {1024, 1024, 1024};
  c = floor.choose(p);
  EXPECT_EQ(c.path, Path::kTuned);
  EXPECT_EQ(to_string(c.design), kSm80 + "/bf16");
  EXPECT_EQ(floor.choose({{512, 512, 512}, Layout::kTN}).path, Path::kTuned);
  // Kernels only: the nearest bf16 row, or the default design, in bf16.
  const Dispatcher kernels(rows, h100(), false);
  c = kernels.choose({{500, 520, 512}, Layout::kTN, DType::kBF16});
  EXPECT_EQ(c.path, Path::kNearest);
  EXPECT_EQ(c.design.dtype, DType::kBF16);
  c = kernels.choose({{500, 520, 512}, Layout::kNN, DType::kBF16});
  EXPECT_EQ(c.path, Path::kDefault);
  EXPECT_EQ(c.design.dtype, DType::kBF16);
  // A policy proposes tiles; the route runs them in the problem's type.
  const Dispatcher policy(rows, h100(), true, [](const Problem&) { return std::optional<Design>(parse_design(kSm80)); });
  c = policy.choose({{100, 520, 512}, Layout::kTN, DType::kBF16});
  EXPECT_EQ(c.path, Path::kPolicy);
  EXPECT_EQ(to_string(c.design), kSm80 + "/bf16");
}

TEST(TunedTable, MissingFileIsAnInputError) {
  EXPECT_THROW(load_tuned_table("/nonexistent/rlgemm-tuned.csv"), Error);
}

TEST(TunedTable, BuiltInTablesParse) {
  const auto names = embedded_table_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "h100.csv"), names.end());
  const auto rows = embedded_tuned_rows();  // throws when a committed table is malformed
  for (const auto& r : rows) EXPECT_FALSE(why_invalid(r.design, r.problem.layout)) << r.source;
}

TEST(TunedTable, SavedTablesReadBackRowForRow) {
  const auto file = std::filesystem::temp_directory_path() / ("rlgemm-saved-table-" + std::to_string(::getpid()) + ".csv");
  const auto rows = embedded_tuned_rows();
  ASSERT_FALSE(rows.empty());
  save_tuned_table(file, rows);
  const auto back = load_tuned_table(file);
  std::filesystem::remove(file);
  ASSERT_EQ(back.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(back[i].gpu, rows[i].gpu);
    EXPECT_EQ(back[i].problem, rows[i].problem);
    EXPECT_EQ(to_string(back[i].design), to_string(rows[i].design));
    EXPECT_NEAR(back[i].time_us, rows[i].time_us, 5e-4);
    ASSERT_EQ(bool(back[i].speedup_vs_lt_auto), bool(rows[i].speedup_vs_lt_auto));
    if (rows[i].speedup_vs_lt_auto) EXPECT_NEAR(*back[i].speedup_vs_lt_auto, *rows[i].speedup_vs_lt_auto, 5e-5);
    EXPECT_EQ(back[i].cublaslt_candidate, rows[i].cublaslt_candidate);
  }
}

// Records `design` timed at `us` beside lt_auto at `ref` us in the same rounds, with a 95% interval of +-`spread`.
void record_paired(Store& store, int64_t gpu, const Problem& problem, const std::string& design, double us, double ref,
                   double spread, TimingMode mode) {
  MeasurementRecord r;
  r.gpu_id = gpu;
  r.problem = problem;
  r.design = design;
  r.mode = mode;
  r.measurement.status = MeasureStatus::kOk;
  r.measurement.timing = TimingStats{us, us, us, 5};
  r.reward = std::log(ref / us);
  r.measurement.paired = PairedGain{ref, r.reward, ref / us * (1 - spread) - 1, ref / us * (1 + spread) - 1, 15};
  store.record(r);
}

TEST(TunedTable, TuningDatabaseGivesTheBestDesignPerShapeAndMode) {
  const auto dir = std::filesystem::temp_directory_path() / ("rlgemm-dispatch-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "tune.db";
  {
    Store store(file);
    const int64_t gpu = store.gpu_id(GpuIdentity{kH100, 132, 9, 0, 1980000, 2619000, 13000, 232448});
    const Problem p{{256, 512, 1024}, Layout::kTN};
    auto record = [&](const Problem& problem, const std::string& design, double us, double ref, double spread,
                      TimingMode mode) { record_paired(store, gpu, problem, design, us, ref, spread, mode); };
    record(p, kSm80, 20.0, 12.0, 0.01, TimingMode::kOffline);
    record(p, kSm90Big, 10.0, 12.0, 0.01, TimingMode::kOffline);
    record(p, kSm90Small, 5.0, 5.1, 0.03, TimingMode::kServer);  // 1.02x, but its interval holds 1
    record(p, kSm90Small, 9.0, 8.0, 0.01, TimingMode::kGraph);   // slower than cuBLASLt
    // The same shape in bf16: a problem of its own, with its own reference.
    record(Problem{p.shape, p.layout, DType::kBF16}, kSm80 + "/bf16", 4.0, 6.0, 0.01, TimingMode::kOffline);
  }
  auto offline = load_tuning_database(file, "offline");
  ASSERT_EQ(offline.size(), 2u);
  std::stable_sort(offline.begin(), offline.end(),
                   [](const TunedRow& a, const TunedRow& b) { return a.problem.dtype < b.problem.dtype; });
  EXPECT_EQ(offline[1].problem.dtype, DType::kBF16);
  EXPECT_EQ(to_string(offline[1].design), kSm80 + "/bf16");
  EXPECT_DOUBLE_EQ(*offline[1].speedup_vs_lt_auto, 1.5);  // against the bf16 reference of its rounds
  EXPECT_EQ(offline[0].problem.dtype, DType::kF16);
  EXPECT_EQ(offline[0].gpu, kH100);
  EXPECT_EQ(to_string(offline[0].design), kSm90Big);  // the highest paired gain
  EXPECT_DOUBLE_EQ(offline[0].time_us, 10.0);
  ASSERT_TRUE(offline[0].speedup_vs_lt_auto);
  EXPECT_DOUBLE_EQ(*offline[0].speedup_vs_lt_auto, 1.2);
  // Gains that do not clear their interval, and losses, give no row: the floor serves those shapes.
  EXPECT_TRUE(load_tuning_database(file, "server").empty());
  EXPECT_TRUE(load_tuning_database(file, "graph").empty());
  EXPECT_THROW(load_tuning_database(file, "cold"), Error);
  EXPECT_THROW(load_tuning_database(dir / "missing.db", "offline"), Error);
  EXPECT_FALSE(std::filesystem::exists(dir / "missing.db"));  // never created by a lookup
  std::filesystem::remove_all(dir);
}

// Several modes, in order of preference: a shape takes the first mode's design where it held there, else the next
// mode's; a shape that held in no listed mode gives no row.
TEST(TunedTable, TuningDatabaseOverSeveralModesPrefersTheFirstThatHeld) {
  const auto dir = std::filesystem::temp_directory_path() / ("rlgemm-dispatch-modes-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "tune.db";
  const Problem both{{256, 512, 1024}, Layout::kTN}, offline_only{{64, 4096, 4096}, Layout::kTN},
      neither{{4096, 4096, 4096}, Layout::kTN};
  {
    Store store(file);
    const int64_t gpu = store.gpu_id(GpuIdentity{kH100, 132, 9, 0, 1980000, 2619000, 13000, 232448});
    auto record = [&](const Problem& problem, const std::string& design, double us, double ref, TimingMode mode) {
      record_paired(store, gpu, problem, design, us, ref, 0.01, mode);
    };
    record(both, kSm90Big, 10.0, 11.0, TimingMode::kOffline);
    record(both, kSm90Small, 8.0, 10.0, TimingMode::kGraph);
    record(offline_only, kSm80, 5.0, 6.0, TimingMode::kOffline);
    record(offline_only, kSm80, 6.0, 5.5, TimingMode::kGraph);  // slower in graphs
    record(neither, kSm90Big, 100.0, 95.0, TimingMode::kOffline);
    record(neither, kSm90Big, 100.0, 96.0, TimingMode::kGraph);
  }
  auto rows = load_tuning_database(file, {TimingMode::kGraph, TimingMode::kOffline});
  std::sort(rows.begin(), rows.end(),
            [](const TunedRow& a, const TunedRow& b) { return a.problem.shape < b.problem.shape; });
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].problem, offline_only);
  EXPECT_EQ(to_string(rows[0].design), kSm80);
  EXPECT_DOUBLE_EQ(*rows[0].speedup_vs_lt_auto, 1.2);
  EXPECT_EQ(rows[1].problem, both);
  EXPECT_EQ(to_string(rows[1].design), kSm90Small);  // graph's, the first mode named
  EXPECT_DOUBLE_EQ(rows[1].time_us, 8.0);
  EXPECT_NE(rows[1].source.find(" graph)"), std::string::npos) << rows[1].source;
  // The other order prefers offline's design where both held.
  rows = load_tuning_database(file, {TimingMode::kOffline, TimingMode::kGraph});
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& r : rows)
    if (r.problem == both) EXPECT_EQ(to_string(r.design), kSm90Big);
  std::filesystem::remove_all(dir);
}

// Several databases as one body of evidence: an earlier table's verification (offline and graph) and a later
// tune in graph mode. A shape takes the most preferred mode that held in any of them, and there the larger gain;
// rows only the earlier database holds stay.
TEST(TunedTable, SeveralDatabasesPoolTheirEvidence) {
  const auto dir = std::filesystem::temp_directory_path() / ("rlgemm-dispatch-pool-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto earlier = dir / "verify.db", later = dir / "retune.db";
  const Problem offline_before{{256, 512, 1024}, Layout::kTN}, better_later{{1024, 1024, 1024}, Layout::kTN},
      worse_later{{2048, 2048, 512}, Layout::kTN}, only_before{{64, 4096, 4096}, Layout::kTN};
  const GpuIdentity h100{kH100, 132, 9, 0, 1980000, 2619000, 13000, 232448};
  {
    Store store(earlier);
    const int64_t gpu = store.gpu_id(h100);
    record_paired(store, gpu, offline_before, kSm90Big, 10.0, 12.0, 0.01, TimingMode::kOffline);
    record_paired(store, gpu, better_later, kSm90Big, 10.0, 10.5, 0.01, TimingMode::kGraph);   // 1.05
    record_paired(store, gpu, worse_later, kSm90Big, 10.0, 11.0, 0.01, TimingMode::kGraph);    // 1.10
    record_paired(store, gpu, only_before, kSm80, 5.0, 6.0, 0.01, TimingMode::kOffline);
  }
  {
    Store store(later);
    const int64_t gpu = store.gpu_id(h100);
    record_paired(store, gpu, offline_before, kSm90Small, 9.0, 10.0, 0.01, TimingMode::kGraph);  // graph now holds
    record_paired(store, gpu, better_later, kSm90Small, 10.0, 11.5, 0.01, TimingMode::kGraph);   // 1.15
    record_paired(store, gpu, worse_later, kSm90Small, 10.0, 10.3, 0.01, TimingMode::kGraph);    // 1.03
  }
  size_t several = 0;
  auto rows = load_tuning_databases({earlier, later}, {TimingMode::kGraph, TimingMode::kOffline}, &several);
  EXPECT_EQ(several, 3u);  // every shape but the one only the earlier database holds
  std::sort(rows.begin(), rows.end(),
            [](const TunedRow& a, const TunedRow& b) { return a.problem.shape < b.problem.shape; });
  ASSERT_EQ(rows.size(), 4u);
  auto find = [&](const Problem& p) -> const TunedRow& {
    const size_t i = row_index(rows, kH100, p);
    EXPECT_LT(i, rows.size()) << p.shape.to_string();
    return rows.at(i);
  };
  EXPECT_EQ(to_string(find(offline_before).design), kSm90Small);  // graph is preferred to offline
  EXPECT_EQ(to_string(find(better_later).design), kSm90Small);
  EXPECT_DOUBLE_EQ(*find(better_later).speedup_vs_lt_auto, 1.15);
  EXPECT_NE(find(better_later).source.find("retune.db"), std::string::npos);
  EXPECT_EQ(to_string(find(worse_later).design), kSm90Big);  // the earlier run's larger gain
  EXPECT_NE(find(worse_later).source.find("verify.db"), std::string::npos);
  EXPECT_EQ(to_string(find(only_before).design), kSm80);
  // The order of the databases does not matter.
  auto swapped = load_tuning_databases({later, earlier}, {TimingMode::kGraph, TimingMode::kOffline});
  ASSERT_EQ(swapped.size(), rows.size());
  for (const TunedRow& r : swapped)
    EXPECT_EQ(to_string(r.design), to_string(find(r.problem).design)) << r.problem.shape.to_string();
  EXPECT_THROW(load_tuning_databases({earlier, dir / "missing.db"}, {TimingMode::kGraph}), Error);
  std::filesystem::remove_all(dir);
}

std::vector<TunedRow> table() {
  return parse(header() +                                                    //
               row(kH100, "1024,1024,1024", "tn", kSm90Small) +              // static: shape-generic when borrowed
               row(kH100, "8192,8192,8192", "tn", kSm90Big) +                //
               row(kH100, "4096,4096,4096", "tn", kSm80, "0.85", "3") +     // cuBLASLt (its candidate 3) faster
               row(kH100, "2048,2048,2048", "tn", kSm80, "0.9") +           // cuBLASLt, no candidate recorded
               row(kH100, "64,64,64", "nn", kSm80) +                         //
               row("NVIDIA A100-SXM4-80GB", "1000,1000,1000", "tn", kSm80));  // another GPU
}

TEST(Dispatcher, ExactShapeUsesItsTunedDesign) {
  const Dispatcher d(table(), h100());
  EXPECT_EQ(d.tuned_rows(), 5u);
  const Choice c = d.choose({{1024, 1024, 1024}, Layout::kTN});
  EXPECT_EQ(c.path, Path::kTuned);
  EXPECT_EQ(to_string(c.design), kSm90Small);  // static kept: it was tuned for this very shape
  EXPECT_EQ(c.describe(), "tuned " + kSm90Small);
}

TEST(Dispatcher, CublasLtServesTheShapesWhereItMeasuredFaster) {
  const Choice lt = Dispatcher(table(), h100()).choose({{4096, 4096, 4096}, Layout::kTN});
  EXPECT_EQ(lt.path, Path::kCublasLt);
  EXPECT_EQ(lt.cublaslt_candidate, 3);  // the algorithm lt_auto measured fastest
  EXPECT_EQ(lt.describe(), "cublaslt candidate 3");
  const Choice first = Dispatcher(table(), h100()).choose({{2048, 2048, 2048}, Layout::kTN});
  EXPECT_EQ(first.path, Path::kCublasLt);
  EXPECT_FALSE(first.cublaslt_candidate.has_value());  // the heuristic's first choice
  EXPECT_EQ(first.describe(), "cublaslt");
  // cuBLASLt only 2% faster offline: the kernel, whose launch costs less host time.
  const auto close = parse(header() + "\n" + row(kH100, "512,512,512", "tn", kSm80, "0.98", "2"));
  EXPECT_EQ(Dispatcher(close, h100()).choose({{512, 512, 512}, Layout::kTN}).path, Path::kTuned);
  const Choice c = Dispatcher(table(), h100(), /*prefer_cublaslt=*/false).choose({{4096, 4096, 4096}, Layout::kTN});
  EXPECT_EQ(c.path, Path::kTuned);
  EXPECT_EQ(to_string(c.design), kSm80);
  // Only the exact shape: its neighbours have no measurement of their own, so they take the floor.
  const Choice near = Dispatcher(table(), h100()).choose({{4000, 4096, 4096}, Layout::kTN});
  EXPECT_EQ(near.path, Path::kCublasLt);
  EXPECT_TRUE(near.floor);
  EXPECT_FALSE(near.cublaslt_candidate.has_value());  // chosen by the handle, as lt_auto does
  EXPECT_EQ(near.describe(), "cublaslt floor");
}

// Without measured evidence that a kernel beats cuBLASLt, cuBLASLt: untuned shapes, other layouts, rows that
// record no comparison with lt_auto, and GPUs without rows. Only a handle that refuses cuBLASLt runs a kernel
// there.
TEST(Dispatcher, NoEvidenceMeansTheCublasLtFloor) {
  const auto rows = parse(header() + row(kH100, "1024,1024,1024", "tn", kSm90Small) +
                          row(kH100, "2048,2048,2048", "tn", kSm90Big, ""));  // no comparison recorded
  const Dispatcher d(rows, h100());
  for (const Problem& p : {Problem{{1000, 1024, 1096}, Layout::kTN}, Problem{{1024, 1024, 1024}, Layout::kNN},
                           Problem{{2048, 2048, 2048}, Layout::kTN}, Problem{{1, 8, 8}, Layout::kTN}}) {
    const Choice c = d.choose(p);
    EXPECT_EQ(c.path, Path::kCublasLt) << p.shape.to_string();
    EXPECT_TRUE(c.floor) << p.shape.to_string();
  }
  EXPECT_EQ(d.choose({{1024, 1024, 1024}, Layout::kTN}).path, Path::kTuned);
  const Dispatcher kernels_only(rows, h100(), /*prefer_cublaslt=*/false);
  EXPECT_EQ(kernels_only.choose({{2048, 2048, 2048}, Layout::kTN}).path, Path::kTuned);
  EXPECT_EQ(kernels_only.choose({{1000, 1024, 1096}, Layout::kTN}).path, Path::kNearest);
  for (const Target& other : {Target{"NVIDIA H200", 9, 0, 232448}, Target{"NVIDIA A100-SXM4-80GB", 8, 0, 166912},
                              Target{"NVIDIA B200", 10, 0, 232448}}) {
    const Choice c = Dispatcher(table(), other).choose({{4096, 4096, 4096}, Layout::kTN});
    EXPECT_EQ(c.path, Path::kCublasLt) << other.name;
    EXPECT_TRUE(c.floor) << other.name;
  }
}

TEST(Dispatcher, WithoutCublasLtOtherShapesBorrowTheNearestInLogSpace) {
  const Dispatcher d(table(), h100(), /*prefer_cublaslt=*/false);
  Choice c = d.choose({{1000, 1024, 1096}, Layout::kTN});
  EXPECT_EQ(c.path, Path::kNearest);
  ASSERT_TRUE(c.borrowed_from);
  EXPECT_EQ(*c.borrowed_from, (Shape{1024, 1024, 1024}));
  Design generic = parse_design(kSm90Small);
  generic.static_shape = false;
  EXPECT_EQ(c.design, generic);
  EXPECT_EQ(c.describe(), "nearest " + to_string(generic) + " (from 1024,1024,1024)");
  c = d.choose({{3000, 4096, 4096}, Layout::kTN});
  EXPECT_EQ(*c.borrowed_from, (Shape{4096, 4096, 4096}));
  // M = 1 is far from every row in log space: sqrt(ln^2 1024 + 2 ln^2 8) = 7.5 to 1024^3 beats ln 8192 = 9.0
  // to 8192^3, although N and K match the latter exactly.
  c = d.choose({{1, 8192, 8192}, Layout::kTN});
  EXPECT_EQ(*c.borrowed_from, (Shape{1024, 1024, 1024}));
  EXPECT_NEAR(log_distance({1, 8192, 8192}, {8192, 8192, 8192}), std::log(8192.0), 1e-12);
  EXPECT_DOUBLE_EQ(log_distance({7, 16, 24}, {7, 16, 24}), 0.0);
  EXPECT_DOUBLE_EQ(log_distance({7, 16, 24}, {70, 160, 240}), log_distance({70, 160, 240}, {7, 16, 24}));
}

// A shape's tune measures the designs other shapes found fast, nearest first: its own row is left out (a seed
// table gives it), the other element type's row of its shape comes first, each design once in the problem's type,
// rows as near ordered by their gain, and only rows of its layout.
TEST(TunedTable, NearestDesignsComeNearestFirstOnceEachInTheProblemsType) {
  const std::string bf16 = "sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg/bf16";
  const auto rows = parse(header() + row(kH100, "1024,1024,1024", "tn", kSm90Big) +          // the problem's own row
                          row(kH100, "1024,1024,1024", "tn", bf16, "1.2", "", "bf16") +     // its shape in bf16
                          row(kH100, "2048,1024,1024", "tn", kSm80, "1.05") +               // ln 2 away
                          row(kH100, "1024,512,1024", "tn", kSm90Small, "1.3") +            // ln 2 away, larger gain
                          row(kH100, "1024,1024,2048", "tn", kSm90Big, "1.4") +             // ln 2 away, the largest gain
                          row(kH100, "512,1024,1024", "nn", kSm80, "1.5") +                 // another layout
                          row(kH100, "8192,8192,8192", "tn", bf16, "1.1", "", "bf16"));     // the same design as bf16
  const Problem problem{{1024, 1024, 1024}, Layout::kTN};
  std::vector<std::string> got;
  for (const Design& d : nearest_designs(rows, problem)) got.push_back(to_string(d));
  const std::string fp16_twin = "sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk1/epi_reg";
  EXPECT_EQ(got, (std::vector<std::string>{fp16_twin, kSm90Big, kSm90Small, kSm80})) << ::testing::PrintToString(got);
  // In bf16 the fp16 row of the shape is the other type's row, and the bf16 row its own.
  got.clear();
  for (const Design& d : nearest_designs(rows, {{1024, 1024, 1024}, Layout::kTN, DType::kBF16}))
    got.push_back(to_string(d));
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got[0], kSm90Big + "/bf16");
  EXPECT_EQ(std::count(got.begin(), got.end(), bf16), 1) << ::testing::PrintToString(got);  // from 8192^3 only
  // nn: the one nn row, whatever its distance.
  got.clear();
  for (const Design& d : nearest_designs(rows, {{64, 64, 64}, Layout::kNN})) got.push_back(to_string(d));
  EXPECT_EQ(got, (std::vector<std::string>{kSm80}));
  EXPECT_TRUE(nearest_designs({}, problem).empty());
}

// The autotuned route's neighbours: the nearest rows' designs as shape-generic kernels, those the GPU can run, none
// already among the candidates, at most the count asked for.
TEST(TunedTable, RunnableNearestDesignsSkipWhatTheGpuCannotRunAndWhatIsTaken) {
  const auto rows = parse(header() + row(kH100, "1024,1024,2048", "tn", kSm90Small) +   // nearest; baked shape
                          row(kH100, "1024,1024,4096", "tn", kSm90Big) +              // next
                          row(kH100, "1024,1024,8192", "tn", kSm80));                 // farthest
  const Problem problem{{1024, 1024, 1024}, Layout::kTN};
  Design small = parse_design(kSm90Small);
  small.static_shape = false;
  const Design big = parse_design(kSm90Big), sm80 = parse_design(kSm80);
  EXPECT_EQ(runnable_nearest_designs(rows, problem, h100(), 2, {}), (std::vector<Design>{small, big}));
  EXPECT_EQ(runnable_nearest_designs(rows, problem, h100(), 2, {big}), (std::vector<Design>{small, sm80}));
  EXPECT_TRUE(runnable_nearest_designs(rows, problem, h100(), 0, {}).empty());
  // An Ampere GPU runs the sm80 design only.
  const Target a100{"NVIDIA A100-SXM4-80GB", 8, 0, 166912};
  EXPECT_EQ(runnable_nearest_designs(rows, problem, a100, 3, {}), (std::vector<Design>{sm80}));
}

TEST(Dispatcher, ATunedRowIsCheckedBesideTheUntunedRoutesOtherDesignsOnly) {
  const Problem problem{{1024, 1024, 1024}, Layout::kTN};
  const Design small = parse_design(kSm90Small), big = parse_design(kSm90Big), sm80 = parse_design(kSm80);
  Design small_generic = small;
  small_generic.static_shape = false;
  const std::vector<std::pair<Design, std::string>> untuned = {
      {small_generic, " (predicted)"}, {big, " (fitted)"}, {big, " (nearest)"}, {sm80, " (nearest)"}};
  // The row's own design (baked to its shape or not) is not checked twice, nor a design offered twice.
  using Beside = std::vector<std::pair<Design, std::string>>;
  EXPECT_EQ(beside_tuned_row(small, untuned, problem, h100()), (Beside{{big, " (fitted)"}, {sm80, " (nearest)"}}));
  // A cuBLASLt row names no kernel: every design of the untuned route is checked.
  EXPECT_EQ(beside_tuned_row(std::nullopt, untuned, problem, h100()),
            (Beside{{small_generic, " (predicted)"}, {big, " (fitted)"}, {sm80, " (nearest)"}}));
  // What the GPU cannot run is left out: an Ampere GPU runs the sm80 design only.
  const Target a100{"NVIDIA A100-SXM4-80GB", 8, 0, 166912};
  EXPECT_EQ(beside_tuned_row(std::nullopt, untuned, problem, a100), (Beside{{sm80, " (nearest)"}}));
  EXPECT_TRUE(beside_tuned_row(sm80, {}, problem, h100()).empty());
}

TEST(Dispatcher, OnlyRowsOfTheSameLayoutAreBorrowed) {
  const Dispatcher d(table(), h100(), /*prefer_cublaslt=*/false);
  // The only nn row is 64^3: every nn shape borrows it, however far, never a tn row.
  Choice c = d.choose({{8192, 8192, 8192}, Layout::kNN});
  EXPECT_EQ(c.path, Path::kNearest);
  EXPECT_EQ(*c.borrowed_from, (Shape{64, 64, 64}));
  EXPECT_EQ(to_string(c.design), kSm80);
  // An exact shape of the other layout is not tuned for this one.
  c = d.choose({{1024, 1024, 1024}, Layout::kNN});
  EXPECT_EQ(c.path, Path::kNearest);
  // Nothing of a layout tuned: the default design.
  const Dispatcher tn_only(parse(header() + row(kH100, "64,64,64", "tn", kSm80)), h100(), false);
  EXPECT_EQ(tn_only.choose({{64, 64, 64}, Layout::kNN}).path, Path::kDefault);
}

TEST(Dispatcher, DesignsTheLayoutOrTheGpuCannotRunAreSkipped) {
  // An sm90 design valid for tn that the nn layout rejects (an MN-major B tile needs BN % 64 == 0).
  const std::string tn_only = "sm90.ws.pingpong/64x96x64/s4/c1x1/raster_m.g8/splitk1/epi_reg";
  ASSERT_FALSE(why_invalid(parse_design(tn_only), Layout::kTN));
  ASSERT_TRUE(why_invalid(parse_design(tn_only), Layout::kNN));
  // The same GPU name on an sm_80 target: sm90 rows cannot run there, the nearest runnable row serves.
  const auto rows = parse(header() + row(kH100, "1024,1024,1024", "tn", kSm90Big) +
                          row(kH100, "128,128,128", "tn", kSm80));
  Target ampere = h100();
  ampere.cc_major = 8;
  const Dispatcher d(rows, ampere, /*prefer_cublaslt=*/false);
  Choice c = d.choose({{1024, 1024, 1024}, Layout::kTN});  // exact row, not runnable here
  EXPECT_EQ(c.path, Path::kNearest);
  EXPECT_EQ(*c.borrowed_from, (Shape{128, 128, 128}));
  EXPECT_EQ(Dispatcher(rows, ampere).choose({{1024, 1024, 1024}, Layout::kTN}).path, Path::kCublasLt);
  EXPECT_TRUE(why_not_runnable(parse_design(kSm90Big), Problem{{256, 256, 256}, Layout::kTN}, ampere));
  EXPECT_FALSE(why_not_runnable(parse_design(kSm80), Problem{{256, 256, 256}, Layout::kTN}, ampere));
  // Programmatic dependent launch is an sm_90 feature, whatever the family.
  const std::string sm80_pdl = kSm80 + "/pdl";
  const auto no_pdl = why_not_runnable(parse_design(sm80_pdl), Problem{{256, 256, 256}, Layout::kTN}, ampere);
  ASSERT_TRUE(no_pdl);
  EXPECT_NE(no_pdl->find("/pdl"), std::string::npos) << *no_pdl;
  EXPECT_FALSE(why_not_runnable(parse_design(sm80_pdl), Problem{{256, 256, 256}, Layout::kTN}, h100()));
  // A policy proposing a design the layout rejects falls back to the floor.
  const Dispatcher with_policy(rows, h100(), true, [&](const Problem&) { return parse_design(tn_only); });
  EXPECT_EQ(with_policy.choose({{500, 512, 512}, Layout::kNN}).path, Path::kCublasLt);
  EXPECT_EQ(with_policy.choose({{500, 512, 512}, Layout::kTN}).path, Path::kPolicy);
}

TEST(Dispatcher, PolicyProposesForUntunedShapesOnly) {
  int calls = 0;
  const Dispatcher d(table(), h100(), true, [&](const Problem&) -> std::optional<Design> {
    ++calls;
    return parse_design("sm90.ws.coop/128x128x64/s4/c1x1/raster_n.g8/splitk1/epi_reg/static");
  });
  EXPECT_EQ(d.choose({{1024, 1024, 1024}, Layout::kTN}).path, Path::kTuned);
  EXPECT_EQ(calls, 0);
  const Choice c = d.choose({{333, 1024, 1024}, Layout::kTN});
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(c.path, Path::kPolicy);
  EXPECT_FALSE(c.design.static_shape);  // borrowed designs run shape-generic
  // A proposer with nothing to say leaves the floor.
  const Dispatcher silent(table(), h100(), true, [](const Problem&) { return std::optional<Design>(); });
  EXPECT_EQ(silent.choose({{333, 1024, 1024}, Layout::kTN}).path, Path::kCublasLt);
}

// The predictor the user asked for: its design (run shape-generic) where it has one that the GPU can run,
// after exact rows and a policy, before the floor.
TEST(Dispatcher, PredictedRoutesComeAfterMeasurementsAndPolicyBeforeTheFloor) {
  const std::string guess = "sm90.ws.coop/128x128x64/s4/c1x1/raster_n.g8/splitk1/epi_reg/static";
  int asked = 0;
  const Proposer predictor = [&](const Problem& p) -> std::optional<Design> {
    ++asked;
    if (p.shape.m == 7) return std::nullopt;  // nothing clears the route rule
    return parse_design(guess);
  };
  const Dispatcher d(table(), h100(), true, nullptr, predictor);
  EXPECT_EQ(d.choose({{1024, 1024, 1024}, Layout::kTN}).path, Path::kTuned);
  EXPECT_EQ(d.choose({{4096, 4096, 4096}, Layout::kTN}).path, Path::kCublasLt);
  EXPECT_EQ(asked, 0) << "measured shapes never ask the predictor";
  const Choice c = d.choose({{333, 1024, 1024}, Layout::kTN});
  EXPECT_EQ(c.path, Path::kPredicted);
  EXPECT_FALSE(c.design.static_shape);
  EXPECT_EQ(c.describe().rfind("predicted sm90.ws.coop/128x128x64", 0), 0u) << c.describe();
  EXPECT_TRUE(d.choose({{7, 1024, 1024}, Layout::kTN}).floor);
  Target ampere = h100();
  ampere.cc_major = 8;  // the predicted sm90 design cannot run there: the floor
  EXPECT_EQ(Dispatcher(table(), ampere, true, nullptr, predictor).choose({{333, 1024, 1024}, Layout::kTN}).path,
            Path::kCublasLt);
  const Dispatcher with_policy(table(), h100(), true,
                               [](const Problem&) { return parse_design("sm80/64x64x32/w32x32/s4/swz/raster_m.g8/splitk1/epi_reg"); },
                               predictor);
  EXPECT_EQ(with_policy.choose({{333, 1024, 1024}, Layout::kTN}).path, Path::kPolicy);
}

TEST(Dispatcher, WithoutCublasLtUntunedGpusGetTheArchitecturesDefaultDesign) {
  const Dispatcher hopper({}, h100(), /*prefer_cublaslt=*/false);
  Choice c = hopper.choose({{100, 200, 300 - 4}, Layout::kTN});
  EXPECT_EQ(c.path, Path::kDefault);
  EXPECT_EQ(c.design.family, Family::kSm90);
  Target ampere{"NVIDIA A100-SXM4-80GB", 8, 0, 166912};
  Target ada{"NVIDIA L4", 8, 9, 101376};
  for (const Target& t : {h100(), ampere, ada}) {
    const Design d = default_design(t);
    EXPECT_EQ(d.family, t.cc_major == 9 ? Family::kSm90 : Family::kSm80) << t.name;
    for (Layout l : {Layout::kNN, Layout::kTN})
      EXPECT_FALSE(why_not_runnable(d, Problem{{1024, 1024, 8192}, l}, t)) << t.name << " " << to_string(d) << ": " << *why_not_runnable(d, Problem{{1024, 1024, 8192}, l}, t);
    // Rows of another GPU do not count.
    EXPECT_EQ(Dispatcher(table(), Target{t.name + " (other)", t.cc_major, t.cc_minor, t.smem_per_block_optin}, false)
                  .choose({{64, 64, 64}, Layout::kTN})
                  .path,
              Path::kDefault);
  }
}

TEST(Dispatcher, RejectsBadShapesAndDuplicateRows) {
  const Dispatcher d(table(), h100());
  EXPECT_THROW(d.choose({{0, 64, 64}, Layout::kTN}), Error);
  EXPECT_THROW(d.choose({{64, 60, 64}, Layout::kTN}), Error);
  auto rows = table();
  rows.push_back(rows.front());
  rows.back().source = "db";
  try {
    Dispatcher twice(rows, h100());
    ADD_FAILURE() << "duplicate rows accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("t.csv:2 and db"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace rlgemm::dispatch
