#!/usr/bin/env python3
"""One CSV line per kernel of an `ncu --page raw --csv` export: what comparing two GEMM kernels needs.

Usage: ncu_summary.py --subject S --clock C RAW.csv   (prints one line per kernel)
       ncu_summary.py --header                          (prints the header line)
       ncu_summary.py --harness-pattern                 (prints the pattern of the kernels left out)
Kernels of the benchmark harness (fills, checks, the fp64 reference) are skipped.
"""
import argparse
import csv
import re
import sys

# The harness's own kernels and the fp64 reference's (their demangled names; the reference's templates name
# double). scripts/ncu-profile reads this pattern (--harness-pattern) for ncu's kernel filter.
HARNESS_PATTERN = (r"fill_kernel|widen_kernel|compare_kernel|find_kernel|nan_kernel|nonfinite_kernel|"
                   r"absolute_kernel|spin_kernel|add_bias_kernel|dgemm|d884gemm|tensorop_d|f64|double")
HARNESS = re.compile(HARNESS_PATTERN, re.I)

FIELDS = ["subject", "clock", "kernel", "grid", "block", "cluster", "registers", "smem_dynamic_bytes",
          "duration_us", "sm_clock_mhz", "tensor_pipe_pct", "sm_throughput_pct", "memory_throughput_pct",
          "dram_read_mb", "dram_write_mb", "l2_mb", "achieved_occupancy_pct", "sm_cycles", "instructions_m",
          "top_stalls", "tma_delivered_mb", "l2_sm_read_mb", "l2_fabric_mb", "lrc_read_mb", "st_global_mb"]


def number(text):
    try:
        return float(str(text).replace(",", ""))
    except ValueError:
        return None


def scaled(value, unit, to):
    """value in `unit` converted to `to` (time: ns/us/ms/s -> us; bytes -> MB; frequency -> MHz)."""
    if value is None:
        return None
    factors = {"nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,
               "byte": 1e-6, "Kbyte": 1e-3, "Mbyte": 1.0, "Gbyte": 1e3,
               "hz": 1e-6, "Khz": 1e-3, "Mhz": 1.0, "Ghz": 1e3, "cycle/nsecond": 1e3, "cycle/usecond": 1.0}
    return value * factors.get(unit, 1.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--subject", default="")
    ap.add_argument("--clock", default="")
    ap.add_argument("--header", action="store_true", help="print the header line only")
    ap.add_argument("--harness-pattern", action="store_true", help="print the pattern of the kernels left out")
    ap.add_argument("raw", nargs="?")
    a = ap.parse_args()
    if a.header:
        csv.writer(sys.stdout).writerow(FIELDS)
        return
    if a.harness_pattern:
        print(HARNESS_PATTERN)
        return
    with open(a.raw, newline="") as f:
        rows = list(csv.reader(f))
    # ncu may print notes before the table: the header is the first row naming "Kernel Name".
    start = next((i for i, r in enumerate(rows) if "Kernel Name" in r), None)
    if start is None:
        sys.exit(f"ncu_summary: no kernel table in {a.raw}")
    header, units = rows[start], rows[start + 1]
    unit = dict(zip(header, units))
    out = csv.writer(sys.stdout)
    for values in rows[start + 2:]:
        row = dict(zip(header, values))
        name = row.get("Kernel Name", "")
        if not name or HARNESS.search(name):
            continue

        def metric(names, to=None):
            for n in names:
                if n in row and number(row[n]) is not None:
                    return scaled(number(row[n]), unit.get(n, ""), to) if to else number(row[n])
            return None

        tensor = None
        for n in row:
            if re.match(r"sm__pipe_tensor_op_(gmma|hmma)_cycles_active\.avg\.pct_of_peak_sustained_active$", n):
                v = number(row[n])
                tensor = v if tensor is None or (v is not None and v > tensor) else tensor
        stalls = []
        for n, v in row.items():
            m = re.match(r"smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$", n)
            if m and number(v) is not None:
                stalls.append((number(v), m.group(1)))
        stalls.sort(reverse=True)
        cluster = "x".join(str(int(metric([f"launch__cluster_dim_{d}"]) or 1)) for d in "xyz")
        def sectors_mb(name):  # a count of 32-byte sectors, in MB
            v = metric([name])
            return v * 32e-6 if v is not None else None

        l2 = metric(["lts__t_bytes.sum"], "Mbyte")
        if l2 is None:  # exports without the byte count give the L2's 32-byte sectors
            l2 = sectors_mb("lts__t_sectors.sum")
        instructions = metric(["smsp__inst_executed.sum"])
        fields = [
            a.subject, a.clock, name[:160], row.get("Grid Size", ""), row.get("Block Size", ""), cluster,
            metric(["launch__registers_per_thread"]), metric(["launch__shared_mem_per_block_dynamic"]),
            metric(["gpu__time_duration.sum"], "usecond"), metric(["sm__cycles_elapsed.avg.per_second"], "Mhz"),
            tensor, metric(["sm__throughput.avg.pct_of_peak_sustained_elapsed"]),
            metric(["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"]),
            metric(["dram__bytes_read.sum"], "Mbyte"), metric(["dram__bytes_write.sum"], "Mbyte"), l2,
            metric(["sm__warps_active.avg.pct_of_peak_sustained_active"]),
            metric(["sm__cycles_elapsed.max", "gpc__cycles_elapsed.max"]),
            instructions / 1e6 if instructions is not None else None,
            " ".join(f"{r}:{v:.2f}" for v, r in stalls[:5]),
            # What the SMs received from TMA loads; what the L2 read for the SMs; the traffic between the L2's two
            # partitions; and what the L2 request coalescer took from the L2 to deliver the SMs' reads (one read
            # serves every CTA of a multicast, and requests of several SMs for the same sectors close in time).
            sectors_mb("l1tex__m_xbar2l1tex_read_sectors_mem_global_op_tma_ld.sum"),
            sectors_mb("lts__t_sectors_srcunit_tex_op_read.sum"),
            sectors_mb("lts__t_sectors_srcunit_ltcfabric.sum"),
            sectors_mb("lrc__lts2lrc_sectors_op_read.sum"),
            # What the threads stored to global memory themselves (an epilogue from registers), not by TMA.
            sectors_mb("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"),
        ]
        out.writerow(["" if x is None else (f"{x:.4g}" if isinstance(x, float) else x) for x in fields])


if __name__ == "__main__":
    main()
