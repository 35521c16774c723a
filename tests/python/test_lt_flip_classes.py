"""scripts/lt_flip_classes.py: the main kernel read from lt_choice_probe's --kernels listing, which choices count in
each mode, each observation's ratio to candidate 0, and the report's classes."""
import pytest

from test_floor_final_check import HEADER, row

KERNELS = """\
512,1536,8960 candidate 0: [nvjet_a grid 2x64x1 block 384 smem 1 regs=168 cluster 2x1x1 attribute5 clusters 64 of 66 resident]
512,1536,8960 candidate 4: [memset] [nvjet_b grid 8x14x1 block 384 smem 1 cluster 8x1x1 attribute5 clusters 14 of 15 resident] \
[_ZN8cublasLt19splitKreduce_kernel grid 48x11x1 block 32 smem 0 programmatic clusters 528 of 0 resident]
512,1536,8960 candidate 8: [nvjet_c grid 8x14x1 block 384 smem 1 cluster 8x1x1 attribute5 clusters 14 of 15 resident]
512,1536,8960 candidate 9: [nvjet_d grid 2x66x1 block 384 smem 1 cluster 2x1x1 attribute5 clusters 132 of 66 resident]
16,64,64 candidate 1: [nvjet_e grid 4x1x1 block 384 smem 1 clusters 4 of 264 resident]
16,64,64 candidate 2: [does not run: refused]
"""


def floor(kept, in_graphs=True):
    timed = "timed on first use in CUDA graphs" if in_graphs else "timed on first use"
    return (f"cublaslt floor ({timed}; on the caller's operands too: candidate {kept} of 13; final: candidate {kept} at "
            f"0.950/0.950/0.950 of candidate 0's time by operand set; candidate {kept} kept)")


@pytest.fixture(scope="module")
def flips(load_script):
    return load_script("lt_flip_classes")


def test_the_main_kernel_is_neither_the_memset_nor_the_split_k_reduction(flips, tmp_path):
    listing = tmp_path / "kernels.txt"
    listing.write_text(KERNELS)
    got = flips.read_kernels([f"bf16={listing}"])
    assert got[("512", "1536", "8960", "bf16")] == {0: (2, 64, 66), 4: (8, 14, 15), 8: (8, 14, 15), 9: (2, 132, 66)}
    assert got[("16", "64", "64", "bf16")] == {1: (1, 4, 264), 2: None}
    assert [flips.bucket(*k[1:]) for k in (got[("512", "1536", "8960", "bf16")][c] for c in (0, 8, 9))] == \
        ["0.8-1", "0.8-1", ">1 wave"]
    assert flips.bucket(4, 264) == "<0.8" and flips.bucket(4, None) == "?"
    with pytest.raises(ValueError, match="fp16=FILE"):
        flips.read_kernels([str(listing)])
    empty = tmp_path / "empty.txt"
    empty.write_text("nothing\n")
    with pytest.raises(ValueError, match="no candidate listed"):
        flips.read_kernels([f"fp16={empty}"])


def test_only_choices_timed_in_the_mode_read_count_and_any_subject_running_the_candidate_times_it(flips, tmp_path):
    listing = tmp_path / "kernels.txt"
    listing.write_text(KERNELS)
    kernels = flips.read_kernels([f"fp16={listing}"])
    run = tmp_path / "run.csv"
    s = "512,1536,8960"
    run.write_text(
        HEADER
        + row(s, "lt_heuristic", "graph", 10.0, "first of 13 heuristic candidates")
        # lt_auto chose 8 in eager timing: in graphs it does not count as a choice, but its time of 8 does
        + row(s, "lt_auto", "graph", 11.0, "candidate 8 of 13 timed")
        + row(s, "lt_auto_graph", "graph", 11.4, "candidate 8 of 13 timed in graph mode")
        # the floor timed its choice in graphs: candidate 9 counts
        + row(s, "rlgemm", "graph", 9.0, floor(9))
        + row(s, "lt_heuristic", "offline", 10.0, "first of 13 heuristic candidates")
        + row(s, "lt_auto", "offline", 9.5, "candidate 8 of 13 timed")
        + row(s, "lt_auto_graph", "offline", 12.0, "candidate 4 of 13 timed in graph mode")
        # in eager calls the floor's graph-timed choice does not count
        + row(s, "rlgemm", "offline", 9.9, floor(9)))
    graph = {o[2]: (round(o[3], 3), o[4]) for o in flips.observations([str(run)], kernels, "graph")}
    assert graph == {8: (1.12, (8, "0.8-1")), 9: (0.9, (2, ">1 wave"))}
    offline = {o[2]: (round(o[3], 3), o[4]) for o in flips.observations([str(run)], kernels, "offline")}
    assert offline == {8: (0.95, (8, "0.8-1"))}
    eager_floor = run.read_text().replace(floor(9), floor(4, in_graphs=False))
    run.write_text(eager_floor)
    offline = {o[2]: round(o[3], 3) for o in flips.observations([str(run)], kernels, "offline")}
    assert offline == {4: 1.095, 8: 0.95}  # candidate 4 timed by lt_auto_graph (12.0) and the floor (9.9)


