// GPU tests skip, with a clear message, on machines without a usable CUDA GPU (CI has none); a fixture for those
// that need a folder of their own.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

#include "core/cuda_util.h"

#define RLGEMM_REQUIRE_GPU()                                                       \
  do {                                                                             \
    std::string rlgemm_why_;                                                       \
    if (!::rlgemm::cuda_device_available(&rlgemm_why_))                            \
      GTEST_SKIP() << "needs a CUDA GPU, none usable here: " << rlgemm_why_;       \
  } while (0)

namespace rlgemm::test {

// A GPU test with the device open and a temporary folder of its own, removed after it: named after the test
// suite and this process, so that test processes side by side never share one. Skipped without a GPU.
class GpuTestWithDir : public ::testing::Test {
 protected:
  void SetUp() override {
    RLGEMM_REQUIRE_GPU();
    device_ = open_device();
    const std::string suite = ::testing::UnitTest::GetInstance()->current_test_info()->test_suite_name();
    dir_ = std::filesystem::temp_directory_path() / ("rlgemm-" + suite + "-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  DeviceInfo device_;
  std::filesystem::path dir_;
};

}  // namespace rlgemm::test
