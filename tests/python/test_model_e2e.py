"""scripts/model_e2e.py without a GPU: its flags and their rules, the resumable CSV, the model's KV-cache decode
against a full forward (fp32, CPU), and the measuring loop end to end on the CPU with a stand-in for rlgemm
(rows, route counts, the logit check, --resume). The GPU timings themselves are run by hand on a GPU machine."""
import csv
import json
import math
import re
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def e2e(load_script):
    pytest.importorskip("torch")  # the script imports it at the top
    return load_script("model_e2e")


def exit_message(capsys, call):
    with pytest.raises(SystemExit) as info:
        call()
    return info.value.code, capsys.readouterr().err


@pytest.mark.parametrize("flags,rule", [
    (["--mode", "eager,graphs"], r"--mode: 'graphs' is not one of eager, graph"),
    (["--phase", "prefil"], r"--phase: 'prefil' is not one of prefill, decode"),
    (["--batch", "1,0"], r"--batch: 0 must be a positive integer"),
    (["--batch", "1,x"], r"--batch: 'x' is not an integer"),
    (["--batch", ","], r"--batch is empty"),
    (["--dtype", "fp8"], r"invalid choice: 'fp8'"),
    (["--min-rounds", "1"], r"--min-rounds is 1: it must be at least 2"),
    (["--max-rounds", "3"], r"--max-rounds \(3\) must be at least --min-rounds \(8\)"),
    (["--target", "0"], r"--target is 0.0: it must be positive"),
    (["--layers", "40"], r"--layers 40: .*llama-3-8b.json has 32 decoder layers"),
    (["--config", "/nonexistent/config.json"], r"--config /nonexistent/config.json: "),
    (["--out", "/nonexistent/dir/e2e.csv"], r"--out /nonexistent/dir/e2e.csv: its folder does not exist"),
])
def test_model_e2e_bad_flags_name_the_rule(e2e, capsys, tmp_path, flags, rule):
    argv = ["--out", str(tmp_path / "e2e.csv")] + flags
    code, err = exit_message(capsys, lambda: e2e.parse_args(argv))
    assert code == 2 and re.search(rule, err), err


def test_model_e2e_defaults_and_config_fields(e2e, capsys, tmp_path):
    args = e2e.parse_args(["--out", str(tmp_path / "e2e.csv"), "--batch", "8,1,8"])
    assert args.batch == [8, 1] and args.phase == ["prefill", "decode"] and args.mode == ["eager", "graph"]
    assert [Path(p).name for p, _ in args.configs] == ["llama-3-8b.json", "qwen2.5-7b.json"]
    assert args.dtype == "fp16" and args.rel_tol == 2e-2
    assert e2e.parse_args(["--out", str(tmp_path / "e2e.csv"), "--dtype", "bf16"]).rel_tol == pytest.approx(0.16)
    qwen = dict(args.configs)[e2e.DEFAULT_CONFIGS[1]]
    assert qwen["head_dim"] == 128 and qwen["num_key_value_heads"] == 4
    broken = tmp_path / "broken.json"
    broken.write_text('{"hidden_size": 64}')
    code, err = exit_message(capsys, lambda: e2e.parse_args(["--out", str(tmp_path / "e.csv"), "--config",
                                                                 str(broken)]))
    assert code == 2 and "the config lacks 'intermediate_size'" in err


def write_rows(path, e2e, rows, tail=""):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(e2e.COLUMNS)
        for key in rows:
            w.writerow(list(key) + ["1"] * (len(e2e.COLUMNS) - len(key)))
    if tail:
        with open(path, "a") as f:
            f.write(tail)


def test_model_e2e_resume_keeps_rows_and_drops_a_torn_line(e2e, capsys, tmp_path):
    out = tmp_path / "e2e.csv"
    assert e2e.held_rows(str(out), resume=False) == set()
    key = ("llama-3-8b/L2of32", "fp16", "1", "512", "32", "prefill", "eager")
    write_rows(out, e2e, [key], tail="llama-3-8b/L2of32,fp16,1,512,32,decode,eag")
    code, err = exit_message(capsys, lambda: e2e.held_rows(str(out), resume=False))
    assert code == 2 and "exists: pass --resume" in err
    assert e2e.held_rows(str(out), resume=True) == {key}
    assert out.read_text().endswith("\n") and "decode,eag" not in out.read_text()
    args = e2e.parse_args(["--out", str(out)])
    assert e2e.row_key("llama-3-8b/L2of32", "fp16", 1, args, "prefill", "eager") == key
    out.write_text("model,batch,seq_len,phase,graphs,tokens_per_s_torch,tokens_per_s_rlgemm,max_logit_diff\n"
                   "llama-3-8b/L2of32,1,512,prefill,0,1,1,0\n")
    code, err = exit_message(capsys, lambda: e2e.held_rows(str(out), resume=True))
    assert code == 2 and "other columns than this script writes" in err


def tiny_config():
    return {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 80, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
            "model_type": "qwen2"}


