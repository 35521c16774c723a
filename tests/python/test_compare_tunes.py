"""scripts/compare-tunes: two tuning databases side by side, per shape by their best paired gains, and the rows
one strategy derived from others. Databases made here with the measurements table's columns the script reads."""
import csv
import math
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "compare-tunes"

COOP = "sm90.ws.coop/128x{}x64/s4/c1x1/raster_m.g8/splitk1/epi_tma"


def make_db(path, rows):
    """rows: (m, n, k, design, strategy, gain, status, paired, mode[, (low, high)]): the interval of gain - 1."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE measurements (id INTEGER PRIMARY KEY, m INTEGER, n INTEGER, k INTEGER, layout TEXT, "
               "dtype TEXT, design TEXT, mode TEXT, status TEXT, strategy TEXT, paired INTEGER, log_ratio REAL, "
               "gain_low REAL, gain_high REAL)")
    for m, n, k, design, strategy, gain, status, paired, mode, *interval in rows:
        low, high = interval[0] if interval else (None, None)
        db.execute("INSERT INTO measurements (m, n, k, layout, dtype, design, mode, status, strategy, paired, "
                   "log_ratio, gain_low, gain_high) VALUES (?, ?, ?, 'tn', 'fp16', ?, ?, ?, ?, ?, ?, ?, ?)",
                   (m, n, k, design, mode, status, strategy, paired, math.log(gain), low, high))
    db.commit()
    db.close()


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


def test_best_of_each_shape_side_by_side_and_the_derived_pairs(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_db(a, [
        (512, 7168, 7168, COOP.format(256), "predicted", 0.96, "ok", 1, "graph"),
        (512, 7168, 7168, COOP.format(128), "rl", 0.90, "ok", 1, "graph"),
        (2048, 4096, 4096, COOP.format(128), "predicted", 1.00, "ok", 1, "graph"),
        (4096, 4096, 4096, COOP.format(128), "predicted", 1.00, "ok", 1, "graph"),  # not in B
    ])
    make_db(b, [
        (512, 7168, 7168, COOP.format(256), "predicted", 0.95, "ok", 1, "graph"),
        (512, 7168, 7168, COOP.format(224), "wave-fit", 1.01, "ok", 1, "graph"),
        (512, 7168, 7168, COOP.format(192), "rl", 2.00, "wrong", 1, "graph"),       # not correct: left out
        (512, 7168, 7168, COOP.format(160), "rl", 2.00, "ok", 0, "graph"),          # unpaired: left out
        (512, 7168, 7168, COOP.format(176), "rl", 2.00, "ok", 1, "offline"),        # another mode
        (2048, 4096, 4096, COOP.format(128), "predicted", 0.98, "ok", 1, "graph"),
    ])
    out, pairs = tmp_path / "ab.csv", tmp_path / "pairs.csv"
    r = run(a, b, "--out", out, "--derived", "wave-fit", "--derived-out", pairs)
    assert r.returncode == 0, r.stderr
    assert "2 shapes in both (3 in A, 2 in B), graph mode" in r.stdout
    ratio = math.sqrt(1.01 / 0.96 * 0.98 / 1.00)
    assert f"geometric mean {ratio:.4f}" in r.stdout
    assert "M = 512: 1 shapes, 1.0521" in r.stdout
    assert "wave-fit: 1 rows of B beside the design they were derived from: 1 faster, geometric mean 1.0632" \
        in r.stdout
    rows = list(csv.DictReader(open(out)))
    assert [(row["M"], row["best_a"], row["best_b"], row["strategy_b"]) for row in rows] == [
        ("512", "0.9600", "1.0100", "wave-fit"), ("2048", "1.0000", "0.9800", "predicted")]
    assert rows[0]["design_b"] == COOP.format(224)
    derived = list(csv.DictReader(open(pairs)))
    assert len(derived) == 1
    assert (derived[0]["source"], derived[0]["derived"], derived[0]["derived_over_source"]) == (
        COOP.format(256), COOP.format(224), "1.0632")


def test_the_same_designs_say_how_far_a_measurement_carries_to_the_other_run(tmp_path):
    """Designs both runs measured on the same shape: the spread of their gains between the runs, and how many of B's
    gains fall inside A's stored interval."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_db(a, [
        (512, 7168, 7168, COOP.format(256), "predicted", 1.000, "ok", 1, "graph", (-0.001, 0.001)),
        (512, 7168, 7168, COOP.format(128), "rl", 1.100, "ok", 1, "graph", (0.099, 0.101)),
        (2048, 4096, 4096, COOP.format(128), "predicted", 0.900, "ok", 1, "graph", (-0.102, -0.098)),
        (4096, 4096, 4096, COOP.format(128), "predicted", 1.000, "ok", 1, "graph"),  # no interval, not in B
    ])
    make_db(b, [
        (512, 7168, 7168, COOP.format(256), "predicted", 1.0005, "ok", 1, "graph"),  # inside A's interval
        (512, 7168, 7168, COOP.format(128), "rl", 1.100 * math.exp(0.02), "ok", 1, "graph"),
        (2048, 4096, 4096, COOP.format(128), "predicted", 0.900 * math.exp(-0.04), "ok", 1, "graph"),
        (2048, 4096, 4096, COOP.format(256), "rl", 0.95, "ok", 1, "graph"),  # A never measured it
    ])
    r = run(a, b)
    assert r.returncode == 0, r.stderr
    assert ("the same design on the same shape in both: 3 measurements; |ln B - ln A|: 50th 2.00%, 90th 4.00%, "
            "95th 4.00%, 97.5th 4.00%") in r.stdout
    assert "A's 95% intervals: median width 0.20%; B's gain inside A's interval on 1 of 3 (33%)" in r.stdout


