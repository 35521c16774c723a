#!/usr/bin/env python3
"""A decoder-only language model end to end on torch (F.linear) and on rlgemm (rlgemm.swap_linears), in one
process, timed side by side: prefill and decode throughput, eager and in CUDA graphs, and how far the logits move.

The model is built from a Hugging Face config.json (bench/models/: Llama-3-8B, Qwen2.5-7B) with random weights:
RMSNorm, rotary attention with grouped-query heads (q/k/v biases where the config has attention_bias, as
Qwen2 does), SwiGLU MLP, untied LM head, fp16 or bf16 (--dtype) on one GPU. Every dimension is the config's --
hidden, intermediate, heads, vocabulary -- but --layers keeps only the first decoder layers (the CSV's model
column says how many), so that a run fits in minutes; each layer is the same work, so tokens/s scale back by the
layer count only where the LM head is small beside them.

The KV cache is static (batch x (seq_len + room for the decode steps) per layer), so a step reads its position
from a device tensor and a whole step can be captured:
  prefill  one forward over batch x seq_len prompt tokens (LM head on the last position, as generation does);
           tokens/s = batch * seq_len / time
  decode   decode_steps single-token steps from position seq_len, each feeding back its argmax;
           tokens/s = batch * decode_steps / time
  eager    Python calls, host launch cost included (small batches are bound by it);
  graph    the prefill and one decode step captured in CUDA graphs (torch.cuda.graph, no rlgemm.prepare: warm-up
           calls only) and replayed.

Timing (scripts/interleaved.py): torch and rlgemm are timed in rounds, each round one sample of each in an order
shuffled afresh (seeded), in this one process, so that a slow spell of the GPU or the host falls on both sides
of a round; the Python garbage collector is off while a row is timed. A sample is decode_steps steps (decode) or
enough back-to-back prefills to last --sample-ms. A row runs at least --min-rounds rounds and stops once the 95%
interval of the per-round speedup (rlgemm tokens/s over torch tokens/s, on its log) is within +/- --target,
or after --row-seconds. Each row gives the median speedup, its 95% interval (Student's t on the per-round log
ratios) and the per-round extremes, beside the median tokens/s of each side.

Logits: before the timing of each batch and mode, the largest |logit_torch - logit_rlgemm| of the prefill's last
position (prefill rows) or of --check-steps decode steps fed the same tokens (decode rows), relative to the largest
|logit_torch|; over --rel-tol (by default 2e-2 in fp16, 8 times that in bf16, whose unit roundoff is 8 times
fp16's) the row says logits_ok = 0 and the run exits 1 at its end.

Routes: calls_<route> columns hold how many of the rlgemm calls of one forward of the row's phase (one prefill,
or one decode step) took each of the handle's routes (rlgemm.stats(): tuned, nearest, policy, default_design,
cublaslt, predicted), counted on eager calls; a graph replays the calls it captured, which took the same routes.
Every row also prints the handle's totals so far.

Rows are written to --out one by one and flushed, so a run that stops keeps its finished rows. An existing --out
needs --resume, which skips the rows it holds (key: model, dtype, batch, seq_len, decode_steps, phase, mode) and
measures the rest. A row's rounds stop --row-seconds after its --min-rounds at the latest: the 32 rows of a whole
run (2 models x 4 batches x 2 phases x 2 modes) spend at most 8 minutes timing, less where the intervals narrow
sooner (CUDA graphs); --batch, --phase and --mode pick a part.

    python3 scripts/model_e2e.py --out model-e2e.csv                      # both models, fp16, every row
    python3 scripts/model_e2e.py --out model-e2e.csv --resume             # finish a stopped run
    python3 scripts/model_e2e.py --out bf16.csv --dtype bf16 --batch 1,32 --mode graph

The checkout's python/ is put on the path (and through it build/librlgemm.so); RLGEMM_LIBRARY overrides it.
Exit codes: 0 done, 1 logits over tolerance, 2 bad input, 3 no GPU, 130 interrupted.
"""
import argparse
import csv
import gc
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for _p in (HERE, HERE.parent / "python"):  # scripts/interleaved.py, and the checkout's rlgemm package
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import interleaved  # noqa: E402

