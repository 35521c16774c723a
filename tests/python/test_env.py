"""rlgemm.env against a local stand-in of `rlgemm serve` (http.server): the requests the client sends, records
and JSON errors read back, and the TRL reward function on plain and conversational completions."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rlgemm import env

SOURCE = ('extern "C" __global__ void k() {}\n'
          'extern "C" int rlgemm_launch(const rlgemm_problem* p, const void* a, const void* b, void* c, void* w,'
          ' size_t s, cudaStream_t st) { return 0; }\n')


def accepted(time_us, graph, offline):
    """A record as the service gives it for an accepted kernel: both modes' speedups with their intervals."""
    return {"verdict": "accepted", "correct": True, "time_us": time_us, "time_us_offline": time_us * 1.1,
            "speedup_vs_best_vendor": graph,
            "speedup_vs_best_vendor_interval": {"low": graph * 0.98, "high": graph * 1.02, "rounds": 16},
            "speedup_vs_best_vendor_offline": offline,
            "speedup_vs_best_vendor_offline_interval": {"low": offline * 0.97, "high": offline * 1.03, "rounds": 16},
            "rejection": None}


class StandIn(BaseHTTPRequestHandler):
    requests = []

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        StandIn.requests.append(body)
        if "design" in body:
            status, answer = 200, {"record": accepted(10.0, 1.25, 1.1)}
        elif "undeclared" in body["source"]:
            status, answer = 400, {"error": "nvcc rejected the program", "reason": "compile_error",
                                   "record": {"verdict": "rejected", "rejection": {"reason": "compile_error",
                                                                                   "detail": "nvcc rejected"}}}
        elif body["shape"] == "0,1,1":
            status, answer = 400, {"error": "M must be positive", "reason": "invalid_shape"}
        elif "broken_service" in body["source"]:
            status, answer = 503, {"error": "no GPU", "reason": "service_unavailable"}
        else:
            status, answer = 200, {"record": accepted(20.0, 0.5, 0.75)}
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def service():
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    StandIn.requests = []
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_evaluate_posts_the_submission_and_returns_the_record(service):
    record = env.evaluate(SOURCE, (128, 256, 64), layout="nn", url=service)
    assert record["verdict"] == "accepted" and record["speedup_vs_best_vendor"] == 0.5
    assert StandIn.requests[-1] == {"source": SOURCE, "shape": "128,256,64", "layout": "nn"}
    env.evaluate("sm80/x", "64,64,64", url=service, design=True)
    assert StandIn.requests[-1]["design"] == "sm80/x"


def test_bad_input_is_a_rejection_and_a_broken_service_an_error(service):
    record = env.evaluate(SOURCE + "int x = undeclared;", "64,64,64", url=service)
    assert record["verdict"] == "rejected" and record["rejection"]["reason"] == "compile_error"
    record = env.evaluate(SOURCE, "0,1,1", url=service)
    assert record["rejection"] == {"reason": "invalid_shape", "detail": "M must be positive"}
    with pytest.raises(env.EvaluationError, match="HTTP 503"):
        env.evaluate(SOURCE + "// broken_service", "64,64,64", url=service)
    with pytest.raises(env.EvaluationError, match="not reachable"):
        env.evaluate(SOURCE, "64,64,64", url="http://127.0.0.1:1", timeout=2)


def test_extract_submission_reads_source_and_designs():
    assert env.extract_submission("text\n```cuda\n" + SOURCE + "```\nmore") == ("source", SOURCE)
    assert env.extract_submission("use `sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg`.") == \
        ("design", "sm80/128x128x32/w64x64/s4/swz/raster_m.g8/splitk1/epi_reg")
    assert env.extract_submission("```python\nprint(1)\n```") is None


def test_reward_function_has_trls_signature_and_scores_each_completion(service):
    reward = env.make_reward_function(url=service)
    completions = [
        "```cuda\n" + SOURCE + "```",                                              # accepted: 0.5
        [{"role": "assistant", "content": "sm90.ws.coop/128x256x64/s4/c1x1/raster_m.g8/splitk1/epi_reg"}],
        "no code here",                                                            # nothing to evaluate
        "```cu\n" + SOURCE + "int x = undeclared;\n```",                           # compile error
    ]
    scores = reward(prompts=["p"] * 4, completions=completions, shape=["64,64,64"] * 4)
    assert scores == [0.5, 1.25, 0.0, 0.0]
    assert len(StandIn.requests) == 3
    assert all(r["shape"] == "64,64,64" for r in StandIn.requests)
    fixed = env.make_reward_function(shape=(32, 32, 32), url=service, failure=-1.0)
    assert fixed(["p"], ["nothing"]) == [-1.0]
    assert fixed(["p"], ["```\n" + SOURCE + "```"]) == [0.5]
    assert StandIn.requests[-1]["shape"] == "32,32,32"


def test_the_reward_is_the_graph_mode_speedup_unless_offline_is_asked_for(service):
    completions = ["```cuda\n" + SOURCE + "```", "sm90.ws.coop/128x256x64/s4/c1x1/raster_m.g8/splitk1/epi_reg"]
    assert env.make_reward_function(url=service)(["p"] * 2, completions, shape=["64,64,64"] * 2) == [0.5, 1.25]
    offline = env.make_reward_function(url=service, mode="offline")
    assert offline(["p"] * 2, completions, shape=["64,64,64"] * 2) == [0.75, 1.1]
    with pytest.raises(ValueError, match="timing mode"):
        env.make_reward_function(mode="server")
    record = env.evaluate(SOURCE, "64,64,64", url=service)
    assert env.speedup_interval(record) == (0.49, 0.51)
    assert env.speedup_interval(record, mode="offline") == pytest.approx((0.7275, 0.7725))
    assert env.speedup_interval({"verdict": "rejected"}) is None
    # A rejection scores `failure` in either mode; an accepted record without the mode's ratio is no verdict.
    assert env.reward_from_record({"verdict": "rejected"}, failure=-1.0, mode="offline") == -1.0
    with pytest.raises(env.EvaluationError, match="speedup_vs_best_vendor_offline"):
        env.reward_from_record({"verdict": "accepted", "speedup_vs_best_vendor": 1.0}, mode="offline")
