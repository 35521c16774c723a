// Shared by the evaluation service's tests: the submissions of tests/env/kernels and what each must get.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <algorithm>
#include <optional>
#include <stdexcept>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <thread>

#include "support/cli.h"

namespace rlgemm::testing {

struct KernelCase {
  std::string name;    // file name without .cu
  std::string source;
  std::string expect;  // "accepted" or "rejected"
  std::string reason;  // the expected rejection's reason
};

inline std::vector<KernelCase> kernel_cases() {
  std::vector<KernelCase> out;
  const std::filesystem::path dir = std::filesystem::path(RLGEMM_SOURCE_DIR) / "tests/env/kernels";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".cu") continue;
    KernelCase c;
    c.name = entry.path().stem().string();
    c.source = read_text(entry.path());
    const std::string first = c.source.substr(0, c.source.find('\n'));
    const std::string tag = "// expect: ";
    if (first.rfind(tag, 0) != 0) continue;
    const std::string rest = first.substr(tag.size());
    c.expect = rest.substr(0, rest.find(' '));
    if (rest.find(' ') != std::string::npos) c.reason = rest.substr(rest.find(' ') + 1);
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const KernelCase& a, const KernelCase& b) { return a.name < b.name; });
  return out;
}

inline KernelCase kernel_case(const std::string& name) {
  for (auto& c : kernel_cases())
    if (c.name == name) return c;
  throw std::runtime_error("no kernel case " + name);
}

// What in an evaluation record differs from what its case expects, "" when nothing: the verdict, the reason
// ("a|b": either), and for an accepted kernel the fields a reward is read from (correct, max_error under 1, the
// headline graph-mode speedup and the offline one, each inside its 95% interval, the best vendor call named).
// The record is read with contains() and at(): a rejected record has no timing fields, and a const json's
// operator[] on a missing key is undefined behaviour (in a release build it reads garbage, which nlohmann reports
// as "type must be number, but is number").
inline std::string verdict_mismatch(const KernelCase& c, const nlohmann::json& record) {
  std::string out;
  auto note = [&](const std::string& what) { out += (out.empty() ? "" : "; ") + what; };
  if (!record.is_object()) return "the record is not a JSON object";
  const std::string verdict = record.contains("verdict") && record.at("verdict").is_string() ? record.at("verdict").get<std::string>() : "";
  if (verdict != c.expect) note("verdict '" + verdict + "', expected '" + c.expect + "'");
  const nlohmann::json rejection = record.contains("rejection") ? record.at("rejection") : nlohmann::json();
  const std::string reason = rejection.is_object() && rejection.contains("reason") && rejection.at("reason").is_string()
                                 ? rejection.at("reason").get<std::string>()
                                 : "";
  if (c.expect == "rejected") {
    if (("|" + c.reason + "|").find("|" + reason + "|") == std::string::npos || reason.empty())
      note("reason '" + reason + "', expected '" + c.reason + "'");
    return out;
  }
  if (!reason.empty()) note("rejected for " + reason + ": " + rejection.value("detail", std::string()));
  auto number = [&](const nlohmann::json& j, const std::string& key) -> std::optional<double> {
    if (!j.is_object() || !j.contains(key) || !j.at(key).is_number()) {
      note("no number '" + key + "'");
      return std::nullopt;
    }
    return j.at(key).get<double>();
  };
  if (!record.contains("correct") || record.at("correct") != true) note("not marked correct");
  if (auto e = number(record, "max_error"); e && !(*e < 1.0)) note("max_error " + std::to_string(*e));
  if (auto t = number(record, "time_us"); t && !(*t > 0)) note("time_us " + std::to_string(*t));
  for (const std::string key : {"speedup_vs_best_vendor", "speedup_vs_best_vendor_offline"}) {
    const auto speedup = number(record, key);
    const nlohmann::json interval = record.contains(key + "_interval") ? record.at(key + "_interval") : nlohmann::json();
    const auto low = number(interval, "low"), high = number(interval, "high"), rounds = number(interval, "rounds");
    if (speedup && !(*speedup > 0)) note(key + " " + std::to_string(*speedup));
    if (speedup && low && high && !(*low > 0 && *low <= *speedup && *speedup <= *high))
      note(key + " " + std::to_string(*speedup) + " outside its interval");
    if (rounds && *rounds < 2) note(key + " from fewer than two rounds");
  }
  for (const std::string key : {"best_vendor", "best_vendor_offline"})
    if (!record.contains(key) || !record.at(key).is_string() || record.at(key).get<std::string>().empty())
      note("no '" + key + "'");
  return out;
}

// The stub: answers POST /v1/chat/completions with the next recorded answer, keeping the requests it got.
class StubEndpoint {
 public:
  explicit StubEndpoint(std::vector<std::string> answers, int status = 200) : answers_(std::move(answers)) {
    server_.Post("/v1/chat/completions", [this, status](const httplib::Request& req, httplib::Response& res) {
      requests.push_back(nlohmann::json::parse(req.body));
      authorization.push_back(req.get_header_value("Authorization"));
      if (status != 200) {
        res.status = status;
        res.set_content("{\"error\": \"overloaded\"}", "application/nlohmann::json");
        return;
      }
      const std::string content = answers_[next_++ % answers_.size()];
      res.set_content(nlohmann::json{{"id", "x"}, {"choices", {{{"index", 0}, {"message", {{"role", "assistant"}, {"content", content}}}}}}}.dump(),
                      "application/nlohmann::json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~StubEndpoint() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<nlohmann::json> requests;
  std::vector<std::string> authorization;

 private:
  std::vector<std::string> answers_;
  size_t next_ = 0;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace rlgemm::testing
