#!/usr/bin/env python3
"""Whether a tune made any shape slower: two runs of `rlgemm bench` over the same shapes, one through a default
handle (the zero-shot run) and one through a handle made from a tuning database (`--rlgemm-db`), the library's rows
(`--impl`, default rlgemm) compared shape by shape and mode by mode.

    scripts/tuned_vs_zero_shot.py --zero-shot Z.csv [Z2.csv ...] --tuned T.csv [T2.csv ...] [--impl rlgemm]
                                  [--worst 10] [--out OUT.csv]

The runs took place at other moments, so their times do not compare; each row's paired ratio to the best vendor
call of its own run (`paired_vs_best_vendor`, with its 95% interval `paired_low`..`paired_high`) does. A shape is
slower after the tune "beyond both intervals" where the tuned row's whole interval lies below the zero-shot row's
(paired_high of the tuned row under paired_low of the zero-shot one). Printed per mode: the shapes in both runs, the
geometric mean of tuned over zero-shot, how many are slower and faster beyond both intervals, and the slowest,
each with what served it in either run (a kernel or cuBLASLt in that way of calling, as `rlgemm summarize` splits
them, and the route: tuned, predicted, cublaslt floor...). OUT.csv
holds every shape: M,N,K,layout,dtype,mode,zero_shot,zero_shot_low,zero_shot_high,zero_shot_route,tuned,tuned_low,
tuned_high,tuned_route,tuned_over_zero_shot,verdict (slower, faster or within).

With --same-run, one run holds both handles side by side (`rlgemm bench --impl ...,rlgemm,rlgemm_zero_shot
--rlgemm-db DB`: the database's handle and the default one, in the same shuffled rounds), and each shape's tuned
over zero-shot is paired round by round from the two rows' `rounds_us` (the zero-shot row's time over the tuned
row's in each round: geometric mean and 95% Student-t interval, scripts/interleaved.py). A shape is slower after
the tune where that interval lies below 1. This is the comparison the measurement rules allow; the two-run one
above is a pointer to where to look. OUT.csv then also holds paired_low and paired_high.

    scripts/tuned_vs_zero_shot.py --same-run RUN.csv [RUN2.csv ...] [--impl rlgemm] [--against rlgemm_zero_shot]

Python's standard library only (it runs on the GPU machine too). Exit 2 on a missing file or a CSV without the
paired columns.
"""
import argparse
import csv
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interleaved import ratio  # noqa: E402

KEY = ("M", "N", "K", "layout", "dtype", "mode")
ROUTES = ("tuned", "predicted", "cublaslt floor", "cublaslt", "policy", "nearest", "autotuned", "default")
KERNEL_ROUTES = ("tuned", "predicted", "autotuned", "nearest", "policy", "default")


def route_of(detail, mode):
    """What served a library row in its way of calling, from its detail, as `rlgemm summarize` splits them: "kernel"
    or "cuBLASLt" (the route's first-use check names what serves eager calls and CUDA graphs), then the route."""
    text = (detail or "").strip()
    route = next((r for r in ROUTES if text.startswith(r)), text.split(" ")[0] if text else "")
    marker = "CUDA graphs: " if mode == "graph" else "eager calls: "
    # The first-use check's own verdict: notes after it use the same words ("; CUDA graphs: the floor ran slower").
    check = text.find("(measured on first use: ")
    at = text.find(marker, check) if check >= 0 else -1
    if at >= 0:
        served = text[at + len(marker):]
        by = "kernel" if served.startswith("sm") else "cuBLASLt" if served.startswith("cuBLASLt") else "?"
    else:
        by = "cuBLASLt" if route.startswith("cublaslt") else "kernel" if route in KERNEL_ROUTES else "?"
    return f"{by} ({route})"


def rows_of(paths, impl, rounds=False):
    """{(M,N,K,layout,dtype,mode): (paired, low, high, route)} of the correct rows of `impl` with a paired ratio;
    with `rounds`, each with its rounds' times (`rounds_us`) after them."""
    out = {}
    for path in paths:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in ("impl", "correct", "paired_vs_best_vendor", "paired_low", "paired_high")
                       if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(f"{path} has no column {', '.join(missing)}")
            for r in reader:
                if r["impl"] != impl or r["correct"] not in ("1", "true", "True") or not r["paired_vs_best_vendor"]:
                    continue
                key = tuple(r.get(k, "") or ("fp16" if k == "dtype" else "") for k in KEY)
                out[key] = (float(r["paired_vs_best_vendor"]), float(r["paired_low"]), float(r["paired_high"]),
                            route_of(r.get("detail", ""), r["mode"]))
                if rounds:
                    text = (r.get("rounds_us") or "").strip()
                    if not text:
                        raise ValueError(f"{path}: {impl} at {','.join(key[:3])} ({key[5]}) has no rounds_us")
                    out[key] += ([float(t) for t in text.split(";")],)
    return out


