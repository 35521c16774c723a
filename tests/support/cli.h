// Runs the built `rlgemm` binary with arguments and captures its exit code and combined output.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace rlgemm::testing {

struct CliResult {
  int code = -1;
  std::string output;
};

// The binary of this build, or $RLGEMM_BINARY (a build run elsewhere, e.g. on a GPU machine).
inline std::string rlgemm_binary() {
  const char* env = std::getenv("RLGEMM_BINARY");
  return env && *env ? env : std::string(RLGEMM_BINARY_DIR) + "/rlgemm";
}

inline CliResult run_rlgemm(const std::string& args) {
  const std::string cmd = rlgemm_binary() + " " + args + " 2>&1";
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), int(buf.size()), pipe)) r.output += buf.data();
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace rlgemm::testing
