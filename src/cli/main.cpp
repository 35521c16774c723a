// rlgemm: writes, checks and tunes HGEMM kernels. One CLI; each subcommand is a file in this folder.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "cli/command.h"
#include "core/cuda_util.h"
#include "rlgemm/error.h"
#ifdef RLGEMM_HAVE_MEASURE
#include "measure/gpu_measurer.h"
#endif
#ifdef RLGEMM_HAVE_ENV
#include "env/evaluator.h"
#endif

namespace rlgemm::cli {

std::vector<RegisteredCommand>& registered_commands() {
  static std::vector<RegisteredCommand> commands;
  return commands;
}

static std::string g_command_line;
const std::string& command_line() { return g_command_line; }

std::string self_exe() {
  std::error_code ec;
  const auto path = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(ErrorKind::kRuntime, "cannot locate the rlgemm executable for its workers: " + ec.message());
  return path.string();
}

CommandRegistration::CommandRegistration(std::string name, CommandSetup setup) {
  registered_commands().push_back({std::move(name), std::move(setup)});
}

}  // namespace rlgemm::cli

int main(int argc, char** argv) {
  using namespace rlgemm;
#ifdef RLGEMM_HAVE_MEASURE
  measure::install_gpu_backends();
#endif
#ifdef RLGEMM_HAVE_ENV
  env::install_env_backend();
#endif
  for (int i = 0; i < argc; ++i) cli::g_command_line += (i ? " " : "") + std::string(argv[i]);
  CLI::App app{"rlgemm: generates, checks and tunes half-precision GEMM kernels for NVIDIA GPUs"};
  app.set_version_flag("--version", std::string(version()) + " (" + build_commit() + ")");
  app.require_subcommand(1);
  auto& commands = cli::registered_commands();
  std::sort(commands.begin(), commands.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::map<std::string, std::function<int()>> actions;
  for (auto& command : commands) actions[command.name] = command.setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    for (auto* sub : app.get_subcommands()) return actions.at(sub->get_name())();
  } catch (const Error& e) {
    std::fprintf(stderr, "rlgemm: error: %s\n", e.what());
    return exit_code(e.kind());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlgemm: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
