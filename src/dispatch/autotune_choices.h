// What autotuning (HandleOptions::autotune) kept for a shape on this machine, so that each shape is measured
// once per machine and library build: the design whose kernel measured fastest against the floor, when it was
// at least the handle's margin faster, else none (the floor serves the shape). A ChoicesFile of
// gpu,library,M,N,K,layout,dtype,design,gain,candidates, where design is the design's text or "cublaslt";
// rows of another GPU or another library build are kept in the file and ignored (another build's kernels may
// run otherwise). Thread-safe.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include "dispatch/choices_file.h"
#include "rlgemm/design.h"
#include "rlgemm/problem.h"

namespace rlgemm::dispatch {

struct AutotuneChoice {
  std::optional<Design> design;  // none: no candidate beat the floor
  double gain = 1;               // the floor's time over the best candidate's, as measured
  int candidates = 0;            // how many kernels were measured
};

class AutotuneChoices {
 public:
  static constexpr const char* kHeader = "gpu,library,M,N,K,layout,dtype,design,gain,candidates";

  // `file` empty: kept in memory only. `library` names the build (no commas).
  AutotuneChoices(std::filesystem::path file, std::string gpu, std::string library);
  std::optional<AutotuneChoice> find(const Problem& problem) const;
  void record(const Problem& problem, const AutotuneChoice& choice);
  const std::filesystem::path& file() const { return file_.file(); }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int, int>;  // M, N, K, layout, dtype
  static Key key_of(const Problem& problem);
  ChoicesFile file_;
  std::string gpu_, library_;
  mutable std::mutex mutex_;
  std::map<Key, AutotuneChoice> chosen_;
};

}  // namespace rlgemm::dispatch
