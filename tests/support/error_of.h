// The message of the rlgemm Error a call throws, or "" when it throws none: for tests that check that a
// refusal names its rule.
#pragma once

#include <functional>
#include <string>

#include "rlgemm/error.h"

namespace rlgemm::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace rlgemm::testing
