// Subcommands of the `rlgemm` CLI register themselves: each lives in its own file in this folder and
// defines a static CommandRegistration that adds its options to the app and returns the action to run.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace rlgemm::cli {

// Adds a subcommand to `app` and returns the function that runs it (returning the exit code).
using CommandSetup = std::function<std::function<int()>(CLI::App& app)>;

struct CommandRegistration {
  CommandRegistration(std::string name, CommandSetup setup);
};

struct RegisteredCommand {
  std::string name;
  CommandSetup setup;
};
std::vector<RegisteredCommand>& registered_commands();

// The command line as typed, recorded in result files.
const std::string& command_line();

// The path of this rlgemm executable, which serves `rlgemm worker` for the measuring workers.
std::string self_exe();

}  // namespace rlgemm::cli
