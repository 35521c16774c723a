#include "dispatch/bench_implementation.h"

#include <utility>

#include "rlgemm/rlgemm.h"

namespace rlgemm::dispatch {
namespace {

class DispatchImplementation final : public bench::Implementation {
 public:
  DispatchImplementation(const HandleOptions& options, std::string name)
      : handle_(options), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  void prepare(const Problem& p, const bench::Operands&, cudaStream_t stream) override {
    handle_.prepare(p.shape.m, p.shape.n, p.shape.k, p.layout, stream, p.dtype);  // route, compile, workspace
    route_ = handle_.describe(p.shape.m, p.shape.n, p.shape.k, p.layout, p.dtype);
    for (char& c : route_)
      if (c == ',') c = ';';  // the detail column holds no commas
  }
  void run(const Problem& p, const bench::Operands& x, cudaStream_t stream) override {
    handle_.gemm(stream, p.shape.m, p.shape.n, p.shape.k, x.a, x.b, p.layout, x.c, p.dtype);
  }
  std::string detail() const override { return route_; }

 private:
  Handle handle_;
  std::string name_;
  std::string route_;
};

}  // namespace

bench::ImplementationPtr make_dispatch_implementation(const HandleOptions& options, std::string name) {
  return std::make_unique<DispatchImplementation>(options, std::move(name));
}

}  // namespace rlgemm::dispatch
