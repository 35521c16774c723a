// How steady is lt_auto's choice among cuBLASLt's candidates? For each shape: every candidate timed side by
// side with the harness's method, offline and in CUDA graphs (the GPU's time), then choose_fastest run a few
// times in each mode, as the harness's lt_auto and the library's floor run it. Before all that, the library
// floor's first-use choice (dispatch::time_candidates) in each mode, on the shape's first touch.
//
//   lt_choice_probe [--repeat R] [--idle-ms T] [--heat-ms H] [--caller] [--workspace-check] [--placements P]
//                   M,N,K [M,N,K ...]   (tn, fp16; prints CSV)
//
// --idle-ms leaves the GPU idle that long before each first-use choice, as a handle does while its host-side
// work for a new shape (the predictor's scan) runs.
//
// --caller times the first-use choices as a call's first use times them: on the operands the candidates are
// then timed on (the caller's) beside the scratch sets, `--repeat` times in each mode; whether the choice
// holds on the very operands it was timed on. The candidates are then timed with their own workspace, as a
// planned route launches them.
//
// --workspace-check times instead, side by side, each candidate three ways: through cublasLtMatmul with the
// whole workspace the choice is timed with (what = "lt-whole-workspace"), through cublasLtMatmul with the
// workspace the heuristic reported for it (what = "lt-own-workspace", what a planned route passes), and launched
// directly as the library's floor launches it (what = "direct"; absent where it cannot be).
//
// --heat-ms H times every round twice, and runs choose_fastest twice: after the GPU rested 300 ms (what =
// "rested-..."), and after H ms of every candidate back to back (what = "heated-..."): whether a candidate's lead
// holds on a GPU under sustained load, where clocks and power settle lower than in a burst after a pause.
//
// --placements P times instead, side by side in CUDA graphs, each candidate (with its own workspace) on P sets
// of operands allocated apart (what = "placement-p"): whether a candidate's time depends on where its operands
// lie, which a choice made on scratch operands cannot see.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
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

// `repeat` rounds of the subjects timed side by side in `mode`; one CSV row per subject and round, its `what`
// the label's text and the round, its candidate the label's number.
void time_rounds(const std::string& s, const std::vector<bench::Subject>& subjects,
                 const std::vector<std::pair<std::string, int>>& labels, bench::Mode mode, int repeat, uint64_t seed,
                 cudaStream_t stream) {
  const std::string m(bench::to_string(mode));
  for (int r = 0; r < repeat; ++r) {
    bench::TimingOptions o;
    o.seed = seed + uint64_t(r);
    const auto times = bench::time_side_by_side(mode, subjects, nullptr, stream, o);
    for (size_t j = 0; j < times.size(); ++j)
      std::printf("%s,%s-%d,%s,%d,%.3f,%.3f,%.3f\n", s.c_str(), labels[j].first.c_str(), r, m.c_str(),
                  labels[j].second, times[j].time_us, times[j].min_us, times[j].max_us);
    std::fflush(stdout);
  }
}

