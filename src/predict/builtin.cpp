// The predictors built into the library: data/predictors/*.json, embedded by src/predict/CMakeLists.txt.
#include <memory>

#include "core/embedded_text.h"
#include "predict/predictor.h"
#include "rlgemm/error.h"

namespace rlgemm::predict {

extern const EmbeddedText kEmbeddedPredictors[];
extern const size_t kEmbeddedPredictorCount;

std::vector<std::string> builtin_predictor_names() {
  std::vector<std::string> names;
  for (size_t i = 0; i < kEmbeddedPredictorCount; ++i) names.push_back(kEmbeddedPredictors[i].name);
  return names;
}

const Predictor* builtin_predictor(const GpuTraits& gpu, const std::string& mode) {
  static const std::vector<std::unique_ptr<Predictor>> all = [] {
    std::vector<std::unique_ptr<Predictor>> parsed;
    for (size_t i = 0; i < kEmbeddedPredictorCount; ++i) {
      try {
        parsed.push_back(std::make_unique<Predictor>(
            Predictor::parse(kEmbeddedPredictors[i].text, std::string("built-in ") + kEmbeddedPredictors[i].name)));
      } catch (const Error& e) {
        // A built-in file this build cannot read is a build defect, not the user's input.
        throw Error(ErrorKind::kRuntime, e.what());
      }
    }
    return parsed;
  }();
  const auto same_gpu = [&](const Predictor& p) { return p.trained_on_gpu(gpu.name); };
  const auto same_architecture = [&](const Predictor& p) {
    for (const GpuTraits& g : p.gpus())
      if (g.cc_major == gpu.cc_major && g.cc_minor == gpu.cc_minor) return true;
    return false;
  };
  const auto pick = [&](auto fits) -> const Predictor* {
    for (const std::string& wanted : {mode, std::string("offline")})
      for (const auto& p : all)
        if (fits(*p) && p->mode() == wanted) return p.get();
    for (const auto& p : all)
      if (fits(*p)) return p.get();
    return nullptr;
  };
  if (const Predictor* p = pick(same_gpu)) return p;
  return pick(same_architecture);
}

}  // namespace rlgemm::predict
