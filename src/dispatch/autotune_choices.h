// What autotuning (HandleOptions::autotune) kept for a shape on this machine, so that each shape's candidates
// are compiled and screened once per machine and library build: for each way of calling (eager calls, and calls
// captured in CUDA graphs), the design whose kernel measured fastest against the floor beyond the handle's
// margin, else none (the floor serves that way). A ChoicesFile of
// gpu,library,M,N,K,layout,dtype,eager_design,eager_gain,graph_design,graph_gain,candidates, where a design is
// its text or "cublaslt"; rows of another GPU or another library build are kept in the file and ignored
// (another build's kernels may run otherwise). Thread-safe.
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
  std::optional<Design> eager;  // eager calls: none where no candidate beat the floor
  double eager_gain = 1;        // the floor's time over that candidate's, as measured (paired)
  std::optional<Design> graph;  // calls captured in CUDA graphs, likewise
  double graph_gain = 1;
  int candidates = 0;           // how many kernels were measured
};

class AutotuneChoices {
 public:
  static constexpr const char* kHeader =
      "gpu,library,M,N,K,layout,dtype,eager_design,eager_gain,graph_design,graph_gain,candidates";

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
