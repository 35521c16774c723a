#!/usr/bin/env python3
"""How the cuBLASLt floor's final held up in the harness: for every graph-mode row where the library served the
floor and its final kept a challenger over the heuristic's first (candidate 0), the challenger's time in the
harness (the `rlgemm` row) over candidate 0's in the same rounds (the `lt_heuristic` row), against the ratio the
final measured at first use. With --same-kernel, also how far apart the same cuBLASLt candidate ran, in graphs and
offline, where several subjects of one run ran it (lt_heuristic: candidate 0; lt_auto, lt_auto_graph and the control twin lt_twin:
the candidate their detail names; rlgemm and rlgemm_nearest: the candidate the floor kept for that way of calling, where the floor served):
the spread of identical kernels that a "best vendor call" over several subjects takes the fastest of. Reads results
CSVs of `rlgemm bench` run with --impl ...lt_heuristic...,rlgemm. With --losses BELOW, also every row where the floor
served below BELOW of the best vendor call, in either mode: the fastest vendor subject and its candidate, and whether
that candidate was among the finalists of the floor's final (where the final lists them) and how it ran there. With
--callers, also, in either mode, where a ranking of the final's finalists by the caller's set alone would have
kept another than the floor's choice, and how that one ran where a vendor subject ran it (its time over the floor's).

With --beside IMPL, the rows the floor served: its geometric mean and rows below 0.97 beside IMPL's on those rows.

    scripts/floor_final_check.py [--worst N] [--same-kernel] [--losses BELOW] [--callers] [--beside IMPL] results.csv ...
"""
import argparse
import csv
import math
import re
import statistics
import sys

from report_cli import print_report

FINAL = re.compile(r"final: candidate (\d+) at ([\d./]+) of candidate 0's time by operand set; candidate (\d+) kept")
CAPTURED = "; captured calls: "


def mode_part(text, mode="graph"):
    """(start, end) of the part of a floor's text that speaks of `mode`'s way of calling: where the floor's captured
    calls take a choice of their own ("; captured calls: ..."), graph the text after that and offline the text
    before it; else all of it."""
    at = text.find(CAPTURED)
    if at < 0:
        return 0, len(text)
    return (at + len(CAPTURED), len(text)) if mode == "graph" else (0, at)


def floor_final(detail, mode="graph"):
    """The floor's final (a FINAL match) for the way of calling of `mode` (in its mode_part)."""
    return FINAL.search(detail, *mode_part(detail, mode))


def floor_served(detail, mode="graph"):
    """The floor served the row's calls of `mode` (graph: captured calls, offline: eager ones): the detail names the
    floor, and a first-use check of a kernel, where there was one, left that way of calling to cuBLASLt."""
    if not detail.startswith("cublaslt floor"):
        return False
    check = detail.find("(measured on first use:")
    way = "CUDA graphs: cuBLASLt" if mode == "graph" else "eager calls: cuBLASLt"
    return check < 0 or way in detail[check:]


NEEDED = ("M", "N", "K", "impl", "mode", "time_us", "speedup_vs_best_vendor", "detail")
VENDORS = ("cublas_nn", "cublas_tn", "lt_heuristic", "lt_auto", "lt_auto_graph")


def ratio(row):
    """A row's ratio to the best vendor call: paired round by round where the file has it."""
    return float(row.get("paired_vs_best_vendor") or row["speedup_vs_best_vendor"])


def fastest_vendor(rows):
    """(time_us, impl) of the fastest vendor subject among a problem's rows ({impl: row}), or None."""
    vendors = [(float(r["time_us"]), impl) for impl, r in rows.items() if impl in VENDORS]
    return min(vendors) if vendors else None


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def problems(paths, mode):
    """(file, (M, N, K, dtype), {impl: row}) for every problem of the files, from their correct rows of `mode`."""
    for path in paths:
        by = {}
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in NEEDED if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(f"{path} has no column {', '.join(missing)}")
            for r in reader:
                if r.get("mode") == mode and r.get("correct", "1") == "1":
                    by.setdefault((r["M"], r["N"], r["K"], r.get("dtype") or "fp16"), {})[r["impl"]] = r
        for key, rows in by.items():
            yield path, key, rows


def graph_problems(paths):
    return problems(paths, "graph")


