#!/usr/bin/env python3
"""Two runs of `rlgemm bench` on the same shapes, side by side: for one subject (default rlgemm), its ratio to the
best vendor call of its own run (paired where the files have it) in the new run and the old, by MNK bucket, and the
shapes that moved most; then every subject's time and the best vendor call's, new over old, by bucket, which tells a
move of the library from a move of the vendor calls (a host that costs cuBLAS's eager calls 2 us less raises every
vendor ratio of short shapes offline). Ratios between the runs are of figures taken apart, at other moments: they
say where to look, not what is faster; each run's own ratios are the measurements. --shapes limits both runs to the
shapes of a shapes file and lists each of them; --groups 12,2,4 then also takes its rows in consecutive groups of
those sizes (as a shapes file's comment describes them) and gives each group's geometric means.

    scripts/compare_runs.py --new NEW.csv [NEW.csv ...] --old OLD.csv [OLD.csv ...] [--impl rlgemm] [--top 12]
                            [--shapes SHAPES.csv [--groups N,N,...]]
"""
import argparse
import csv
import math
import sys

from floor_final_check import fastest_vendor, geomean, problems, ratio
from report_cli import print_report

BUCKETS = ("MNK<2^30", "2^30<=MNK<2^36", "MNK>=2^36")


def bucket(key):
    mnk = int(key[0]) * int(key[1]) * int(key[2])
    return BUCKETS[0] if mnk < 2**30 else BUCKETS[1] if mnk < 2**36 else BUCKETS[2]


def load(paths, mode):
    """{(M, N, K, dtype): {impl: row}} of the correct rows of `mode`; a later file's problem replaces an earlier's."""
    return {key: rows for _, key, rows in problems(paths, mode)}


def best_vendor_us(rows):
    fastest = fastest_vendor(rows)
    return fastest[0] if fastest else None


def read_shapes(path):
    with open(path, newline="") as f:
        lines = [line for line in f if not line.lstrip().startswith("#")]
    reader = csv.DictReader(lines)
    if not reader.fieldnames or not {"M", "N", "K"} <= set(reader.fieldnames):
        raise ValueError(f"{path} has no columns M, N, K")
    return [(r["M"], r["N"], r["K"]) for r in reader]


def compare(new_paths, old_paths, impl="rlgemm", top=12, shapes=None, groups=None):
    lines = []
    for mode in ("offline", "graph"):
        new, old = load(new_paths, mode), load(old_paths, mode)
        keys = [k for k in new if k in old and impl in new[k] and impl in old[k]]
        if shapes is not None:
            wanted = set(shapes)
            keys = [k for k in keys if k[:3] in wanted]
        if not keys:
            lines.append(f"{mode}: no shape with {impl} in both runs")
            continue
        def both(sel, sep):  # the subject's geometric mean over `sel` in the new run and the old
            return (f"new {geomean([ratio(new[k][impl]) for k in sel]):.4f}{sep}"
                    f"old {geomean([ratio(old[k][impl]) for k in sel]):.4f}")

        lines.append(f"{mode}: {len(keys)} shapes; {impl} over the best vendor call of its run (geometric mean), "
                     + both(keys, ", "))
        for b in BUCKETS:
            sel = [k for k in keys if bucket(k) == b]
            if sel:
                lines.append(f"  {b:15} {len(sel):4}  " + both(sel, "  "))
        start = 0
        for g, size in enumerate(groups or []):
            members = set(shapes[start:start + size])
            start += size
            sel = [k for k in keys if k[:3] in members]
            if sel:
                lines.append(f"  group {g + 1} ({len(sel)} of the shapes file's rows {start - size + 1}-{start})  "
                             + both(sel, "  "))
        moved = sorted(keys, key=lambda k: math.log(ratio(new[k][impl]) / ratio(old[k][impl])))
        if shapes is not None:  # keys holds the file's shapes only: each in the file's order
            order = {s: i for i, s in enumerate(shapes)}
            listed = sorted(keys, key=lambda k: order[k[:3]])
        else:
            listed = moved[:top] + [k for k in moved[-top:] if k not in moved[:top]]
        for k in listed:
            n, o = new[k], old[k]
            lines.append(f"  {'x'.join(k[:3]):18} new {ratio(n[impl]):.4f} ({float(n[impl]['time_us']):.3f} us, best "
                         f"vendor {best_vendor_us(n):.3f})  old {ratio(o[impl]):.4f} ({float(o[impl]['time_us']):.3f} us,"
                         f" {best_vendor_us(o):.3f})  {n[impl]['detail'][:70]}")
        lines.append(f"  time new/old by bucket (geometric mean over the shapes both runs have):")
        subjects = sorted({i for k in keys for i in new[k] if i in old[k]})
        for b in BUCKETS:
            sel = [k for k in keys if bucket(k) == b]
            if not sel:
                continue
            parts = []
            for s in subjects:
                xs = [float(new[k][s]["time_us"]) / float(old[k][s]["time_us"]) for k in sel if s in new[k] and s in old[k]]
                if xs:
                    parts.append(f"{s} {geomean(xs):.3f}")
            vb = [best_vendor_us(new[k]) / best_vendor_us(old[k]) for k in sel
                  if best_vendor_us(new[k]) and best_vendor_us(old[k])]
            parts.append(f"best vendor call {geomean(vb):.3f}")
            lines.append(f"    {b:15} " + ", ".join(parts))
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--new", nargs="+", required=True, help="results CSVs of the new run")
    p.add_argument("--old", nargs="+", required=True, help="results CSVs of the old run")
    p.add_argument("--impl", default="rlgemm", help="the subject compared (default rlgemm)")
    p.add_argument("--top", type=int, default=12, help="list this many shapes that moved most each way (default 12)")
    p.add_argument("--shapes", help="a shapes file (M,N,K): only its shapes, each listed in its order")
    p.add_argument("--groups", help="with --shapes: sizes of consecutive groups of its rows, comma-separated")
    a = p.parse_args(argv)

    def lines():
        shapes = read_shapes(a.shapes) if a.shapes else None
        groups = [int(x) for x in a.groups.split(",")] if a.groups else None
        if groups and (shapes is None or sum(groups) != len(shapes) or min(groups) < 1):
            raise ValueError(f"--groups {a.groups} does not split the {len(shapes or [])} rows of --shapes")
        return compare(a.new, a.old, a.impl, a.top, shapes, groups)

    return print_report("compare_runs", lines)


if __name__ == "__main__":
    sys.exit(main())
