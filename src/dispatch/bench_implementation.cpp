#include "dispatch/bench_implementation.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "bench/results.h"
#include "rlgemm/rlgemm.h"

namespace rlgemm::dispatch {
namespace {

class DispatchImplementation final : public bench::Implementation {
 public:
  DispatchImplementation(const HandleOptions& options, std::string name)
      : handle_(options), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  // The shape's first use is a call on the operands the harness times (`x`), as an application's first call
  // is on its own: the route, its compile and workspace, and the floor's choice timed on them too.
  void prepare(const Problem& p, const bench::Operands& x, cudaStream_t stream) override {
    run(p, x, stream);
    route_ = handle_.describe(p.shape.m, p.shape.n, p.shape.k, p.layout, p.dtype);
    for (char& c : route_)
      if (c == ',') c = ';';  // the detail column holds no commas
    graph_memory_before_ = handle_.stats().graph_memory_workspaces;
  }
  void run(const Problem& p, const bench::Operands& x, cudaStream_t stream) override {
    handle_.gemm(stream, p.shape.m, p.shape.n, p.shape.k, x.a, x.b, p.layout, x.c, p.dtype);
  }
  std::string detail() const override { return route_; }
  std::map<std::string, double> first_use_seconds() const override {
    const Stats s = handle_.stats();
    return {{"floor's choice", s.first_use_floor_s}, {"kernels built", s.first_use_build_s},
            {"route check", s.first_use_check_s}};
  }
  // Captured calls that found every capture slot of their route owned (a graph of an earlier capture still
  // alive) paid an allocation in the graph at every replay: their rows say so.
  std::string graph_rounds_note() const override {
    const uint64_t calls = handle_.stats().graph_memory_workspaces - graph_memory_before_;
    return calls ? std::to_string(calls) + " " + bench::kGraphMemoryNote : "";
  }

 private:
  Handle handle_;
  std::string name_;
  std::string route_;
  uint64_t graph_memory_before_ = 0;
};

}  // namespace

bench::ImplementationPtr make_dispatch_implementation(const HandleOptions& options, std::string name) {
  return std::make_unique<DispatchImplementation>(options, std::move(name));
}

}  // namespace rlgemm::dispatch
