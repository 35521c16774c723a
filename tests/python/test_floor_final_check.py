"""scripts/floor_final_check.py: which graph rows count (the floor served them and its final kept a challenger), the
harness ratio it reads, and the report's bins."""
import pytest

HEADER = ("M,N,K,layout,impl,mode,time_us,tflops,speedup_vs_best_vendor,speedup_vs_lt_auto,correct,time_min_us,"
          "time_max_us,samples,batch,detail,dtype\n")


def row(shape, impl, mode, time_us, detail="", speedup=1.0):
    return f"{shape},tn,{impl},{mode},{time_us},1,{speedup},1,1,{time_us},{time_us},9,1,\"{detail}\",fp16\n"


def floor(kept, ratios, tail=""):
    return ("cublaslt floor (timed on first use in CUDA graphs; on the caller's operands too: candidate 8 of 13; "
            f"final: candidate 8 at {ratios} of candidate 0's time by operand set; candidate {kept} kept){tail}")


def two_ways(eager_ratios, graph_ratios):
    """A floor whose eager calls kept candidate 2 and whose captured calls kept candidate 1, a choice of their own."""
    return floor(2, eager_ratios).replace("candidate 8", "candidate 2") + (
        "; captured calls: cublaslt floor (timed on first use in CUDA graphs: candidate 1 of 8; final: candidate 1 at "
        f"{graph_ratios} of candidate 0's time by operand set; candidate 1 kept)")


@pytest.fixture(scope="module")
def check(load_script):
    return load_script("floor_final_check")


def test_floor_final_check_reads_only_floor_rows_that_kept_a_challenger(check, tmp_path):
    path = tmp_path / "run.csv"
    path.write_text(
        HEADER
        # held: the challenger ran 0.9 of candidate 0's time in the harness
        + row("1,2,3", "lt_heuristic", "graph", 10.0) + row("1,2,3", "rlgemm", "graph", 9.0, floor(8, "0.880/0.900/0.910"))
        # reversed: 1.1
        + row("4,5,6", "lt_heuristic", "graph", 10.0)
        + row("4,5,6", "rlgemm", "graph", 11.0, floor(8, "0.960/0.970/0.975"), 0.9)
        # candidate 0 kept: not counted
        + row("7,8,9", "lt_heuristic", "graph", 10.0) + row("7,8,9", "rlgemm", "graph", 10.0, floor(0, "1.010/1.000/1.020"))
        # a kernel served the graph calls: not counted
        + row("2,2,2", "lt_heuristic", "graph", 10.0)
        + row("2,2,2", "rlgemm", "graph", 8.0, floor(8, "0.900/0.900/0.900",
                                                       " (measured on first use: eager calls: cuBLASLt; CUDA graphs: "
                                                       "sm80/16x64x128/w16x16/s6 at 1.20x cuBLASLt)"))
        # offline rows: not counted
        + row("1,2,3", "lt_heuristic", "offline", 10.0) + row("1,2,3", "rlgemm", "offline", 20.0, floor(8, "0.9/0.9/0.9")))
    rows = check.kept_challengers([str(path)])
    got = {r[1][:3]: (r[2], r[3], round(r[4], 3)) for r in rows}
    assert got == {("1", "2", "3"): (8, [0.88, 0.9, 0.91], 0.9), ("4", "5", "6"): (8, [0.96, 0.97, 0.975], 1.1)}
    lines = check.report(rows)
    assert lines[0].startswith("2 graph rows")
    assert "[0.00, 0.95) | 1 | 0.900 | 0 | 0" in lines
    assert "[0.97, 0.98) | 1 | 1.100 | 1 | 1" in lines
    assert "all | 2 | 0.995 | 1 | 1" in lines
    assert "4,5,6,fp16 candidate 8" in lines[-2]


