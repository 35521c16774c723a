#!/usr/bin/env python3
"""Triton fp16 matmul kernels (fp32 accumulation) as cubins for `rlgemm sass-opt --cubin ... --launch SPEC`.

For each configuration the kernel is compiled by the Triton of this machine's PyTorch (for the GPU it runs on:
sm_90a on an H100), run once against torch.matmul to make sure the launch is right, and timed; then written as
    OUT/<name>.cubin      the compiled kernel
    OUT/<name>.json       its launch SPEC: grid, block, dynamic shared memory and every parameter, with fills
                          that depend on the seed alone (sass-opt compares outputs bit for bit)
and listed in OUT/manifest.json ([{"name", "kernel", "cubin", "launch", "time_us", "m", "n", "k", ...}]).

    scripts/triton_cubins.py --out DIR [--rlgemm build/rlgemm] [--min-us 50]

The kernel takes plain pointers (A row-major M x K, B row-major K x N, C row-major M x N: rlgemm's "nn"
layout), no TMA descriptors. Triton 3.x appends hidden pointer parameters to a kernel (a global scratch
pointer, and in later versions a profiling one); the SPEC lists them as null pointers, or as zeroed scratch
buffers when the kernel asks for scratch memory. How many there are is read from the cubin itself
(`rlgemm sass-opt --params`), so that the SPEC matches whichever Triton compiled it.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import triton
import triton.language as tl


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    # Tiles in groups of GROUP_M rows, so that consecutive programs share columns of B in L2.
    pid = tl.program_id(axis=0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % rows
    tile_n = (pid % per_group) // rows
    offs_m = (tile_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (tile_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < left, other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * stride_bk
    rows_c = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols_c = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rows_c[:, None] * stride_cm + cols_c[None, :]
    tl.store(c_ptrs, acc.to(tl.float16), mask=(rows_c[:, None] < M) & (cols_c[None, :] < N))


# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages, M, N, K): the tile shapes of Triton's matmul
# tutorial, at sizes where each takes well over 50 us on an H100.
CONFIGS = [
    (128, 256, 64, 8, 8, 3, 4096, 4096, 4096),
    (256, 128, 64, 8, 8, 3, 4096, 4096, 4096),
    (128, 128, 64, 8, 4, 4, 4096, 4096, 4096),
    (128, 128, 32, 8, 4, 4, 4096, 4096, 2048),
    (64, 128, 32, 8, 4, 4, 4096, 4096, 2048),
    (128, 64, 64, 8, 4, 4, 2048, 4096, 4096),
]
USER_PARAMS = 9  # a, b, c, M, N, K, stride_am, stride_bk, stride_cm
USER_SIZES = [8, 8, 8, 4, 4, 4, 4, 4, 4]


def write_atomically(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    with tempfile.NamedTemporaryFile(mode, dir=path.parent, delete=False) as f:
        f.write(data)
    os.replace(f.name, path)


def meta(compiled, name, default=None):
    return getattr(compiled.metadata, name, default)


def kernel_params(rlgemm, cubin, kernel):
    out = subprocess.run([rlgemm, "sass-opt", "--cubin", str(cubin), "--kernel", kernel, "--params"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"triton_cubins: rlgemm cannot read {cubin}: {out.stderr.strip()}")
    return json.loads(out.stdout)["params"]


def time_us(launch, calls=20):
    for _ in range(3):
        launch()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        launch()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) * 1000.0 / calls


def build(config, out_dir, rlgemm, min_us):
    bm, bn, bk, group, warps, stages, m, n, k = config
    name = f"triton_{bm}x{bn}x{bk}_g{group}_w{warps}_s{stages}_{m}x{n}x{k}"
    gen = torch.Generator(device="cuda").manual_seed(1)
    a = torch.rand((m, k), device="cuda", dtype=torch.float16, generator=gen) * 2 - 1
    b = torch.rand((k, n), device="cuda", dtype=torch.float16, generator=gen) * 2 - 1
    c = torch.empty((m, n), device="cuda", dtype=torch.float16)
    programs = triton.cdiv(m, bm) * triton.cdiv(n, bn)

    def launch():
        return matmul_kernel[(programs,)](a, b, c, m, n, k, a.stride(0), b.stride(0), c.stride(0),
                                          BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group,
                                          num_warps=warps, num_stages=stages)

    compiled = launch()
    if hasattr(compiled, "result"):  # Triton versions that compile asynchronously hand back a future
        compiled = compiled.result()
    torch.cuda.synchronize()
    reference = torch.matmul(a.float(), b.float())
    error = ((c.float() - reference).abs().max() / reference.abs().max()).item()
    if not error < 1e-2:
        sys.exit(f"triton_cubins: {name} computes a wrong product (max error {error:.3g} of the largest element)")
    us = time_us(launch)
    if us < min_us:
        print(f"triton_cubins: warning: {name} takes {us:.1f} us, under {min_us} us", file=sys.stderr)

    entry = write_kernel(compiled, name, (m, n, k), programs, warps, out_dir, rlgemm)
    print(f"{name}: kernel {entry['kernel']}, {us:.1f} us, {entry['shared_bytes']} bytes of shared memory, "
          f"{entry['params']} parameters ({entry['params'] - USER_PARAMS} appended by Triton)")
    entry.update({"time_us": us, "block": [bm, bn, bk], "group": group, "num_warps": warps, "num_stages": stages})
    return entry


def write_kernel(compiled, name, shape, programs, warps, out_dir, rlgemm):
    """Writes the compiled kernel's cubin and launch SPEC; returns its manifest entry."""
    m, n, k = shape
    kernel = meta(compiled, "name") or compiled.name
    ctas = meta(compiled, "num_ctas", 1)
    cluster = list(meta(compiled, "cluster_dims", (1, 1, 1)) or (1, 1, 1))
    if ctas != 1 or any(d != 1 for d in cluster):
        sys.exit(f"triton_cubins: {name} was compiled for clusters ({ctas} CTAs, {cluster}); the SPEC here "
                 "describes single-CTA launches")
    cubin_path = out_dir / f"{name}.cubin"
    write_atomically(cubin_path, compiled.asm["cubin"])

    # The parameters the cubin takes: the kernel's own, then the pointers Triton appends.
    sizes = [p["size"] for p in kernel_params(rlgemm, cubin_path, kernel)]
    if sizes[:USER_PARAMS] != USER_SIZES or any(s != 8 for s in sizes[USER_PARAMS:]):
        sys.exit(f"triton_cubins: {name}: the cubin's parameters are {sizes} bytes; expected {USER_SIZES} "
                 "followed by 8-byte pointers (did Triton specialize an argument away?)")
    elems_a, elems_b, elems_c = m * k, k * n, m * n
    fill = {"rule": "random", "type": "fp16", "min": -1, "max": 1}
    params = [
        {"name": "a", "kind": "buffer", "bytes": 2 * elems_a, "role": "input", "fill": fill},
        {"name": "b", "kind": "buffer", "bytes": 2 * elems_b, "role": "input", "fill": fill},
        {"name": "c", "kind": "buffer", "bytes": 2 * elems_c, "role": "output", "fill": {"rule": "nan", "type": "fp16"}},
    ]
    for pname, value in (("M", m), ("N", n), ("K", k), ("stride_am", k), ("stride_bk", n), ("stride_cm", n)):
        params.append({"name": pname, "kind": "scalar", "type": "i32", "value": value})
    hidden = [("global_scratch", meta(compiled, "global_scratch_size", 0) or 0),
              ("profile_scratch", meta(compiled, "profile_scratch_size", 0) or 0)]
    for i in range(len(sizes) - USER_PARAMS):
        pname, per_program = hidden[i] if i < len(hidden) else (f"hidden{i}", 0)
        if per_program > 0:  # Triton's launcher allocates this much per program
            params.append({"name": pname, "kind": "buffer", "bytes": per_program * programs, "role": "scratch"})
        else:
            params.append({"name": pname, "kind": "null"})
    spec = {
        "name": name,
        "set": "triton",
        "problem": {"m": m, "n": n, "k": k, "layout": "nn"},
        "grid": [programs, 1, 1],
        "block": [32 * warps, 1, 1],
        "shared_bytes": int(meta(compiled, "shared", 0)),
        "params": params,
    }
    spec_path = out_dir / f"{name}.json"
    write_atomically(spec_path, json.dumps(spec, indent=1) + "\n")
    return {"name": name, "kernel": kernel, "cubin": str(cubin_path), "launch": str(spec_path), "m": m, "n": n,
            "k": k, "shared_bytes": spec["shared_bytes"], "params": len(sizes)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path, help="folder for the cubins, SPECs and manifest.json")
    parser.add_argument("--rlgemm", default=str(Path(__file__).resolve().parents[1] / "build/rlgemm"))
    parser.add_argument("--min-us", type=float, default=50.0, help="warn about kernels faster than this")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("triton_cubins: needs a CUDA GPU (Triton compiles for the GPU it runs on)")
    major, minor = torch.cuda.get_device_capability()
    kernels = [build(c, args.out, args.rlgemm, args.min_us) for c in CONFIGS]
    manifest = {"triton": triton.__version__, "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                "capability": f"{major}.{minor}", "kernels": kernels}
    write_atomically(args.out / "manifest.json", json.dumps(manifest, indent=1) + "\n")
    print(f"wrote {len(kernels)} kernels to {args.out} (Triton {triton.__version__})")


if __name__ == "__main__":
    main()
