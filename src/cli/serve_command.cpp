// `rlgemm serve [--host H] [--port P] [--db FILE] [--gpus all]`: the evaluation service (env/service.h) over
// HTTP (env/http.h), for trainers of kernel-writing models: POST a kernel, get its checked and timed record.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <thread>

#include "cli/command.h"
#include "env/http.h"
#include "env/service.h"
#include "rlgemm/error.h"

namespace rlgemm::cli {
namespace {

struct ServeArgs {
  std::string host = "127.0.0.1";
  int port = 8089;
  std::string db = "rlgemm-tune.db";
  std::string gpus = "all";
  std::string arch;
  double timeout_s = 300;
  int threads = 16;
};

CommandRegistration registration("serve", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand("serve", "Serve kernel evaluations over HTTP: a checked, timed reward for a submitted kernel");
  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("--host", a->host, "Address to listen on")->default_val("127.0.0.1");
  cmd->add_option("--port", a->port, "Port (0: any free port, printed)")->default_val(8089)->check(CLI::Range(0, 65535));
  cmd->add_option("--db", a->db, "Tuning database that records every evaluation (SQLite; created if missing)")
      ->default_val("rlgemm-tune.db");
  cmd->add_option("--gpus", a->gpus, "all, a count, or ordinals (0,2): one worker per GPU")->default_val("all");
  cmd->add_option("--arch", a->arch, "nvcc -arch for source submissions (default: the GPU's, sm_90a on Hopper)");
  cmd->add_option("--timeout", a->timeout_s,
                  "Seconds one evaluation may take in its worker before it counts as a hang (a design's first compile "
                  "included; a kernel that hangs is caught sooner by the worker's watchdog, RLGEMM_WATCHDOG_S)")
      ->default_val(300)->check(CLI::PositiveNumber);
  cmd->add_option("--threads", a->threads, "Requests served at once (compiles overlap; GPU work queues)")
      ->default_val(16)->check(CLI::Range(1, 1024));
  return [a] {
    env::ServiceOptions options;
    options.db = a->db;
    options.arch = a->arch;
    options.start_workers = env::gpu_workers(a->gpus, self_exe(), a->timeout_s);
    env::Service service(options);
    env::HttpServer server(service, {a->host, a->port, env::kMaxSourceBytes + 64 * 1024, a->threads});
    const int port = server.bind();
    std::printf("rlgemm serve: listening on http://%s:%d (POST /v1/evaluate), records in %s\n", a->host.c_str(), port,
                a->db.c_str());
    std::fflush(stdout);
    // SIGINT and SIGTERM end the service cleanly: a thread waits for them (the others, and the processes
    // started from them, keep them blocked) and stops the server, whose run() then returns.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    std::thread waiter([&] {
      int signal = 0;
      sigwait(&stop_signals, &signal);
      server.stop();
    });
    server.run();
    pthread_kill(waiter.native_handle(), SIGTERM);  // run() may also end by itself (the socket failed)
    waiter.join();
    return 0;
  };
});

}  // namespace
}  // namespace rlgemm::cli
