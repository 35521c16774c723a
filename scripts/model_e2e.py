#!/usr/bin/env python3
"""A Llama-style decoder end to end on torch.matmul and on rlgemm: prefill and decode throughput, and how far
the logits move.

The model is transformers' LlamaForCausalLM built from a LlamaConfig with random weights when transformers
is importable, else a self-contained implementation of the same architecture (RMSNorm, rotary attention
with grouped-query heads, SwiGLU MLP, untied LM head). Both run in fp16 on one GPU. The same model runs
twice: first as built (every linear layer is torch.matmul via nn.Linear), then after rlgemm.swap_linears.

Phases, per batch size:
  prefill  one forward pass over batch x seq_len prompt tokens; tokens/s = batch * seq_len / time
  decode   --decode-tokens single-token steps with a KV cache after the prompt; tokens/s = batch * steps / time
Each is timed with CUDA events as the median of --repeats runs after --warmup runs. The rlgemm run decodes
the tokens the torch run chose (teacher forcing), so the logits of every step are comparable;
max_logit_diff is the largest |logit_torch - logit_rlgemm| over the prompt's logits (prefill) or every
decode step (decode). Tolerance: fp16 rounding of the layer outputs, compounded over the layers; the run
reports the difference relative to the largest logit and fails (exit 1) above --rel-tol (default 2e-2).

Appends rows  model,batch,seq_len,phase,tokens_per_s_torch,tokens_per_s_rlgemm,max_logit_diff  to --out.

  PYTHONPATH=python RLGEMM_LIBRARY=build/librlgemm.so python scripts/model_e2e.py --out model-e2e.csv
"""
import argparse
import csv
import math
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

import rlgemm


# ---------------- a self-contained Llama-style decoder (used when transformers is missing) ----------------

class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(var + self.eps)).to(x.dtype) * self.weight


def rotary(x, cos, sin):  # x: (B, H, T, D); cos/sin: (T, D)
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads, self.kv_heads, self.dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, self.heads * self.dim, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, self.kv_heads * self.dim, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, self.kv_heads * self.dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.dim, c.hidden_size, bias=False)

    def forward(self, x, cos, sin, cache):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.dim).transpose(1, 2)
        q, k = rotary(q, cos, sin), rotary(k, cos, sin)
        if cache is not None:
            if cache.get("k") is not None:
                k = torch.cat((cache["k"], k), dim=2)
                v = torch.cat((cache["v"], v), dim=2)
            cache["k"], cache["v"] = k, v
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=t > 1)
        return self.o_proj(y.transpose(1, 2).reshape(b, t, self.heads * self.dim))


class Mlp(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = Mlp(c)

    def forward(self, x, cos, sin, cache):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class TinyLlama(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c.vocab_size, c.hidden_size)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.num_hidden_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, c.head_dim, 2).float() / c.head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, ids, caches=None, start=0):
        t = ids.shape[1]
        pos = torch.arange(start, start + t, device=ids.device).float()
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(torch.half), emb.sin().to(torch.half)
        x = self.embed_tokens(ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, None if caches is None else caches[i])
        return self.lm_head(self.norm(x))


class Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)
        self.head_dim = self.hidden_size // self.num_attention_heads


# ---------------- one runner interface over both implementations ----------------

class Runner:
    def __init__(self, args):
        kw = dict(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
                  num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                  rms_norm_eps=1e-5, rope_theta=10000.0)
        torch.manual_seed(args.seed)
        self.hf = False
        if not args.no_transformers:
            try:
                from transformers import LlamaConfig, LlamaForCausalLM
                config = LlamaConfig(max_position_embeddings=args.seq_len + args.decode_tokens + 8,
                                     tie_word_embeddings=False, attention_bias=False, mlp_bias=False, **kw)
                self.model = LlamaForCausalLM(config)
                self.hf = True
            except ImportError:
                pass
        if not self.hf:
            self.model = TinyLlama(Config(**kw))
        self.model = self.model.to("cuda", torch.half).eval()
        self.name = f"llama-{'hf' if self.hf else 'local'}-h{args.hidden}-l{args.layers}"

    @torch.inference_mode()
    def prefill(self, ids):
        """Logits of the prompt and the state to decode from."""
        if self.hf:
            out = self.model(input_ids=ids, use_cache=True)
            return out.logits, out.past_key_values
        caches = [dict() for _ in self.model.layers]
        return self.model(ids, caches, 0), caches

    @torch.inference_mode()
    def step(self, token, state, position):
        if self.hf:
            out = self.model(input_ids=token, past_key_values=state, use_cache=True)
            return out.logits, out.past_key_values
        return self.model(token, state, position), state