def test_floor_final_check_groups_the_subjects_that_ran_the_same_candidate(check, tmp_path):
    path = tmp_path / "run.csv"
    path.write_text(
        HEADER
        + row("1,2,3", "lt_heuristic", "graph", 10.0)
        + row("1,2,3", "lt_auto", "graph", 11.0, "candidate 0 of 8 timed")
        + row("1,2,3", "lt_auto_graph", "graph", 9.0, "candidate 3 of 8 timed in graph mode")
        + row("1,2,3", "rlgemm", "graph", 9.5, floor(3, "0.900/0.900/0.900"))
        + row("1,2,3", "lt_twin", "graph", 10.5, "lt_auto's algorithm (candidate 0 of 8 timed)")
        + row("1,2,3", "cublas_tn", "graph", 8.0)                               # not a cuBLASLt candidate
        + row("4,5,6", "lt_heuristic", "graph", 10.0)
        + row("4,5,6", "lt_auto", "graph", 10.0, "candidate 1 of 8 timed")      # alone with its candidate
        + row("4,5,6", "lt_heuristic", "offline", 10.0) + row("4,5,6", "lt_auto", "offline", 20.0, "candidate 0 of 8 timed"))
    groups = check.same_kernel_groups([str(path)])
    got = {(g[1][:3], g[2]): g[3] for g in groups}
    assert got == {(("1", "2", "3"), 0): [(10.0, "lt_heuristic"), (10.5, "lt_twin"), (11.0, "lt_auto")],
                   (("1", "2", "3"), 3): [(9.0, "lt_auto_graph"), (9.5, "rlgemm")]}
    lines = check.same_kernel_report(groups)
    assert lines[0].startswith("2 graph problems")
    assert "above 1.03: 2; above 1.05: 2" in lines[1]
    assert "the floor (rlgemm) over lt_auto or lt_auto_graph running the same candidate: 1 problems, geometric mean " \
        "1.0556; above 1.02: 1; below 0.98: 0" in lines[2]
    assert "candidate 0 1.100 lt_heuristic=10.0 lt_twin=10.5 lt_auto=11.0" in lines[4]


def test_floor_final_check_groups_offline_rows_by_the_eager_calls_own_final(check, tmp_path):
    # The eager floor kept candidate 2, the captured calls' choice candidate 1: offline rows group the floor with
    # candidate 2's runs, graph rows with candidate 1's.
    detail = two_ways("0.950/0.950/0.950", "0.960/0.960/0.960")
    path = tmp_path / "run.csv"
    path.write_text(
        HEADER
        + row("1,2,3", "lt_auto", "offline", 10.0, "candidate 2 of 8 timed")
        + row("1,2,3", "rlgemm", "offline", 9.0, detail)
        + row("1,2,3", "lt_auto_graph", "offline", 12.0, "candidate 1 of 8 timed in graph mode")
        + row("1,2,3", "lt_auto", "graph", 10.0, "candidate 2 of 8 timed")
        + row("1,2,3", "rlgemm", "graph", 11.0, detail)
        + row("1,2,3", "lt_auto_graph", "graph", 10.0, "candidate 1 of 8 timed in graph mode"))
    offline = {g[2]: g[3] for g in check.same_kernel_groups([str(path)], "offline")}
    assert offline == {2: [(9.0, "rlgemm"), (10.0, "lt_auto")]}
    graph = {g[2]: g[3] for g in check.same_kernel_groups([str(path)], "graph")}
    assert graph == {1: [(10.0, "lt_auto_graph"), (11.0, "rlgemm")]}
    lines = check.same_kernel_report(check.same_kernel_groups([str(path)], "offline"), mode="offline")
    assert lines[0] == "1 offline problems where several subjects ran the same cuBLASLt candidate"
    assert "running the same candidate: 1 problems, geometric mean 0.9000" in lines[2]


def test_floor_final_check_reads_the_captured_calls_own_final_for_graph_rows(check, tmp_path):
    # The eager floor kept candidate 2, the captured calls' own choice candidate 1: graph rows are candidate 1's.
    detail = two_ways("0.958/0.946/0.970", "0.965/0.931/0.953")
    path = tmp_path / "run.csv"
    path.write_text(HEADER + row("1,2,3", "lt_heuristic", "graph", 10.0) + row("1,2,3", "rlgemm", "graph", 10.5, detail))
    assert check.floor_final(detail, "graph")[3] == "1" and check.floor_final(detail, "offline")[3] == "2"
    rows = check.kept_challengers([str(path)])
    assert [(r[2], r[3]) for r in rows] == [(1, [0.965, 0.931, 0.953])]