# Where the model runs. Always "cuda" from the command line; the tests run the measuring loop on "cpu" with a
# stand-in for rlgemm (tests/python/test_scripts.py), where times come from the host clock and graphs are absent.
DEVICE = "cuda"
DEFAULT_CONFIGS = [str(HERE.parent / "bench" / "models" / f) for f in ("llama-3-8b.json", "qwen2.5-7b.json")]
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
# Relative logit tolerance per element type: fp16's, scaled by the unit roundoff (bf16 keeps 8 significant bits,
# fp16 11).
REL_TOL = {"fp16": 2e-2, "bf16": 2e-2 * 8}
PHASES = ("prefill", "decode")
MODES = ("eager", "graph")
ROUTES = ("tuned", "nearest", "policy", "default_design", "cublaslt", "predicted")
KEY = ["model", "dtype", "batch", "seq_len", "decode_steps", "phase", "mode"]
COLUMNS = KEY + ["rounds", "tokens_per_s_torch", "tokens_per_s_rlgemm", "speedup_median", "speedup_geomean",
                 "speedup_ci_low", "speedup_ci_high", "speedup_min", "speedup_max", "max_logit_diff",
                 "logit_rel_diff", "logits_ok"] + [f"calls_{r}" for r in ROUTES] + ["row_seconds"]


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight


def rotate(x, cos, sin):  # x (B, H, T, D); cos, sin (T, D)
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, c, bias):
        super().__init__()
        self.heads, self.kv_heads, self.dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        h = c["hidden_size"]
        self.q_proj = nn.Linear(h, self.heads * self.dim, bias=bias)
        self.k_proj = nn.Linear(h, self.kv_heads * self.dim, bias=bias)
        self.v_proj = nn.Linear(h, self.kv_heads * self.dim, bias=bias)
        self.o_proj = nn.Linear(self.heads * self.dim, h, bias=False)

    def forward(self, x, cos, sin, cache, pos):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.dim).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k_cache, v_cache = cache
        rep = self.heads // self.kv_heads
        if t > 1:  # prefill from position 0: causal attention over the prompt, which fills the cache
            k_cache[:, :, :t].copy_(k)
            v_cache[:, :, :t].copy_(v)
            y = F.scaled_dot_product_attention(q, k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1),
                                               is_causal=True)
        else:  # one token at position pos (a device tensor, so the step can be captured)
            k_cache.index_copy_(2, pos, k)
            v_cache.index_copy_(2, pos, v)
            # (1, 1, 1, S): SDPA broadcasts a mask over batch, heads and query rows only from 4 dimensions.
            mask = (torch.arange(k_cache.shape[2], device=x.device) <= pos).view(1, 1, 1, -1)
            y = F.scaled_dot_product_attention(q, k_cache.repeat_interleave(rep, 1), v_cache.repeat_interleave(rep, 1),
                                               attn_mask=mask)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, self.heads * self.dim))


class Block(nn.Module):
    def __init__(self, c, bias):
        super().__init__()
        h, i = c["hidden_size"], c["intermediate_size"]
        self.input_layernorm = RMSNorm(h, c["rms_norm_eps"])
        self.self_attn = Attention(c, bias)
        self.post_attention_layernorm = RMSNorm(h, c["rms_norm_eps"])
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)

    def forward(self, x, cos, sin, cache, pos):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, pos)
        y = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


def fail(message, code=2):
    """Bad input: the message on stderr and exit code 2."""
    print(f"model_e2e: {message}", file=sys.stderr)
    raise SystemExit(code)


