// Helpers of the measure stage's tests: scratch files, reading them back, and skipping without a Hopper GPU.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/cuda_util.h"
#include "support/gpu.h"

namespace rlgemm::testing {

// `name` in a scratch folder of this process, named after `suite`; parent folders are created.
inline std::filesystem::path scratch_file(const std::string& suite, const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("rlgemm-" + suite + "-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

inline std::vector<std::string> lines_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

inline bool hopper_available(std::string* why) {
  if (!cuda_device_available(why)) return false;
  const DeviceInfo device = open_device(0);
  if (device.cc_major == 9 && device.cc_minor == 0) return true;
  *why = device.name + " is not a Hopper (sm_90) GPU";
  return false;
}

}  // namespace rlgemm::testing

#define REQUIRE_HOPPER()                                                                               \
  do {                                                                                                 \
    RLGEMM_REQUIRE_GPU();                                                                              \
    std::string why_;                                                                                  \
    if (!::rlgemm::testing::hopper_available(&why_)) GTEST_SKIP() << "needs a Hopper GPU: " << why_; \
  } while (0)
