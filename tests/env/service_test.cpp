// The evaluation service and its HTTP front without a GPU: bad input gets a JSON error and costs no GPU time
// (no worker is ever started), gaming that the imports show is rejected on the CPU, every evaluation is in the
// database, and a restarted service still has them.
#include <httplib.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "env/http.h"
#include "env/service.h"
#include "env_test_util.h"
#include "rlgemm/error.h"
#include "search/worker.h"

namespace rlgemm::env {
namespace {

using nlohmann::json;
using testing::kernel_case;

std::filesystem::path temp_db(const std::string& name) {
  auto path = std::filesystem::temp_directory_path() / ("rlgemm-env-" + name + "-" + std::to_string(::getpid()) + ".db");
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + "-wal");
  std::filesystem::remove(path.string() + "-shm");
  return path;
}

// A service whose GPU workers must never start: every request here is answered on the CPU.
ServiceOptions cpu_only(const std::filesystem::path& db, int* starts) {
  ServiceOptions o;
  o.db = db;
  o.arch = "sm_90a";
  o.start_workers = [starts]() -> search::MeasurerPtr {
    ++*starts;
    throw Error(ErrorKind::kNoDevice, "no GPU in this test");
  };
  return o;
}

class Served {
 public:
  explicit Served(Service& service) : server_(service, {"127.0.0.1", 0, kMaxSourceBytes + 64 * 1024, 4}) {
    port_ = server_.bind();
    thread_ = std::thread([this] { server_.run(); });
  }
  ~Served() {
    server_.stop();
    thread_.join();
  }
  httplib::Result post(const json& body) { return client().Post("/v1/evaluate", body.dump(), "application/json"); }
  httplib::Result post_raw(const std::string& body) { return client().Post("/v1/evaluate", body, "application/json"); }
  httplib::Result get(const std::string& path) { return client().Get(path); }

