#include "dispatch/autotune_choices.h"

#include <cstdio>
#include <utility>
#include <vector>

namespace rlgemm::dispatch {

namespace {
constexpr const char* kNoKernel = "cublaslt";
}

AutotuneChoices::Key AutotuneChoices::key_of(const Problem& p) {
  return {p.shape.m, p.shape.n, p.shape.k, int(p.layout), int(p.dtype)};
}

AutotuneChoices::AutotuneChoices(std::filesystem::path file, std::string gpu, std::string library)
    : file_(std::move(file), kHeader, "the autotuning cache"), gpu_(std::move(gpu)), library_(std::move(library)) {
  for (const std::vector<std::string>& f : file_.read()) {
    if (f.size() != 12 || f[0] != gpu_ || f[1] != library_) continue;
    try {
      const Problem p{{std::stoll(f[2]), std::stoll(f[3]), std::stoll(f[4])}, parse_layout(f[5]), parse_dtype(f[6])};
      AutotuneChoice choice;
      // A design of another element type than its shape's is a corrupt line, not a choice.
      auto design = [&](const std::string& text, std::optional<Design>& out) {
        if (text == kNoKernel) return true;
        out = parse_design(text);
        return out->dtype == p.dtype;
      };
      if (!design(f[7], choice.eager) || !design(f[9], choice.graph)) continue;
      choice.eager_gain = std::stod(f[8]);
      choice.graph_gain = std::stod(f[10]);
      choice.candidates = std::stoi(f[11]);
      if (!(choice.eager_gain > 0) || !(choice.graph_gain > 0) || choice.candidates < 0) continue;
      chosen_[key_of(p)] = std::move(choice);
    } catch (const std::exception&) {
      // A line cut short by a crash, or a design this build cannot parse: skipped.
    }
  }
}

std::optional<AutotuneChoice> AutotuneChoices::find(const Problem& p) const {
  std::lock_guard lock(mutex_);
  const auto it = chosen_.find(key_of(p));
  if (it == chosen_.end()) return std::nullopt;
  return it->second;
}

void AutotuneChoices::record(const Problem& p, const AutotuneChoice& choice) {
  {
    std::lock_guard lock(mutex_);
    chosen_[key_of(p)] = choice;
  }
  auto gain = [](double g) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4f", g);
    return std::string(text);
  };
  auto design = [](const std::optional<Design>& d) { return d ? to_string(*d) : std::string(kNoKernel); };
  file_.append({gpu_, library_, std::to_string(p.shape.m), std::to_string(p.shape.n), std::to_string(p.shape.k),
                std::string(to_string(p.layout)), std::string(to_string(p.dtype)), design(choice.eager),
                gain(choice.eager_gain), design(choice.graph), gain(choice.graph_gain),
                std::to_string(choice.candidates)});
}

}  // namespace rlgemm::dispatch