def test_model_decode_with_the_kv_cache_matches_a_full_forward(e2e):
    # On the CPU in fp32: a prefill of t tokens, then decode steps at positions t, t+1, ..., give the logits a
    # prefill of the longer prompt gives at its last position (cache, rotary positions, the decode mask, GQA).
    torch = e2e.torch
    torch.manual_seed(0)
    model = e2e.Decoder(tiny_config(), layers=2).float().eval()
    assert model.layers[0].self_attn.q_proj.bias is not None  # qwen2: q/k/v biases
    for p in model.parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=1.0 / math.sqrt(p.shape[1]))
    batch, t, steps = 2, 6, 3
    ids = torch.randint(0, 80, (batch, t + steps))
    shape = (batch, 2, t + steps, 16)
    with torch.no_grad():
        caches = [(torch.zeros(shape), torch.zeros(shape)) for _ in model.layers]
        model(ids[:, :t], caches, None)
        for i in range(steps):
            pos = torch.tensor([t + i])
            got = model(ids[:, t + i:t + i + 1], caches, pos)
            fresh = [(torch.zeros(shape), torch.zeros(shape)) for _ in model.layers]
            want = model(ids[:, :t + i + 1], fresh, None)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def fake_rlgemm(torch, error=0.0):
    """A stand-in for the rlgemm package on the CPU: swap_linears puts in layers that compute F.linear (times
    1 + error) and count their calls as the handle's cublaslt route."""
    import types
    counts = {"tuned": 0, "nearest": 0, "policy": 0, "default_design": 0, "cublaslt": 0, "predicted": 0}

    class Layer(torch.nn.Module):
        def __init__(self, linear):
            super().__init__()
            self.weight, self.bias = linear.weight, linear.bias

        def forward(self, x):
            counts["cublaslt"] += 1
            return torch.nn.functional.linear(x, self.weight, self.bias) * (1.0 + error)

    def swap_linears(model):
        swapped = []
        for name, module in list(model.named_modules()):
            if isinstance(module, torch.nn.Linear):
                parent, _, child = name.rpartition(".")
                setattr(model.get_submodule(parent) if parent else model, child, Layer(module))
                swapped.append(name)
        return swapped, {}

    spent = {"floor_s": 1.25, "build_s": 0.5, "check_s": 2.0}
    return types.SimpleNamespace(swap_linears=swap_linears, stats=lambda: dict(counts), version=lambda: "stand-in",
                                 BACKEND="stand-in", first_use_seconds=lambda: dict(spent))


def run_e2e(e2e, monkeypatch, tmp_path, extra, error=0.0):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(tiny_config()))
    monkeypatch.setattr(e2e, "DEVICE", "cpu")
    monkeypatch.setitem(sys.modules, "rlgemm", fake_rlgemm(e2e.torch, error))
    out = tmp_path / "e2e.csv"
    argv = ["--config", str(config), "--out", str(out), "--mode", "eager", "--batch", "1,2", "--seq-len", "8",
            "--decode-steps", "3", "--layers", "2", "--min-rounds", "3", "--max-rounds", "3", "--sample-ms", "1",
            "--dtype", "bf16"] + extra
    status = e2e.main(argv)
    with open(out, newline="") as f:
        return status, list(csv.DictReader(f))


def test_model_e2e_measures_every_row_and_resumes_on_the_cpu(e2e, monkeypatch, tmp_path, capsys):
    # The measuring loop end to end on the CPU (bf16 model, host clock, a stand-in for rlgemm): rows, route counts
    # per forward, the logit check, what the first uses took, and --resume.
    status, rows = run_e2e(e2e, monkeypatch, tmp_path, [])
    assert status == 0
    assert ("its shapes' first uses took 3.8 s (the floor's choice 1.2, kernels built 0.5, the route check 2.0)"
            in capsys.readouterr().out)
    assert [(r["batch"], r["phase"], r["mode"]) for r in rows] == [
        ("1", "prefill", "eager"), ("1", "decode", "eager"), ("2", "prefill", "eager"), ("2", "decode", "eager")]
    for r in rows:
        assert r["model"] == "tiny/L2of3" and r["dtype"] == "bf16" and r["rounds"] == "3"
        assert r["logits_ok"] == "1" and float(r["max_logit_diff"]) == 0.0
        # 7 linear layers per decoder layer and the LM head: one call each per forward.
        assert int(r["calls_cublaslt"]) == 2 * 7 + 1 and int(r["calls_predicted"]) == 0
        assert float(r["speedup_ci_low"]) <= float(r["speedup_geomean"]) <= float(r["speedup_ci_high"])
        assert float(r["speedup_min"]) <= float(r["speedup_median"]) <= float(r["speedup_max"])
        assert float(r["tokens_per_s_torch"]) > 0 and float(r["tokens_per_s_rlgemm"]) > 0
    out = tmp_path / "e2e.csv"
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:-1]) + lines[-1][:20])  # the last row torn by a kill
    status, again = run_e2e(e2e, monkeypatch, tmp_path, ["--resume"])
    assert status == 0 and len(again) == 4
    assert again[:3] == rows[:3] and again[3]["phase"] == "decode" and again[3]["batch"] == "2"
    status, again = run_e2e(e2e, monkeypatch, tmp_path, ["--resume"])
    assert status == 0 and len(again) == 4  # nothing left to measure


def test_model_e2e_fails_on_logits_that_moved(e2e, monkeypatch, tmp_path):
    # Every linear layer 5% off: the logits move by more than 1% of the largest logit, and the run exits 1 with
    # its rows kept and marked.
    status, rows = run_e2e(e2e, monkeypatch, tmp_path, ["--batch", "1", "--rel-tol", "0.01"], error=0.05)
    assert status == 1
    assert len(rows) == 2 and {r["logits_ok"] for r in rows} == {"0"}
    assert all(float(r["logit_rel_diff"]) > 0.01 for r in rows)