def test_floor_final_check_names_the_fastest_vendor_candidate_where_the_floor_lost(check, tmp_path):
    listed = "; every finalist's mean over candidate 0's: 8 0.990; 9 1.012; 3 1.030"  # a CSV's detail: no commas
    path = tmp_path / "run.csv"
    path.write_text(
        HEADER
        # lost to lt_auto_graph's candidate 9, a finalist the final ran 1.2% slower than candidate 0
        + row("1,2,3", "lt_heuristic", "graph", 10.9) + row("1,2,3", "lt_auto_graph", "graph", 10.4,
                                                            "candidate 9 of 14 timed in graph mode")
        + row("1,2,3", "rlgemm", "graph", 10.9, floor(0, "1.021/1.004/1.015", listed).replace(")" + listed, listed + ")"),
              0.954)
        # lost to lt_auto's candidate 12, no finalist
        + row("4,5,6", "lt_heuristic", "graph", 75.0) + row("4,5,6", "lt_auto", "graph", 68.5, "candidate 12 of 14 timed")
        + row("4,5,6", "rlgemm", "graph", 70.8, floor(1, "0.930/0.930/0.935").replace(" kept)", " kept" + listed + ")"),
              0.967)
        # lost to candidate 0 itself (lt_heuristic), always in the final
        + row("5,5,5", "lt_heuristic", "graph", 10.0)
        + row("5,5,5", "rlgemm", "graph", 10.6, floor(8, "0.950/0.950/0.950").replace(" kept)", " kept" + listed + ")"),
              0.943)
        # an older run's floor without the list; and a loss offline only
        + row("7,8,9", "lt_auto", "graph", 9.0, "candidate 3 of 8 timed")
        + row("7,8,9", "rlgemm", "graph", 9.9, floor(8, "0.9/0.9/0.9"), 0.909)
        + row("7,8,9", "lt_auto", "offline", 9.0, "candidate 3 of 8 timed")
        + row("7,8,9", "rlgemm", "offline", 9.5, floor(8, "0.9/0.9/0.9"), 0.947)
        # above the bar, and a kernel's row: not listed
        + row("2,2,2", "lt_auto", "graph", 9.0, "candidate 3 of 8 timed")
        + row("2,2,2", "rlgemm", "graph", 9.1, floor(3, "0.9/0.9/0.9"), 0.99)
        + row("3,3,3", "lt_auto", "graph", 9.0, "candidate 3 of 8 timed")
        + row("3,3,3", "rlgemm", "graph", 10.0, "predicted sm80/16x64x128 (measured on first use: CUDA graphs: sm80)", 0.9))
    graph = check.floor_losses([str(path)], "graph", 0.97)
    assert [(r[1][:3], r[2], r[4], r[5], r[8]) for r in graph] == [
        (("7", "8", "9"), 8, "lt_auto", 3, None), (("5", "5", "5"), 8, "lt_heuristic", 0, 1.0),
        (("1", "2", "3"), 0, "lt_auto_graph", 9, 1.012), (("4", "5", "6"), 1, "lt_auto", 12, None)]
    assert graph[0][9] is None and graph[3][9] == {8: 0.99, 9: 1.012, 3: 1.03}
    lines = check.losses_report(graph, "graph", 0.97)
    assert lines[0] == "4 graph rows where the floor served below 0.97 of the best vendor call"
    assert lines[1].endswith("the final's finalists not named")
    assert lines[2].endswith("the fastest, lt_heuristic (candidate 0), 10.00 us; candidate 0 in the final at 1.000 of "
                             "candidate 0's time")
    assert lines[3].endswith("candidate 9 in the final at 1.012 of candidate 0's time")
    assert lines[4].endswith("candidate 12 not a finalist (finalists 8 9 3)")
    assert [r[1][:3] for r in check.floor_losses([str(path)], "offline", 0.97)] == [("7", "8", "9")]
    # describe()'s own text, with commas, reads the same.
    described = floor(1, "0.930/0.930/0.935").replace(
        " kept)", " kept; every finalist's mean over candidate 0's: 8 0.990, 9 1.012, 3 1.030)")
    assert check.finalists_of(described) == {8: 0.99, 9: 1.012, 3: 1.03}


def test_floor_final_check_refuses_a_missing_file_or_another_csv(check, tmp_path, capsys):
    assert check.main([str(tmp_path / "none.csv")]) == 2
    assert "none.csv" in capsys.readouterr().err
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    assert check.main(["--same-kernel", str(other)]) == 2  # not a results CSV: its missing columns named
    assert "other.csv has no column M, N, K, impl, mode, time_us" in capsys.readouterr().err
    broken = tmp_path / "broken.csv"
    broken.write_text("M,N,K,mode,impl\n1,2,3,graph,rlgemm\n1,2,3,graph,lt_heuristic\n")  # rows without a detail
    assert check.main([str(broken)]) == 2
    assert "results CSVs" in capsys.readouterr().err


def test_the_finalists_times_on_the_callers_set_are_read_where_the_final_says_them(check, tmp_path):
    listed = ("; every finalist's mean over candidate 0's: 8 0.869; 1 0.890; on the caller's set: 8 0.917; 1 0.905")
    detail = floor(8, "0.917/0.851/0.834").replace(" kept)", " kept" + listed + ")")
    assert check.finalists_of(detail) == {8: 0.869, 1: 0.89}
    assert check.callers_of(detail) == {8: 0.917, 1: 0.905}
    assert check.callers_of(floor(8, "0.9/0.9/0.9")) is None  # an older run's final: not said
    # a clause after the floor's own text is not its final's
    assert check.callers_of(floor(8, "0.9/0.9/0.9") + " (x; on the caller's set: 8 0.9)") is None
    path = tmp_path / "run.csv"
    path.write_text(HEADER + row("1,4544,4544", "lt_heuristic", "graph", 13.7)
                    + row("1,4544,4544", "lt_auto_graph", "graph", 11.8, "candidate 1 of 16 timed in graph mode")
                    + row("1,4544,4544", "rlgemm", "graph", 12.55, detail, 0.935))
    lines = check.losses_report(check.floor_losses([str(path)], "graph", 0.97), "graph", 0.97)
    assert lines[1].endswith("candidate 1 in the final at 0.890 of candidate 0's time (0.905 on the caller's set)")


