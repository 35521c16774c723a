"""scripts/env-measure without a GPU: the results folder named after the GPU nvidia-smi reports, env-hacks.csv's
rows against a stand-in of `rlgemm serve` (every kernel case, at least 10 honest ones, expected from each file's
first line), and the agreement rows of env-throughput.csv in both timing modes."""
import importlib.machinery
import importlib.util
import json
import os
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_script():
    loader = importlib.machinery.SourceFileLoader("env_measure", str(ROOT / "scripts/env-measure"))
    spec = importlib.util.spec_from_loader("env_measure", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


em = load_script()


@pytest.mark.parametrize("name, short", [("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"),
                                         ("NVIDIA A100-SXM4-80GB", "nvidia-a100-sxm4-80gb")])
def test_the_results_folder_is_named_after_the_gpu(tmp_path, monkeypatch, name, short):
    smi = tmp_path / "nvidia-smi"
    smi.write_text(f"#!/bin/sh\necho '{name}'\n")
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert em.short_gpu_name("1") == short


def test_without_nvidia_smi_the_folder_must_be_given(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SystemExit, match="--out-dir"):
        em.short_gpu_name("1")


class StandIn(BaseHTTPRequestHandler):
    """Answers every case as its first line expects, except a case whose source holds a phrase of `wrong`, which
    gets the reason that phrase maps to."""
    wrong = {}

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        source = body.get("source", "")
        status, answer = 200, {"record": {"verdict": "accepted", "rejection": None}}
        if body["shape"].startswith("0,"):
            status, answer = 400, {"reason": "invalid_shape", "error": "M must be positive"}
        elif len(source) > 256 * 1024:
            status, answer = 400, {"reason": "too_large", "error": "too large"}
        elif "undeclared" in source:
            status, answer = 400, {"reason": "compile_error", "error": "nvcc"}
        elif source and "rlgemm_launch" not in source:
            status, answer = 400, {"reason": "no_launch_function", "error": "none"}
        elif source.startswith("// expect: rejected "):
            reason = source.splitlines()[0].split(" ")[3].split("|")[-1]
            for phrase, instead in StandIn.wrong.items():
                if phrase in source:
                    reason = instead
            answer = {"record": {"verdict": "rejected", "rejection": {"reason": reason, "detail": ""}}}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def service():
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_env_hacks_rows_cover_every_case_and_say_what_each_expected(service):
    StandIn.wrong = {}
    rows = em.hacks(service)
    cases = sorted(p.stem for p in em.KERNELS.glob("*.cu"))
    assert [r[0] for r in rows[:len(cases)]] == cases
    assert sum(r[1] == "accepted" for r in rows[:len(cases)]) >= 10
    fault = next(r for r in rows if r[0] == "fault")
    assert fault == ["fault", "rejected fault", "rejected", "fault"]
    assert next(r for r in rows if r[0] == "per_thread_stream")[1] == "rejected no_work|legacy_stream"
    assert next(r for r in rows if r[0] == "bad_input_oversized")[1:] == ["rejected too_large", "rejected", "too_large"]
    assert all(em.agrees(r) for r in rows), [r for r in rows if not em.agrees(r)]


def test_a_case_that_gets_another_reason_does_not_agree(service):
    StandIn.wrong = {"Writes through a null pointer": "wrong_result"}
    rows = em.hacks(service)
    StandIn.wrong = {}
    assert [r for r in rows if not em.agrees(r)] == [["fault", "rejected fault", "rejected", "wrong_result"]]
    assert not em.agrees(["honest_x", "accepted", "rejected", "fault"])


def test_agreement_alternates_reward_and_bench_per_design_beside_the_rewards_vendor_calls(monkeypatch):
    calls = []
    graph_us = iter([21.0, 22.0, 20.0, 30.0])  # the reward's graph time of each round

    def post(url, body):
        calls.append(("reward", body["design"]))
        if body["design"] != "sm80/d":
            return {"record": {"verdict": "rejected"}}
        return {"record": {"verdict": "accepted", "design": "sm80/d", "time_us": next(graph_us), "time_us_offline": 25.0,
                           "vendor_us": {"lt_auto": 19.0, "cublas_tn": 22.0},
                           "speedup_vs_best_vendor": 1.1, "speedup_vs_best_vendor_interval": {"low": 1.0, "high": 1.2},
                           "speedup_vs_best_vendor_offline": 0.9,
                           "speedup_vs_best_vendor_offline_interval": {"low": 0.8, "high": 1.0}}}

    def bench_times(rlgemm, shape, designs, vendors=None):
        calls.append(("bench", tuple(designs), tuple(vendors or ())))
        return {("sm80/d", "graph"): (20.0, 1.05), ("sm80/d", "offline"): (25.0, 0.95)}

    monkeypatch.setattr(em, "DESIGNS", ["sm80/d", "sm80/x"])
    monkeypatch.setattr(em, "post", post)
    monkeypatch.setattr(em, "bench_times", bench_times)
    rows = em.agreement("url", "rlgemm", "mid", "2048,2048,2048", rounds=4)
    pair = ("bench", ("sm80/d",), ("cublas_tn", "lt_auto"))
    # Even rounds evaluate first, odd rounds run bench first; a design the service rejects is not benched after.
    even = [("reward", "sm80/d"), pair, ("reward", "sm80/x")]
    odd = [pair, ("reward", "sm80/d"), ("bench", ("sm80/x",), ()), ("reward", "sm80/x")]
    assert calls == (even + odd) * 2
    assert [r[6] for r in rows] == ["graph", "offline"]
    graph, offline = rows
    # Ratios 1.05, 1.10, 1.00, 1.50: the median is 1.075, the range 1.00..1.50; the reward's time is the median
    # round's.
    assert graph[:12] == ["mid 2048,2048,2048", "agreement", 4, "", "", "sm80/d", "graph", "22.000", "20.000",
                          "1.0750", "1.0000", "1.5000"]
    assert graph[12:] == ["1.1000", "1.0000", "1.2000", "1.0500"]
    assert offline[7:12] == ["25.000", "25.000", "1.0000", "1.0000", "1.0000"]


def test_a_round_without_a_bench_time_leaves_the_ratio_out():
    rewards = {("d", "graph"): (10.0, 1.0, 0.9, 1.1)}
    rows = em.agreement_rows("small", "1,1,1", [(rewards, {}), (rewards, {("d", "graph"): (8.0, 1.2)})])
    assert rows[0][2] == 1 and rows[0][8:12] == ["8.000", "1.2500", "1.2500", "1.2500"]
    assert em.agreement_rows("small", "1,1,1", [(rewards, {})])[0][8:12] == ["", "", "", ""]


def test_bench_times_the_design_in_the_services_order_and_rounds(tmp_path):
    """bench runs offline first, then graph, 16 batches each, as the service times a submission; its rows come
    back per (design, mode), a wrong row left out."""
    fake = tmp_path / "rlgemm"
    args_file = tmp_path / "args"
    fake.write_text(f"""#!/usr/bin/env python3
import sys
args = sys.argv[1:]
open({str(args_file)!r}, "w").write(" ".join(args))
out = args[args.index("--out") + 1]
open(out, "w").write("impl,mode,time_us,speedup_vs_best_vendor,correct\\n"
                     "sm80/d,offline,25.0,0.9,1\\nsm80/d,graph,20.0,1.1,1\\nlt_auto,graph,22.0,1.0,1\\n"
                     "sm80/w,graph,1.0,9.0,0\\n")
""")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    times = em.bench_times(str(fake), "64,64,64", ["sm80/d", "sm80/w"], ["lt_auto", "cublas_tn"])
    assert times == {("sm80/d", "offline"): (25.0, 0.9), ("sm80/d", "graph"): (20.0, 1.1)}
    args = args_file.read_text().split()
    assert args[args.index("--mode") + 1] == "offline,graph"
    assert args[args.index("--batches") + 1] == "16"
    assert args[args.index("--impl") + 1] == "lt_auto,cublas_tn"
    assert [args[i + 1] for i, a in enumerate(args) if a == "--design"] == ["sm80/d", "sm80/w"]
