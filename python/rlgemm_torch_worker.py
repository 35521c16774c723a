#!/usr/bin/env python3
"""torch.matmul for `rlgemm bench`: the same correctness gate and timing modes as the C++ harness
(src/bench/correctness.cpp, src/bench/timing.cpp), run in this process because PyTorch lives in Python.

Protocol, one JSON object per line. On start the worker writes {"hello": {"torch", "cuda", "device"}} or
{"error": ...} (and exits). Then for each request line
  {"m", "n", "k", "layout": "nn"|"tn", "dtype": "fp16"|"bf16" (fp16 when absent), "modes": [...], "seed",
   "timing": {"batch_target_us", "batches", "max_warmup_batches", "samples", "gap_mean_ms"}}
it answers {"correct", "detail", "modes": {mode: {"time_us", "min_us", "max_us", "samples", "batch"}}}
or {"error": ..., "out_of_memory": bool}. End of input ends the worker.
"""
import argparse
import json
import math
import os
import random
import statistics
import sys
import time

# Protocol lines go to a private copy of stdout; anything a library prints lands on stderr instead.
PROTOCOL = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)


def send(obj):
    PROTOCOL.write(json.dumps(obj) + "\n")


try:
    import torch
except ImportError as e:
    send({"error": f"PyTorch is not installed for {sys.executable} ({e})"})
    sys.exit(1)

# Same tolerance as src/bench/device_data.h: twice half an ulp of the element type, relative, plus the fp32
# accumulation term.
REL_TOL = {"fp16": 2.0 ** -10, "bf16": 2.0 ** -7}
SUM_TOL = 2.0 ** -16
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
GUARD_ELEMS = 2048  # 4 KiB of 16-bit elements each side, as GuardedBuffer
GUARD_BITS = -23131  # 0xA5A5 as int16


class Guarded:
    """An fp16 or bf16 tensor inside a larger buffer whose guard bands must stay untouched."""

    def __init__(self, shape, dtype):
        self.numel = math.prod(shape)
        self.buf = torch.empty(self.numel + 2 * GUARD_ELEMS, dtype=dtype, device="cuda")
        self.buf.view(torch.int16).fill_(GUARD_BITS)
        self.t = self.buf[GUARD_ELEMS:GUARD_ELEMS + self.numel].view(*shape)

    def guards_intact(self):
        bits = self.buf.view(torch.int16)
        return bool((bits[:GUARD_ELEMS] == GUARD_BITS).all() and (bits[GUARD_ELEMS + self.numel:] == GUARD_BITS).all())


def fill(t, positive, generator):
    """Standard normal, or uniform in [0, 1): positive sums grow with K and defeat fp16 accumulation."""
    return t.uniform_(0, 1, generator=generator) if positive else t.normal_(generator=generator)


def operand_b(stored, layout):
    return stored if layout == "nn" else stored.t()  # tn: a view of the N x K weight, no copy