 private:
  httplib::Client client() {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(std::chrono::seconds(300));
    return c;
  }
  HttpServer server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(EnvService, BadInputGetsJsonErrorsAndNoGpuTime) {
  const auto db = temp_db("bad-input");
  int starts = 0;
  Service service(cpu_only(db, &starts));
  Served http(service);

  auto not_json = http.post_raw("{\"source\": ");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
  EXPECT_EQ(json::parse(not_json->body)["reason"], "invalid_request");

  auto bad_shape = http.post({{"source", kernel_case("honest_naive").source}, {"shape", "0,64,64"}});
  ASSERT_TRUE(bad_shape);
  EXPECT_EQ(bad_shape->status, 400);
  EXPECT_EQ(json::parse(bad_shape->body)["reason"], "invalid_shape") << bad_shape->body;

  auto unknown_layout = http.post({{"source", "x"}, {"shape", "64,64,64"}, {"layout", "tt"}});
  ASSERT_TRUE(unknown_layout);
  EXPECT_EQ(unknown_layout->status, 400);

  auto oversized = http.post({{"source", std::string(kMaxSourceBytes + 100 * 1024, ' ')}, {"shape", "64,64,64"}});
  ASSERT_TRUE(oversized);
  EXPECT_EQ(oversized->status, 413);
  EXPECT_EQ(json::parse(oversized->body)["reason"], "too_large");
  auto over_source_limit = http.post({{"source", std::string(kMaxSourceBytes + 10, ' ')}, {"shape", "64,64,64"}});
  ASSERT_TRUE(over_source_limit);
  EXPECT_EQ(over_source_limit->status, 400);
  EXPECT_EQ(json::parse(over_source_limit->body)["reason"], "too_large");

  auto no_launch = http.post({{"source", "extern \"C\" __global__ void k() {}\n"}, {"shape", "64,64,64"}});
  ASSERT_TRUE(no_launch);
  EXPECT_EQ(no_launch->status, 400);
  const json no_launch_body = json::parse(no_launch->body);
  EXPECT_EQ(no_launch_body["reason"], "no_launch_function");
  EXPECT_EQ(no_launch_body["record"]["verdict"], "rejected");

  auto broken = http.post({{"source", kernel_case("honest_naive").source + "\nint x = nope;\n"}, {"shape", "64,64,64"}});
  ASSERT_TRUE(broken);
  EXPECT_EQ(broken->status, 400);
  const json broken_body = json::parse(broken->body);
  EXPECT_EQ(broken_body["reason"], "compile_error");
  EXPECT_FALSE(broken_body["record"]["compile"]["ok"].get<bool>());
  EXPECT_NE(broken_body["record"]["compile"]["log"].get<std::string>().find("nope"), std::string::npos);

  auto bad_design = http.post({{"design", "sm80/not-a-design"}, {"shape", "64,64,64"}});
  ASSERT_TRUE(bad_design);
  EXPECT_EQ(bad_design->status, 400);
  EXPECT_EQ(json::parse(bad_design->body)["reason"], "invalid_design");

  auto nowhere = http.get("/v1/nothing");
  ASSERT_TRUE(nowhere);
  EXPECT_EQ(nowhere->status, 404);
  EXPECT_FALSE(json::parse(nowhere->body)["error"].get<std::string>().empty());

  EXPECT_EQ(starts, 0) << "bad input must not start a GPU worker";
}

TEST(EnvService, TextChecksNeedNoWorkerEvenToLearnTheArchitecture) {
  const auto db = temp_db("no-arch");
  int starts = 0;
  ServiceOptions options = cpu_only(db, &starts);
  options.arch = "";  // taken from the GPU, once a worker has started
  Service service(options);
  const json answer = service.evaluate({{"source", "extern \"C\" __global__ void k() {}\n"}, {"shape", "64,64,64"}});
  EXPECT_EQ(answer["reason"], "no_launch_function");
  EXPECT_EQ(starts, 0);
}

TEST(EnvService, GamingVisibleInTheImportsIsAVerdictNotAnError) {
  const auto db = temp_db("static-gaming");
  int starts = 0;
  Service service(cpu_only(db, &starts));
  Served http(service);
  auto sync = http.post({{"source", kernel_case("host_sync").source}, {"shape", "128,128,128"}});
  ASSERT_TRUE(sync);
  EXPECT_EQ(sync->status, 200);
  const json record = json::parse(sync->body)["record"];
  EXPECT_EQ(record["verdict"], "rejected");
  EXPECT_EQ(record["rejection"]["reason"], "host_sync");
  EXPECT_TRUE(record["compile"]["ok"].get<bool>());
  EXPECT_FALSE(record["correct"].get<bool>());
  EXPECT_EQ(starts, 0);
}

TEST(EnvService, AnHonestSubmissionWithoutAGpuIsAServiceError) {
  const auto db = temp_db("no-gpu");
  int starts = 0;
  Service service(cpu_only(db, &starts));
  Served http(service);
  auto honest = http.post({{"source", kernel_case("honest_naive").source}, {"shape", "128,128,128"}});
  ASSERT_TRUE(honest);
  EXPECT_EQ(honest->status, 503);
  EXPECT_NE(json::parse(honest->body)["error"].get<std::string>().find("no GPU"), std::string::npos);
  EXPECT_EQ(starts, 1);
}

// What the GPU workers answer reaches the verdict as the workers said it, through the pool that the service
// spreads them with (which tags each record with the member that evaluated it): an answered evaluation is the
// worker's verdict, and only a worker that died or hung is a fault.
class ScriptedWorker final : public search::Measurer {
 public:
  explicit ScriptedWorker(json answer) : answer_(std::move(answer)) {}
  GpuIdentity gpu() override { return GpuIdentity{"scripted GPU", 132, 9, 0, 1, 1, 1, 1}; }
  TimingStats reference(const Problem&, TimingMode) override { throw Error(ErrorKind::kRuntime, "not here"); }
  Measurement measure(const Design&, const Problem&, TimingMode) override { throw Error(ErrorKind::kRuntime, "not here"); }
  json evaluate(const json&) override { return answer_; }