def kept_challengers(paths):
    """(file, (M, N, K, dtype), kept candidate, final's ratios by operand set, harness ratio, speedup vs best vendor)
    for every graph row whose floor final kept a challenger."""
    out = []
    for path, key, rows in graph_problems(paths):
        lib, first = rows.get("rlgemm"), rows.get("lt_heuristic")
        if not lib or not first or not floor_served(lib["detail"]):
            continue
        m = floor_final(lib["detail"])
        if not m or int(m[3]) == 0:
            continue
        ratios = [float(x) for x in m[2].split("/")]
        harness = float(lib["time_us"]) / float(first["time_us"])
        out.append((path, key, int(m[3]), ratios, harness, float(lib["speedup_vs_best_vendor"])))
    return out


# Pairs apart by ", " in describe(), by "; " in a results CSV's detail (which holds no commas).
FINALISTS = re.compile(r"every finalist's mean over candidate 0's: (\d+ [\d.]+(?:[,;] \d+ [\d.]+)*)")


def finalists_of(detail, mode="graph"):
    """{candidate: mean time over candidate 0's in the final} of every finalist but candidate 0, from the floor's
    final of `mode`'s way of calling (as floor_final reads it); None where the detail does not list them."""
    final = floor_final(detail, mode)
    if not final:
        return None
    m = FINALISTS.match(detail, final.end() + 2)  # after "kept; "
    if not m:
        return None
    return {int(c): float(x) for c, x in (pair.split() for pair in re.split(r"[,;] ", m[1]))}


CALLERS = re.compile(r"; on the caller's set: (\d+ [\d.]+(?:[,;] \d+ [\d.]+)*)")


def callers_of(detail, mode="graph"):
    """{candidate: time over candidate 0's on the caller's operand set} of every finalist but candidate 0, from the
    floor's final of `mode`'s way of calling, where the final says it (finals timed on the caller's operands); None
    otherwise."""
    final = floor_final(detail, mode)
    if not final:
        return None
    m = CALLERS.search(detail, final.end(), mode_part(detail, mode)[1])
    if not m or m.start() > detail.find(")", final.end()):
        return None
    return {int(c): float(x) for c, x in (pair.split() for pair in re.split(r"[,;] ", m[1]))}


AUTO = re.compile(r"^candidate (\d+) of \d+ timed")
TWIN = re.compile(r"^lt_auto's algorithm \(candidate (\d+) of \d+ timed")


def vendor_candidate(impl, detail):
    """The cuBLASLt candidate a cuBLASLt subject ran, where its detail says (lt_heuristic runs the first); None for
    other subjects."""
    if impl == "lt_heuristic":
        return 0
    if impl not in ("lt_auto", "lt_auto_graph", "lt_twin"):
        return None
    m = (TWIN if impl == "lt_twin" else AUTO).match(detail or "")
    return int(m[1]) if m else None


def same_kernel_groups(paths, mode="graph"):
    """(file, (M, N, K, dtype), candidate, [(time_us, impl), ...] fastest first) for every problem of `mode` where at
    least two subjects ran the same cuBLASLt candidate (the floor: the one its final kept for that way of calling)."""
    out = []
    for path, key, rows in problems(paths, mode):
        ran = {}
        for impl, r in rows.items():
            candidate = vendor_candidate(impl, r["detail"])
            if impl in ("rlgemm", "rlgemm_nearest") and floor_served(r["detail"], mode):
                m = floor_final(r["detail"], mode)
                candidate = int(m[3]) if m else None
            if candidate is not None:
                ran.setdefault(candidate, []).append((float(r["time_us"]), impl))
        for candidate, times in ran.items():
            if len(times) >= 2:
                out.append((path, key, candidate, sorted(times)))
    return out


def floor_losses(paths, mode, below):
    """(file, (M, N, K, dtype), the floor's kept candidate or None, the library's ratio to the best vendor call (paired
    where the file has it), the fastest vendor subject, its candidate or None, its time, the library's time, that
    candidate's mean in the floor's final over candidate 0's (1 where it is candidate 0, None where it was no
    finalist), the finalists listed or None, that candidate's time over candidate 0's on the caller's set in the
    final or None) for every row of `mode` where the floor served below `below`."""
    out = []
    for path, key, rows in problems(paths, mode):
        lib = rows.get("rlgemm")
        if not lib or not floor_served(lib["detail"], mode):
            continue
        measured, fastest = ratio(lib), fastest_vendor(rows)
        if measured >= below or not fastest:
            continue
        time_us, impl = fastest
        candidate = vendor_candidate(impl, rows[impl]["detail"])
        final = floor_final(lib["detail"], mode)
        listed = finalists_of(lib["detail"], mode)
        mean = 1.0 if candidate == 0 else listed.get(candidate) if listed is not None and candidate is not None else None
        callers = (callers_of(lib["detail"], mode) or {}).get(candidate) if candidate else None
        out.append((path, key, int(final[3]) if final else None, measured, impl, candidate, time_us,
                    float(lib["time_us"]), mean, listed, callers))
    return sorted(out, key=lambda r: r[3])


