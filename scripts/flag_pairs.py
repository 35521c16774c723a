"""Each design of a bench run beside the same design with one flag more, paired round by round.

    python3 scripts/flag_pairs.py RUN.csv --flag bulktail [--out PAIRS.csv]

RUN.csv is an `rlgemm bench` CSV in which each design ran with and without the flag (`--designs FILE` listing
both, e.g. bench/designs/bulk-tail.txt). For every mode, shape and design D whose run holds D and D with /FLAG, one
row: the time of D over the time of D/FLAG in each round (`rounds_us`, the rounds of one run are interleaved and
shuffled, so a round's two times were taken side by side), summarized as the geometric mean of the per-round
ratios with its 95% Student-t interval (scripts/interleaved.py). Above 1: the flag made D faster.

Columns: mode, design (D, without the flag), shape (MxNxK), plain_over_FLAG, low, high, rounds. Exit 2 on bad
input: a missing column, a run with no pair, rounds of unequal length.
"""
import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interleaved import ratio  # noqa: E402

COLUMNS = ("M", "N", "K", "impl", "mode", "rounds_us")


def without_flag(design, flag):
    """`design` with its `/flag` part taken out, or None when it has none."""
    parts = design.split("/")
    if flag not in parts[1:]:
        return None
    parts.remove(flag)
    return "/".join(parts)


def rounds(row):
    text = row["rounds_us"].strip()
    if not text:
        raise ValueError(f"{row['impl']} at {row['M']}x{row['N']}x{row['K']} ({row['mode']}) has no rounds")
    return [float(t) for t in text.split(";")]


def pairs(rows, flag):
    """[(mode, design, shape, Ratio)] for every design that ran with and without `flag`, in the run's order."""
    by_key = {}
    for row in rows:
        by_key[(row["mode"], row["impl"], f"{row['M']}x{row['N']}x{row['K']}")] = row
    out = []
    for (mode, impl, shape), flagged in by_key.items():
        plain_impl = without_flag(impl, flag)
        plain = by_key.get((mode, plain_impl, shape)) if plain_impl else None
        if plain is None:
            continue
        a, b = rounds(plain), rounds(flagged)
        if len(a) != len(b):
            raise ValueError(f"{plain_impl} and {impl} at {shape} ({mode}): {len(a)} rounds against {len(b)}")
        out.append((mode, plain_impl, shape, ratio(a, b)))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", help="an rlgemm bench CSV")
    parser.add_argument("--flag", required=True, help="the design flag, without its slash (bulktail, l2p0, ...)")
    parser.add_argument("--out", help="the pairs CSV (default: standard output)")
    args = parser.parse_args(argv)
    try:
        with open(args.run, newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise ValueError(f"{args.run} lacks the column(s) {', '.join(missing)}: not an rlgemm bench CSV")
            found = pairs(list(reader), args.flag.lstrip("/"))
        if not found:
            raise ValueError(f"{args.run} holds no design that ran both with and without /{args.flag.lstrip('/')}")
    except (OSError, ValueError) as e:
        print(f"flag_pairs: {e}", file=sys.stderr)
        return 2
    out = open(args.out, "w", newline="") if args.out else sys.stdout
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["mode", "design", "shape", f"plain_over_{args.flag.lstrip('/')}", "low", "high", "rounds"])
    for mode, design, shape, r in found:
        w.writerow([mode, design, shape, f"{r.geomean:.4f}", f"{r.low:.4f}", f"{r.high:.4f}", r.rounds])
    if args.out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