 private:
  json answer_;
};

TEST(EnvService, AWorkersAnswerIsItsVerdictAndOnlyALostWorkerIsAFault) {
  const json accepted = {{"correct", true}, {"max_error", 0.1}, {"time_us", 10.0}, {"speedup_vs_best_vendor", 1.1},
                         {"rejection", nullptr}, {"verdict", "accepted"}};
  const json died = {{"worker_failed", "died"}, {"why", "the worker exited with code 4"}};
  for (const json& answer : {accepted, died}) {
    const auto db = temp_db("scripted");
    ServiceOptions o;
    o.db = db;
    o.arch = "sm_90a";
    o.start_workers = [answer]() -> search::MeasurerPtr {
      std::vector<search::MeasurerPtr> members;
      members.push_back(std::make_unique<ScriptedWorker>(answer));
      return std::make_unique<search::PoolMeasurer>(std::move(members));
    };
    Service service(o);
    const json record = service.evaluate({{"design", "sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg"},
                                          {"shape", "512,768,1024"}})["record"];
    if (answer.contains("worker_failed")) {
      EXPECT_EQ(record["verdict"], "rejected") << record.dump();
      EXPECT_EQ(record["rejection"]["reason"], "fault") << record.dump();
    } else {
      EXPECT_EQ(record["verdict"], "accepted") << record.dump();
      EXPECT_EQ(record["speedup_vs_best_vendor"], 1.1) << record.dump();
      EXPECT_EQ(record["worker"], 0) << record.dump();
    }
  }
}

TEST(EnvService, EveryEvaluationIsRecordedAndARestartKeepsThem) {
  const auto db = temp_db("restart");
  int starts = 0;
  std::vector<int64_t> ids;
  {
    Service service(cpu_only(db, &starts));
    Served http(service);
    for (const char* name : {"per_call_alloc", "cublas_declared"}) {
      auto r = http.post({{"source", kernel_case(name).source}, {"shape", "256,128,64"}, {"layout", "nn"}});
      ASSERT_TRUE(r);
      ids.push_back(json::parse(r->body)["record"]["id"].get<int64_t>());
    }
    auto listed = http.get("/v1/evaluations?limit=10");
    ASSERT_TRUE(listed);
    EXPECT_EQ(json::parse(listed->body).size(), 2u);
    auto bad_limit = http.get("/v1/evaluations?limit=zero");
    ASSERT_TRUE(bad_limit);
    EXPECT_EQ(bad_limit->status, 400);
  }
  Service again(cpu_only(db, &starts));
  const json recent = again.recent(10);
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0]["id"].get<int64_t>(), ids[1]);
  EXPECT_EQ(recent[0]["rejection"]["reason"], "cublas");
  EXPECT_EQ(recent[1]["rejection"]["reason"], "allocation");
  EXPECT_EQ(recent[1]["shape"], "256,128,64");
  EXPECT_EQ(recent[1]["layout"], "nn");
  Store store(db);
  const auto rows = store.evaluations(10);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].submission, kernel_case("per_call_alloc").source);
  EXPECT_FALSE(rows[1].gpu_id);
  EXPECT_EQ(rows[1].verdict, "rejected");
  EXPECT_EQ(starts, 0);
}

}  // namespace
}  // namespace rlgemm::env

namespace rlgemm::env {
namespace {

// `rlgemm serve` as a user starts it: it prints where it listens, answers, and ends cleanly on SIGTERM with the
// evaluation in its database.
TEST(EnvServeCommand, ListensAnswersAndStopsOnSigterm) {
  const auto db = temp_db("serve-command");
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    const std::string exe = testing::rlgemm_binary();
    ::execl(exe.c_str(), exe.c_str(), "serve", "--port", "0", "--arch", "sm_90a", "--db", db.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  std::string line;
  char ch;
  while (::read(out[0], &ch, 1) == 1 && ch != '\n') line += ch;
  const auto at = line.find("127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << line;
  const int port = std::stoi(line.substr(at + 10));
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(300));
  auto r = client.Post("/v1/evaluate", json{{"source", kernel_case("dlopen_cublas").source}, {"shape", "64,64,64"}}.dump(),
                       "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["record"]["rejection"]["reason"], "forbidden_symbol") << r->body;
  ::kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ::close(out[0]);
  Store store(db);
  EXPECT_EQ(store.evaluations(5).size(), 1u);
}

}  // namespace
}  // namespace rlgemm::env