void check_workspaces(const Problem& problem, const std::string& s, int repeat, cublasLtHandle_t handle,
                      cudaStream_t stream) {
  const dispatch::CublasLtContext context;
  const bench::LtProblem lt(problem);
  const auto candidates = lt.candidates(handle);
  const bench::ScratchOperands x(problem, stream);
  DeviceScratch<unsigned char> whole(bench::kLtWorkspaceBytes);
  std::vector<std::unique_ptr<dispatch::CublasLtGemm>> plans;
  std::vector<std::unique_ptr<dispatch::LtDirect>> directs;
  std::vector<std::unique_ptr<DeviceScratch<unsigned char>>> own;  // each direct launch's workspace, zeroed
  std::vector<bench::Subject> subjects;
  std::vector<std::pair<std::string, int>> labels;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS) continue;
    const size_t own_bytes = candidates[i].workspaceSize;
    subjects.push_back({[&, i](cudaStream_t st) {
                          lt.launch(handle, candidates[i].algo, x.a.ptr, x.b.ptr, x.c.ptr, whole.ptr,
                                    bench::kLtWorkspaceBytes, st);
                        }, {}, "whole " + std::to_string(i)});
    labels.emplace_back("lt-whole-workspace", int(i));
    subjects.push_back({[&, i, own_bytes](cudaStream_t st) {
                          lt.launch(handle, candidates[i].algo, x.a.ptr, x.b.ptr, x.c.ptr, whole.ptr, own_bytes, st);
                        }, {}, "own " + std::to_string(i)});
    labels.emplace_back("lt-own-workspace", int(i));
    auto plan = std::make_unique<dispatch::CublasLtGemm>(context, problem, int(i));
    std::string why;
    auto direct = dispatch::LtDirect::make(*plan, problem, why);
    if (!direct) {
      std::fprintf(stderr, "%s candidate %zu: not launched directly: %s\n", s.c_str(), i, why.c_str());
    } else {
      const size_t bytes = std::max<size_t>(plan->workspace_bytes(), 16);
      auto& ws = own.emplace_back(std::make_unique<DeviceScratch<unsigned char>>(bytes));
      RLGEMM_CUDA_CHECK(cudaMemsetAsync(ws->ptr, 0, bytes, stream));
      const dispatch::LtDirect* d = direct.get();
      void* w = ws->ptr;
      subjects.push_back({[&x, d, w](cudaStream_t st) { d->launch(st, x.a.ptr, x.b.ptr, x.c.ptr, w); }, {},
                          "direct " + std::to_string(i)});
      labels.emplace_back("direct", int(i));
      directs.push_back(std::move(direct));
    }
    plans.push_back(std::move(plan));
    std::printf("%s,workspace-bytes,,%zu,%zu,,\n", s.c_str(), i, own_bytes);
  }
  for (bench::Mode mode : {bench::Mode::kOffline, bench::Mode::kGraph})
    time_rounds(s, subjects, labels, mode, repeat, 2000, stream);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void check_placements(const Problem& problem, const std::string& s, int repeat, int placements,
                      cublasLtHandle_t handle, cudaStream_t stream) {
  const bench::LtProblem lt(problem);
  const auto candidates = lt.candidates(handle);
  // As the floor's choice allocates them, with no budget but the device's memory.
  const bench::OperandSets sets(problem, stream, placements, SIZE_MAX);
  if (int(sets.size()) < placements)
    throw Error(ErrorKind::kOutOfMemory, s + ": only " + std::to_string(sets.size()) + " of " +
                                             std::to_string(placements) + " operand sets fit in half the free memory");
  DeviceScratch<unsigned char> workspace(bench::kLtWorkspaceBytes);
  std::vector<bench::Subject> subjects;
  std::vector<std::pair<std::string, int>> labels;  // "placement-p", candidate
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].state != CUBLAS_STATUS_SUCCESS) continue;
    for (int p = 0; p < placements; ++p) {
      const bench::ScratchOperands* x = &sets[size_t(p)];
      const size_t bytes = candidates[i].workspaceSize;
      subjects.push_back({[&, i, x, bytes](cudaStream_t st) {
                            lt.launch(handle, candidates[i].algo, x->a.ptr, x->b.ptr, x->c.ptr, workspace.ptr, bytes,
                                      st);
                          }, {}, "candidate " + std::to_string(i) + " placement " + std::to_string(p)});
      labels.emplace_back("placement-" + std::to_string(p), int(i));
    }
  }
  time_rounds(s, subjects, labels, bench::Mode::kGraph, repeat, 3000, stream);
  RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 3;
  double idle_ms = 0;
  CLI::App app("How steady is lt_auto's choice among cuBLASLt's candidates (tn, fp16; prints CSV)", "lt_choice_probe");
  app.add_option("--repeat", repeat, "rounds of the side-by-side timing and choose_fastest")->check(CLI::PositiveNumber);
  app.add_option("--idle-ms", idle_ms, "idle time before each first-use choice")->check(CLI::NonNegativeNumber);
  int placements = 0;
  app.add_option("--placements", placements, "time each candidate on this many operand sets allocated apart")
      ->check(CLI::PositiveNumber);
  bool caller = false;
  app.add_flag("--caller", caller, "time the first-use choices on the operands the candidates are then timed on");
  double heat_ms = 0;
  app.add_option("--heat-ms", heat_ms,
                 "time each round twice: after the GPU rested, and after this long under the candidates' load")
      ->check(CLI::NonNegativeNumber);
  bool workspace_check = false;
  app.add_flag("--workspace-check", workspace_check,
               "time each candidate with the whole workspace, with its own, and launched directly");
  std::vector<Shape> shapes;
  if (const int status = probes::parse_command_line(app, argc, argv, shapes); status >= 0) return status;
  try {
    cudaStream_t stream = nullptr;
    RLGEMM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cublasLtHandle_t handle = nullptr;
    if (cublasLtCreate(&handle) != CUBLAS_STATUS_SUCCESS) throw Error(ErrorKind::kRuntime, "cublasLtCreate failed");
    std::printf("M,N,K,what,mode,candidate,time_us,min_us,max_us\n");
    for (const Shape& shape : shapes) {
      const Problem problem{shape, Layout::kTN, DType::kF16};
      const std::string s = std::to_string(shape.m) + "," + std::to_string(shape.n) + "," + std::to_string(shape.k);
      if (placements > 0) {
        check_placements(problem, s, repeat, placements, handle, stream);
        continue;
      }
      if (workspace_check) {
        check_workspaces(problem, s, repeat, handle, stream);
        continue;
      }
      const bench::ScratchOperands x(problem, stream);
      // First, before anything else touches this shape: the library floor's own first-use choice (fresh scratch
      // operands and workspace, a fresh cuBLASLt handle), in each mode, as a handle makes it (with --caller, on
      // x too, as a call's first use on x would, `repeat` times).
      const std::optional<bench::LtOperands> on_x =
          caller ? std::optional<bench::LtOperands>(bench::LtOperands{x.a.ptr, x.b.ptr, x.c.ptr}) : std::nullopt;
      for (bench::Mode mode : {bench::Mode::kOffline, bench::Mode::kGraph})
        for (int r = 0; r < (caller ? repeat : 1); ++r) {
          const dispatch::CublasLtContext context;
          RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
          if (idle_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(idle_ms));
          const bench::LtChoice c = dispatch::time_candidates(context, problem, stream, mode, on_x);
          std::printf("%s,%s,%s,%d,,,\n", s.c_str(), caller ? ("first-use-caller-" + std::to_string(r)).c_str() : "first-use",
                      std::string(bench::to_string(mode)).c_str(), c.index);
        }
      const bench::LtProblem lt(problem);
      const auto candidates = lt.candidates(handle);
      DeviceScratch<unsigned char> workspace(bench::kLtWorkspaceBytes);
      std::vector<bench::Subject> subjects;
      std::vector<int> runnable;
      for (size_t i = 0; i < candidates.size(); ++i) {
        const size_t bytes = caller ? bench::launch_workspace_bytes(candidates[i], bench::kLtWorkspaceBytes,
                                                                    bench::LtWorkspace::kOwn)
                                    : bench::kLtWorkspaceBytes;
        auto call = [&, i, bytes](cudaStream_t s) {
          lt.launch(handle, candidates[i].algo, x.a.ptr, x.b.ptr, x.c.ptr, workspace.ptr, bytes, s);
        };
        try {
          call(stream);
          RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
        } catch (const Error&) {
          continue;
        }
        runnable.push_back(int(i));
        subjects.push_back({call, {}, "candidate " + std::to_string(i)});
      }
      // With --heat-ms, each round twice: after the GPU rested (idle kRestMs), and after heat_ms of every
      // candidate back to back (a GPU under sustained load, as a server's or a long benchmark's).
      constexpr double kRestMs = 300;
      const auto heat = [&](double ms) {
        const auto start = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - start < std::chrono::duration<double, std::milli>(ms)) {
          for (const bench::Subject& subject : subjects) subject.call(stream);
          RLGEMM_CUDA_CHECK(cudaStreamSynchronize(stream));
        }
      };
      const std::vector<std::string> states = heat_ms > 0 ? std::vector<std::string>{"rested-", "heated-"}
                                                          : std::vector<std::string>{""};
      const auto settle = [&](const std::string& state) {  // before each timing and each choice
        if (state == "rested-") std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kRestMs));
        if (state == "heated-") heat(heat_ms);
      };
      for (bench::Mode mode : {bench::Mode::kOffline, bench::Mode::kGraph}) {
        const std::string m(bench::to_string(mode));
        for (int r = 0; r < repeat; ++r)
          for (const std::string& state : states) {
            RLGEMM_CUDA_CHECK(cudaDeviceSynchronize());
            settle(state);
            bench::TimingOptions o;
            o.seed = 1000 + uint64_t(r);
            const auto times = bench::time_side_by_side(mode, subjects, nullptr, stream, o);
            for (size_t j = 0; j < times.size(); ++j)
              std::printf("%s,%sall-candidates-%d,%s,%d,%.3f,%.3f,%.3f\n", s.c_str(), state.c_str(), r, m.c_str(),
                          runnable[j], times[j].time_us, times[j].min_us, times[j].max_us);
            settle(state);
            const bench::LtChoice c = bench::choose_fastest(lt, handle, candidates, x.a.ptr, x.b.ptr, x.c.ptr,
                                                            workspace.ptr, bench::kLtWorkspaceBytes, stream, mode);
            std::printf("%s,%schoose_fastest-%d,%s,%d,,,\n", s.c_str(), state.c_str(), r, m.c_str(), c.index);
            std::fflush(stdout);
          }
      }
    }
    cublasLtDestroy(handle);
    cudaStreamDestroy(stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "lt_choice_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
