"""scripts/tuned_vs_zero_shot.py: whether a tune made a shape slower, from two runs' paired ratios."""
import csv

import pytest

HEADER = "M,N,K,layout,impl,mode,time_us,correct,detail,dtype,paired_vs_best_vendor,paired_low,paired_high\n"


@pytest.fixture(scope="module")
def tvz(load_script):
    return load_script("tuned_vs_zero_shot")


def write(path, rows):
    path.write_text(HEADER + "".join(
        f'{m},{n},{k},tn,{impl},{mode},1.0,{ok},"{detail}",fp16,{p},{lo},{hi}\n'
        for m, n, k, impl, mode, ok, detail, p, lo, hi in rows))
    return str(path)


PREDICTED = ("predicted sm80/16x64x128/w16x16/s4/swz/raster_m.g8/splitk4.parallel/epi_smem (measured on first use: "
             "eager calls: sm80/16x64x128/w16x16/s4/swz/raster_m.g8/splitk4.parallel/epi_smem at 1.10x cuBLASLt; "
             "CUDA graphs: sm80/16x64x128/w16x16/s4/swz/raster_m.g8/splitk4.parallel/epi_smem at 1.20x cuBLASLt)")
TUNED_EAGER_FLOOR = ("cublaslt floor (timed on first use in CUDA graphs) (measured on first use: eager calls: cuBLASLt; "
                     "the kernel sm80/16x64x64 measured 1.02x cuBLASLt; CUDA graphs: sm80/16x64x64/w16x32 at 1.05x)")


