#include <map>
#include <mutex>

#include "rlgemm/error.h"
#include "search/measurer.h"
#include "search/synthetic_measurer.h"

namespace rlgemm::search {

namespace {

struct Registry {
  Registry() {
    factories["synthetic"] = [](const BackendOptions& o) -> MeasurerPtr {
      return std::make_unique<SyntheticMeasurer>(o);
    };
    counters["synthetic"] = [] { return 1; };
  }
  std::mutex mutex;
  std::map<std::string, BackendFactory> factories;
  std::map<std::string, std::function<int()>> counters;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

nlohmann::json Measurer::evaluate(const nlohmann::json&) {
  fail("this measuring backend does not evaluate submissions (the evaluation service runs the \"env\" backend)");
}

void register_backend(const std::string& name, BackendFactory factory) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.factories[name] = std::move(factory);
}

void register_backend_device_counter(const std::string& name, std::function<int()> counter) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  r.counters[name] = std::move(counter);
}

MeasurerPtr make_backend(const BackendOptions& options) {
  BackendFactory factory;
  std::string known;
  {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.factories.find(options.backend);
    if (it != r.factories.end()) factory = it->second;
    for (auto& [name, f] : r.factories) known += (known.empty() ? "" : ", ") + name;
  }
  if (!factory) {
    if (options.backend == "gpu")
      throw Error(ErrorKind::kInvalidInput,
                  "the gpu measuring backend is not available in this build (no harness backend is registered); "
                  "use --backend synthetic");
    fail("unknown measuring backend '" + options.backend + "': known backends are " + known);
  }
  return factory(options);
}

int backend_device_count(const BackendOptions& options) {
  std::function<int()> counter;
  {
    auto& r = registry();
    std::lock_guard lock(r.mutex);
    auto it = r.counters.find(options.backend);
    if (it != r.counters.end()) counter = it->second;
  }
  if (!counter) {
    make_backend(options);  // throws the backend's own "not available" error
    return 1;
  }
  return counter();
}

}  // namespace rlgemm::search
