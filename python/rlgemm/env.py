"""Client of the evaluation service (`rlgemm serve`): a checked, timed reward for a kernel a model wrote.

    from rlgemm.env import evaluate, reward_function
    record = evaluate(source, "4096,4096,4096")      # CUDA C++ under the kernel contract, or design=True
    record["verdict"], record["speedup_vs_best_vendor"], record["rejection"]

    # Hugging Face TRL: GRPOTrainer(..., reward_funcs=[reward_function]); each dataset row names its "shape".

An accepted kernel's record carries its speedup over the best vendor call in two timing modes, each with a 95%
interval from paired, interleaved rounds: "speedup_vs_best_vendor" (graph mode: the calls replayed from a CUDA
graph, the GPU's time alone; the reward) with "speedup_vs_best_vendor_interval" ({"low", "high", "rounds"}),
and "speedup_vs_best_vendor_offline" (back-to-back calls from the host) with its "..._offline_interval".

Only the standard library is used (urllib). The service's address comes from the `url` argument, else from
RLGEMM_SERVE_URL, else http://127.0.0.1:8089.
"""
import json
import os
import re
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

__all__ = ["EvaluationError", "evaluate", "extract_submission", "reward_from_record", "speedup_interval",
           "make_reward_function", "reward_function"]

_DEFAULT_URL = "http://127.0.0.1:8089"
_FENCE = re.compile(r"```[A-Za-z+]*[ \t]*\n(.*?)```", re.S)
_DESIGN = re.compile(r"(?:^|[\s`*(])(sm[0-9]+[a-z.]*/[^\s`*,;)]*[^\s`*,;).])")
# The record's field of each timing mode's speedup (its interval: the same name followed by "_interval").
_SPEEDUP = {"graph": "speedup_vs_best_vendor", "offline": "speedup_vs_best_vendor_offline"}


class EvaluationError(RuntimeError):
    """The service could not evaluate (unreachable, no GPU, internal failure): no verdict on the kernel."""


def _service_url(url):
    return (url or os.environ.get("RLGEMM_SERVE_URL") or _DEFAULT_URL).rstrip("/")


def _shape_text(shape):
    if isinstance(shape, str):
        return shape
    m, n, k = shape
    return f"{int(m)},{int(n)},{int(k)}"


def evaluate(source, shape, layout="tn", url=None, timeout=900, design=False):
    """Evaluates one submission; returns its record (a dict).

    `source` is CUDA C++ defining extern "C" __global__ kernels and rlgemm_launch (see the README), or with
    design=True a design text of rlgemm's grammar. `shape` is "M,N,K" or (M, N, K). A submission the service
    rejects -- bad input included (a compile error, no launch function, too large, an invalid shape) -- still
    gives a record: its "verdict" is "rejected" and "rejection" holds {"reason", "detail"}. Raises
    EvaluationError only when the service gives no verdict.
    """
    body = {"design" if design else "source": source, "shape": _shape_text(shape), "layout": layout}
    request = urllib.request.Request(_service_url(url) + "/v1/evaluate", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())["record"]
    except urllib.error.HTTPError as e:
        try:
            answer = json.loads(e.read())
        except ValueError:
            answer = {}
        if 400 <= e.code < 500 and "reason" in answer:
            record = answer.get("record") or {"verdict": "rejected", "correct": False}
            record["rejection"] = record.get("rejection") or {"reason": answer["reason"],
                                                              "detail": answer.get("error", "")}
            return record
        raise EvaluationError(f"rlgemm serve answered HTTP {e.code}: {answer.get('error', e.reason)}") from None
    except (urllib.error.URLError, OSError) as e:
        raise EvaluationError(f"rlgemm serve at {_service_url(url)} is not reachable: {e}") from None


def extract_submission(completion):
    """The submission in a model's answer: ("source", code) for a fenced block defining rlgemm_launch,
    ("design", text) for a line holding a design, or None."""
    for block in _FENCE.findall(completion):
        if "rlgemm_launch" in block:
            return "source", block
    for match in _DESIGN.finditer(completion):
        return "design", match.group(1)
    return None


def _speedup_field(mode):
    if mode not in _SPEEDUP:
        raise ValueError(f"unknown timing mode {mode!r}: use 'graph' or 'offline'")
    return _SPEEDUP[mode]


def reward_from_record(record, failure=0.0, mode="graph"):
    """The speedup over the best vendor call for an accepted kernel, `failure` for any rejection.

    mode="graph" (the default, and what a model should learn from) reads the GPU-time ratio; mode="offline"
    the ratio of back-to-back host-launched calls. An accepted record without the mode's ratio (a service that
    predates it) raises EvaluationError rather than scoring the kernel as a failure.
    """
    field = _speedup_field(mode)
    if record.get("verdict") != "accepted":
        return failure
    if record.get(field) is None:
        raise EvaluationError(f"the accepted record has no {field!r}: the service does not report {mode} timings")
    return float(record[field])


def speedup_interval(record, mode="graph"):
    """(low, high) of the 95% interval of an accepted record's speedup in `mode`, or None."""
    interval = record.get(_speedup_field(mode) + "_interval")
    if not isinstance(interval, dict) or interval.get("low") is None or interval.get("high") is None:
        return None
    return float(interval["low"]), float(interval["high"])


def _completion_text(completion):
    # TRL passes plain strings, or for conversational datasets a list of messages ending with the answer.
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], dict):
        return str(completion[-1].get("content", ""))
    return str(completion)


def make_reward_function(shape=None, layout="tn", url=None, failure=0.0, parallel=16, timeout=900, mode="graph"):
    """A reward function with TRL's signature, (prompts, completions, **kwargs) -> list[float].

    Each completion's submission is evaluated on the shape of its row: the dataset's "shape" column (TRL
    passes columns as keyword arguments, one value per completion), else `shape`. A completion without a
    submission, or one the service rejects, gets `failure`; an accepted kernel its speedup over the best vendor
    call in `mode` (graph: the GPU's time alone, the default; offline). Up to `parallel` evaluations are in
    flight at once (the service compiles them concurrently and queues the GPU work over its GPUs).
    """
    _speedup_field(mode)
    def rlgemm_reward(prompts, completions, **kwargs):
        shapes = kwargs.get("shape") or [shape] * len(completions)
        layouts = kwargs.get("layout") or [layout] * len(completions)

        def one(i):
            found = extract_submission(_completion_text(completions[i]))
            if found is None or shapes[i] is None:
                return failure
            kind, text = found
            # A service that gives no verdict raises (EvaluationError): no score is better than a wrong one.
            record = evaluate(text, shapes[i], layouts[i], url=url, timeout=timeout, design=kind == "design")
            return reward_from_record(record, failure, mode)

        with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(completions)))) as pool:
            return list(pool.map(one, range(len(completions))))

    rlgemm_reward.__name__ = "rlgemm_reward"
    return rlgemm_reward


reward_function = make_reward_function()