def check(p, positive, seed):
    """One check of the gate on fresh inputs; returns (ok, why, worst error/tolerance ratio)."""
    m, n, k, layout = p["m"], p["n"], p["k"], p["layout"]
    name = p.get("dtype", "fp16")
    dtype = DTYPES[name]
    what = "positive inputs" if positive else "normal inputs"
    g = torch.Generator(device="cuda").manual_seed(seed)
    a, bs, c = Guarded((m, k), dtype), Guarded((k, n) if layout == "nn" else (n, k), dtype), Guarded((m, n), dtype)
    fill(a.t, positive, g)
    fill(bs.t, positive, g)
    b = operand_b(bs.t, layout)
    c.t.fill_(float("nan"))
    address = c.t.data_ptr()
    torch.matmul(a.t, b, out=c.t)
    torch.cuda.synchronize()
    if c.t.data_ptr() != address:
        return False, f"{what}: torch.matmul did not write into the preallocated C", math.inf
    for operand, buf in (("A", a), ("B", bs), ("C", c)):
        if not buf.guards_intact():
            return False, f"{what}: a write strayed outside {operand}", math.inf
    bad = int((~torch.isfinite(c.t)).sum())
    if bad:
        return False, f"{what}: {bad} elements of C not written or not finite", math.inf

    # The fp64 reference of all of C, as the harness's gate.
    a64, b64 = a.t.double(), b.double()
    ref = a64 @ b64
    mag = ref.abs() if positive else a64.abs() @ b64.abs()
    del a64, b64
    err = (c.t.double() - ref).abs()
    ratio = err / (REL_TOL[name] * ref.abs() + SUM_TOL * mag + 1e-30)
    worst = float(ratio.max())
    if worst > 1.0:
        i = int(ratio.argmax())
        over = int((ratio > 1.0).sum())
        return (False, f"{what}: {over} of {m * n} elements over the tolerance, the worst C[{i // n},{i % n}] = "
                f"{float(c.t.flatten()[i]):.6g} against {float(ref.flatten()[i]):.6g} "
                f"(error {float(err.flatten()[i]):.3g})", worst)
    return True, "", worst


def events_ms(n, step):
    """GPU milliseconds for n calls of step(i)."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for i in range(n):
        step(i)
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop)


def summary(per_call_us, batch, use_mean=False):
    return {"time_us": statistics.fmean(per_call_us) if use_mean else statistics.median(per_call_us),
            "min_us": min(per_call_us), "max_us": max(per_call_us), "samples": len(per_call_us), "batch": batch}


def time_batches(step, o):
    """Offline and cold: batches of back-to-back calls, warm-up until two agree within 2%, median batch."""
    step(0)  # the first call after a change of operands can pay for first touches
    single_us = events_ms(1, step) * 1e3
    batch = int(min(max(math.ceil(o["batch_target_us"] / max(single_us, 0.5)), 1), 100000))
    counter = [0]

    def run_batch():
        base = counter[0]
        counter[0] += batch
        return events_ms(batch, lambda i: step(base + i)) * 1e3 / batch

    previous = run_batch()
    for _ in range(1, o["max_warmup_batches"]):
        now = run_batch()
        stable = abs(now - previous) <= 0.02 * previous
        previous = now
        if stable:
            break
    return summary([run_batch() for _ in range(o["batches"])], batch)


def time_server(call, o, seed):
    rng = random.Random(seed)
    per_call = []
    torch.cuda.synchronize()
    for _ in range(o["samples"]):
        time.sleep(rng.expovariate(1.0 / o["gap_mean_ms"]) / 1e3 if o["gap_mean_ms"] > 0 else 0)
        per_call.append(events_ms(1, lambda i: call()) * 1e3)
    return summary(per_call, 1)


def time_cudal2(call, refresh, o):
    per_call = []
    for s in range(o["samples"] + 1):
        refresh()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        call()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        if s > 0:  # the first is a warm-up
            per_call.append((t1 - t0) * 1e6)
    return summary(per_call, 1, use_mean=True)


def time_graph(call, o):
    """Graph: N back-to-back calls captured in one CUDA graph (a replay lasts at least batch_target_us),
    warm-up replays until two agree within 2%, then the median replay over N: the GPU's time alone."""
    def capture(calls):
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(calls):
                call()
        return graph

    def replay_us(graph, calls):
        torch.cuda._sleep(60000)  # the GPU stays busy while the host submits the replay (about 30 us)
        return events_ms(1, lambda i: graph.replay()) * 1e3 / calls

    probe_calls = 8
    call()  # cuBLAS chooses its kernel and workspace outside the capture
    torch.cuda.synchronize()
    graph = capture(probe_calls)
    graph.replay()
    per_call = replay_us(graph, probe_calls)
    calls = int(min(max(math.ceil(o["batch_target_us"] / max(per_call, 0.1)), 1), 10000))
    if calls != probe_calls:
        del graph
        graph = capture(calls)
    previous = replay_us(graph, calls)
    for _ in range(1, o["max_warmup_batches"]):
        now = replay_us(graph, calls)
        stable = abs(now - previous) <= 0.02 * previous
        previous = now
        if stable:
            break
    return summary([replay_us(graph, calls) for _ in range(o["batches"])], calls)


