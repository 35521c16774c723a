#!/usr/bin/env python3
"""Which cuBLASLt candidates lose in the rounds after winning a choice, by the shape of their launch. A choice
(lt_auto's, lt_auto_graph's, the library floor's final) that takes a candidate other than the heuristic's first
(candidate 0) found it faster when it timed it; in the harness's rounds that follow, the candidate's time over
candidate 0's (lt_heuristic's row of the same rounds) says whether the lead held. Only choices timed in the mode
read count (graph: lt_auto_graph's, and the floor's where timed in CUDA graphs; offline: lt_auto's and its control
twin's, and the floor's where timed in eager calls): a choice timed in the other mode can lose by host cost alone.
Each such problem and candidate is one observation: the median time of the subjects that ran the candidate in the
mode read (whatever way they chose it), over lt_heuristic's. The candidates are
classed by their main kernel (not a memset, not the split-K reduction) as `lt_choice_probe --kernels` lists it for
the same shapes: the cluster's size, and how its clusters launched compare with the clusters the GPU holds at once
(below 0.8 of them, 0.8 to 1 (one wave that needs nearly every cluster slot free when it starts), more than one
wave). For each class: the observations, their geometric mean, how many ran more than 3% behind or ahead of
candidate 0, and the geometric mean over all observations had candidate 0 been kept in that class.

With --margins, the library floor's own choices (those its final took, with the final's mean time of the kept
candidate over candidate 0's) are weighed under a margin for the full-cluster class alone (clusters of 4 or more
whose launch fills 0.8-1 of the cluster slots): a challenger of that class kept only where its final's mean is
below 1 - margin of candidate 0's, else candidate 0 (whose time is lt_heuristic's, ratio 1). For each margin: the
choices turned back, how many of those had held by more than 3% in the rounds, and the geometric mean and the
count more than 3% behind over all the floor's choices. The same margin over every class is printed beside it.

    scripts/lt_flip_classes.py --kernels fp16=KERNELS.txt [--kernels bf16=KERNELS.txt] [--mode graph|offline]
                               [--worst N] [--margins 0.03,0.05,...] results.csv ...
"""
import argparse
import re
import statistics
import sys

import floor_final_check as F
from report_cli import print_report

LINE = re.compile(r"^(\d+),(\d+),(\d+) candidate (\d+):(.*)$")
GROUP = re.compile(r"\[([^\]]*)\]")
CLUSTER = re.compile(r" cluster (\d+)x(\d+)x(\d+)")
RESIDENT = re.compile(r" clusters (\d+) of (\d+|\?) resident")
CHOOSERS = {"graph": ("lt_auto_graph",), "offline": ("lt_auto", "lt_twin")}
RUNNERS = ("lt_auto", "lt_auto_graph", "lt_twin")
BUCKETS = ("<0.8", "0.8-1", ">1 wave")


def main_kernel(text):
    """(cluster size, launched, resident or None) of the main kernel of a candidate's listing, or None where the
    listing has none (it did not run, or its launch was not read)."""
    for group in GROUP.findall(text):
        if group == "memset" or "splitKreduce" in group or group.startswith(("does not run", "not read")):
            continue
        c = CLUSTER.search(group)
        size = int(c[1]) * int(c[2]) * int(c[3]) if c else 1
        r = RESIDENT.search(group)
        if not r:
            return None
        return size, int(r[1]), None if r[2] == "?" else int(r[2])
    return None


def read_kernels(specs):
    """{(M, N, K, dtype): {candidate: main_kernel(...)}} from `dtype=FILE` specs of `lt_choice_probe --kernels`."""
    out = {}
    for spec in specs:
        dtype, sep, path = spec.partition("=")
        if not sep or dtype not in ("fp16", "bf16"):
            raise ValueError(f"--kernels {spec}: expected fp16=FILE or bf16=FILE")
        with open(path) as f:
            for line in f:
                m = LINE.match(line.rstrip("\n"))
                if m:
                    out.setdefault((m[1], m[2], m[3], dtype), {})[int(m[4])] = main_kernel(m[5])
    if not out:
        raise ValueError("no candidate listed in " + ", ".join(specs))
    return out


def bucket(launched, resident):
    if not resident:
        return "?"
    fill = launched / resident
    return BUCKETS[0] if fill < 0.8 else BUCKETS[1] if fill <= 1 else BUCKETS[2]


def floor_candidate(row, mode):
    """(candidate, timed in `mode`) of the library's floor for `mode`'s way of calling, where the floor served it
    and its final says what it kept; else None. Where the captured calls took a choice of their own (after
    "; captured calls: "), graph rows read that one and offline rows the other, as floor_final_check does."""
    detail = row["detail"]
    if not F.floor_served(detail, mode):
        return None
    m = F.floor_final(detail, mode)
    if not m:
        return None
    start, end = F.mode_part(detail, mode)
    in_graphs = "timed on first use in CUDA graphs" in detail[start:end]
    kept = int(m[3])
    final = (F.finalists_of(detail, mode) or {}).get(kept)
    return kept, in_graphs == (mode == "graph"), final


