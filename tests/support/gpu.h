// GPU tests skip, with a clear message, on machines without a usable CUDA GPU (CI has none).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/cuda_util.h"

#define RLGEMM_REQUIRE_GPU()                                                       \
  do {                                                                             \
    std::string rlgemm_why_;                                                       \
    if (!::rlgemm::cuda_device_available(&rlgemm_why_))                            \
      GTEST_SKIP() << "needs a CUDA GPU, none usable here: " << rlgemm_why_;       \
  } while (0)
