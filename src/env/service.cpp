#include "env/service.h"

#include <unistd.h>

#include <fstream>

#include "compile/sha256.h"
#include "rlgemm/design.h"
#include "rlgemm/error.h"
#include "search/worker.h"

namespace rlgemm::env {

using nlohmann::json;

bool is_input_error(const std::string& reason) {
  return reason == "invalid_request" || reason == "invalid_shape" || reason == "too_large" ||
         reason == "no_launch_function" || reason == "compile_error" || reason == "invalid_design";
}

namespace {

// The rule a request broke, from parse_request's message.
std::string input_reason(const std::string& message) {
  if (message.find("bytes, over the limit") != std::string::npos) return "too_large";
  if (message.find("shape") != std::string::npos || message.find("Shape") != std::string::npos ||
      message.find("dimension") != std::string::npos || message.find("M, N") != std::string::npos)
    return "invalid_shape";
  return "invalid_request";
}

json rejection_json(const Rejection& r) { return {{"reason", r.reason}, {"detail", r.detail}}; }

}  // namespace

std::function<search::MeasurerPtr()> gpu_workers(std::string gpus, std::string worker_exe, double timeout_s) {
  return [=]() -> search::MeasurerPtr {
    search::MeasurerSetup setup;
    setup.backend.backend = "env";
    setup.gpus = gpus;
    setup.worker_exe = worker_exe;
    setup.timeout_s = timeout_s;
    search::MeasurerPtr measurer = search::make_measurer(setup);
    if (dynamic_cast<search::PoolMeasurer*>(measurer.get())) return measurer;
    std::vector<search::MeasurerPtr> one;
    one.push_back(std::move(measurer));
    return std::make_unique<search::PoolMeasurer>(std::move(one));
  };
}

Service::Service(ServiceOptions options) : options_(std::move(options)), store_(options_.db) {
  scratch_ = std::filesystem::temp_directory_path() / ("rlgemm-serve-" + std::to_string(::getpid()));
  std::filesystem::create_directories(scratch_);
}

Service::~Service() {
  std::error_code ec;
  std::filesystem::remove_all(scratch_, ec);
}

search::Measurer& Service::workers() {
  std::lock_guard lock(workers_mutex_);
  if (!workers_) {
    if (!options_.start_workers) throw Error(ErrorKind::kNoDevice, "this service has no GPU workers");
    workers_ = options_.start_workers();
    gpu_ = workers_->gpu();
    std::lock_guard store_lock(store_mutex_);
    gpu_id_ = store_.gpu_id(*gpu_);
  }
  return *workers_;
}

std::string Service::arch() {
  if (!options_.arch.empty()) return options_.arch;
  workers();
  const int cc = gpu_->cc_major * 10 + gpu_->cc_minor;
  return "sm_" + std::to_string(cc) + (cc == 90 ? "a" : "");
}

GpuIdentity Service::gpu_identity() {
  workers();
  return *gpu_;
}

json Service::gpu() {
  std::lock_guard lock(workers_mutex_);
  if (!gpu_) return json::object();
  return {{"name", gpu_->name}, {"sm_count", gpu_->sm_count}, {"cc", std::to_string(gpu_->cc_major) + "." + std::to_string(gpu_->cc_minor)}};
}

json Service::evaluate(const json& body) {
  Request request;
  try {
    request = parse_request(body);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInvalidInput) throw;
    return {{"error", e.what()}, {"reason", input_reason(e.what())}};
  }
  const bool source = request.kind == Request::Kind::kSource;
  json record = {{"kind", source ? "source" : "design"},
                 {"shape", request.problem.shape.to_string()},
                 {"layout", std::string(to_string(request.problem.layout))},
                 {"submission_sha256", sha256_hex(request.text)}};
  json work = {{"m", request.problem.shape.m}, {"n", request.problem.shape.n}, {"k", request.problem.shape.k},
               {"layout", std::string(to_string(request.problem.layout))}};
  std::filesystem::path shared_object;
  if (source) {
    // The text's own checks first: a submission they reject needs no compiler and no GPU to learn the arch.
    if (auto why = check_source(request.text)) {
      record["compile"] = {{"ok", false}, {"log", ""}, {"seconds", 0.0}};
      record["rejection"] = rejection_json(*why);
      return finish(request, std::move(record), std::nullopt);
    }
    const Build build = build_source(request.text, arch(), options_.build);
    const bool compiled = !build.shared_object.empty();
    record["compile"] = {{"ok", compiled}, {"log", build.log}, {"seconds", build.seconds}};
    if (build.rejection) {
      record["rejection"] = rejection_json(*build.rejection);
      return finish(request, std::move(record), std::nullopt);
    }
    // A name of its own for every evaluation: the worker's dynamic loader must never take it for one it saw.
    shared_object = scratch_ / (record["submission_sha256"].get<std::string>().substr(0, 16) + "-" +
                                std::to_string(next_file_++) + ".so");
    {
      std::ofstream out(shared_object, std::ios::binary);
      out.write(build.shared_object.data(), std::streamsize(build.shared_object.size()));
      if (!out) throw Error(ErrorKind::kRuntime, "cannot write " + shared_object.string());
    }
    work["shared_object"] = shared_object.string();
  } else {
    try {
      record["design"] = to_string(parse_design(request.text));
    } catch (const Error& e) {
      record["rejection"] = {{"reason", "invalid_design"}, {"detail", e.what()}};
      return finish(request, std::move(record), std::nullopt);
    }
    work["design"] = record["design"];
  }
  json result;
  try {
    result = workers().evaluate(work);
  } catch (...) {
    if (!shared_object.empty()) std::filesystem::remove(shared_object);
    throw;
  }
  if (!shared_object.empty()) std::filesystem::remove(shared_object);
  if (result.contains("worker_failed")) {
    // The worker did not answer: the submission hung the GPU or broke the process.
    const std::string why = result.value("why", std::string());
    const bool hang = result["worker_failed"] == "timeout" || why.find("exited with code 5") != std::string::npos;
    record["rejection"] = {{"reason", hang ? "hang" : "fault"},
                           {"detail", (hang ? "the evaluation did not finish: " : "the evaluation crashed the worker: ") + why}};
    record["correct"] = false;
  } else {
    for (auto& [key, value] : result.items()) record[key] = value;
  }
  record["gpu"] = gpu_->name;
  return finish(request, std::move(record), gpu_id_);
}

