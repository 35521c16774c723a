// `rlgemm worker`: the isolated measuring process the tuner starts (one per GPU). It speaks the JSON-lines
// protocol of search/worker.h on stdin and stdout; it is not meant to be run by hand.
#include "cli/command.h"
#include "search/worker.h"

namespace rlgemm::cli {
namespace {

CommandRegistration registration("worker", [](CLI::App& app) -> std::function<int()> {
  auto* cmd = app.add_subcommand("worker", "Measuring worker process started by `rlgemm tune` (internal)");
  cmd->group("");  // hidden from the command list
  auto options = std::make_shared<search::BackendOptions>();
  cmd->add_option("--backend", options->backend, "Measuring backend")->default_val("synthetic");
  cmd->add_option("--gpu", options->gpu_ordinal, "GPU ordinal")->default_val(0);
  cmd->add_option("--delay-ms", options->delay_ms, "Synthetic backend: sleep per measurement")->default_val(0);
  return [options] {
    search::BackendOptions o = *options;
    o.simulate_faults = true;  // only a worker may act out test.fault and test.hang
    return search::serve_worker(o, 0, 1);
  };
});

}  // namespace
}  // namespace rlgemm::cli
