"""scripts/bench_torch_op.py without a GPU: its flags and their rules, its shapes, and the summary (geometric mean
and worst shape per mode and bias)."""
import pytest


@pytest.fixture(scope="module")
def op_bench(load_script):
    pytest.importorskip("torch")  # the script imports it at the top
    return load_script("bench_torch_op")


def exit_message(capsys, call):
    with pytest.raises(SystemExit) as info:
        call()
    return info.value.code, capsys.readouterr().err


def test_bench_torch_op_flags_and_summary(op_bench, capsys, tmp_path):
    args = op_bench.parse_args(["--out", str(tmp_path / "op.csv")])
    assert args.bias == [0, 1] and args.dtype == "fp16"
    for flags, rule in ((["--bias", "2"], "give 0 (no bias), 1 (with bias) or 0,1"), (["--bias", "y"], "give 0, 1"),
                        (["--rounds", "1"], "at least 2"), (["--dtype", "fp32"], "invalid choice")):
        code, err = exit_message(capsys, lambda: op_bench.parse_args(["--out", str(tmp_path / "op.csv")] + flags))
        assert code == 2 and rule in err, err
    shapes = op_bench.shapes(quick=False)
    assert len(shapes) == len(set(shapes)) and (1, 128256, 4096) in shapes and (4096, 152064, 3584) in shapes
    row = dict(M=1, N=8, K=8, route="cublaslt", speedup_ci_low=0.0, speedup_ci_high=0.0, graph_speedup_ci_low=0.0,
               graph_speedup_ci_high=0.0)
    rows = [dict(row, bias=1, speedup=2.0, graph_speedup=1.0), dict(row, bias=1, M=2, speedup=0.5, graph_speedup=1.0)]
    lines = op_bench.summary(rows)
    assert lines[0].startswith("eager with bias: geometric mean torch/rlgemm 1.000 over 2 shapes; worst 2x8x8 0.500")
    assert lines[1].startswith("graph with bias: geometric mean torch/rlgemm 1.000")