def full_config(c):
    """The config with the fields the model reads; a missing one is a ValueError naming it."""
    c = dict(c)
    for field in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size",
                  "rms_norm_eps"):
        if field not in c:
            raise ValueError(f"the config lacks {field!r}")
    c.setdefault("num_key_value_heads", c["num_attention_heads"])
    c.setdefault("head_dim", c["hidden_size"] // c["num_attention_heads"])
    return c


class Decoder(nn.Module):
    def __init__(self, c, layers):
        super().__init__()
        c = full_config(c)
        bias = bool(c.get("attention_bias", c.get("model_type") == "qwen2"))
        self.c = c
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Block(c, bias) for _ in range(layers))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        d = c["head_dim"]
        self.register_buffer("inv_freq", 1.0 / (c.get("rope_theta", 10000.0) ** (torch.arange(0, d, 2).float() / d)),
                             persistent=False)

    def rope(self, positions):
        freqs = torch.outer(positions.float(), self.inv_freq.float())
        emb = torch.cat((freqs, freqs), dim=-1)
        dtype = self.embed_tokens.weight.dtype
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def forward(self, ids, caches, pos):
        """Logits of the last position. ids (B, T); T > 1 is a prefill from position 0, T == 1 a step at pos."""
        t = ids.shape[1]
        positions = torch.arange(t, device=ids.device) if t > 1 else pos
        cos, sin = self.rope(positions)
        x = self.embed_tokens(ids)
        for layer, cache in zip(self.layers, caches):
            x = layer(x, cos, sin, cache, pos)
        return self.lm_head(self.norm(x[:, -1:]))[:, 0]


class Backends:
    """The model's linear layers as nn.Linear (torch) or RlgemmLinear (rlgemm), switched in place."""

    def __init__(self, model):
        import rlgemm
        self.model = model
        originals = {n: m for n, m in model.named_modules() if isinstance(m, nn.Linear)}
        swapped, left = rlgemm.swap_linears(model)
        if left:
            raise SystemExit(f"model_e2e: rlgemm cannot serve {left}")
        self.slots = []
        for name in swapped:
            parent_name, _, child = name.rpartition(".")
            parent = model.get_submodule(parent_name) if parent_name else model
            self.slots.append((parent, child, originals[name], getattr(parent, child)))
        self.use("torch")

    def use(self, which):
        for parent, child, torch_layer, rlgemm_layer in self.slots:
            setattr(parent, child, torch_layer if which == "torch" else rlgemm_layer)


class Runner:
    """Static buffers (prompt, token, position, KV cache) for one batch size, and CUDA graphs per backend."""

    def __init__(self, model, batch, seq_len, steps, check_steps, seed, dtype):
        c = model.c
        self.model, self.batch, self.seq_len, self.steps = model, batch, seq_len, steps
        gen = torch.Generator(DEVICE).manual_seed(seed + batch)
        self.prompt = torch.randint(0, c["vocab_size"], (batch, seq_len), device=DEVICE, generator=gen)
        # Room for a timed sample's steps and the logit check's after the prompt (a step past the cache's end
        # would index out of it), and one more for the warm-up step.
        shape = (batch, c["num_key_value_heads"], seq_len + max(steps, check_steps) + 1, c["head_dim"])
        self.caches = [(torch.zeros(shape, device=DEVICE, dtype=dtype),
                        torch.zeros(shape, device=DEVICE, dtype=dtype)) for _ in model.layers]
        self.token = torch.zeros(batch, 1, dtype=torch.long, device=DEVICE)
        self.first_token = torch.randint(0, c["vocab_size"], (batch, 1), device=DEVICE, generator=gen)
        self.pos = torch.zeros(1, dtype=torch.long, device=DEVICE)
        self.graphs = {}

    def prefill(self):
        logits = self.model(self.prompt, self.caches, None)
        self.token.copy_(logits.argmax(-1, keepdim=True))
        self.pos.fill_(self.seq_len)
        return logits

    def step(self):
        logits = self.model(self.token, self.caches, self.pos)
        self.token.copy_(logits.argmax(-1, keepdim=True))
        self.pos.add_(1)
        return logits

    def rewind(self):
        """Back to position seq_len (the cache before it holds the last prefill's keys and values) and a fixed
        first token, so that every decode sample covers the same positions."""
        self.pos.fill_(self.seq_len)
        self.token.copy_(self.first_token)

    def capture(self, backend):
        """The prefill and one decode step in CUDA graphs, after eager warm-up calls (no prepare())."""
        self.prefill()
        self.step()
        synchronize()
        prefill_graph, step_graph = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
        with torch.cuda.graph(prefill_graph):
            prefill_out = self.prefill()
        with torch.cuda.graph(step_graph):
            step_out = self.step()
        self.graphs[backend] = (prefill_graph, prefill_out, step_graph, step_out)

    def run_prefill(self, backend, graph):
        if graph:
            g = self.graphs[backend]
            g[0].replay()
            return g[1]
        return self.prefill()

    def run_step(self, backend, graph):
        if graph:
            g = self.graphs[backend]
            g[2].replay()
            return g[3]
        return self.step()