def test_a_shape_is_slower_only_where_the_whole_intervals_part(tvz, tmp_path):
    zero = write(tmp_path / "z.csv", [
        (16, 2048, 4608, "rlgemm", "graph", 1, PREDICTED, 1.23, 1.19, 1.27),
        (16, 2048, 4608, "rlgemm", "offline", 1, PREDICTED, 1.45, 1.40, 1.49),
        (512, 1536, 8960, "rlgemm", "graph", 1, "cublaslt floor (timed on first use)", 0.96, 0.95, 0.97),
        (1, 512, 3584, "rlgemm", "graph", 1, "cublaslt floor", 1.00, 0.99, 1.01),
        (1, 512, 3584, "lt_auto", "graph", 1, "candidate 0 of 9 timed", 0.99, 0.98, 1.00),  # another impl
        (64, 64, 64, "rlgemm", "graph", 1, "cublaslt floor", 1.00, 0.99, 1.01),  # not in the tuned run
    ])
    tuned = write(tmp_path / "t.csv", [
        (16, 2048, 4608, "rlgemm", "graph", 1, TUNED_EAGER_FLOOR, 1.02, 1.02, 1.02),
        (16, 2048, 4608, "rlgemm", "offline", 1, TUNED_EAGER_FLOOR, 1.46, 1.40, 1.52),  # overlaps: within
        (512, 1536, 8960, "rlgemm", "graph", 1, "cublaslt floor (timed on first use)", 0.99, 0.98, 1.00),
        (1, 512, 3584, "rlgemm", "graph", 0, "wrong values", 0.50, 0.40, 0.60),  # not correct: left out
    ])
    pairs = tvz.compare(tvz.rows_of([zero], "rlgemm"), tvz.rows_of([tuned], "rlgemm"))
    got = {(p["mode"], p["M"], p["N"]): p for p in pairs}
    assert set(got) == {("graph", "16", "2048"), ("offline", "16", "2048"), ("graph", "512", "1536")}
    slower = got[("graph", "16", "2048")]
    assert slower["verdict"] == "slower"
    assert slower["tuned_route"] == "kernel (cublaslt floor)"  # in graphs the tuned kernel served
    assert slower["zero_shot_route"] == "kernel (predicted)"
    assert slower["tuned_over_zero_shot"] == pytest.approx(1.02 / 1.23)
    assert got[("offline", "16", "2048")]["verdict"] == "within"
    assert got[("offline", "16", "2048")]["tuned_route"] == "cuBLASLt (cublaslt floor)"
    assert got[("graph", "512", "1536")]["verdict"] == "faster"
    lines = tvz.report(pairs)
    assert lines[0].startswith("graph: 2 shapes in both runs;")
    assert "slower beyond both intervals 1, faster 1" in lines[0]
    assert lines[1].startswith("  16,2048,4608 fp16: 1.020 [1.020, 1.020] kernel (cublaslt floor) against 1.230")
    assert lines[2] == ("offline: 1 shapes in both runs; tuned over zero-shot 1.0069; slower beyond both "
                        "intervals 0, faster 0")
    out = tmp_path / "out.csv"
    assert tvz.main(["--zero-shot", zero, "--tuned", tuned, "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 3 and rows[0]["verdict"] == "slower"


def test_bad_input_is_refused_with_its_reason(tvz, tmp_path, capsys):
    ok = write(tmp_path / "ok.csv", [(1, 2, 3, "rlgemm", "graph", 1, "cublaslt floor", 1.0, 0.9, 1.1)])
    assert tvz.main(["--zero-shot", str(tmp_path / "none.csv"), "--tuned", ok]) == 2
    assert "none.csv" in capsys.readouterr().err
    old = tmp_path / "old.csv"
    old.write_text("M,N,K,layout,impl,mode,time_us,correct\n1,2,3,tn,rlgemm,graph,1.0,1\n")  # no paired columns
    assert tvz.main(["--zero-shot", str(old), "--tuned", ok]) == 2
    assert "paired_vs_best_vendor" in capsys.readouterr().err
    other = write(tmp_path / "other.csv", [(4, 5, 6, "rlgemm", "graph", 1, "cublaslt floor", 1.0, 0.9, 1.1)])
    assert tvz.main(["--zero-shot", other, "--tuned", ok]) == 2
    assert "no shape and mode" in capsys.readouterr().err


def test_the_route_is_the_first_use_checks_verdict_not_a_note_after_it(tvz):
    # The route check's note on a floor slower than its final follows the verdicts in the same words.
    detail = ("cublaslt floor (timed on first use in CUDA graphs: candidate 8 of 13) (measured on first use: eager "
              "calls: sm80/16x64x128/w16x16/s6 at 1.04x cuBLASLt (95% CI 1.04..1.04); CUDA graphs: cuBLASLt; the "
              "kernel sm80/16x64x128/w16x16/s6 measured 0.97x cuBLASLt (95% CI 0.97..0.97); on the scratch/the "
              "caller's operands: eager 1.04/1.05; graphs 0.97/0.99; eager calls: the floor ran slower against "
              "cuBLASLt's first candidate than in its final (0.95x): 0.98x on set 2; the kernels held to the floor as "
              "its final found it; CUDA graphs: the floor ran slower against cuBLASLt's first candidate than in its "
              "final (0.95x): 0.98x on set 2; the kernels held to the floor as its final found it)")
    assert tvz.route_of(detail, "graph") == "cuBLASLt (cublaslt floor)"
    assert tvz.route_of(detail, "offline") == "kernel (cublaslt floor)"


def test_one_run_holding_both_handles_is_paired_round_by_round(tvz, tmp_path, capsys):
    header = HEADER.rstrip("\n") + ",rounds_us\n"
    rows = [  # (M, impl, mode, detail, paired ratio to the best vendor call, rounds)
        (16, "rlgemm", "graph", TUNED_EAGER_FLOOR, 1.02, "10.0;10.4;10.2;10.1"),
        (16, "rlgemm_zero_shot", "graph", PREDICTED, 1.10, "9.0;9.5;9.2;9.1"),      # the tune lost ~10%
        (32, "rlgemm", "graph", "cublaslt floor", 1.00, "20.0;20.5;20.1;20.3"),
        (32, "rlgemm_zero_shot", "graph", "cublaslt floor", 1.00, "20.1;20.4;20.2;20.2"),  # the same: within
        (32, "rlgemm", "offline", PREDICTED, 1.20, "8.0;8.1;8.0;8.2"),
        (32, "rlgemm_zero_shot", "offline", "cublaslt floor", 1.00, "9.6;9.7;9.6;9.8"),  # the tune won ~20%
    ]
    run = tmp_path / "run.csv"
    run.write_text(header + "".join(f'{m},2048,4608,tn,{impl},{mode},1.0,1,"{d}",fp16,{p},{p - 0.01},{p + 0.01},{r}\n'
                                    for m, impl, mode, d, p, r in rows))
    pairs = {(p["mode"], p["M"]): p for p in tvz.compare_same_run([str(run)], "rlgemm", "rlgemm_zero_shot")}
    slower = pairs[("graph", "16")]
    assert slower["verdict"] == "slower" and slower["paired_high"] < 1
    assert slower["tuned_over_zero_shot"] == pytest.approx((0.9 * 9.5 / 10.4 * 9.2 / 10.2 * 9.1 / 10.1) ** 0.25)
    assert pairs[("graph", "32")]["verdict"] == "within"
    assert pairs[("offline", "32")]["verdict"] == "faster" and pairs[("offline", "32")]["paired_low"] > 1
    lines = tvz.report(list(pairs.values()))
    assert lines[0].startswith("graph: 2 shapes, both handles in the same rounds;")
    assert "slower beyond the paired interval 1, faster 0" in lines[0]
    assert lines[1].startswith("  16,2048,4608 fp16: 0.9") and "against kernel (predicted)" in lines[1]
    out = tmp_path / "out.csv"
    assert tvz.main(["--same-run", str(run), "--out", str(out)]) == 0
    assert {"paired_low", "paired_high"} <= set(next(csv.DictReader(out.open())))
    # Either one run or two; rounds of unequal length are refused.
    with pytest.raises(SystemExit):
        tvz.main(["--same-run", str(run), "--tuned", str(run)])
    run.write_text(run.read_text().replace("9.0;9.5;9.2;9.1", "9.0;9.5;9.2"))
    assert tvz.main(["--same-run", str(run)]) == 2
    assert "paired rounds" in capsys.readouterr().err
