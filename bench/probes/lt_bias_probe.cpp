// What a cuBLASLt route's calls with a bias could run. For each shape: the floor's algorithm (the library's
// first-use choice in CUDA graphs) and its workspace; then every algorithm cuBLASLt offers with a bias epilogue
// within the harness's workspace (kLtWorkspaceBytes), and the route's first bias candidate, each with
// its workspace, whether the route's workspace holds it (CublasLtGemm::bias_candidates takes only those), its
// algorithm id, tile and split; all of them timed side by side in CUDA graphs (the GPU's time), `--repeat` times;
// and the choice CublasLtGemm::time_bias_candidates makes.
//
//   lt_bias_probe [--repeat R] [--caller] [--direct] M,N,K [M,N,K ...]      (tn, fp16; prints CSV)
//
// --caller makes both choices as a call's first use makes them, on the operands the algorithms are then timed
// on beside the scratch sets: whether the choice holds on the very operands it was timed on.
// --direct also times each of the route's bias candidates launched directly (dispatch::LtDirect, as the handle
// serves them), in the same rounds as the cublasLtMatmul launches, each with its own workspace size: whether a
// choice timed through cublasLtMatmul holds where the handle launches it.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/cublaslt_problem.h"
#include "bench/fill.h"
#include "bench/timing.h"
#include "core/cuda_util.h"
#include "dispatch/cublaslt_gemm.h"
#include "dispatch/lt_direct.h"
#include "rlgemm/error.h"
#include "rlgemm/problem.h"
#include "probe_cli.h"

using namespace rlgemm;

