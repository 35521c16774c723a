#!/usr/bin/env python3
"""How far one cuBLASLt candidate's time moves with where its operands or workspace lie, from the CSV of
`lt_choice_probe --placements N` or `--workspace-placements N`: per shape and candidate, within each round (the
placements timed side by side), the slowest placement's time over the fastest's, and which placement was slowest.
A move that repeats round after round at the same placement is the placement's; one that wanders is noise.

    scripts/probe_spread.py [--above X] probe.csv ...
"""
import argparse
import csv
import re
import sys

from report_cli import print_report

LABEL = re.compile(r"^(placement|workspace)-(\d+)(?:-(\d+))?-(\d+)$")  # kind, placement, [bytes], round


def spreads(paths):
    """{(shape, kind, candidate): {"bytes": workspace bytes or None, "rounds": [(slowest/fastest, slowest p), ...]}}."""
    times = {}
    for path in paths:
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                m = LABEL.match(r["what"])
                if not m:
                    continue
                key = (f'{r["M"]},{r["N"]},{r["K"]}', m[1], int(r["candidate"]))
                entry = times.setdefault(key, {"bytes": int(m[3]) if m[3] else None, "rounds": {}})
                entry["rounds"].setdefault(int(m[4]), {})[int(m[2])] = float(r["time_us"])
    out = {}
    for key, entry in times.items():
        rounds = []
        for _, by_placement in sorted(entry["rounds"].items()):
            if len(by_placement) < 2:
                continue
            slowest = max(by_placement, key=by_placement.get)
            rounds.append((by_placement[slowest] / min(by_placement.values()), slowest))
        if rounds:
            out[key] = {"bytes": entry["bytes"], "rounds": rounds}
    return out


def report(result, above=1.03):
    lines = ["shape | kind | candidate | workspace bytes | slowest over fastest by round (slowest placement) | "
             "the same placement slowest in every round"]
    for (shape, kind, candidate), e in sorted(result.items()):
        worst = min(s for s, _ in e["rounds"])  # the move that held in every round
        if worst <= above:
            continue
        steady = len({p for _, p in e["rounds"]}) == 1
        rounds = " ".join(f"{s:.3f} ({p})" for s, p in e["rounds"])
        lines.append(f"{shape} | {kind} | {candidate} | {'-' if e['bytes'] is None else e['bytes']} | {rounds} | "
                     f"{'yes' if steady else 'no'}")
    moved = sum(1 for e in result.values() if min(s for s, _ in e["rounds"]) > above)
    lines.append(f"{moved} of {len(result)} candidates moved more than {above - 1:.0%} in every round")
    return lines


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--above", type=float, default=1.03, help="list candidates whose every round moved more than this")
    p.add_argument("files", nargs="+")
    a = p.parse_args(argv)
    return print_report("probe_spread", lambda: report(spreads(a.files), a.above), "give CSVs of lt_choice_probe")


if __name__ == "__main__":
    sys.exit(main())
