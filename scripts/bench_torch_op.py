#!/usr/bin/env python3
"""torch.ops.rlgemm.linear against F.linear as a PyTorch user calls them, with and without a bias: microseconds per
call over back-to-back calls between CUDA events (host cost included, as in an eager model), and the same calls
captured in a CUDA graph (kernel time alone). Captures need no prepare(): each shape is warmed up once on the
default stream first.

Shapes: six single layers (1..4096 x 4096 x 4096, 16 x 14336 x 4096, 512 x 2048/5632 x 2048), M from 2 to 8192 at
4096x4096, and the linear layers of the end-to-end model runs (Llama-3-8B and Qwen2.5-7B dims: q/o, k/v, gate/up,
down, lm_head) at the token counts of their decode and prefill steps. Each shape is measured with bias and
without (--bias), F.linear(x, w, b) against torch.ops.rlgemm.linear(x, w, b), after a check that the two agree.

Timing (scripts/interleaved.py): the four subjects of a shape (torch and rlgemm, eager and graph) are timed in
rounds, in one process, each round one sample of each in an order shuffled afresh (seeded), so that a slow spell
falls on all of them; a sample is as many calls as fill --budget-ms. A shape runs at least --rounds rounds and
stops once both speedups' 95% intervals are within +/- --target (or after --shape-seconds). Per shape and mode:
the median time of each side, the median speedup torch/rlgemm over the rounds and its 95% interval (Student's t on
the per-round log ratios).

Writes M,N,K,dtype,bias,rounds, the four median times, speedup,speedup_ci_low,speedup_ci_high (eager),
graph_speedup,graph_speedup_ci_low,graph_speedup_ci_high and route (rlgemm.describe) to --out, row by row (a
stopped run keeps its rows), and prints, per mode and bias, the geometric mean of the speedups over the shapes
and the worst shape.

    python3 scripts/bench_torch_op.py --out torch-op.csv                  # fp16, with and without bias
    python3 scripts/bench_torch_op.py --out torch-op-bf16.csv --dtype bf16 --bias 1 --quick

The checkout's python/ is put on the path (and through it build/librlgemm.so); RLGEMM_LIBRARY overrides it.
Exit codes: 0 done, 1 a result that disagrees with F.linear, 2 bad input, 3 no GPU, 130 interrupted.
"""
import argparse
import csv
import math
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _p in (HERE, HERE.parent / "python"):  # scripts/interleaved.py, and the checkout's rlgemm package
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import interleaved  # noqa: E402

SINGLE = [(1, 4096, 4096), (8, 4096, 4096), (16, 14336, 4096), (512, 2048, 2048), (512, 5632, 2048),
          (4096, 4096, 4096)]
SWEEP = [(m, 4096, 4096) for m in (2, 4, 32, 64, 128, 256, 1024, 2048, 8192)]
# (N, K) of each model's linear layers: attention q/o, k/v (grouped-query), MLP gate/up and down, lm_head.
MODELS = {
    "llama3-8b": [(4096, 4096), (1024, 4096), (14336, 4096), (4096, 14336), (128256, 4096)],
    "qwen2.5-7b": [(3584, 3584), (512, 3584), (18944, 3584), (3584, 18944), (152064, 3584)],
}
MODEL_TOKENS = (1, 32, 128, 4096)  # decode at batch 1, 32, 128; prefill of 8 x 512 tokens
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
COLUMNS = ["M", "N", "K", "dtype", "bias", "rounds", "torch_us", "rlgemm_us", "torch_graph_us", "rlgemm_graph_us",
           "speedup", "speedup_ci_low", "speedup_ci_high", "graph_speedup", "graph_speedup_ci_low",
           "graph_speedup_ci_high", "route"]


def shapes(quick):
    out = list(SINGLE) + list(SWEEP)
    for dims in MODELS.values():
        for m in (MODEL_TOKENS[:2] if quick else MODEL_TOKENS):
            for n, k in dims:
                out.append((m, n, k))
    seen, unique = set(), []
    for s in out:
        if s not in seen:
            seen.add(s)
            unique.append(s)
    return unique


def time_calls(fn, calls):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


def graph_of(fn, calls):
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph


def time_graph(graph, calls):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / calls


class Disagreement(Exception):
    pass