def losses_report(rows, mode, below):
    lines = [f"{len(rows)} {mode} rows where the floor served below {below} of the best vendor call"]
    for r in rows:
        kept = f"candidate {r[2]}" if r[2] is not None else "its choice (no final named)"
        ran = f"candidate {r[5]}" if r[5] is not None else "its own kernel"
        if r[9] is None:
            where = "the final's finalists not named"
        elif r[5] is None:
            where = "finalists " + " ".join(str(c) for c in r[9])
        elif r[8] is None:
            where = f"candidate {r[5]} not a finalist (finalists " + " ".join(str(c) for c in r[9]) + ")"
        else:
            where = f"candidate {r[5]} in the final at {r[8]:.3f} of candidate 0's time"
            if len(r) > 10 and r[10] is not None:
                where += f" ({r[10]:.3f} on the caller's set)"
        lines.append(f"  {r[0]} {','.join(r[1])} {r[3]:.3f}: the floor's {kept} {r[7]:.2f} us; the fastest, {r[4]} "
                     f"({ran}), {r[6]:.2f} us; {where}")
    return lines


def callers_rankings(paths, mode):
    """(file, (M, N, K, dtype), the kept candidate, the finalist the caller's set ranks first (candidate 0 at 1),
    its time over candidate 0's there, the kept one's there, the library's time, the median time of the vendor
    subjects that ran the caller's set's first in the rounds or None) for every row of `mode` where the floor served
    and its final says its finalists' times on the caller's set (callers_of)."""
    out = []
    for path, key, rows in problems(paths, mode):
        lib = rows.get("rlgemm")
        if not lib or not floor_served(lib["detail"], mode):
            continue
        final, callers = floor_final(lib["detail"], mode), callers_of(lib["detail"], mode)
        if not final or callers is None:
            continue
        ranked = {0: 1.0, **callers}
        kept, first = int(final[3]), min(ranked, key=lambda c: (ranked[c], c))
        ran = [float(r["time_us"]) for impl, r in rows.items() if vendor_candidate(impl, r["detail"]) == first]
        out.append((path, key, kept, first, ranked[first], ranked.get(kept), float(lib["time_us"]),
                    statistics.median(ran) if ran else None))
    return out


def callers_report(rows, mode, worst=10):
    differ = [r for r in rows if r[3] != r[2]]
    timed = [r for r in differ if r[7] is not None]
    lines = [f"{len(rows)} {mode} rows where the floor's final said its finalists' times on the caller's set; "
             f"ranked by that set alone, another finalist first at {len(differ)}"]
    if timed:
        ratios = [r[7] / r[6] for r in timed]
        lines.append(f"where a vendor subject ran that finalist ({len(timed)}): its time over the floor's, geometric "
                     f"mean {geomean(ratios):.4f}; faster by more than 1% at {sum(x < 0.99 for x in ratios)}, slower "
                     f"by more than 1% at {sum(x > 1.01 for x in ratios)}")
    for r in sorted(timed, key=lambda r: r[7] / r[6])[:worst]:
        lines.append(f"  {r[0]} {','.join(r[1])}: kept candidate {r[2]} ({r[5]:.3f} on the caller's set), "
                     f"{r[6]:.2f} us; candidate {r[3]} ({r[4]:.3f} there) ran {r[7]:.2f} us")
    return lines


def floor_beside(paths, mode, impl):
    """[(the library's ratio to the best vendor call, `impl`'s)] of every row of `mode` the floor served where `impl`
    ran beside it (ratios paired where the file has them)."""
    out = []
    for _, _, rows in problems(paths, mode):
        lib, other = rows.get("rlgemm"), rows.get(impl)
        if lib and other and floor_served(lib["detail"], mode):
            out.append((ratio(lib), ratio(other)))
    return out


def beside_report(pairs, mode, impl, below=0.97):
    lib, other = [p[0] for p in pairs], [p[1] for p in pairs]
    return [f"{mode}: {len(pairs)} rows the floor served; the floor {geomean(lib):.4f} of the best vendor call "
            f"({sum(x < below for x in lib)} below {below}), {impl} beside it {geomean(other):.4f} "
            f"({sum(x < below for x in other)} below {below})"]


