"""scripts/route_claims.py: which library rows a kernel served in each way of calling, the claim and the measured
ratio it reads, the floor candidate named after "against", and the fastest vendor subject of the same rounds."""
import pytest

HEADER = ("M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_best_vendor,speedup_vs_lt_auto,correct,time_min_us,"
          "time_max_us,samples,batch,detail,dtype,paired_vs_best_vendor\n")


def row(shape, impl, mode, time_us, detail="", speedup=1.0, paired="", correct=1):
    return (f"{shape},tn,{impl},{mode},{time_us},1,{speedup},1,{correct},{time_us},{time_us},9,1,\"{detail}\",fp16,"
            f"{paired}\n")


KERNEL = "sm80/16x64x64/w16x16/s4/swz/raster_n.g4/splitk1/epi_reg"


def checked(eager, graph, against=""):
    return (f"predicted {KERNEL} (the nearest tuned row's design) (measured on first use: eager calls: {eager}; "
            f"CUDA graphs: {graph}; on the scratch/the caller's operands: eager 1.02/1.03, graphs 1.02/1.03{against})")


FLOOR = ("; against cublaslt floor (timed on first use in CUDA graphs; on the caller's operands too: candidate 0 of 12; "
         "final: candidate 8 at 0.99/0.99/0.99 of candidate 0's time by operand set; candidate 0 kept) "
         "(its kernel launched directly)")
CAPTURED_FLOOR = ("; against cublaslt floor (timed on first use: candidate 2 of 9); captured calls: cublaslt floor "
                  "(timed on first use in CUDA graphs: candidate 5 of 9)")


@pytest.fixture(scope="module")
def claims(load_script):
    return load_script("route_claims")


def test_route_claims_reads_the_served_kernels_claims_and_the_floor_they_beat(claims, tmp_path):
    path = tmp_path / "run.csv"
    won = f"{KERNEL} at 1.06x cuBLASLt (95% CI 1.05..1.07)"
    lost = f"cuBLASLt; the kernel {KERNEL} measured 0.96x cuBLASLt (95% CI 0.95..0.97)"
    path.write_text(
        HEADER
        # a kernel serves graphs, claimed 1.06, the bench measured 0.949 (paired), against candidate 0
        + row("16,36864,4608", "lt_heuristic", "graph", 89.1, "first of 12 heuristic candidates", 0.92)
        + row("16,36864,4608", "lt_auto_graph", "graph", 81.9, "candidate 8 of 12 timed in graph mode")
        + row("16,36864,4608", "rlgemm", "graph", 86.0, checked(lost, won, FLOOR), 0.95, 0.949)
        + row("16,36864,4608", "rlgemm", "offline", 88.0, checked(lost, won, FLOOR), 0.95, 0.951)
        # the floor served both ways: not counted
        + row("1,2,3", "lt_auto", "graph", 5.0, "candidate 1 of 4 timed")
        + row("1,2,3", "rlgemm", "graph", 5.0, "cublaslt floor (chosen on this machine before in CUDA graphs)")
        # served eager calls, with a captured floor of its own; no paired column: the unpaired ratio
        + row("2,2,2", "lt_auto", "offline", 10.0, "candidate 2 of 9 timed")
        + row("2,2,2", "rlgemm_nearest", "offline", 8.0,
              checked(f"{KERNEL} at 1.30x cuBLASLt (95% CI 1.2..1.4)", lost, CAPTURED_FLOOR), 1.25)
        + row("2,2,2", "rlgemm_nearest", "graph", 10.5,
              checked(f"{KERNEL} at 1.30x cuBLASLt (95% CI 1.2..1.4)", lost, CAPTURED_FLOOR), 0.97)
        # a wrong row: not read
        + row("3,3,3", "lt_auto", "graph", 1.0, "candidate 0 of 2 timed")
        + row("3,3,3", "rlgemm", "graph", 1.0, checked(lost, won), correct=0))
    graph = claims.claims([str(path)], "graph")
    assert [(r[1][:3], r[2], r[4], r[5], r[6], r[7][:2]) for r in graph] == [
        (("16", "36864", "4608"), "rlgemm", 1.06, 0.949, 0, ("lt_auto_graph", 8))]
    assert graph[0][7][2] == pytest.approx(81.9 / 86.0)
    offline = claims.claims([str(path)], "offline")
    assert [(r[1][:3], r[2], r[4], r[5], r[6], r[7][:2]) for r in offline] == [
        (("2", "2", "2"), "rlgemm_nearest", 1.30, 1.25, 2, ("lt_auto", 2))]
    assert claims.floor_candidate("x" + CAPTURED_FLOOR, "graph") == 5
    assert claims.floor_candidate("x" + CAPTURED_FLOOR, "offline") == 2
    assert claims.floor_candidate("no floor named", "graph") is None
    lines = claims.report(graph, below=0.99)
    assert lines[0] == "1 library rows served by a kernel"
    assert lines[2].endswith("| 1 | 1.060 | 0.949 | +0.111 | 1")
    assert "floor candidate 0; fastest lt_auto_graph candidate 8 0.952" in lines[-1]