def test_a_ranking_by_the_callers_set_alone_is_weighed_where_a_vendor_subject_ran_its_choice(check, tmp_path):
    said = "; every finalist's mean over candidate 0's: 8 0.869; 1 0.890; on the caller's set: 8 0.917; 1 0.905"
    agree = "; every finalist's mean over candidate 0's: 3 0.950; on the caller's set: 3 0.940"
    path = tmp_path / "run.csv"
    path.write_text(
        HEADER
        # 1x4544x4544's kind: the mean kept 8, the caller's set ranks 1 first, which lt_auto_graph ran faster
        + row("1,4544,4544", "lt_heuristic", "graph", 13.7)
        + row("1,4544,4544", "lt_auto_graph", "graph", 11.8, "candidate 1 of 16 timed in graph mode")
        + row("1,4544,4544", "rlgemm", "graph", 12.55, floor(8, "0.917/0.851/0.834").replace(" kept)", " kept" + said + ")"))
        # both rankings agree
        + row("2,2,2", "lt_heuristic", "graph", 10.0)
        + row("2,2,2", "rlgemm", "graph", 9.4, floor(3, "0.940/0.950/0.960").replace(" kept)", " kept" + agree + ")"))
        # candidate 0 kept, the caller's set ranks 5 first, which no vendor subject ran
        + row("3,3,3", "lt_heuristic", "graph", 10.0)
        + row("3,3,3", "rlgemm", "graph", 10.0, floor(0, "0.980/1.050/1.040").replace(
            " kept)", " kept; every finalist's mean over candidate 0's: 5 1.020; on the caller's set: 5 0.980)"))
        # an older final without the caller's set: not read
        + row("4,4,4", "lt_heuristic", "graph", 10.0) + row("4,4,4", "rlgemm", "graph", 9.0, floor(2, "0.9/0.9/0.9")))
    got = {r[1][:3]: r for r in check.callers_rankings([str(path)], "graph")}
    assert set(got) == {("1", "4544", "4544"), ("2", "2", "2"), ("3", "3", "3")}
    assert got[("1", "4544", "4544")][2:] == (8, 1, 0.905, 0.917, 12.55, 11.8)
    assert got[("2", "2", "2")][2:4] == (3, 3)
    assert got[("3", "3", "3")][2:] == (0, 5, 0.98, 1.0, 10.0, None)
    lines = check.callers_report(list(got.values()), "graph")
    assert lines[0] == ("3 graph rows where the floor's final said its finalists' times on the caller's set; ranked "
                        "by that set alone, another finalist first at 2")
    assert lines[1] == ("where a vendor subject ran that finalist (1): its time over the floor's, geometric mean "
                        f"{11.8 / 12.55:.4f}; faster by more than 1% at 1, slower by more than 1% at 0")
    assert lines[2].endswith("kept candidate 8 (0.917 on the caller's set), 12.55 us; candidate 1 (0.905 there) ran "
                             "11.80 us")
    assert check.main(["--callers", str(path)]) == 0


def test_the_floors_rows_are_set_beside_another_subjects_on_the_same_rows(check, tmp_path):
    path = tmp_path / "run.csv"
    path.write_text(
        HEADER
        + row("1,2,3", "lt_auto_graph", "graph", 10.0, "candidate 1 of 9 timed in graph mode", 1.0)
        + row("1,2,3", "rlgemm", "graph", 10.5, floor(2, "0.9/0.9/0.9"), 0.95)
        + row("4,5,6", "lt_auto_graph", "graph", 10.0, "candidate 0 of 9 timed in graph mode", 0.96)
        + row("4,5,6", "rlgemm", "graph", 9.6, floor(0, "1/1/1"), 1.0)
        # a kernel served: not the floor's row
        + row("7,8,9", "lt_auto_graph", "graph", 10.0, "candidate 0 of 9 timed in graph mode", 0.9)
        + row("7,8,9", "rlgemm", "graph", 9.0, "predicted sm80/16x64x128 (measured on first use: CUDA graphs: sm80)",
              1.1))
    pairs = check.floor_beside([str(path)], "graph", "lt_auto_graph")
    assert sorted(pairs) == [(0.95, 1.0), (1.0, 0.96)]
    assert check.beside_report(pairs, "graph", "lt_auto_graph") == [
        f"graph: 2 rows the floor served; the floor {(0.95 * 1.0) ** 0.5:.4f} of the best vendor call (1 below 0.97), "
        f"lt_auto_graph beside it {(1.0 * 0.96) ** 0.5:.4f} (1 below 0.97)"]
