// The evaluation service behind `rlgemm serve`: takes a submission (env/contract.h), rejects what breaks the
// contract on the CPU (costing no GPU time), compiles source submissions in the isolated compile service,
// queues the rest over the GPUs (one `rlgemm worker --backend env` process per GPU), and records every
// evaluation in the tuning database (store/store.h, table evaluations) before answering.
//
// The answer to a request: {"record": {...}} with the evaluation's record, or, for bad input (an invalid
// request or shape, an oversized submission, a missing launch function, source that does not compile),
// {"error": "...", "reason": "...", "record": {...}} with the record of the rejection (compile log included).
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "env/contract.h"
#include "search/measurer.h"
#include "store/store.h"

namespace rlgemm::env {

struct ServiceOptions {
  std::filesystem::path db;  // the tuning database that keeps the records
  std::string arch;          // nvcc's -arch for source submissions; "": the first GPU's (sm_90a on an H100)
  BuildLimits build;
  // Starts the GPU workers, on first need (a request that reaches a GPU). Returns a measurer whose evaluate()
  // is thread-safe (search::PoolMeasurer).
  std::function<search::MeasurerPtr()> start_workers;
};

// start_workers for `rlgemm serve` and `rlgemm propose --llm`: one `worker_exe worker --backend env` process
// per GPU that `gpus` selects (search::parse_gpu_selection), each request bounded by `timeout_s`.
std::function<search::MeasurerPtr()> gpu_workers(std::string gpus, std::string worker_exe, double timeout_s);

// Reasons that are bad input rather than a verdict on a kernel: the answer is an error (HTTP 400).
bool is_input_error(const std::string& reason);

class Service {
 public:
  explicit Service(ServiceOptions options);
  ~Service();

  // Evaluates one request; thread-safe (GPU work waits for an idle worker). Never throws for a bad
  // submission; throws Error(kNoDevice / kRuntime) when the service itself cannot work.
  nlohmann::json evaluate(const nlohmann::json& request);
  // The latest `limit` records, newest first.
  nlohmann::json recent(int64_t limit);
  // The GPU the workers run on ({} before they started).
  nlohmann::json gpu();
  // The GPU the workers run on, starting them when they are not yet.
  GpuIdentity gpu_identity();

 private:
  search::Measurer& workers();
  std::string arch();
  nlohmann::json finish(const Request& request, nlohmann::json record, std::optional<int64_t> gpu_id);

  ServiceOptions options_;
  std::mutex store_mutex_;
  Store store_;
  std::mutex workers_mutex_;
  search::MeasurerPtr workers_;
  std::optional<GpuIdentity> gpu_;
  std::optional<int64_t> gpu_id_;
  std::filesystem::path scratch_;  // shared objects handed to the workers
  std::atomic<uint64_t> next_file_{0};
};

}  // namespace rlgemm::env