def test_route_claims_lists_the_checks_that_met_a_slow_floor(claims, tmp_path):
    path = tmp_path / "run.csv"
    slow = ("; CUDA graphs: the floor ran slower against cuBLASLt's first candidate than in its final (0.95x): "
            "1.03x on set 1, 1.04x on set 2; the kernels held to the floor as its final found it")
    first_serves = ("; CUDA graphs: the floor ran slower against cuBLASLt's first candidate than in its final (0.97x): "
                    "1.05x on set 1, 1.05x on set 2; the first serves in its place, the kernels measured against it")
    won = f"{KERNEL} at 1.06x cuBLASLt (95% CI 1.05..1.07)"
    lost = f"cuBLASLt; the kernel {KERNEL} measured 0.96x cuBLASLt (95% CI 0.95..0.97)"
    path.write_text(
        HEADER
        + row("16,28672,3584", "lt_auto", "graph", 50.3, "candidate 1 of 11 timed")
        # held to the floor as its final found it, the floor served
        + row("16,28672,3584", "rlgemm", "graph", 50.4, "cublaslt floor (timed on first use)" + checked(lost, lost, slow + FLOOR),
              0.998, 0.998)
        # a kernel that won even so
        + row("16,28672,3584", "rlgemm_no_nearest", "graph", 48.0, checked(won, won, slow + FLOOR), 1.05, 1.048)
        # slower than the first itself on every set: the first served in its place
        + row("16,28672,3584", "rlgemm_nearest", "graph", 50.3,
              "cublaslt floor (the heuristic's first candidate, faster than the floor's choice in the route check)"
              + checked(lost, lost, first_serves + FLOOR), 1.0, 1.0)
        # the eager check did not meet it: not listed in offline
        + row("16,28672,3584", "lt_auto", "offline", 52.0, "candidate 1 of 11 timed")
        + row("16,28672,3584", "rlgemm", "offline", 52.0, checked(lost, lost, slow + FLOOR), 1.0, 1.0))
    graph = claims.slow_floor_checks([str(path)], "graph")
    assert sorted((r[2], r[3], r[4]) for r in graph) == [
        ("rlgemm", "floor", 0.998), ("rlgemm_nearest", "first", 1.0), ("rlgemm_no_nearest", "kernel", 1.048)]
    assert claims.slow_floor_checks([str(path)], "offline") == []
    lines = claims.slow_floor_report(graph)
    assert lines[0].startswith(
        "3 checks met the floor slower than its final: the floor served 1, the first candidate in its place 1, a kernel 1;")
    assert "16,28672,3584,fp16 rlgemm floor served, measured 0.998" in lines[1]
    assert claims.slow_floor_report([]) == ["no check met the floor slower than its final"]


def test_route_claims_says_what_it_needs(claims, tmp_path, capsys):
    path = tmp_path / "other.csv"
    path.write_text("a,b\n1,2\n")
    assert claims.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "other.csv has no column M, N, K" in err and "give results CSVs of rlgemm bench" in err
    assert claims.main([str(tmp_path / "none.csv")]) == 2
    assert "none.csv" in capsys.readouterr().err