def synchronize():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def elapsed_s(fn, calls=1):
    """Seconds between CUDA events around `calls` back-to-back calls of fn (their results dropped at once, so
    that the allocator sees what a model's loop does)."""
    if DEVICE != "cuda":
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        return time.perf_counter() - t0
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3


def logits_of(runner, backend, graph, forced):
    """Prefill logits and the logits of len(forced) decode steps fed the tokens `forced` (both backends see the
    same inputs, so their logits are comparable)."""
    prefill = runner.run_prefill(backend, graph).float().clone()
    steps = []
    for token in forced:
        runner.token.copy_(token)
        steps.append(runner.run_step(backend, graph).float().clone())
    return prefill, steps


def check_logits(runner, backends, graph, check_steps):
    """{phase: (max |logit diff|, that over max |logit_torch|)} between torch and rlgemm."""
    logits, forced = {}, None
    for backend in ("torch", "rlgemm"):
        backends.use(backend)
        if forced is None:  # the tokens torch's own decode picks, fed to both
            runner.run_prefill(backend, graph)
            forced = []
            for _ in range(check_steps):
                forced.append(runner.token.clone())
                runner.run_step(backend, graph)
        logits[backend] = logits_of(runner, backend, graph, forced)
    (tp, ts), (rp, rs) = logits["torch"], logits["rlgemm"]
    out = {"prefill": ((tp - rp).abs().max().item(), tp.abs().max().item())}
    diff = max(((a - r).abs().max().item() for a, r in zip(ts, rs)), default=0.0)
    scale = max((a.abs().max().item() for a in ts), default=1.0)
    out["decode"] = (diff, scale)
    return {phase: (d, d / max(s, 1e-6)) for phase, (d, s) in out.items()}


def route_calls(runner, backends):
    """{phase: {route: calls}} of one eager prefill and one eager decode step on rlgemm (the handle's stats)."""
    import rlgemm
    backends.use("rlgemm")
    before = rlgemm.stats()
    runner.prefill()
    after_prefill = rlgemm.stats()
    runner.step()
    after_step = rlgemm.stats()
    delta = lambda a, b: {r: b.get(r, 0) - a.get(r, 0) for r in ROUTES}
    return {"prefill": delta(before, after_prefill), "decode": delta(after_prefill, after_step)}


