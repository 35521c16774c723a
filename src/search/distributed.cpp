#include "search/distributed.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <optional>

#include "rlgemm/error.h"
#include "search/worker.h"

namespace rlgemm::search {

using nlohmann::json;

// ---- what every lane does ----

json to_json(const LaneHello& h) {
  if (!h.error.empty()) return {{"ready", false}, {"error", h.error}, {"kind", h.error_kind}};
  return {{"ready", true}, {"gpu", to_json(h.gpu)}, {"parallelism", h.parallelism}};
}

LaneHello lane_hello_from_json(const json& j) {
  LaneHello h;
  if (!j.value("ready", false)) {
    h.error = j.value("error", std::string("the lane did not say why it cannot measure"));
    h.error_kind = j.value("kind", int(ErrorKind::kRuntime));
    return h;
  }
  h.gpu = gpu_from_json(j.at("gpu"));
  h.parallelism = std::max(1, j.value("parallelism", 1));
  return h;
}

LaneHello hello_of(Measurer& measurer) {
  LaneHello h;
  try {
    h.gpu = measurer.gpu();
    h.parallelism = std::max(1, measurer.parallelism());
  } catch (const Error& e) {
    h.error = e.what();
    h.error_kind = int(e.kind());
  } catch (const std::exception& e) {
    h.error = e.what();
    h.error_kind = int(ErrorKind::kRuntime);
  }
  return h;
}

json serve_job(Measurer& measurer, const json& job) {
  try {
    const std::string op = job.at("op").get<std::string>();
    const Problem problem = problem_from_json(job);
    const TimingMode mode = parse_timing_mode(job.at("mode").get<std::string>());
    if (op == "measure") {
      std::vector<Design> designs;
      for (const auto& text : job.at("designs")) designs.push_back(parse_design(text.get<std::string>()));
      json measurements = json::array();
      for (const Measurement& m : measurer.measure_batch(designs, problem, mode)) measurements.push_back(to_json(m));
      return {{"ok", true}, {"measurements", std::move(measurements)}};
    }
    return {{"ok", false}, {"error", "unknown job '" + op + "'"}, {"kind", int(ErrorKind::kInvalidInput)}};
  } catch (const Error& e) {
    return {{"ok", false}, {"error", e.what()}, {"kind", int(e.kind())}};
  } catch (const std::exception& e) {
    return {{"ok", false}, {"error", std::string("bad job: ") + e.what()}, {"kind", int(ErrorKind::kInvalidInput)}};
  }
}

// ---- lanes in this process ----

LocalLanes::LocalLanes(std::vector<Measurer*> measurers, std::vector<std::string> names) : names_(std::move(names)) {
  if (measurers.empty()) fail("local lanes need at least one measurer");
  for (size_t i = 0; i < measurers.size(); ++i) {
    auto lane = std::make_unique<Lane>();
    lane->measurer = measurers[i];
    lane->hello = hello_of(*measurers[i]);
    lanes_.push_back(std::move(lane));
    if (names_.size() <= i) names_.push_back("lane " + std::to_string(i));
  }
  for (size_t i = 0; i < lanes_.size(); ++i) lanes_[i]->thread = std::thread([this, i] { serve(int(i)); });
}

LocalLanes::~LocalLanes() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  job_ready_.notify_all();
  for (auto& lane : lanes_) lane->thread.join();
}

void LocalLanes::serve(int index) {
  Lane& lane = *lanes_[size_t(index)];
  for (;;) {
    json job;
    {
      std::unique_lock lock(mutex_);
      job_ready_.wait(lock, [&] { return stopping_ || !lane.jobs.empty(); });
      if (lane.jobs.empty()) return;  // stopping, nothing left to answer
      job = std::move(lane.jobs.front());
      lane.jobs.pop_front();
    }
    if (job.value("op", std::string()) == "stop") return;
    json answer = lane.hello.error.empty()
                      ? serve_job(*lane.measurer, job)
                      : json{{"ok", false}, {"error", lane.hello.error}, {"kind", lane.hello.error_kind}};
    {
      std::lock_guard lock(mutex_);
      answers_.emplace_back(index, std::move(answer));
    }
    answer_ready_.notify_all();
  }
}

void LocalLanes::send(int lane, const json& job) {
  if (lane < 0 || lane >= lanes()) fail("no local lane " + std::to_string(lane));
  {
    std::lock_guard lock(mutex_);
    lanes_[size_t(lane)]->jobs.push_back(job);
  }
  job_ready_.notify_all();
}

