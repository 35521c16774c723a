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
  const auto same_architecture = [&](const Predictor& p) {
    for (const GpuTraits& g : p.gpus())
      if (g.cc_major == gpu.cc_major && g.cc_minor == gpu.cc_minor) return true;
    return false;
  };
  // The timing mode before the GPU: a predictor of another mode learned another quantity (host cost in or out),
  // which matters more than which GPU of the architecture it learned on. So: the mode asked for (this GPU's own,
  // then its architecture's), then offline (likewise), then any mode.
  for (const std::string& wanted : {mode, std::string("offline"), std::string()})
    for (const bool own_gpu : {true, false})
      for (const auto& p : all)
        if ((own_gpu ? p->trained_on_gpu(gpu.name) : same_architecture(*p)) && (wanted.empty() || p->mode() == wanted))
          return p.get();
  return nullptr;
}

}  // namespace rlgemm::predict