def observations(paths, kernels, mode):
    """(file, (M, N, K, dtype), candidate, ratio to candidate 0, class, final) for every problem and candidate other
    than 0 that a subject chose; class is (cluster size, fill bucket), or None where the listing lacks the
    candidate; final is the library floor's final mean time of the candidate over candidate 0's where the floor
    chose it (timed in the mode read), else None."""
    out = []
    for path, key, rows in F.problems(paths, mode):
        first = rows.get("lt_heuristic")
        if not first:
            continue
        ran, chosen, finals = {}, set(), {}
        for impl, r in rows.items():
            if impl in RUNNERS:
                c = F.vendor_candidate(impl, r["detail"])
                in_mode = impl in CHOOSERS[mode]
            elif impl == "rlgemm" and (floor := floor_candidate(r, mode)):
                c, in_mode, final = floor
                if in_mode and final is not None:
                    finals[c] = final
            else:
                continue
            if c is None:
                continue
            ran.setdefault(c, []).append(float(r["time_us"]))
            if in_mode and c != 0:
                chosen.add(c)
        for c in sorted(chosen):
            times = ran[c]
            k = kernels.get(key, {}).get(c)
            cls = (k[0], bucket(k[1], k[2])) if k else None
            out.append((path, key, c, statistics.median(times) / float(first["time_us"]), cls, finals.get(c)))
    return out


def full_clusters(cls):
    """The class a margin is weighed for: clusters of 4 or more whose launch fills 0.8-1 of the cluster slots."""
    return bool(cls) and cls[0] >= 4 and cls[1] == BUCKETS[1]


def margin_report(obs, margins):
    """Lines weighing a final's margin on the floor's own choices (observations with a final), as the module says."""
    floor = [o for o in obs if len(o) > 5 and o[5] is not None]
    lines = [f"{len(floor)} of them the library floor's final took (its mean over candidate 0's known); "
             f"{sum(full_clusters(o[4]) for o in floor)} of the full-cluster class (clusters of 4 or more, fill 0.8-1)"]
    if not floor:
        return lines
    lines.append("margin | turned back (full-cluster class) | of those >3% ahead in the rounds | geometric mean | "
                 ">3% behind | over every class: turned back | geometric mean | >3% behind")

    def under(margin, only_class):
        turned = [(not only_class or full_clusters(o[4])) and o[5] >= 1 - margin for o in floor]
        back = [o for o, t in zip(floor, turned) if t]
        return back, [1.0 if t else o[3] for o, t in zip(floor, turned)]

    for m in [0.0] + list(margins):
        back, kept = under(m, True)
        back_all, kept_all = under(m, False)
        lines.append(f"{m:.2f} | {len(back)} | {sum(o[3] < 0.97 for o in back)} | {F.geomean(kept):.4f} | "
                     f"{sum(x > 1.03 for x in kept)} | {len(back_all)} | {F.geomean(kept_all):.4f} | "
                     f"{sum(x > 1.03 for x in kept_all)}")
    return lines


def report(obs, mode, worst=10):
    lines = [f"{len(obs)} {mode} observations: a problem and a candidate other than 0 that a choice took; its time "
             f"over candidate 0's in the rounds, geometric mean {F.geomean([o[3] for o in obs]):.4f}"]
    lines.append("cluster | fill | observations | geometric mean | >3% behind | >3% ahead | all, with candidate 0 "
                 "kept in this class")
    classes = sorted({o[4] for o in obs if o[4]}, key=lambda c: (c[0], c[1]))
    for cls in classes + [None]:
        mine = [o[3] for o in obs if o[4] == cls]
        if not mine:
            continue
        kept_first = F.geomean([1.0 if o[4] == cls else o[3] for o in obs])
        name = f"{cls[0]} | {cls[1]}" if cls else "not listed | -"
        lines.append(f"{name} | {len(mine)} | {F.geomean(mine):.4f} | {sum(x > 1.03 for x in mine)} | "
                     f"{sum(x < 0.97 for x in mine)} | {kept_first:.4f}")
    lines.append("the most behind (file, shape, candidate, time over candidate 0's, class):")
    for path, key, c, ratio, cls, *_ in sorted(obs, key=lambda o: -o[3])[:worst]:
        lines.append(f"  {path} {','.join(key)} candidate {c} {ratio:.3f} {cls}")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", action="append", required=True, help="dtype=FILE of lt_choice_probe --kernels")
    p.add_argument("--mode", default="graph", choices=("graph", "offline"))
    p.add_argument("--worst", type=int, default=10)
    p.add_argument("--margins", default="", help="comma-separated margins to weigh for the full-cluster class")
    p.add_argument("files", nargs="+")
    a = p.parse_args(argv)

    def lines():
        margins = [float(x) for x in a.margins.split(",") if x.strip()]
        if any(not 0 <= m < 1 for m in margins):
            raise ValueError(f"--margins {a.margins}: each margin lies in [0, 1)")
        obs = observations(a.files, read_kernels(a.kernels), a.mode)
        return report(obs, a.mode, a.worst) + (margin_report(obs, margins) if margins else [])

    return print_report("lt_flip_classes", lines,
                        "give lt_choice_probe --kernels listings and results CSVs of rlgemm bench")


if __name__ == "__main__":
    sys.exit(main())
