#include "env/http.h"

#include <httplib.h>

#include "rlgemm/error.h"

namespace rlgemm::env {

using nlohmann::json;

namespace {

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

}  // namespace

HttpServer::HttpServer(Service& service, HttpOptions options)
    : service_(service), options_(std::move(options)), server_(std::make_unique<httplib::Server>()) {
  auto& s = *server_;
  s.new_task_queue = [threads = options_.threads] { return new httplib::ThreadPool(size_t(threads)); };
  s.set_payload_max_length(options_.max_body_bytes);
  s.Post("/v1/evaluate", [this](const httplib::Request& req, httplib::Response& res) {
    json body;
    try {
      body = json::parse(req.body);
    } catch (const json::exception& e) {
      return reply(res, 400, {{"error", std::string("the body is not JSON: ") + e.what()}, {"reason", "invalid_request"}});
    }
    try {
      const json answer = service_.evaluate(body);
      reply(res, answer.contains("error") ? 400 : 200, answer);
    } catch (const Error& e) {
      reply(res, 503, {{"error", e.what()}, {"reason", "service_unavailable"}});
    } catch (const std::exception& e) {
      reply(res, 500, {{"error", e.what()}, {"reason", "internal"}});
    }
  });
  s.Get("/v1/evaluations", [this](const httplib::Request& req, httplib::Response& res) {
    int64_t limit = 100;
    if (req.has_param("limit")) {
      try {
        limit = std::stoll(req.get_param_value("limit"));
      } catch (const std::exception&) {
        limit = -1;
      }
      if (limit < 1 || limit > 100000)
        return reply(res, 400, {{"error", "limit must be a whole number from 1 to 100000"}, {"reason", "invalid_request"}});
    }
    reply(res, 200, service_.recent(limit));
  });
  s.Get("/v1/health", [this](const httplib::Request&, httplib::Response& res) {
    reply(res, 200, {{"ok", true}, {"gpu", service_.gpu()}});
  });
  // httplib answers an oversized body (413) or an unknown path (404) itself; the body still speaks JSON.
  s.set_error_handler([max = options_.max_body_bytes](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413)
      reply(res, 413, {{"error", "the request is over the limit of " + std::to_string(max) + " bytes"}, {"reason", "too_large"}});
    else if (res.status == 404)
      reply(res, 404, {{"error", "no such endpoint: POST /v1/evaluate, GET /v1/evaluations, GET /v1/health"},
                       {"reason", "invalid_request"}});
    else
      reply(res, res.status, {{"error", "HTTP " + std::to_string(res.status)}, {"reason", "invalid_request"}});
  });
}

HttpServer::~HttpServer() = default;

int HttpServer::bind() {
  const int port = options_.port == 0 ? server_->bind_to_any_port(options_.host)
                                      : (server_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0)
    throw Error(ErrorKind::kRuntime, "cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                                         " (in use, or not an address of this machine)");
  return port;
}

void HttpServer::run() { server_->listen_after_bind(); }

void HttpServer::stop() { server_->stop(); }

}  // namespace rlgemm::env