def test_refuses_what_it_cannot_compare(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_db(a, [(512, 7168, 7168, COOP.format(256), "predicted", 0.96, "ok", 1, "graph")])
    make_db(b, [(2048, 4096, 4096, COOP.format(128), "predicted", 0.98, "ok", 1, "graph")])
    r = run(a, b)
    assert r.returncode != 0 and "no shape has a correct paired graph measurement in both" in r.stderr
    r = run(a, b, "--derived", "wave-fit")
    assert r.returncode != 0 and "--derived and --derived-out go together" in r.stderr
    r = run(a, tmp_path / "missing.db")
    assert r.returncode != 0 and "missing.db" in r.stderr


WAVE_FIT_AB = SCRIPT.parent / "wave-fit-ab"


def test_wave_fit_ab_tunes_both_ways_and_goes_on_after_its_time_limit(tmp_path):
    """scripts/wave-fit-ab on the CPU cost model: cut by --seconds, then run again to the end from the two databases
    alone; they come out whole and side by side."""
    import os
    rlgemm = os.environ.get("RLGEMM_CLI") or str(SCRIPT.parents[1] / "build" / "rlgemm")
    if not Path(rlgemm).exists():
        pytest.skip(f"no rlgemm binary at {rlgemm}")
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("M,N,K\n512,5120,4096\n512,9216,7168\n2048,11008,4096\n")
    out = tmp_path / "ab"
    env = dict(os.environ, RLGEMM=rlgemm, PYTHON=sys.executable)
    # 24 measurements of 200 ms a side: 4.8 s, more than the 4 s each side gets.
    args = [str(WAVE_FIT_AB), str(shapes), str(out), "--budget", "8",
            "--", "--backend", "synthetic", "--delay-ms", "200"]
    cut = subprocess.run(args[:5] + ["--seconds", "8"] + args[5:], capture_output=True, text=True, env=env)
    assert cut.returncode == 0, cut.stderr
    for side in ("off", "on"):
        db = sqlite3.connect(out / f"wave-fit-ab-{side}.db")
        assert db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] < 24
        # As brought back from a GPU machine: the two databases without the working folders.
        shutil.rmtree(out / f".wave-fit-ab-{side}")
    done = subprocess.run(args, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    for side in ("off", "on"):
        assert not (out / f"wave-fit-ab-{side}.db-wal").exists()
        db = sqlite3.connect(out / f"wave-fit-ab-{side}.db")
        assert db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0] == 24  # 8 each, none twice
    on = sqlite3.connect(out / "wave-fit-ab-on.db")
    assert on.execute("SELECT COUNT(*) FROM measurements WHERE strategy = 'wave-fit'").fetchone()[0] > 0
    off = sqlite3.connect(out / "wave-fit-ab-off.db")
    assert off.execute("SELECT COUNT(*) FROM measurements WHERE strategy = 'wave-fit'").fetchone()[0] == 0
    assert "3 shapes in both (3 in A, 3 in B), graph mode" in done.stdout
    assert "wave-fit: " in (out / "wave-fit-ab.txt").read_text()
    rows = list(csv.DictReader(open(out / "wave-fit-ab.csv")))
    assert [row["M"] for row in rows] == ["512", "512", "2048"]


def test_wave_fit_ab_cut_before_a_shape_is_tuned_both_ways_says_so_and_goes_on(tmp_path):
    """A time limit that ends both tunes before their first measurement (5 s each, 1 s a side) leaves nothing to
    compare: the script says to run it again and exits 0, as a cut run does; a real failure still exits 1."""
    import os
    rlgemm = os.environ.get("RLGEMM_CLI") or str(SCRIPT.parents[1] / "build" / "rlgemm")
    if not Path(rlgemm).exists():
        pytest.skip(f"no rlgemm binary at {rlgemm}")
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("M,N,K\n512,5120,4096\n")
    env = dict(os.environ, RLGEMM=rlgemm, PYTHON=sys.executable)
    out = tmp_path / "ab"
    cut = subprocess.run([str(WAVE_FIT_AB), str(shapes), str(out), "--seconds", "2", "--", "--backend", "synthetic",
                          "--delay-ms", "5000"], capture_output=True, text=True, env=env)
    assert cut.returncode == 0, cut.stderr
    assert "run the same command again" in cut.stderr
    assert not (out / "wave-fit-ab.txt").exists() and not (out / "wave-fit-ab.err").exists()
    broken = subprocess.run([str(WAVE_FIT_AB), str(shapes), str(tmp_path / "ab2"), "--", "--backend", "no-such"],
                            capture_output=True, text=True, env=env)
    assert broken.returncode == 1 and "failed" in broken.stderr


def test_wave_fit_ab_refuses_bad_arguments(tmp_path):
    r = subprocess.run([str(WAVE_FIT_AB), str(tmp_path / "none.csv"), str(tmp_path / "ab")], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "no such shapes file" in r.stderr
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("M,N,K\n512,5120,4096\n")
    r = subprocess.run([str(WAVE_FIT_AB), str(shapes), str(tmp_path / "ab"), "--wave-fit", "0"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "--wave-fit 0" in r.stderr
    r = subprocess.run([str(WAVE_FIT_AB), str(shapes), str(tmp_path / "ab"), "--sideways"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and "unknown argument '--sideways'" in r.stderr