def time_it(fn, warmup, repeats):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def run_phase_set(runner, ids, decode_tokens, forced=None):
    """Prefill logits, the decode logits of every step (teacher-forced by `forced` when given) and the tokens."""
    logits, state = runner.prefill(ids)
    prefill_logits = logits.float()
    token = logits[:, -1:].argmax(-1)
    steps, tokens = [], []
    for i in range(decode_tokens):
        if forced is not None:
            token = forced[i]
        tokens.append(token)
        logits, state = runner.step(token, state, ids.shape[1] + i)
        steps.append(logits[:, -1].float())
        token = logits[:, -1:].argmax(-1)
    return prefill_logits, torch.stack(steps, 1) if steps else None, tokens


def measure(runner, ids, args):
    prefill_s = time_it(lambda: runner.prefill(ids), args.warmup, args.repeats)

    def decode():
        logits, state = runner.prefill(ids)
        token = logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(args.decode_tokens):
            logits, state = runner.step(token, state, ids.shape[1] + i)
            token = logits[:, -1:].argmax(-1)
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    for _ in range(args.warmup):
        decode()
    decode_s = statistics.median(decode() for _ in range(args.repeats))
    b = ids.shape[0]
    return b * ids.shape[1] / prefill_s, b * args.decode_tokens / decode_s


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="CSV to append rows to (header written when new)")
    p.add_argument("--batch", default="1,8", help="comma-separated batch sizes")
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--decode-tokens", type=int, default=32)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=5632)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rel-tol", type=float, default=2e-2)
    p.add_argument("--no-transformers", action="store_true", help="use the self-contained model")
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("model_e2e: no GPU: torch.cuda.is_available() is False", file=sys.stderr)
        return 3

    runner = Runner(args)
    print(f"model {runner.name}: {sum(q.numel() for q in runner.model.parameters()) / 1e6:.0f} M parameters, "
          f"{'transformers LlamaForCausalLM' if runner.hf else 'self-contained Llama'}; rlgemm {rlgemm.version()}")
    batches = [int(b) for b in args.batch.split(",")]
    prompts = {b: torch.randint(0, args.vocab, (b, args.seq_len), device="cuda",
                                generator=torch.Generator("cuda").manual_seed(args.seed + b)) for b in batches}

    torch_results = {}
    for b in batches:
        logits, steps, tokens = run_phase_set(runner, prompts[b], args.decode_tokens)
        torch_results[b] = (logits, steps, tokens, measure(runner, prompts[b], args))

    swapped, left = rlgemm.swap_linears(runner.model)
    print(f"rlgemm serves {len(swapped)} linear layers" + (f"; left on torch: {left}" if left else ""))

    new_file = not os.path.exists(args.out) or os.path.getsize(args.out) == 0
    failed = False
    with open(args.out, "a", newline="") as f:
        w = csv.writer(f)
        if new_file:
            w.writerow(["model", "batch", "seq_len", "phase", "tokens_per_s_torch", "tokens_per_s_rlgemm",
                        "max_logit_diff"])
        for b in batches:
            ref_logits, ref_steps, tokens, (pre_t, dec_t) = torch_results[b]
            logits, steps, _ = run_phase_set(runner, prompts[b], args.decode_tokens, forced=tokens)
            pre_r, dec_r = measure(runner, prompts[b], args)
            diffs = {"prefill": (logits - ref_logits).abs().max().item(),
                     "decode": (steps - ref_steps).abs().max().item() if steps is not None else 0.0}
            scale = {"prefill": ref_logits.abs().max().item(),
                     "decode": ref_steps.abs().max().item() if ref_steps is not None else 1.0}
            for phase, (tt, tr) in (("prefill", (pre_t, pre_r)), ("decode", (dec_t, dec_r))):
                rel = diffs[phase] / max(scale[phase], 1e-6)
                ok = math.isfinite(rel) and rel <= args.rel_tol
                failed |= not ok
                w.writerow([runner.name, b, args.seq_len, phase, f"{tt:.1f}", f"{tr:.1f}", f"{diffs[phase]:.4g}"])
                print(f"batch {b:3d} {phase:7s}: torch {tt:10.1f} tok/s, rlgemm {tr:10.1f} tok/s "
                      f"(x{tr / tt:.3f}); max |logit diff| {diffs[phase]:.4g} = {rel:.2e} of max |logit| "
                      f"{scale[phase]:.3g} {'ok' if ok else 'OVER TOLERANCE ' + str(args.rel_tol)}")
    print(f"rlgemm calls per path: {rlgemm.stats()}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