def compare_same_run(paths, impl, against):
    """As compare, for `impl` (the tuned database's handle) against `against` (the default handle) in the same
    runs: tuned_over_zero_shot paired round by round, with paired_low and paired_high, and the verdict by that
    interval."""
    tuned, zero_shot = rows_of(paths, impl, rounds=True), rows_of(paths, against, rounds=True)
    out = compare(zero_shot, tuned)
    for p in out:
        key = tuple(p[k] for k in KEY)
        r = ratio(zero_shot[key][4], tuned[key][4])  # the zero-shot row's time over the tuned row's, round by round
        p.update(tuned_over_zero_shot=r.geomean, paired_low=r.low, paired_high=r.high,
                 verdict="slower" if r.high < 1 else "faster" if r.low > 1 else "within")
    return out


def compare(zero_shot, tuned):
    """One dict per shape and mode in both runs, in key order."""
    out = []
    for key in sorted(set(zero_shot) & set(tuned), key=lambda k: (k[5], int(k[0]), int(k[1]), int(k[2]), k[3], k[4])):
        z, t = zero_shot[key], tuned[key]
        verdict = "slower" if t[2] < z[1] else "faster" if t[1] > z[2] else "within"
        out.append(dict(zip(KEY, key), zero_shot=z[0], zero_shot_low=z[1], zero_shot_high=z[2], zero_shot_route=z[3],
                        tuned=t[0], tuned_low=t[1], tuned_high=t[2], tuned_route=t[3],
                        tuned_over_zero_shot=t[0] / z[0], verdict=verdict))
    return out


def report(pairs, worst=10):
    lines = []
    for mode in sorted({p["mode"] for p in pairs}):
        rows = [p for p in pairs if p["mode"] == mode]
        same_run = "paired_low" in rows[0]
        geo = math.exp(sum(math.log(p["tuned_over_zero_shot"]) for p in rows) / len(rows))
        slower = sorted((p for p in rows if p["verdict"] == "slower"), key=lambda p: p["tuned_over_zero_shot"])
        faster = sum(1 for p in rows if p["verdict"] == "faster")
        if same_run:
            lines.append(f"{mode}: {len(rows)} shapes, both handles in the same rounds; tuned over zero-shot "
                         f"{geo:.4f}; slower beyond the paired interval {len(slower)}, faster {faster}")
        else:
            lines.append(f"{mode}: {len(rows)} shapes in both runs; tuned over zero-shot {geo:.4f}; slower beyond "
                         f"both intervals {len(slower)}, faster {faster}")
        for p in slower[:worst]:
            if same_run:
                lines.append(f"  {p['M']},{p['N']},{p['K']} {p['dtype']}: {p['tuned_over_zero_shot']:.3f} "
                             f"[{p['paired_low']:.3f}, {p['paired_high']:.3f}] {p['tuned_route']} against "
                             f"{p['zero_shot_route']}")
                continue
            lines.append(f"  {p['M']},{p['N']},{p['K']} {p['dtype']}: {p['tuned']:.3f} [{p['tuned_low']:.3f}, "
                         f"{p['tuned_high']:.3f}] {p['tuned_route']} against {p['zero_shot']:.3f} "
                         f"[{p['zero_shot_low']:.3f}, {p['zero_shot_high']:.3f}] {p['zero_shot_route']}")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--zero-shot", nargs="+", help="results CSVs of the default handle's run")
    p.add_argument("--tuned", nargs="+", help="results CSVs of the run through the tuned database")
    p.add_argument("--same-run", nargs="+", help="results CSVs holding both handles (--impl and --against)")
    p.add_argument("--impl", default="rlgemm", help="the library's implementation (the tuned database's handle)")
    p.add_argument("--against", default="rlgemm_zero_shot", help="with --same-run: the default handle's")
    p.add_argument("--worst", type=int, default=10, help="how many of the slower shapes to print a mode")
    p.add_argument("--out", help="write every shape's comparison here")
    a = p.parse_args(argv)
    if bool(a.same_run) == bool(a.zero_shot or a.tuned) or (not a.same_run and not (a.zero_shot and a.tuned)):
        p.error("give either --same-run, or --zero-shot and --tuned")
    try:
        if a.same_run:
            pairs = compare_same_run(a.same_run, a.impl, a.against)
        else:
            pairs = compare(rows_of(a.zero_shot, a.impl), rows_of(a.tuned, a.impl))
    except (OSError, KeyError, ValueError) as e:
        print(f"tuned_vs_zero_shot: {e.__class__.__name__}: {e} (give results CSVs of rlgemm bench)", file=sys.stderr)
        return 2
    if not pairs:
        print(f"tuned_vs_zero_shot: no shape and mode has a paired {a.impl} row in both runs", file=sys.stderr)
        return 2
    if a.out:
        with open(a.out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(pairs[0]))
            w.writeheader()
            for row in pairs:
                w.writerow({k: f"{v:.4f}" if isinstance(v, float) else v for k, v in row.items()})
    print("\n".join(report(pairs, a.worst)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
