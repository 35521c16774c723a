"""scripts/ncu_summary.py: one line per kernel of an `ncu --page raw --csv` export, the harness's kernels left out.
Exports made here with the columns the script reads."""
import csv
import io
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ncu_summary.py"

COLUMNS = ["ID", "Kernel Name", "Grid Size", "Block Size", "launch__registers_per_thread", "gpu__time_duration.sum",
           "sm__cycles_elapsed.max", "lts__t_sectors.sum", "smsp__inst_executed.sum", "dram__bytes_read.sum",
           "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
           "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"]
UNITS = ["", "", "", "", "register/thread", "usecond", "cycle", "sector", "inst", "Mbyte", "inst", "inst"]


def export(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["==PROF== a note before the table"])
        w.writerow(COLUMNS)
        w.writerow(UNITS)
        w.writerows(rows)


def summary(path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--subject", "s", "--clock", "base", str(path)],
                         capture_output=True, text=True, check=True).stdout
    header = subprocess.run([sys.executable, str(SCRIPT), "--header"], capture_output=True, text=True,
                            check=True).stdout
    return list(csv.DictReader(io.StringIO(header + out)))


def test_cycles_instructions_and_l2_bytes_from_sectors(tmp_path):
    raw = tmp_path / "raw.csv"
    export(raw, [
        ["0", "fill_kernel", "(1, 1, 1)", "(256, 1, 1)", "16", "1.0", "100", "10", "1000", "0.1", "0", "0"],
        ["1", "rlgemm_sm90_ws_coop_128x128x64", "(132, 1, 1)", "(384, 1, 1)", "168", "288.7", "397,603",
         "70,631,799", "56,929,840", "280.76", "2.19", "1.28"],
    ])
    rows = summary(raw)
    assert [r["kernel"] for r in rows] == ["rlgemm_sm90_ws_coop_128x128x64"]  # the harness's fill left out
    r = rows[0]
    assert abs(float(r["sm_cycles"]) - 397603) < 100  # four significant digits
    assert abs(float(r["instructions_m"]) - 56.93) < 0.01
    assert abs(float(r["l2_mb"]) - 70631799 * 32e-6) < 1  # 32-byte sectors
    assert r["top_stalls"].startswith("barrier:2.19 long_scoreboard:1.28")


def test_multicast_columns_what_the_sms_received_and_what_the_l2_read(tmp_path):
    raw = tmp_path / "raw.csv"
    columns = COLUMNS + ["l1tex__m_xbar2l1tex_read_sectors_mem_global_op_tma_ld.sum",
                         "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_ltcfabric.sum",
                         "lrc__lts2lrc_sectors_op_read.sum", "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"]
    with open(raw, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        w.writerow(UNITS + ["sector", "sector", "sector", "sector", "sector"])
        w.writerow(["1", "rlgemm_sm90_ws_coopn_192x192x64_s4_c1x2", "(132, 1, 1)", "(384, 1, 1)", "168", "250.0",
                    "400,000", "46,079,111", "25,000,000", "236.9", "3.6", "3.1",
                    "62,717,952", "38,976,996", "6,750,174", "38,083,094", "665,600"])
    r = summary(raw)[0]
    assert abs(float(r["tma_delivered_mb"]) - 62717952 * 32e-6) < 1
    assert abs(float(r["l2_sm_read_mb"]) - 38976996 * 32e-6) < 1
    assert abs(float(r["l2_fabric_mb"]) - 6750174 * 32e-6) < 1
    assert abs(float(r["lrc_read_mb"]) - 38083094 * 32e-6) < 1
    assert abs(float(r["st_global_mb"]) - 665600 * 32e-6) < 0.01
    # an export without them leaves the columns empty
    export(raw, [["1", "k", "(1, 1, 1)", "(1, 1, 1)", "1", "1.0", "1", "1", "1", "1", "0", "0"]])
    r = summary(raw)[0]
    assert all(r[c] == "" for c in ("tma_delivered_mb", "l2_sm_read_mb", "l2_fabric_mb", "lrc_read_mb", "st_global_mb"))