def measure(runner, backends, phase, graph, args, seed):
    """Interleaved rounds of torch and rlgemm on one phase; {backend: [seconds per sample]} and the token count
    of a sample."""
    if phase == "prefill":
        backends.use("torch")
        estimate = min(elapsed_s(lambda: runner.run_prefill("torch", graph)) for _ in range(2))
        reps = max(1, math.ceil(args.sample_ms / 1e3 / max(estimate, 1e-6)))

        def sample(backend):
            backends.use(backend)
            return elapsed_s(lambda: runner.run_prefill(backend, graph), reps) / reps

        tokens = runner.batch * runner.seq_len
    else:
        def sample(backend):
            backends.use(backend)
            runner.rewind()
            return elapsed_s(lambda: runner.run_step(backend, graph), runner.steps)

        tokens = runner.batch * runner.steps
    gc.collect()
    gc.disable()
    try:
        times = interleaved.run_rounds({b: (lambda b=b: sample(b)) for b in ("torch", "rlgemm")},
                                       [("torch", "rlgemm")], seed, min_rounds=args.min_rounds,
                                       max_rounds=args.max_rounds, max_seconds=args.row_seconds, target=args.target)
    finally:
        gc.enable()
    return times, tokens


def split_list(text, flag, allowed=None, kind=str):
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ValueError(f"{flag} is empty: give a comma-separated list")
    out = []
    for x in items:
        try:
            v = kind(x)
        except ValueError:
            raise ValueError(f"{flag}: {x!r} is not a{'n integer' if kind is int else ' value'}") from None
        if allowed is not None and v not in allowed:
            raise ValueError(f"{flag}: {x!r} is not one of {', '.join(allowed)}")
        if kind is int and v < 1:
            raise ValueError(f"{flag}: {x} must be a positive integer")
        if v not in out:
            out.append(v)
    return out


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", action="append", help="a Hugging Face config.json (repeatable; default: "
                   "bench/models/llama-3-8b.json and qwen2.5-7b.json)")
    p.add_argument("--out", required=True, help="CSV to write rows to, one by one")
    p.add_argument("--resume", action="store_true", help="keep the rows --out holds and measure the others")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="fp16", help="element type of the model (default fp16)")
    p.add_argument("--batch", default="1,8,32,128", help="batch sizes (default 1,8,32,128)")
    p.add_argument("--phase", default="prefill,decode", help="prefill, decode or both (default both)")
    p.add_argument("--mode", default="eager,graph", help="eager, graph or both (default both)")
    p.add_argument("--seq-len", type=int, default=512, help="prompt length (default 512)")
    p.add_argument("--decode-steps", type=int, default=32, help="decode steps per sample (default 32)")
    p.add_argument("--layers", type=int, default=2, help="decoder layers kept of the config's (all: 0; default 2)")
    p.add_argument("--min-rounds", type=int, default=8, help="rounds per row at least (default 8)")
    p.add_argument("--max-rounds", type=int, default=400, help="rounds per row at most (default 400)")
    p.add_argument("--row-seconds", type=float, default=15.0,
                   help="stop a row's rounds after this long once --min-rounds ran (default 15)")
    p.add_argument("--target", type=float, default=0.0075,
                   help="stop a row once its speedup's 95%% interval is within +/- this (log units; default 0.0075)")
    p.add_argument("--sample-ms", type=float, default=20.0, help="length of a prefill sample (default 20 ms)")
    p.add_argument("--check-steps", type=int, default=4, help="decode steps whose logits are compared (default 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rel-tol", type=float, help="largest |logit diff| over largest |logit| allowed (default "
                   "2e-2 in fp16, 0.16 in bf16)")
    args = p.parse_args(argv)
    try:
        args.batch = split_list(args.batch, "--batch", kind=int)
        args.phase = split_list(args.phase, "--phase", PHASES)
        args.mode = split_list(args.mode, "--mode", MODES)
    except ValueError as e:
        p.error(str(e))
    for flag, value, low in (("--seq-len", args.seq_len, 2), ("--decode-steps", args.decode_steps, 1),
                             ("--layers", args.layers, 0), ("--min-rounds", args.min_rounds, 2),
                             ("--check-steps", args.check_steps, 1)):
        if value < low:
            p.error(f"{flag} is {value}: it must be at least {low}")
    if args.max_rounds < args.min_rounds:
        p.error(f"--max-rounds ({args.max_rounds}) must be at least --min-rounds ({args.min_rounds})")
    for flag, value in (("--row-seconds", args.row_seconds), ("--target", args.target),
                        ("--sample-ms", args.sample_ms)):
        if not value > 0:
            p.error(f"{flag} is {value}: it must be positive")
    if args.rel_tol is None:
        args.rel_tol = REL_TOL[args.dtype]
    elif not args.rel_tol > 0:
        p.error(f"--rel-tol is {args.rel_tol}: it must be positive")
    args.config = args.config or DEFAULT_CONFIGS
    args.configs = []
    for path in args.config:
        try:
            c = full_config(json.loads(Path(path).read_text()))
        except (OSError, ValueError) as e:
            p.error(f"--config {path}: {e}")
        if args.layers > c["num_hidden_layers"]:
            p.error(f"--layers {args.layers}: {path} has {c['num_hidden_layers']} decoder layers")
        args.configs.append((path, c))
    if not Path(args.out).resolve().parent.is_dir():
        p.error(f"--out {args.out}: its folder does not exist")
    return args