def test_the_report_gives_each_class_and_the_mean_had_candidate_0_been_kept_there(flips):
    obs = [("f", ("1", "2", "3", "fp16"), 8, 1.1, (8, "0.8-1")),
           ("f", ("4", "5", "6", "fp16"), 8, 0.9, (8, "0.8-1")),
           ("f", ("7", "8", "9", "fp16"), 2, 0.8, (2, "<0.8")),
           ("f", ("1", "1", "1", "fp16"), 3, 0.95, None)]
    lines = flips.report(obs, "graph", worst=1)
    assert lines[0].startswith("4 graph observations")
    kept_first = (1.0 * 1.0 * 0.8 * 0.95) ** 0.25
    assert f"8 | 0.8-1 | 2 | {(1.1 * 0.9) ** 0.5:.4f} | 1 | 1 | {kept_first:.4f}" in lines
    assert any(line.startswith("2 | <0.8 | 1 | 0.8000 | 0 | 1 |") for line in lines)
    assert any(line.startswith("not listed | - | 1 | 0.9500 | 0 | 1 |") for line in lines)
    assert lines[-1].strip().startswith("f 1,2,3,fp16 candidate 8 1.100")


def test_bad_input_is_said_and_gives_2(flips, tmp_path, capsys):
    assert flips.main(["--kernels", f"fp16={tmp_path / 'missing.txt'}", str(tmp_path / "run.csv")]) == 2
    assert "lt_flip_classes" in capsys.readouterr().err


def test_a_margin_for_the_full_cluster_class_turns_back_only_its_narrow_finals(flips):
    obs = [("f", ("1", "2", "3", "fp16"), 8, 1.10, (8, "0.8-1"), 0.95),   # lost its lead; the final's was 5%
           ("f", ("4", "5", "6", "fp16"), 4, 0.90, (4, "0.8-1"), 0.93),   # held; the final's lead was 7%
           ("f", ("7", "8", "9", "fp16"), 2, 0.80, (2, "0.8-1"), 0.97),   # another class: kept at any margin
           ("f", ("1", "1", "1", "fp16"), 3, 0.95, (8, "0.8-1"), None)]   # lt_auto_graph's choice: not the floor's
    lines = flips.margin_report(obs, [0.06])
    assert lines[0].startswith("3 of them the library floor's final took") and "2 of the full-cluster class" in lines[0]
    assert lines[2] == f"0.00 | 0 | 0 | {(1.1 * 0.9 * 0.8) ** (1 / 3):.4f} | 1 | 0 | {(1.1 * 0.9 * 0.8) ** (1 / 3):.4f} | 1"
    assert lines[3] == f"0.06 | 1 | 0 | {(0.9 * 0.8) ** (1 / 3):.4f} | 0 | 2 | {0.9 ** (1 / 3):.4f} | 0"
    assert flips.full_clusters((4, "0.8-1")) and not flips.full_clusters((2, "0.8-1"))
    assert not flips.full_clusters((8, "<0.8")) and not flips.full_clusters(None)
    assert flips.margin_report([], [0.06]) == ["0 of them the library floor's final took (its mean over candidate 0's "
                                               "known); 0 of the full-cluster class (clusters of 4 or more, fill 0.8-1)"]


def test_margins_out_of_range_are_refused(flips, tmp_path, capsys):
    listing = tmp_path / "kernels.txt"
    listing.write_text(KERNELS)
    run = tmp_path / "run.csv"
    run.write_text(HEADER)
    assert flips.main(["--kernels", f"fp16={listing}", "--margins", "1.5", str(run)]) == 2
    assert "each margin lies in [0, 1)" in capsys.readouterr().err
