// The HTTP JSON front of the evaluation service (`rlgemm serve`), on cpp-httplib.
//
//   POST /v1/evaluate       body: a request of env/contract.h  -> 200 {"record": {...}}
//                           bad input (invalid JSON, request or shape, oversized, no launch function, compile
//                           error) -> 400 {"error", "reason", "record"?}; the service cannot work -> 503 {"error"}
//   GET  /v1/evaluations?limit=N   the latest records, newest first
//   GET  /v1/health                {"ok": true, "gpu": {...}}
#pragma once

#include <memory>
#include <string>

#include "env/service.h"

namespace httplib {
class Server;
}

namespace rlgemm::env {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8089;  // 0: any free port (bind() tells which)
  size_t max_body_bytes = kMaxSourceBytes + 64 * 1024;
  int threads = 16;  // requests served at once (compiles run concurrently; GPU work queues in the service)
};

class HttpServer {
 public:
  HttpServer(Service& service, HttpOptions options);
  ~HttpServer();
  // Binds the socket; returns the port. Throws Error(kRuntime) when the address is taken.
  int bind();
  // Serves until stop() (from another thread or a signal handler's thread).
  void run();
  void stop();

 private:
  Service& service_;
  HttpOptions options_;
  std::unique_ptr<httplib::Server> server_;
};

}  // namespace rlgemm::env