def held_rows(path, resume):
    """The keys of the rows `path` holds (an empty set for a new file). An existing file needs --resume, and must
    have this script's columns; a last line torn by a kill is cut off (its row is measured again)."""
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return set()
    if not resume:
        fail(f"{path} exists: pass --resume to continue it, or write to a new file")
    with open(path, "rb+") as f:
        data = f.read()
        if not data.endswith(b"\n"):
            cut = data.rfind(b"\n") + 1
            print(f"model_e2e: {path}: dropping a torn last line ({len(data) - cut} bytes)", file=sys.stderr)
            f.truncate(cut)
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != COLUMNS:
            fail(f"{path} has other columns than this script writes ({', '.join(reader.fieldnames or [])}); "
                 "write to a new file")
        return {tuple(row[k] for k in KEY) for row in reader}


def row_key(name, dtype, batch, args, phase, mode):
    return (name, dtype, str(batch), str(args.seq_len), str(args.decode_steps), phase, mode)


def model_name(config_path, c, layers):
    return f"{Path(config_path).stem}/L{layers}of{c['num_hidden_layers']}"


def build_model(c, layers, dtype, seed):
    torch.manual_seed(seed)
    with torch.device(DEVICE):
        model = Decoder(c, layers).to(dtype).eval()
    for param in model.parameters():  # unit-scale activations: weights ~ N(0, 1/fan_in)
        if param.dim() == 2:
            torch.nn.init.normal_(param, std=1.0 / math.sqrt(param.shape[1]))
    return model


def format_calls(calls):
    return " ".join(f"{r} {n}" for r, n in calls.items() if n) or "none"


