"""scripts/flag_pairs.py: a design beside the same design with one flag more, paired round by round."""
import csv
import math
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "flag_pairs.py"
HEADER = ["M", "N", "K", "layout", "impl", "mode", "time_us", "rounds_us"]
PLAIN = "sm90.ws.pingpong/128x168x64/s5/c2x1/raster_m.g8/splitk1/epi_tma"


def run(tmp_path, rows, *extra):
    path = tmp_path / "run.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(HEADER)
        w.writerows(rows)
    return subprocess.run([sys.executable, str(SCRIPT), str(path), *extra], capture_output=True, text=True)


def test_each_pair_is_the_geometric_mean_of_its_rounds_ratios(tmp_path):
    rows = [
        [2048, 11008, 4096, "tn", "lt_auto", "graph", 270, "270;271;272"],
        [2048, 11008, 4096, "tn", PLAIN, "graph", 300, "300;310;290"],
        [2048, 11008, 4096, "tn", PLAIN + "/bulktail", "graph", 290, "290;300;282"],
        [2048, 11008, 4096, "tn", PLAIN + "/bulktail/bf16", "graph", 290, "290;300;282"],  # its pair is missing
        [512, 11008, 4096, "tn", PLAIN, "offline", 90, "90;91"],
        [512, 11008, 4096, "tn", PLAIN + "/bulktail", "offline", 99, "99;100"],
    ]
    result = run(tmp_path, rows, "--flag", "bulktail")
    assert result.returncode == 0, result.stderr
    got = list(csv.DictReader(result.stdout.splitlines()))
    assert [(g["mode"], g["design"], g["shape"]) for g in got] == [
        ("graph", PLAIN, "2048x11008x4096"), ("offline", PLAIN, "512x11008x4096")]
    expected = math.exp(sum(math.log(a / b) for a, b in [(300, 290), (310, 300), (290, 282)]) / 3)
    assert float(got[0]["plain_over_bulktail"]) == round(expected, 4)
    assert float(got[0]["low"]) < expected < float(got[0]["high"])
    assert got[0]["rounds"] == "3"
    assert float(got[1]["plain_over_bulktail"]) < 1  # the flag made it slower there


def test_bad_input_says_why(tmp_path):
    no_pair = run(tmp_path, [[64, 64, 64, "tn", PLAIN, "graph", 3, "3;3"]], "--flag", "bulktail")
    assert no_pair.returncode == 2 and "no design that ran both" in no_pair.stderr
    uneven = run(tmp_path, [[64, 64, 64, "tn", PLAIN, "graph", 3, "3;3;3"],
                            [64, 64, 64, "tn", PLAIN + "/bulktail", "graph", 3, "3;3"]], "--flag", "bulktail")
    assert uneven.returncode == 2 and "3 rounds against 2" in uneven.stderr
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    not_bench = subprocess.run([sys.executable, str(SCRIPT), str(path), "--flag", "bulktail"],
                               capture_output=True, text=True)
    assert not_bench.returncode == 2 and "not an rlgemm bench CSV" in not_bench.stderr
