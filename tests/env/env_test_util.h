// Shared by the evaluation service's tests: the submissions of tests/env/kernels and what each must get.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <algorithm>
#include <stdexcept>

#include "support/cli.h"

namespace rlgemm::testing {

struct KernelCase {
  std::string name;    // file name without .cu
  std::string source;
  std::string expect;  // "accepted" or "rejected"
  std::string reason;  // the expected rejection's reason
};

inline std::vector<KernelCase> kernel_cases() {
  std::vector<KernelCase> out;
  const std::filesystem::path dir = std::filesystem::path(RLGEMM_SOURCE_DIR) / "tests/env/kernels";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".cu") continue;
    KernelCase c;
    c.name = entry.path().stem().string();
    c.source = read_text(entry.path());
    const std::string first = c.source.substr(0, c.source.find('\n'));
    const std::string tag = "// expect: ";
    if (first.rfind(tag, 0) != 0) continue;
    const std::string rest = first.substr(tag.size());
    c.expect = rest.substr(0, rest.find(' '));
    if (rest.find(' ') != std::string::npos) c.reason = rest.substr(rest.find(' ') + 1);
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(), [](const KernelCase& a, const KernelCase& b) { return a.name < b.name; });
  return out;
}

inline KernelCase kernel_case(const std::string& name) {
  for (auto& c : kernel_cases())
    if (c.name == name) return c;
  throw std::runtime_error("no kernel case " + name);
}

}  // namespace rlgemm::testing