json Service::finish(const Request& request, json record, std::optional<int64_t> gpu_id) {
  const bool rejected = record.contains("rejection") && !record["rejection"].is_null();
  record["verdict"] = rejected ? "rejected" : "accepted";
  if (!rejected) record["rejection"] = nullptr;
  if (!record.contains("correct")) record["correct"] = false;
  EvaluationRecord row;
  row.gpu_id = gpu_id;
  row.problem = request.problem;
  row.kind = record["kind"];
  row.submission = request.text;
  row.submission_sha256 = record["submission_sha256"];
  row.verdict = record["verdict"];
  row.reason = rejected ? record["rejection"]["reason"].get<std::string>() : "";
  if (record.contains("time_us") && record["time_us"].is_number()) row.time_us = record["time_us"].get<double>();
  if (record.contains("speedup_vs_best_vendor") && record["speedup_vs_best_vendor"].is_number())
    row.speedup = record["speedup_vs_best_vendor"].get<double>();
  {
    std::lock_guard lock(store_mutex_);
    row.record = record.dump();
    record["id"] = store_.record_evaluation(row);
  }
  json answer = {{"record", record}};
  if (rejected && is_input_error(row.reason)) {
    answer["error"] = record["rejection"]["detail"];
    answer["reason"] = row.reason;
  }
  return answer;
}

json Service::recent(int64_t limit) {
  std::vector<EvaluationRecord> rows;
  {
    std::lock_guard lock(store_mutex_);
    rows = store_.evaluations(limit);
  }
  json out = json::array();
  for (const auto& r : rows) {
    json record = json::parse(r.record);
    record["id"] = r.id;
    record["created_at"] = r.created_at;
    out.push_back(std::move(record));
  }
  return out;
}

}  // namespace rlgemm::env
