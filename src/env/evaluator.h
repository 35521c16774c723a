// The GPU side of the evaluation service: runs in the isolated worker process (`rlgemm worker --backend env`,
// one per GPU), so that a submission that faults or hangs costs that process and not the service.
//
// One evaluation, on inputs drawn afresh for it:
//   1. source: the shared object is loaded (dlopen) and rlgemm_launch called once inside a CUDA graph capture, in
//      global mode, of a blocking stream of the submission's own (the harness times on a non-blocking one, as
//      bench does): work on the legacy stream or a synchronizing call fails the capture;
//      a graph without a kernel did its work elsewhere. Every later call makes the work captured from the launch
//      function again (one capture per set of operand addresses), never the function itself, so work it put on
//      other streams never runs again: its kernels and memsets launched directly as recorded where they are a
//      chain (run/recorded.h: no graph launch's host cost in the offline time, as bench launches a design),
//      else the graph.
//      design: rlgemm's generator and compiler, as `rlgemm bench --design`.
//   2. the harness's correctness gate (bench/correctness.h): C poisoned with NaN, guard bands around A, B, C and
//      the workspace, standard-normal and uniform-positive inputs (fp16 or bf16 accumulation fails the
//      latter), the long-K probe, every element against an fp64 reference.
//   3. timed side by side with the vendor calls (cuBLAS, cuBLASLt heuristic and every-candidate lt_auto) in
//      interleaved rounds, by the harness's offline method (the time `rlgemm bench` reports) and in graph mode
//      (the calls captured in a CUDA graph: the GPU's time alone, the reward); each mode's speedup over the best
//      vendor call comes with a 95% interval from the paired rounds (env/reward.h). Then timed again with A and
//      B rewritten with new values before every call: a kernel much slower there (2x, plus 30 us for the host
//      clock) is fast only on inputs it has seen, and rejected as timing-dependent.
//   4. new inputs written into the same buffers, C poisoned, the call repeated back to back and checked again:
//      an output cached from an earlier call, or a kernel that changes its behaviour after many calls, fails.
// A fault poisons the CUDA context: the worker ends (exit code 70) and the service records the rejection.
#pragma once

#include <nlohmann/json.hpp>

#include "core/cuda_util.h"
#include "search/measurer.h"

namespace rlgemm::env {

// Registers the "env" measuring backend (the GPU backend, plus evaluate()). Called once at start-up.
void install_env_backend();

// Worker exit code after a submission broke the CUDA context (the service reads it as a fault).
inline constexpr int kContextLostExit = 70;

}  // namespace rlgemm::env