def main(argv=None):
    args = parse_args(argv)
    held = held_rows(args.out, args.resume)
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("model_e2e: no GPU: torch.cuda.is_available() is False", file=sys.stderr)
        return 3
    if DEVICE != "cuda" and "graph" in args.mode:
        fail(f"--mode graph needs a GPU (the model runs on {DEVICE})")
    import rlgemm
    dtype = DTYPES[args.dtype]
    gpu = torch.cuda.get_device_name() if DEVICE == "cuda" else DEVICE
    print(f"{gpu}, torch {torch.__version__}, rlgemm {rlgemm.version()}, operators "
          f"{rlgemm.BACKEND}; {args.dtype}; torch's reduced-precision reductions: fp16 "
          f"{torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction}, bf16 "
          f"{torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction}", flush=True)
    if held:
        print(f"model_e2e: {args.out} holds {len(held)} rows; those are skipped", flush=True)
    failed = False
    rows = 0
    with open(args.out, "a", newline="") as f:
        w = csv.writer(f)
        if not held:
            w.writerow(COLUMNS)
            f.flush()
        for config_path, c in args.configs:
            layers = args.layers or c["num_hidden_layers"]
            name = model_name(config_path, c, layers)
            todo = {b: [(m, ph) for m in args.mode for ph in args.phase
                        if row_key(name, args.dtype, b, args, ph, m) not in held] for b in args.batch}
            if not any(todo.values()):
                print(f"{name}: every row held", flush=True)
                continue
            model = build_model(c, layers, dtype, args.seed)
            backends = Backends(model)
            print(f"{name}: {sum(q.numel() for q in model.parameters()) / 1e9:.2f} B parameters", flush=True)
            with torch.inference_mode(False), torch.no_grad():
                for b in args.batch:
                    if not todo[b]:
                        continue
                    runner = Runner(model, b, args.seq_len, args.decode_steps, args.check_steps, args.seed, dtype)
                    for backend in ("torch", "rlgemm"):  # first calls: rlgemm's first-use choices, cuBLAS's
                        backends.use(backend)
                        runner.prefill()
                        runner.step()
                    synchronize()
                    calls = route_calls(runner, backends)
                    for mode in args.mode:
                        phases = [ph for m, ph in todo[b] if m == mode]
                        if not phases:
                            continue
                        graph = mode == "graph"
                        if graph:
                            for backend in ("torch", "rlgemm"):
                                backends.use(backend)
                                runner.capture(backend)
                        logit = check_logits(runner, backends, graph, args.check_steps)
                        for phase in phases:
                            t0 = time.monotonic()
                            seed = args.seed * 1000003 + b * 31 + PHASES.index(phase) * 7 + MODES.index(mode)
                            times, tokens = measure(runner, backends, phase, graph, args, seed)
                            seconds = time.monotonic() - t0
                            ratio = interleaved.ratio(times["torch"], times["rlgemm"])
                            tps = {k: tokens / statistics.median(v) for k, v in times.items()}
                            diff, rel = logit[phase]
                            ok = math.isfinite(rel) and rel <= args.rel_tol
                            failed |= not ok
                            w.writerow(list(row_key(name, args.dtype, b, args, phase, mode))
                                       + [ratio.rounds, f"{tps['torch']:.1f}", f"{tps['rlgemm']:.1f}"]
                                       + [f"{x:.4f}" for x in (ratio.median, ratio.geomean, ratio.low, ratio.high,
                                                               ratio.min, ratio.max)]
                                       + [f"{diff:.4g}", f"{rel:.3g}", int(ok)]
                                       + [calls[phase][r] for r in ROUTES] + [f"{seconds:.1f}"])
                            f.flush()
                            rows += 1
                            print(f"{name} {args.dtype} batch {b:3d} {phase:7s} {mode:5s}: torch {tps['torch']:11.1f} "
                                  f"tok/s, rlgemm {tps['rlgemm']:11.1f} tok/s, {ratio}; logits max diff {diff:.4g} = "
                                  f"{rel:.2e} of max {'ok' if ok else 'OVER ' + str(args.rel_tol)}; rlgemm calls "
                                  f"per {'step' if phase == 'decode' else 'prefill'}: {format_calls(calls[phase])}; "
                                  f"handle totals {rlgemm.stats()}", flush=True)
                    del runner
                    gc.collect()
                    torch.cuda.empty_cache()
            backends.use("torch")
            del model, backends
            gc.collect()
            torch.cuda.empty_cache()
    spent = rlgemm.first_use_seconds()
    print(f"model_e2e: {rows} rows written to {args.out}; rlgemm calls per route: {rlgemm.stats()}; its shapes' first "
          f"uses took {sum(spent.values()):.1f} s (the floor's choice {spent['floor_s']:.1f}, kernels built "
          f"{spent['build_s']:.1f}, the route check {spent['check_s']:.1f})")
    return 1 if failed else 0


if __name__ == "__main__":
    t0 = time.time()
    try:
        status = main()
    except KeyboardInterrupt:
        print("model_e2e: interrupted; the rows written stay (--resume continues)", file=sys.stderr)
        status = 130
    print(f"model_e2e: {time.time() - t0:.0f} s")
    sys.exit(status)