def measure(p):
    m, n, k, layout, seed, o = p["m"], p["n"], p["k"], p["layout"], p["seed"], p["timing"]
    if layout not in ("nn", "tn"):
        raise ValueError(f"unknown layout '{layout}'")
    if p.get("dtype", "fp16") not in DTYPES:
        raise ValueError(f"unsupported dtype '{p['dtype']}': supported are {', '.join(DTYPES)}")
    dtype = DTYPES[p.get("dtype", "fp16")]
    worst = 0.0
    for positive in (False, True):
        ok, why, ratio = check(p, positive, seed + 2 * positive)
        worst = max(worst, ratio)
        if not ok:
            return {"correct": False, "detail": why, "modes": {}}

    g = torch.Generator(device="cuda")
    b_shape = (k, n) if layout == "nn" else (n, k)

    def new_set(set_seed):
        g.manual_seed(set_seed)
        return (torch.empty(m, k, dtype=dtype, device="cuda").normal_(generator=g),
                torch.empty(b_shape, dtype=dtype, device="cuda").normal_(generator=g),
                torch.empty(m, n, dtype=dtype, device="cuda"))

    a, bs, c = new_set(seed)
    b = operand_b(bs, layout)

    def call():
        torch.matmul(a, b, out=c)

    def refresh():  # CUDA-L2's "inputs freshly written": the same values, written again
        g.manual_seed(seed)
        a.normal_(generator=g)
        bs.normal_(generator=g)

    modes = {}
    for mode in p["modes"]:
        if mode == "offline":
            modes[mode] = time_batches(lambda i: call(), o)
        elif mode == "server":
            modes[mode] = time_server(call, o, seed)
        elif mode == "cudal2":
            modes[mode] = time_cudal2(call, refresh, o)
        elif mode == "graph":
            modes[mode] = time_graph(call, o)
        elif mode == "cold":
            set_bytes = 2 * (m * k + k * n + m * n)
            l2 = torch.cuda.get_device_properties(torch.cuda.current_device()).L2_cache_size
            sets = [new_set(seed + 1000 + s) for s in range(max(2, -(-2 * l2 // set_bytes) + 1))]
            sets = [(x, operand_b(y, layout), z) for x, y, z in sets]

            def rotating_call(i):
                x, y, z = sets[i % len(sets)]
                torch.matmul(x, y, out=z)

            modes[mode] = time_batches(rotating_call, o)
            del sets
        else:
            raise ValueError(f"unknown mode '{mode}'")
    return {"correct": True, "detail": f"torch {torch.__version__} worst error {worst:.2f} of tolerance",
            "modes": modes}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", type=int, default=0)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        send({"error": f"PyTorch {torch.__version__} sees no CUDA device"})
        return 1
    if args.device >= torch.cuda.device_count():
        send({"error": f"PyTorch sees {torch.cuda.device_count()} CUDA devices; there is no device {args.device}"})
        return 1
    torch.cuda.set_device(args.device)
    # fp32 accumulation throughout: the yardstick's rule for every implementation.
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    send({"hello": {"torch": torch.__version__, "cuda": torch.version.cuda,
                    "device": torch.cuda.get_device_name(args.device)}})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = measure(json.loads(line))
        except torch.cuda.OutOfMemoryError as e:
            reply = {"error": f"out of device memory in torch: {str(e).splitlines()[0]}", "out_of_memory": True}
        except Exception as e:  # reported to the harness, which decides what a failed problem means
            reply = {"error": f"{type(e).__name__}: {e}", "out_of_memory": False}
        torch.cuda.empty_cache()
        send(reply)
    return 0


if __name__ == "__main__":
    sys.exit(main())
