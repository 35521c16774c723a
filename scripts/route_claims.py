#!/usr/bin/env python3
"""What the library's first-use check claimed against what the harness measured: for every library row (impl rlgemm,
rlgemm_nearest, rlgemm_no_nearest, ...) served by a kernel in its way of calling, the gain the check measured over the
handle's floor ("CUDA graphs: DESIGN at 1.06x cuBLASLt", "eager calls: ..."), the row's ratio to the best vendor call
of the run (paired where the file has it), the cuBLASLt candidate the check measured the kernel against (where the
detail names it: "against cublaslt floor (...: candidate N of M ...)") and the fastest vendor subject of the same
rounds with the candidate it ran. Also every library row whose check met the floor running slower against cuBLASLt's
first candidate than in its final ("CUDA graphs: the floor ran slower ...", dispatch::against_floor_as_chosen), what
served it (a kernel, the floor, or the first candidate in its place: a rule of the H200's twenty-ninth set's runs,
since dropped) and its measured ratio. Reads results CSVs of `rlgemm bench` run with the library and cuBLAS subjects.

    scripts/route_claims.py [--mode graph|offline] [--below 0.99] results.csv ...
"""
import argparse
import math
import re
import sys

from floor_final_check import fastest_vendor, geomean, mode_part, problems, ratio, vendor_candidate
from report_cli import print_report

CLAIM = {"graph": re.compile(r"CUDA graphs: (sm\S+) at ([\d.]+)x cuBLASLt"),
         "offline": re.compile(r"eager calls: (sm\S+) at ([\d.]+)x cuBLASLt")}
AGAINST = re.compile(r"; against cublaslt floor \((.*)$")
CANDIDATE = re.compile(r"candidate (\d+) of \d+")
SLOW_FLOOR = {"graph": "; CUDA graphs: the floor ran slower against cuBLASLt's first candidate",
              "offline": "; eager calls: the floor ran slower against cuBLASLt's first candidate"}
HELD = "; the kernels held to the floor as its final found it"
FIRST_SERVES = "; the first serves in its place"


def floor_candidate(detail, mode):
    """The cuBLASLt candidate a served kernel was checked against in `mode`, from its "against" text: the captured
    calls' own where the floor has one and the mode is graph, else the floor's. None where the text names none (a
    choice made before on this machine says "chosen ... before", not a candidate)."""
    m = AGAINST.search(detail)
    if not m:
        return None
    c = CANDIDATE.search(m[1], *mode_part(m[1], mode))
    return int(c[1]) if c else None


def claims(paths, mode="graph"):
    """(file, (M, N, K, dtype), impl, design, claimed gain, measured ratio, floor candidate, (fastest vendor impl,
    its candidate, its time over the row's)) for every library row a kernel served in `mode`."""
    out = []
    for path, key, rows in problems(paths, mode):
        best = fastest_vendor(rows)
        for impl, r in rows.items():
            if not impl.startswith("rlgemm"):
                continue
            m = CLAIM[mode].search(r["detail"])
            if not m:
                continue
            fastest = None
            if best:
                fastest = (best[1], vendor_candidate(best[1], rows[best[1]]["detail"]), best[0] / float(r["time_us"]))
            out.append((path, key, impl, m[1], float(m[2]), ratio(r), floor_candidate(r["detail"], mode), fastest))
    return out


def slow_floor_checks(paths, mode="graph"):
    """(file, (M, N, K, dtype), impl, what served: "kernel", "floor" or "first", measured ratio) for every library
    row whose check in `mode` met the floor slower against cuBLASLt's first candidate than in its final."""
    out = []
    for path, key, rows in problems(paths, mode):
        for impl, r in rows.items():
            detail = r["detail"]
            at = detail.find(SLOW_FLOOR[mode]) if impl.startswith("rlgemm") else -1
            if at < 0:
                continue
            # The note ends with what the check did: held the kernels to the floor's final, or put the first in
            # the floor's place.
            held, first = detail.find(HELD, at), detail.find(FIRST_SERVES, at)
            first_served = first >= 0 and (held < 0 or first < held)
            served = "kernel" if CLAIM[mode].search(detail) else "first" if first_served else "floor"
            out.append((path, key, impl, served, ratio(r)))
    return out


def slow_floor_report(rows):
    if not rows:
        return ["no check met the floor slower than its final"]
    count = {what: sum(r[3] == what for r in rows) for what in ("floor", "first", "kernel")}
    lines = [f"{len(rows)} checks met the floor slower than its final: the floor served {count['floor']}, the first "
             f"candidate in its place {count['first']}, a kernel {count['kernel']}; measured over the best vendor call "
             f"{geomean([r[4] for r in rows]):.3f} (geometric mean)"]
    for r in sorted(rows, key=lambda r: r[4]):
        lines.append(f"  {r[0]} {','.join(r[1])} {r[2]} {r[3]} served, measured {r[4]:.3f}")
    return lines


def report(rows, below=0.99):
    lines = [f"{len(rows)} library rows served by a kernel"]
    by_file = {}
    for r in rows:
        by_file.setdefault(r[0], []).append(r)
    lines.append("file | rows | claimed over the floor (geometric mean) | measured over the best vendor call | "
                 f"mean ln(claimed / measured) | measured below {below}")
    for path, sel in by_file.items():
        d = sum(math.log(r[4] / r[5]) for r in sel) / len(sel)
        lines.append(f"{path} | {len(sel)} | {geomean([r[4] for r in sel]):.3f} | {geomean([r[5] for r in sel]):.3f} | "
                     f"{d:+.3f} | {sum(r[5] < below for r in sel)}")
    misses = sorted((r for r in rows if r[5] < below), key=lambda r: r[5])
    if misses:
        lines.append(f"measured below {below} (file, shape, impl, claimed, measured, the floor's candidate; the fastest "
                     "vendor subject, its candidate, its time over the row's):")
    for r in misses:
        floor = "?" if r[6] is None else str(r[6])
        fastest = "-" if r[7] is None else f"{r[7][0]} candidate {'?' if r[7][1] is None else r[7][1]} {r[7][2]:.3f}"
        lines.append(f"  {r[0]} {','.join(r[1])} {r[2]} {r[3]} claimed {r[4]:.2f} measured {r[5]:.3f} floor candidate "
                     f"{floor}; fastest {fastest}")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("graph", "offline"), default="graph", help="the way of calling (default graph)")
    p.add_argument("--below", type=float, default=0.99, help="list the rows measured below this ratio (default 0.99)")
    p.add_argument("files", nargs="+")
    a = p.parse_args(argv)
    return print_report("route_claims", lambda: report(claims(a.files, a.mode), a.below)
                        + slow_floor_report(slow_floor_checks(a.files, a.mode)))


if __name__ == "__main__":
    sys.exit(main())
