// Shared by the evaluation service's tests: the submissions of tests/env/kernels and what each must get.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <algorithm>
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
