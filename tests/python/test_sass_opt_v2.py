"""scripts/sass-opt-v2's SASS_OPT_AGAIN: the named parts run again from scratch (after a change to the game's
rules), their earlier rows moved aside; the other parts' rows stay. A stand-in rlgemm that records its calls and
writes nothing takes the GPU's place."""
import csv
import os
import stat
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "sass-opt-v2"
FIELDS = ["kernel", "M", "N", "K", "layout", "gain", "set", "actions", "changes"]


def write_rows(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for kernel, set_, actions in rows:
            w.writerow({"kernel": kernel, "M": 64, "N": 64, "K": 64, "layout": "tn", "gain": "0.0100",
                        "set": set_, "actions": actions, "changes": "stall=1"})


def read_keys(path):
    with open(path, newline="") as f:
        return [(r["kernel"], r["set"], r["actions"]) for r in csv.DictReader(f)]


def stand_in(tmp_path):
    calls = tmp_path / "calls.txt"
    fake = tmp_path / "rlgemm"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {calls}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return fake, calls


def run(results, fake, *parts, again=True):
    env = dict(os.environ, RLGEMM=str(fake), SASS_OPT_BUDGET_S="60")
    if again:
        env["SASS_OPT_AGAIN"] = "1"
    return subprocess.run(["bash", str(SCRIPT), str(results), *parts], capture_output=True, text=True, env=env,
                          cwd=ROOT)


def test_again_moves_the_named_parts_rows_aside_and_runs_them(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    csv_path = results / "sass-opt-v2.csv"
    write_rows(csv_path, [("a", "sm80", "moves"), ("b", "sm80", "both"), ("c", "sm90", "both"), ("d", "sm80", "both")])
    fake, calls = stand_in(tmp_path)
    done = run(results, fake, "sm80-both")
    assert done.returncode == 0, done.stderr
    assert read_keys(csv_path) == [("a", "sm80", "moves"), ("c", "sm90", "both")]
    assert read_keys(results / "sass-opt-v2.replaced.csv") == [("b", "sm80", "both"), ("d", "sm80", "both")]
    assert "2 rows of sm80,both moved" in done.stdout
    # Rewritten with the "\n" line ends of the rows rlgemm sass-opt appends, so the file keeps one kind.
    assert b"\r" not in csv_path.read_bytes() and b"\r" not in (results / "sass-opt-v2.replaced.csv").read_bytes()
    # The part ran again: each of its sm80 designs was handed to rlgemm with both action spaces.
    lines = calls.read_text().splitlines()
    assert len(lines) == 12 and all("--actions both" in line and "--resume" in line for line in lines)
    # A second time appends to the rows moved aside, under the one header.
    write_rows(csv_path, [("e", "sm80", "both")])
    assert run(results, fake, "sm80-both").returncode == 0
    assert read_keys(results / "sass-opt-v2.replaced.csv")[-1] == ("e", "sm80", "both")


def test_without_again_the_rows_stay_and_an_unknown_part_is_refused_first(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    csv_path = results / "sass-opt-v2.csv"
    write_rows(csv_path, [("b", "sm80", "both")])
    fake, calls = stand_in(tmp_path)
    assert run(results, fake, "sm80-both", again=False).returncode == 0
    assert read_keys(csv_path) == [("b", "sm80", "both")]
    assert not (results / "sass-opt-v2.replaced.csv").exists()
    bad = run(results, fake, "sm80-both", "sm70-both")
    assert bad.returncode == 2 and "unknown part 'sm70-both'" in bad.stderr
    assert read_keys(csv_path) == [("b", "sm80", "both")]  # refused before anything moved