namespace {

int algo_attribute(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t what) {
  int value = -1;
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, what, &value, sizeof value, &written) != CUBLAS_STATUS_SUCCESS)
    return -1;
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 2;
  CLI::App app("What a cuBLASLt route's calls with a bias could run (tn, fp16; prints CSV)", "lt_bias_probe");
  app.add_option("--repeat", repeat, "rounds of the side-by-side timing")->check(CLI::PositiveNumber);
  bool caller = false;
  app.add_flag("--caller", caller, "make the choices on the operands the algorithms are then timed on");
  bool direct = false;
  app.add_flag("--direct", direct, "also time the route's bias candidates launched directly, as the handle serves them");
  std::vector<Shape> shapes;
  if (const int status = probes::parse_command_line(app, argc, argv, shapes); status >= 0) return status;
  try {
    cudaStream_t stream = nullptr;
    RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const dispatch::CublasLtContext context;
    std::printf("M,N,K,what,candidate,workspace,in_route,algo_id,tile,splitk,time_us,min_us,max_us\n");
    for (const Shape& shape : shapes) {
      const Problem problem{shape, Layout::kTN, DType::kF16};
      const std::string s = std::to_string(shape.m) + "," + std::to_string(shape.n) + "," + std::to_string(shape.k);
      const bench::ScratchOperands x(problem, stream);
      const std::optional<bench::LtOperands> on_x =
          caller ? std::optional<bench::LtOperands>(bench::LtOperands{x.a.ptr, x.b.ptr, x.c.ptr}) : std::nullopt;
      const bench::LtChoice floor_choice =
          dispatch::time_candidates(context, problem, stream, bench::Mode::kGraph, on_x);
      const dispatch::CublasLtGemm floor(context, problem, floor_choice.index);
      std::printf("%s,floor,%d,%zu,,,,,,,\n", s.c_str(), floor_choice.index, floor.workspace_bytes());
      const bench::LtChoice chosen = floor.time_bias_candidates(stream, bench::Mode::kGraph, on_x);
      std::printf("%s,time_bias_candidates,%d,,,,,,,,\n", s.c_str(), chosen.index);

      // The route's first bias candidate (bias_candidates: the heuristic's first within the route's workspace), then
      // the heuristic's within the harness's.
      const bench::LtProblem lt(problem, bench::LtEpilogue::kBias);
      std::vector<cublasLtMatmulHeuristicResult_t> all;
      std::vector<std::string> names;
      const auto route_list = floor.bias_candidates();
      if (!route_list.empty()) {
        all.push_back(route_list.front());
        names.push_back("route-first");  // bias_candidates()[0]
      }
      int h = 0;
      for (const auto& r : lt.candidates(context.handle(), bench::kLtWorkspaceBytes)) {
        all.push_back(r);
        names.push_back("heuristic-" + std::to_string(h++));
      }
      DeviceScratch<unsigned char> bias(size_t(shape.n) * 2);
      bench::fill_random(reinterpret_cast<half*>(bias.ptr), size_t(shape.n), bench::Fill::kNormal, 5, stream,
                         problem.dtype);
      DeviceScratch<unsigned char> workspace(bench::kLtWorkspaceBytes);
      std::vector<bench::Subject> subjects;
      // What each subject's rows say: its name, its index (into `all`, or for a direct launch into route_list),
      // its algorithm and whether the route's workspace holds it.
      struct Row {
        std::string name;
        size_t index;
        cublasLtMatmulHeuristicResult_t candidate;
        bool in_route;
      };
      std::vector<Row> rows;
      for (size_t i = 0; i < all.size(); ++i) {
        auto call = [&, i](cudaStream_t st) {
          lt.launch(context.handle(), all[i].algo, x.a.ptr, x.b.ptr, x.c.ptr, workspace.ptr, bench::kLtWorkspaceBytes,
                    st, bias.ptr);
        };
        try {
          call(stream);
          RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
        } catch (const Error&) {
          continue;
        }
        subjects.push_back({call, {}, names[i]});
        rows.push_back({names[i], i, all[i], bench::offers(route_list, all[i].algo)});
      }
      // The route's bias candidates launched directly, each with its own workspace size (rows "direct-<j>": j
      // indexes bias_candidates(), the index time_bias_candidates returns).
      std::vector<std::unique_ptr<dispatch::CublasLtGemm>> plans;
      std::vector<std::unique_ptr<dispatch::LtDirect>> directs;
      if (direct) {
        for (size_t j = 0; j < route_list.size(); ++j) {
          auto plan = floor.with_bias(int(j));
          std::string why;
          auto launcher = dispatch::LtDirect::make(*plan, problem, why);
          if (!launcher) {
            std::fprintf(stderr, "lt_bias_probe: %s bias candidate %zu is not launched directly: %s\n", s.c_str(), j,
                         why.c_str());
            continue;
          }
          const dispatch::LtDirect* d = launcher.get();
          subjects.push_back(
              {[&, d](cudaStream_t st) { d->launch(st, x.a.ptr, x.b.ptr, x.c.ptr, workspace.ptr, bias.ptr); },
               {},
               "direct-" + std::to_string(j)});
          rows.push_back({"direct-" + std::to_string(j), j, route_list[j], true});
          plans.push_back(std::move(plan));
          directs.push_back(std::move(launcher));
        }
      }
      for (int r = 0; r < repeat; ++r) {
        bench::TimingOptions o;
        o.seed = 2000 + uint64_t(r);
        const auto times = bench::time_side_by_side(bench::Mode::kGraph, subjects, nullptr, stream, o);
        for (size_t j = 0; j < times.size(); ++j) {
          const Row& row = rows[j];
          const auto& c = row.candidate;
          std::printf("%s,%s-%d,%zu,%zu,%d,%d,%d,%d,%.3f,%.3f,%.3f\n", s.c_str(), row.name.c_str(), r, row.index,
                      c.workspaceSize, int(row.in_route), algo_attribute(c.algo, CUBLASLT_ALGO_CONFIG_ID),
                      algo_attribute(c.algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                      algo_attribute(c.algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM), times[j].time_us, times[j].min_us,
                      times[j].max_us);
        }
        std::fflush(stdout);
      }
    }
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lt_bias_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
