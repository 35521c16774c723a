#!/usr/bin/env python3
"""Which GPU kernels F.linear and torch.ops.rlgemm.linear run for a shape, and for how long each: the calls
profiled back to back (torch.profiler, CUDA activity), per kernel its name, launches, mean GPU time and launch
configuration (grid, block, shared memory, registers, stream: from the profiler's trace). For
finding why one side is slower on a shape: another kernel (cuBLAS's heuristic against the library's timed
choice), or the same kernel run differently.

    python3 bench/probes/torch_kernels.py [--dtype fp16|bf16] [--calls N] M,N,K [M,N,K ...]

Each shape runs without a bias and with one. x is (M, K), the weight (N, K), as in bench_torch_op.py. The
checkout's python/ is put on the path (and through it build/librlgemm.so).
"""
import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import rlgemm  # noqa: E402,F401  (registers torch.ops.rlgemm)


def kernels(fn, calls):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    launches = {}
    with tempfile.NamedTemporaryFile(suffix=".json") as trace:
        prof.export_chrome_trace(trace.name)
        for ev in json.load(open(trace.name)).get("traceEvents", []):
            if ev.get("cat") == "kernel":
                a = ev.get("args", {})
                launches.setdefault(ev.get("name"), set()).add(
                    f"grid {a.get('grid')} block {a.get('block')} smem {a.get('shared memory')} "
                    f"regs {a.get('registers per thread')} stream {a.get('stream')}")
    rows = []
    for e in prof.key_averages():
        total = getattr(e, "device_time_total", None)
        if total is None:
            total = e.cuda_time_total
        if total > 0 and e.count > 0:
            rows.append((e.key, e.count, total / e.count, "; ".join(sorted(launches.get(e.key, ())))))
    return sorted(rows, key=lambda r: -r[1] * r[2])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("shapes", nargs="+", help="M,N,K")
    p.add_argument("--dtype", choices=["fp16", "bf16"], default="fp16")
    p.add_argument("--calls", type=int, default=50)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_kernels: no GPU", file=sys.stderr)
        return 3
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    for text in args.shapes:
        try:
            m, n, k = (int(v) for v in text.split(","))
        except ValueError:
            print(f"torch_kernels: {text!r} is not M,N,K", file=sys.stderr)
            return 2
        x = torch.randn(m, k, device="cuda", dtype=dtype)
        w = torch.randn(n, k, device="cuda", dtype=dtype) / math.sqrt(k)
        bias = torch.randn(n, device="cuda", dtype=dtype)
        for b in (None, bias):
            for name, fn in (("torch", lambda: F.linear(x, w, b)), ("rlgemm", lambda: torch.ops.rlgemm.linear(x, w, b))):
                for kernel, count, us, launch in kernels(fn, args.calls):
                    print(f"{m},{n},{k} bias {int(b is not None)} {name:6s} {us:9.2f} us x{count // args.calls} {kernel}"
                          + (f" [{launch}]" if launch else ""))
        print(f"{m},{n},{k} rlgemm route: {rlgemm.describe(m, n, k, 'tn', dtype=dtype)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