def measure(m, n, k, dtype, bias, args, seed):
    """{subject: [us per call per round]} for torch/rlgemm eager/graph on x (m, k) @ w (n, k).T (+ b)."""
    x = torch.randn(m, k, device="cuda", dtype=dtype)
    w = torch.randn(n, k, device="cuda", dtype=dtype) / math.sqrt(k)
    b = torch.randn(n, device="cuda", dtype=dtype) if bias else None
    fns = {"torch": lambda: F.linear(x, w, b), "rlgemm": lambda: torch.ops.rlgemm.linear(x, w, b)}
    for fn in fns.values():  # first calls: kernel choice, compilation, cuBLAS heuristics
        fn()
    torch.cuda.synchronize()
    try:
        # Outputs of about unit size: 2e-2 is several bf16 and many fp16 roundings of the output.
        torch.testing.assert_close(fns["rlgemm"](), fns["torch"](), rtol=2e-2, atol=2e-2)
    except AssertionError as e:
        raise Disagreement(str(e)) from None
    estimate = min(time_calls(fns["torch"], 3) for _ in range(2))
    calls = max(10, min(300, int(args.budget_ms * 1e3 / max(estimate, 1.0))))
    graphs = {name: graph_of(fn, calls) for name, fn in fns.items()}
    subjects = {name: (lambda fn=fn: time_calls(fn, calls)) for name, fn in fns.items()}
    subjects.update({f"{name}_graph": (lambda g=g: time_graph(g, calls)) for name, g in graphs.items()})
    times = interleaved.run_rounds(subjects, [("torch", "rlgemm"), ("torch_graph", "rlgemm_graph")], seed,
                                   min_rounds=args.rounds, max_rounds=args.max_rounds, max_seconds=args.shape_seconds,
                                   target=args.target)
    del graphs
    return times


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="CSV to write, row by row (replaced)")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp16", help="element type (default fp16)")
    p.add_argument("--bias", default="0,1", help="0 without bias, 1 with (default both)")
    p.add_argument("--rounds", type=int, default=10, help="rounds per shape at least (default 10)")
    p.add_argument("--max-rounds", type=int, default=100, help="rounds per shape at most (default 100)")
    p.add_argument("--shape-seconds", type=float, default=4.0,
                   help="stop a shape's rounds after this long once --rounds ran (default 4)")
    p.add_argument("--target", type=float, default=0.01,
                   help="stop once both speedups' 95%% intervals are within +/- this (log units; default 0.01)")
    p.add_argument("--budget-ms", type=float, default=10.0, help="time per sample (sets the call count; default 10)")
    p.add_argument("--quick", action="store_true", help="fewer model token counts")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        args.bias = sorted({int(v) for v in args.bias.split(",")})
    except ValueError:
        p.error(f"--bias {args.bias!r}: give 0, 1 or 0,1")
    if not args.bias or any(v not in (0, 1) for v in args.bias):
        p.error(f"--bias {args.bias}: give 0 (no bias), 1 (with bias) or 0,1")
    if args.rounds < 2:
        p.error(f"--rounds is {args.rounds}: an interval needs at least 2")
    if args.max_rounds < args.rounds:
        p.error(f"--max-rounds ({args.max_rounds}) must be at least --rounds ({args.rounds})")
    for flag, value in (("--shape-seconds", args.shape_seconds), ("--target", args.target),
                        ("--budget-ms", args.budget_ms)):
        if not value > 0:
            p.error(f"{flag} is {value}: it must be positive")
    if not Path(args.out).resolve().parent.is_dir():
        p.error(f"--out {args.out}: its folder does not exist")
    return args


def summary(rows):
    """Lines: per bias and mode, the geometric mean of the per-shape median speedups and the worst shape."""
    lines = []
    for bias in sorted({r["bias"] for r in rows}):
        picked = [r for r in rows if r["bias"] == bias]
        for mode, col in (("eager", "speedup"), ("graph", "graph_speedup")):
            worst = min(picked, key=lambda r: r[col])
            lines.append(f"{mode} {'with' if bias else 'without'} bias: geometric mean torch/rlgemm "
                         f"{interleaved.geometric_mean(r[col] for r in picked):.3f} over {len(picked)} shapes; worst "
                         f"{worst['M']}x{worst['N']}x{worst['K']} {worst[col]:.3f} (95% CI {worst[col + '_ci_low']:.3f}.."
                         f"{worst[col + '_ci_high']:.3f}), {worst['route']}")
    return lines


def main(argv=None):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_torch_op: no GPU: torch.cuda.is_available() is False", file=sys.stderr)
        return 3
    import rlgemm
    dtype = DTYPES[args.dtype]
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, rlgemm {rlgemm.version()}, "
          f"operators: {rlgemm.BACKEND} ({rlgemm.ops.BACKEND_DETAIL}); {args.dtype}", flush=True)
    rows, failed = [], False
    t0 = time.time()
    with open(args.out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        f.flush()
        for i, (m, n, k) in enumerate(shapes(args.quick)):
            for bias in args.bias:
                try:
                    t = measure(m, n, k, dtype, bias, args, args.seed * 1000003 + 2 * i + bias)
                except Disagreement as e:
                    failed = True
                    print(f"{m:5d} x {n:6d} x {k:5d} bias {bias}: rlgemm disagrees with F.linear: {e}", flush=True)
                    continue
                eager = interleaved.ratio(t["torch"], t["rlgemm"])
                graph = interleaved.ratio(t["torch_graph"], t["rlgemm_graph"])
                med = {name: statistics.median(v) for name, v in t.items()}
                route = rlgemm.describe(m, n, k, "tn", dtype=dtype)
                row = {"M": m, "N": n, "K": k, "dtype": args.dtype, "bias": bias, "rounds": eager.rounds,
                       "torch_us": med["torch"], "rlgemm_us": med["rlgemm"], "torch_graph_us": med["torch_graph"],
                       "rlgemm_graph_us": med["rlgemm_graph"], "speedup": eager.median, "speedup_ci_low": eager.low,
                       "speedup_ci_high": eager.high, "graph_speedup": graph.median,
                       "graph_speedup_ci_low": graph.low, "graph_speedup_ci_high": graph.high, "route": route}
                rows.append(row)
                w.writerow([f"{row[c]:.2f}" if c.endswith("_us") else f"{row[c]:.4f}" if isinstance(row[c], float)
                            else row[c] for c in COLUMNS])
                f.flush()
                print(f"{m:5d} x {n:6d} x {k:5d} bias {bias}: eager torch {med['torch']:9.2f} rlgemm "
                      f"{med['rlgemm']:9.2f} us {eager} | graph torch {med['torch_graph']:9.2f} rlgemm "
                      f"{med['rlgemm_graph']:9.2f} us {graph} | {route}", flush=True)
    if rows:
        for line in summary(rows):
            print(line)
    print(f"{len(rows)} rows in {time.time() - t0:.0f} s -> {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("bench_torch_op: interrupted; the rows written stay", file=sys.stderr)
        sys.exit(130)