def same_kernel_report(groups, worst=10, mode="graph"):
    lines = [f"{len(groups)} {mode} problems where several subjects ran the same cuBLASLt candidate"]
    if not groups:
        return lines
    spread = [g[3][-1][0] / g[3][0][0] for g in groups]
    mean = geomean(spread)
    lines.append(f"slowest over fastest, geometric mean {mean:.4f}; above 1.03: {sum(x > 1.03 for x in spread)}; "
                 f"above 1.05: {sum(x > 1.05 for x in spread)}")
    # The library's floor beside lt_auto (else lt_auto_graph) running the same candidate: what its own launch costs.
    floor_over_auto = []
    for g in groups:
        times = {impl: t for t, impl in g[3]}
        auto = times.get("lt_auto", times.get("lt_auto_graph"))
        if "rlgemm" in times and auto:
            floor_over_auto.append(times["rlgemm"] / auto)
    if floor_over_auto:
        g = geomean(floor_over_auto)
        lines.append(f"the floor (rlgemm) over lt_auto or lt_auto_graph running the same candidate: {len(floor_over_auto)} "
                     f"problems, geometric mean {g:.4f}; above 1.02: {sum(x > 1.02 for x in floor_over_auto)}; "
                     f"below 0.98: {sum(x < 0.98 for x in floor_over_auto)}")
    lines.append("the widest (file, shape, candidate, slowest over fastest, times):")
    for x, g in sorted(zip(spread, groups), key=lambda p: -p[0])[:worst]:
        lines.append(f"  {g[0]} {','.join(g[1])} candidate {g[2]} {x:.3f} "
                     + " ".join(f"{impl}={t:.1f}" for t, impl in g[3]))
    return lines


def report(rows, worst=10):
    lines = [f"{len(rows)} graph rows served by the floor whose final kept a challenger over candidate 0"]
    if not rows:
        return lines
    bins = [(0.0, 0.95), (0.95, 0.97), (0.97, 0.98), (0.98, 0.99), (0.99, 1.01)]
    lines.append("final's ratio (slowest operand set) | rows | harness: challenger / candidate 0, geometric mean | "
                 "slower than candidate 0 | more than 3% slower")
    for lo, hi in bins:
        sel = [r for r in rows if lo <= max(r[3]) < hi]
        if sel:
            g = geomean([r[4] for r in sel])
            lines.append(f"[{lo:.2f}, {hi:.2f}) | {len(sel)} | {g:.3f} | {sum(r[4] > 1 for r in sel)} | "
                         f"{sum(r[4] > 1.03 for r in sel)}")
    g = geomean([r[4] for r in rows])
    lines.append(f"all | {len(rows)} | {g:.3f} | {sum(r[4] > 1 for r in rows)} | {sum(r[4] > 1.03 for r in rows)}")
    lines.append("the largest reversals (file, shape, kept candidate, final's ratios, harness ratio, vs best vendor):")
    for r in sorted(rows, key=lambda r: -r[4])[:worst]:
        lines.append(f"  {r[0]} {','.join(r[1])} candidate {r[2]} final {'/'.join(f'{x:.3f}' for x in r[3])} "
                     f"harness {r[4]:.3f} best-vendor {r[5]:.3f}")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worst", type=int, default=10, help="list this many of the largest reversals")
    p.add_argument("--same-kernel", action="store_true", help="also the spread of the same candidate across subjects")
    p.add_argument("--losses", type=float, metavar="BELOW",
                   help="also every row, in both modes, where the floor served below BELOW of the best vendor call: "
                        "the fastest vendor subject's candidate, and whether the floor's final had it")
    p.add_argument("--callers", action="store_true",
                   help="also, in both modes, the floor rows whose final a ranking by the caller's set alone would "
                        "have won with another finalist, and how that finalist ran where a vendor subject ran it")
    p.add_argument("--beside", metavar="IMPL",
                   help="also, in both modes, the rows the floor served: the floor's geometric mean and rows below 0.97 "
                        "beside those of IMPL (a vendor subject, e.g. lt_auto_graph) on the same rows")
    p.add_argument("files", nargs="+")
    a = p.parse_args(argv)

    def lines():
        out = report(kept_challengers(a.files), a.worst)
        if a.beside:
            for mode in ("graph", "offline"):
                out += beside_report(floor_beside(a.files, mode, a.beside), mode, a.beside)
        if a.callers:
            for mode in ("graph", "offline"):
                out += callers_report(callers_rankings(a.files, mode), mode, a.worst)
        if a.same_kernel:
            for mode in ("graph", "offline"):
                out += same_kernel_report(same_kernel_groups(a.files, mode), a.worst, mode)
        if a.losses is not None:
            for mode in ("graph", "offline"):
                out += losses_report(floor_losses(a.files, mode, a.losses), mode, a.losses)
        return out

    return print_report("floor_final_check", lines)


if __name__ == "__main__":
    sys.exit(main())
