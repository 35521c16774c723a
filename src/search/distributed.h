// Tuning many problems at once over measuring lanes. A lane is a group of GPUs that measures one batch at a
// time: an MPI rank with its local GPU workers (mpi_tuner.h), or a measurer of this process (LocalLanes). The
// coordinator owns the store and the strategies: it hands a problem to each free lane, sends the lane that
// problem's batches one after another, records every measurement in the store as soon as its batch is back,
// and gives the lane the next problem when one is done, so a slow lane tunes fewer problems.
//
// Problems are independent (tuner.h: each has a strategy of its own, seeded from the problem): what is
// recorded for a problem depends neither on the lane that tuned it nor on the order problems were handed out,
// so any number of lanes records what one process tuning the same problems would.
//
// Jobs and answers are JSON objects in the forms of the worker protocol (worker.h):
//   {"op":"measure", <problem>, "designs":[...]}    -> {"ok":true,"measurements":[{...}, ...]} (each paired)
//   {"op":"stop"}                                   (no answer: the lane ends)
//   a lane that cannot answer                       -> {"ok":false,"error":"...","kind":N}
// A lane that fails (its GPUs became unusable) is retired and its problem, with the job it had in flight,
// goes to another lane; a failure of kind invalid input (the problem itself) ends the run.
#pragma once

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "search/measurer.h"
#include "search/tuner.h"

namespace rlgemm::search {

// What a lane says when it starts: the GPU it measures on and how many candidates it measures at once, or
// why it cannot measure.
struct LaneHello {
  GpuIdentity gpu;
  int parallelism = 1;
  std::string error;  // empty when the lane can measure
  int error_kind = 0; // an ErrorKind, with the error
};

nlohmann::json to_json(const LaneHello& hello);
LaneHello lane_hello_from_json(const nlohmann::json& j);
// The hello of a lane that measures with `measurer` (starting its workers).
LaneHello hello_of(Measurer& measurer);
// Answers one job (not "stop") with `measurer`; never throws.
nlohmann::json serve_job(Measurer& measurer, const nlohmann::json& job);

// Where the coordinator's jobs go.
class LaneChannel {
 public:
  virtual ~LaneChannel() = default;
  virtual int lanes() const = 0;
  virtual std::string lane_name(int lane) const = 0;  // "rank 2"
  virtual const LaneHello& hello(int lane) const = 0;
  virtual void send(int lane, const nlohmann::json& job) = 0;
  // Blocks until some lane answers a job: (lane, answer).
  virtual std::pair<int, nlohmann::json> receive() = 0;
};

// Lanes of this process: one thread per measurer, each serving its jobs in order.
class LocalLanes : public LaneChannel {
 public:
  // `names` (optional) name the lanes; "lane <i>" otherwise.
  explicit LocalLanes(std::vector<Measurer*> measurers, std::vector<std::string> names = {});
  ~LocalLanes() override;  // stops the threads
  LocalLanes(const LocalLanes&) = delete;
  LocalLanes& operator=(const LocalLanes&) = delete;

  int lanes() const override { return int(lanes_.size()); }
  std::string lane_name(int lane) const override { return names_[size_t(lane)]; }
  const LaneHello& hello(int lane) const override { return lanes_[size_t(lane)]->hello; }
  void send(int lane, const nlohmann::json& job) override;
  std::pair<int, nlohmann::json> receive() override;
  // An answer if one is waiting, without blocking.
  bool try_receive(std::pair<int, nlohmann::json>& answer);

 private:
  struct Lane {
    Measurer* measurer = nullptr;
    LaneHello hello;
    std::deque<nlohmann::json> jobs;
    std::thread thread;
  };
  void serve(int lane);

  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::string> names_;
  std::mutex mutex_;
  std::condition_variable job_ready_, answer_ready_;
  std::deque<std::pair<int, nlohmann::json>> answers_;
  bool stopping_ = false;
};

// Tunes `options.problems` over the lanes of `channel`, each problem with a strategy from `factory`, into
// `store`. `spec` is the design space. Progress lines (one per problem done, naming its lane) go to
// options.progress; options.after_problem runs on each outcome as it completes. Returns the outcomes in the
// order of options.problems. Throws Error(kInvalidInput) when the lanes measure on different GPUs (one run
// tunes one kind of GPU), Error(kNoDevice) when no lane can measure.
std::vector<ProblemOutcome> tune_distributed(Store& store, LaneChannel& channel, const StrategyFactory& factory,
                                             const SpaceSpec& spec, const TuneOptions& options);

}  // namespace rlgemm::search