std::pair<int, json> LocalLanes::receive() {
  std::unique_lock lock(mutex_);
  answer_ready_.wait(lock, [&] { return !answers_.empty(); });
  auto answer = std::move(answers_.front());
  answers_.pop_front();
  return answer;
}

bool LocalLanes::try_receive(std::pair<int, json>& answer) {
  std::lock_guard lock(mutex_);
  if (answers_.empty()) return false;
  answer = std::move(answers_.front());
  answers_.pop_front();
  return true;
}

// ---- the coordinator ----

namespace {

using Clock = ProblemTuning::Clock;

std::string describe(const GpuIdentity& g) {
  return g.name + " (" + std::to_string(g.sm_count) + " SMs, sm_" + std::to_string(g.cc_major) +
         std::to_string(g.cc_minor) + ", SM clock " + std::to_string(g.sm_clock_khz / 1000) + " MHz, driver " +
         std::to_string(g.driver_version) + ")";
}

// A problem on its way through the lanes.
struct Work {
  size_t index = 0;
  StrategyPtr strategy;
  std::unique_ptr<ProblemTuning> tuning;  // from the problem's first job on
  json job;                               // the job in flight; sent again if its lane is retired
};

}  // namespace

std::vector<ProblemOutcome> tune_distributed(Store& store, LaneChannel& channel, const StrategyFactory& factory,
                                             const SpaceSpec& spec, const TuneOptions& options) {
  if (options.budget.evaluations <= 0 && options.budget.minutes <= 0)
    fail("the tuning budget must be a positive number of evaluations or minutes");
  if (!factory) fail("distributed tuning needs a strategy per problem (a strategy factory)");
  for (const Problem& p : options.problems) validate(p.shape);
  const size_t count = options.problems.size();

  // The lanes that can measure, and the one GPU they all measure on.
  const int lanes = channel.lanes();
  std::vector<bool> healthy(size_t(lanes), false);
  std::optional<GpuIdentity> gpu;
  int first = -1, parallelism = 1;
  std::string refusals;
  for (int lane = 0; lane < lanes; ++lane) {
    const LaneHello& hello = channel.hello(lane);
    if (!hello.error.empty()) {
      if (options.progress)
        std::fprintf(options.progress, "rlgemm tune: %s cannot measure and is left out: %s\n",
                     channel.lane_name(lane).c_str(), hello.error.c_str());
      refusals += (refusals.empty() ? "" : "; ") + channel.lane_name(lane) + ": " + hello.error;
      continue;
    }
    if (!gpu) {
      gpu = hello.gpu;
      first = lane;
    } else if (!(hello.gpu == *gpu)) {
      fail(channel.lane_name(lane) + " measures on " + describe(hello.gpu) + ", " + channel.lane_name(first) +
           " on " + describe(*gpu) + ": one tuning run tunes one kind of GPU (start one run per kind)");
    }
    healthy[size_t(lane)] = true;
    parallelism = std::max(parallelism, hello.parallelism);
  }
  if (!gpu) throw Error(ErrorKind::kNoDevice, "no lane can measure: " + refusals);
  const int64_t gpu_id = store.gpu_id(*gpu);
  // One batch size for every lane: a problem's candidates must not depend on the lane that tunes it.
  const int batch = effective_batch(options, parallelism);
  DesignSpaces spaces(spec, smem_limit_or_hopper(gpu->smem_per_block_optin));

  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(options.budget.minutes * 60.0));
  std::deque<size_t> queue;
  for (size_t i = 0; i < count; ++i) queue.push_back(i);
  std::deque<std::unique_ptr<Work>> orphans;  // work whose lane was retired, with its job in flight
  std::vector<std::unique_ptr<Work>> busy(static_cast<size_t>(lanes));
  std::vector<std::optional<ProblemOutcome>> outcomes(count);
  size_t done = 0;

  auto healthy_lanes = [&] { return std::max<long>(1, std::count(healthy.begin(), healthy.end(), true)); };

  auto begin_tuning = [&](Work& w) {
    const Problem& problem = options.problems[w.index];
    auto problem_deadline = Clock::time_point::max();
    if (options.budget.minutes > 0) {
      // The time left, shared among the problems not done yet as the lanes will work on them, side by side.
      const auto left = deadline - Clock::now();
      const int64_t rounds = int64_t(std::ceil(double(count - done) / double(healthy_lanes())));
      problem_deadline = std::min(deadline, Clock::now() + left / std::max<int64_t>(rounds, 1));
    }
    w.tuning = std::make_unique<ProblemTuning>(store, gpu_id, *gpu, spaces.of(problem.layout), *w.strategy, options,
                                               problem, batch, problem_deadline);
  };

  auto finish = [&](int lane, Work& w) {
    ProblemOutcome outcome = w.tuning->finish();
    ++done;
    if (options.progress) {
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      const double left = options.budget.minutes > 0
                              ? std::chrono::duration<double>(deadline - Clock::now()).count()
                              : elapsed / double(done) * double(count - done);
      std::fprintf(options.progress, "%s  (%s)\n",
                   progress_line(done - 1, count, outcome, w.tuning->cap(), options.budget.evaluations > 0, left)
                       .c_str(),
                   channel.lane_name(lane).c_str());
      std::fflush(options.progress);
    }
    if (options.after_problem) options.after_problem(outcome);
    outcomes[w.index] = std::move(outcome);
  };

  // Sends `w`'s next job to `lane`, or finishes the problem; false when the lane is free again.
  auto advance = [&](int lane, std::unique_ptr<Work> w) -> bool {
    const Problem& problem = options.problems[w->index];
    if (!w->tuning) begin_tuning(*w);
    const std::vector<Design> designs = w->tuning->next_batch();
    if (designs.empty()) {
      finish(lane, *w);
      return false;
    }
    w->job = problem_json(problem, options.mode);
    w->job["op"] = "measure";
    json texts = json::array();
    for (const Design& d : designs) texts.push_back(to_string(d));
    w->job["designs"] = std::move(texts);
    channel.send(lane, w->job);
    busy[size_t(lane)] = std::move(w);
    return true;
  };

  // Gives a free lane work: an orphan's job in flight first, else the next problem.
  auto feed = [&](int lane) {
    while (!busy[size_t(lane)]) {
      if (!orphans.empty()) {
        std::unique_ptr<Work> w = std::move(orphans.front());
        orphans.pop_front();
        channel.send(lane, w->job);
        busy[size_t(lane)] = std::move(w);
        return;
      }
      if (queue.empty()) return;
      auto w = std::make_unique<Work>();
      w->index = queue.front();
      queue.pop_front();
      w->strategy = factory(options.problems[w->index]);
      advance(lane, std::move(w));
    }
  };

  for (;;) {
    for (int lane = 0; lane < lanes; ++lane)
      if (healthy[size_t(lane)]) feed(lane);
    if (std::none_of(busy.begin(), busy.end(), [](const auto& w) { return bool(w); })) {
      if (done == count) break;
      throw Error(ErrorKind::kRuntime, "every lane was retired with " + std::to_string(count - done) +
                                           " problems left; run the same command again to continue");
    }
    auto [lane, answer] = channel.receive();
    if (lane < 0 || lane >= lanes || !busy[size_t(lane)]) continue;  // an answer nobody waits for
    std::unique_ptr<Work> w = std::move(busy[size_t(lane)]);
    const Problem& problem = options.problems[w->index];
    if (!answer.value("ok", false)) {
      const auto kind = ErrorKind(answer.value("kind", int(ErrorKind::kRuntime)));
      const std::string why = answer.value("error", std::string("no reason given"));
      if (kind == ErrorKind::kInvalidInput)
        throw Error(kind, std::string(to_string(problem.layout)) + " " + problem.shape.to_string() + ": " + why);
      if (options.progress)
        std::fprintf(options.progress, "rlgemm tune: %s is retired (%s); %s %s goes to another lane\n",
                     channel.lane_name(lane).c_str(), why.c_str(), std::string(to_string(problem.layout)).c_str(),
                     problem.shape.to_string().c_str());
      healthy[size_t(lane)] = false;
      orphans.push_back(std::move(w));
      continue;
    }
    try {
      std::vector<Measurement> results;
      for (const auto& m : answer.at("measurements")) results.push_back(measurement_from_json(m));
      w->tuning->complete(results);
    } catch (const nlohmann::json::exception& e) {
      throw Error(ErrorKind::kRuntime, channel.lane_name(lane) + " answered a job with '" +
                                           answer.dump().substr(0, 200) + "': " + e.what());
    }
    advance(lane, std::move(w));
  }

  std::vector<ProblemOutcome> out;
  out.reserve(count);
  for (auto& o : outcomes) out.push_back(std::move(*o));
  return out;
}

}  // namespace rlgemm::search
