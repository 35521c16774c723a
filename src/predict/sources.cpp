#include "predict/sources.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "bench/results.h"
#include "rlgemm/error.h"
#include "store/store.h"

namespace rlgemm::predict {

namespace {

// The GPU of a harness run, from the JSON the harness writes beside its CSV; for runs merged by `rlgemm
// summarize --out`, the GPU of the runs it merged (one GPU: rows of several would need the GPU per row).
std::optional<GpuTraits> gpu_of_run(const std::string& csv_path) {
  const std::filesystem::path json_path = std::filesystem::path(csv_path).replace_extension(".json");
  std::ifstream in(json_path);
  if (!in) return std::nullopt;
  try {
    const nlohmann::json j = nlohmann::json::parse(in);
    nlohmann::json g;
    if (j.contains("gpu")) {
      g = j["gpu"];
    } else {
      for (const auto& source : j.at("merged_from")) {
        if (!source.contains("run") || !source["run"].contains("gpu")) continue;
        if (!g.is_null() && g.at("name") != source["run"]["gpu"].at("name"))
          fail(json_path.string() + ": the merged runs were measured on different GPUs; give the runs' own CSVs");
        g = source["run"]["gpu"];
      }
      if (g.is_null()) return std::nullopt;
    }
    GpuTraits t;
    t.name = g.at("name").get<std::string>();
    t.sm_count = g.at("sm_count").get<int>();
    const std::string cc = g.at("compute_capability").get<std::string>();
    const auto dot = cc.find('.');
    if (dot == std::string::npos) throw std::invalid_argument(cc);
    t.cc_major = std::stoi(cc.substr(0, dot));
    t.cc_minor = std::stoi(cc.substr(dot + 1));
    return t;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(json_path.string() + ": cannot read the run's GPU (" + e.what() + ")");
  }
}

// "tuned <design>", "nearest <design> (from M,N,K)", "policy <design>", "default <design>": the design the
// library's kernel route ran; "" for the cuBLASLt route and for SASS-rescheduled kernels.
std::string design_of_library_row(const std::string& detail) {
  for (const char* route : {"tuned ", "nearest ", "policy ", "default "}) {
    const std::string prefix(route);
    if (detail.rfind(prefix, 0) != 0) continue;
    if (detail.find(" sass ") != std::string::npos) return "";
    const auto end = detail.find(' ', prefix.size());
    return detail.substr(prefix.size(), end == std::string::npos ? std::string::npos : end - prefix.size());
  }
  return "";
}

}  // namespace

std::vector<Sample> samples_from_harness_csv(const std::string& path, const std::optional<GpuTraits>& fallback) {
  std::optional<GpuTraits> gpu = gpu_of_run(path);
  if (!gpu) gpu = fallback;
  if (!gpu) fail(path + ": no run JSON beside it names the GPU; give the GPU (--gpu)");
  std::vector<Sample> out;
  for (const bench::Row& row : bench::read_csv(path)) {
    if (!row.correct || !(row.time_us > 0) || !std::isfinite(row.time_us)) continue;
    if (row.dtype != DType::kF16) continue;  // the predictors learn fp16 kernels; their features name no type
    Sample s;
    s.gpu = *gpu;
    s.problem = {row.shape, row.layout};
    s.mode = std::string(bench::to_string(row.mode));
    s.time_us = row.time_us;
    s.source = path;
    if (row.impl == "lt_auto") {
      s.impl = "lt_auto";
    } else {
      s.impl = bench::is_design_row(row) ? row.impl : row.impl == "rlgemm" ? design_of_library_row(row.detail) : "";
      if (s.impl.empty()) continue;
      if (std::isfinite(row.speedup) && row.speedup > 0) s.lt_us = row.time_us * row.speedup;
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<Sample> samples_from_store(const std::string& path) {
  // Read from a copy (StoreReadCopy, which refuses a missing file): the databases read here are records
  // (committed results) that reading must leave as they are.
  StoreReadCopy copy(path);
  Store& store = *copy;
  std::map<int64_t, GpuTraits> gpus;
  for (const auto& [id, identity] : store.gpus()) gpus[id] = traits_of(identity);
  std::vector<Sample> out;
  // Every problem with a paired correct measurement appears in best_designs, once per (GPU, problem, mode). Only
  // paired rows teach: each design's time comes with lt_auto's of the same rounds (a reference timed apart, as
  // older files hold, differs from it by the GPU's drift between the two moments, up to 11% on an H200).
  for (const BestDesign& best : store.best_designs()) {
    if (best.problem.dtype != DType::kF16) continue;  // fp16 kernels only, as above
    const GpuTraits& gpu = gpus.at(best.gpu_id);
    const std::string mode(to_string(best.mode));
    out.push_back({gpu, best.problem, mode, "lt_auto", best.paired.reference_us, 0, path});
    for (const MeasurementRecord& r : store.measurements(best.gpu_id, best.problem, best.mode)) {
      const auto& m = r.measurement;
      if (m.status != MeasureStatus::kOk || !m.paired || !(m.timing.median_us > 0)) continue;
      out.push_back({gpu, best.problem, mode, r.design, m.timing.median_us, m.paired->reference_us, path});
    }
  }
  return out;
}

std::vector<Sample> load_samples(const std::vector<std::string>& paths, const std::optional<GpuTraits>& fallback) {
  std::vector<Sample> all;
  for (const std::string& path : paths) {
    auto part = std::filesystem::path(path).extension() == ".db" ? samples_from_store(path)
                                                                  : samples_from_harness_csv(path, fallback);
    all.insert(all.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  return all;
}

}  // namespace rlgemm::predict
