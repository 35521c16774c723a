#!/usr/bin/env python3
"""Where a kernel's warps wait, from ncu's source page of its SASS (`ncu -i REP --page source --print-source sass
--csv`, which scripts/ncu-profile writes with NCU_SOURCE=1).

Usage: ncu_source_summary.py SOURCE.csv [--top N]

Prints, for the whole kernel and for its main loop, the share of the warp-stall samples on each opcode, and the
instructions with the most samples with their leading stall reasons. The main loop is the instructions executed
about as often as the most executed wgmma (HGMMA): between half and one and a half times its count, so that the
spin loops of barrier waits (executed far more often) and the prologue and epilogue (far less) are left out.
Several kernels in one page (ncu profiled two launches) are counted together.
"""
import argparse
import collections
import csv
import sys

from ncu_summary import number as parsed_number

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def number(text):
    """A cell's value; 0 for an empty or non-numeric cell."""
    value = parsed_number(text)
    return 0.0 if value is None else value


def opcode(source):
    """The opcode of a SASS line, without its guard predicate: '@!P0 BRA 0x..' -> 'BRA'."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].rstrip(";") if words else ""


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    start = next((i for i, r in enumerate(rows) if "Source" in r and SAMPLES in r), None)
    if start is None:
        sys.exit(f"ncu_source_summary: no source table with '{SAMPLES}' in {path}")
    header = rows[start]
    return header, [dict(zip(header, r)) for r in rows[start + 1:] if len(r) == len(header) and r[0] != header[0]]


def reasons_of(header):
    return [h for h in header if h.startswith("stall_") and "Not Issued" not in h]


def shares(rows):
    total = sum(number(r[SAMPLES]) for r in rows)
    by_op = collections.Counter()
    for r in rows:
        by_op[opcode(r["Source"])] += number(r[SAMPLES])
    return total, by_op


def main_loop(rows):
    hgmma = [number(r[EXECUTED]) for r in rows if opcode(r["Source"]).startswith("HGMMA")]
    if not hgmma:
        return []
    top = max(hgmma)
    return [r for r in rows if 0.5 * top <= number(r[EXECUTED]) <= 1.5 * top]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("source")
    ap.add_argument("--top", type=int, default=15)
    a = ap.parse_args()
    header, rows = read(a.source)
    reasons = reasons_of(header)
    out = sys.stdout
    for label, part in (("kernel", rows), ("main loop", main_loop(rows))):
        total, by_op = shares(part)
        if total == 0:
            out.write(f"{label}: no samples\n")
            continue
        ops = ", ".join(f"{op} {v / total * 100:.1f}%" for op, v in by_op.most_common(8))
        out.write(f"{label}: {len(part)} instructions, {total:.0f} samples: {ops}\n")
    total = sum(number(r[SAMPLES]) for r in rows) or 1.0
    out.write(f"top {a.top} instructions (share of the kernel's samples, executed, leading stall reasons):\n")
    for r in sorted(rows, key=lambda r: -number(r[SAMPLES]))[:a.top]:
        lead = sorted(((number(r[c]), c[len("stall_"):]) for c in reasons), reverse=True)[:2]
        why = " ".join(f"{name} {v / total * 100:.1f}%" for v, name in lead if v > 0)
        out.write(f"  {number(r[SAMPLES]) / total * 100:5.1f}%  {int(number(r[EXECUTED])):>9d}  "
                  f"{r['Source'].strip()[:72]:72s}  {why}\n")


if __name__ == "__main__":
    main()
