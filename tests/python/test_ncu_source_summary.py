"""scripts/ncu_source_summary.py: stall-sample shares by opcode, for the kernel and its main loop (the instructions
executed about as often as the most executed wgmma), from an ncu source page made here."""
import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ncu_source_summary.py"
HEADER = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Warp Stall Sampling (Not-issued Samples)",
          "Instructions Executed", "stall_barrier", "stall_long_sb", "stall_long_sb (Not Issued)"]


def page(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["Kernel Name", "k", ""])
        w.writerow(HEADER)
        w.writerows(rows)


def run(path):
    return subprocess.run([sys.executable, str(SCRIPT), str(path), "--top", "2"], capture_output=True, text=True,
                          check=True).stdout


def test_main_loop_leaves_out_spin_loops_and_the_prologue(tmp_path):
    src = tmp_path / "source.csv"
    page(src, [
        ["0x0", "      LDC R1, c[0x0][0x28]", "10", "10", "100", "0", "0", "0"],                 # prologue
        ["0x10", "      HGMMA.64x168x16.F32 R24, gdesc[UR16], R24", "30", "0", "1000", "0", "0", "0"],
        ["0x20", "      WARPGROUP.DEPBAR.LE gsb0, 0x1", "50", "50", "1000", "50", "0", "0"],
        ["0x30", "@!P0  BRA 0x7f", "20", "20", "900", "0", "20", "20"],                          # data wait
        ["0x40", "@!P3  NANOSLEEP.SYNCS 0xc350", "90", "90", "5000", "0", "90", "90"],           # spin loop
    ])
    out = run(src).splitlines()
    assert out[0].startswith("kernel: 5 instructions, 200 samples: NANOSLEEP.SYNCS 45.0%")
    # 1000 executions of the wgmma: the loop is the lines executed 500..1500 times; the guard predicate is not the
    # opcode
    assert out[1] == ("main loop: 3 instructions, 100 samples: WARPGROUP.DEPBAR.LE 50.0%, HGMMA.64x168x16.F32 30.0%, "
                      "BRA 20.0%")
    assert "NANOSLEEP.SYNCS" in out[3] and "long_sb 45.0%" in out[3]
    assert "WARPGROUP.DEPBAR.LE" in out[4] and "barrier 25.0%" in out[4]


def test_a_page_without_samples_is_refused(tmp_path):
    src = tmp_path / "raw.csv"
    src.write_text("ID,Kernel Name\n1,k\n")
    r = subprocess.run([sys.executable, str(SCRIPT), str(src)], capture_output=True, text=True)
    assert r.returncode != 0 and "no source table" in r.stderr
