"""Tune rlgemm for the model you run: its nn.Linear layers' GEMMs at the token counts you serve.

    import rlgemm
    results = rlgemm.tune_model(model, batch_sizes=(1, 8, 32, 128, 512, 2048), budget=8)

Every nn.Linear computes y = x W^T: one tn GEMM with M = tokens, N = out_features, K = in_features. The shapes
are read off the modules (no forward pass), or, with `forward=`, recorded by forward hooks while the model
runs once per token count (then layers that see fewer tokens, such as mixture-of-experts experts, are recorded
with the rows they really get). The tuner is the `rlgemm` command-line program (`rlgemm tune`), found through
$RLGEMM_CLI, next to librlgemm.so (where rlgemm.Handle loads it from), in the source checkout's build folder,
or on PATH; it measures on the GPU, writes every measurement to its database (resumable) and starts each shape
from its speed predictor's best guesses.
"""
import csv
import io
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

DEFAULT_BATCH_SIZES = (1, 8, 32, 128, 512, 2048)


def _round_up8(x):
    # N and K must be multiples of 8 (16-byte rows); padding is how serving stacks run such layers too.
    return (int(x) + 7) // 8 * 8


def linear_shapes(model, batch_sizes=DEFAULT_BATCH_SIZES, forward=None):
    """The distinct (M, N, K) GEMMs of `model`'s nn.Linear layers, in first-seen order.

    Without `forward`, every Linear runs on all the tokens: M = each batch size. With `forward` (a callable
    taking a token count and running the model on that many tokens), forward hooks record each Linear's rows
    as they are.
    """
    import torch  # the model is a torch module

    sizes = [int(b) for b in batch_sizes]
    if not sizes or any(b < 1 for b in sizes):
        raise ValueError("batch_sizes must be positive token counts, e.g. (1, 8, 32)")
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    if not linears:
        raise ValueError("the model has no nn.Linear layers to tune")
    shapes = []

    def add(m, n, k):
        shape = (int(m), _round_up8(n), _round_up8(k))
        if shape[0] >= 1 and shape not in shapes:
            shapes.append(shape)

    if forward is None:
        for tokens in sizes:
            for layer in linears:
                add(tokens, layer.out_features, layer.in_features)
        return shapes

    def hook(module, inputs, output):
        x = inputs[0]
        rows = x.numel() // x.shape[-1] if x.dim() > 0 else 0
        add(rows, module.out_features, module.in_features)

    handles = [layer.register_forward_hook(hook) for layer in linears]
    try:
        with torch.no_grad():
            for tokens in sizes:
                forward(tokens)
    finally:
        for h in handles:
            h.remove()
    return shapes


def find_cli():
    """The `rlgemm` executable: $RLGEMM_CLI, beside librlgemm.so, in the checkout's build folder, or on PATH."""
    env = os.environ.get("RLGEMM_CLI")
    if env:
        return env
    places = []
    lib = os.environ.get("RLGEMM_LIBRARY")
    if lib:
        places.append(Path(lib).resolve().parent / "rlgemm")
    here = Path(__file__).resolve().parent
    places.append(here / "rlgemm")
    repo = here.parent.parent
    places.append(repo / "build" / "rlgemm")
    places += sorted(repo.glob("build-*/rlgemm"))
    for p in places:
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    on_path = shutil.which("rlgemm")
    if on_path:
        return on_path
    raise FileNotFoundError("the rlgemm program was not found (looked at " + ", ".join(str(p) for p in places) +
                            " and PATH); build it (cmake --build build) or set RLGEMM_CLI=/path/to/rlgemm")


def tune_shapes(shapes, budget=8, db="rlgemm-tune.db", backend=None, extra_args=(), cli=None, dtype="fp16"):
    """Runs `rlgemm tune` on (M, N, K) shapes (tn layout) of element type `dtype` ("fp16" or "bf16"); returns one dict per shape from its result table
    (m, n, k, evaluations, reference_us, best_us, speedup, design), the speedup being over cuBLASLt.

    `backend` None measures on the GPU; "synthetic" asks for the CPU cost model by name (estimates only).
    Raises subprocess.CalledProcessError (with the tuner's message in .stderr) when the tuner fails.
    """
    shapes = [(int(m), int(n), int(k)) for m, n, k in shapes]
    if not shapes:
        raise ValueError("no shapes to tune")
    cli = cli or find_cli()
    with tempfile.TemporaryDirectory(prefix="rlgemm-tune-") as tmp:
        path = Path(tmp) / "shapes.csv"
        path.write_text("M,N,K\n" + "".join(f"{m},{n},{k}\n" for m, n, k in shapes))
        cmd = [cli, "tune", "--shapes", str(path), "--layout", "tn", "--dtype", dtype, "--budget", str(budget),
               "--db", str(db)]
        if backend:
            cmd += ["--backend", backend]
        cmd += [str(a) for a in extra_args]
        done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise subprocess.CalledProcessError(done.returncode, cmd, output=done.stdout, stderr=done.stderr)
    rows = []
    for row in csv.DictReader(io.StringIO(done.stdout)):
        rows.append({"m": int(row["m"]), "n": int(row["n"]), "k": int(row["k"]),
                     "evaluations": int(row["evaluations"]), "reference_us": float(row["reference_us"]),
                     "best_us": float(row["best_us"]), "speedup": float(row["speedup"]), "design": row["design"]})
    return rows


def tune_model(model, batch_sizes=DEFAULT_BATCH_SIZES, budget=8, db="rlgemm-tune.db", forward=None, backend=None,
               extra_args=(), cli=None):
    """Records the GEMMs of `model`'s nn.Linear layers at `batch_sizes` tokens (linear_shapes) and tunes them
    (tune_shapes) in the element type of the model's weights (bf16 for a bfloat16 model, else fp16). A handle
    opened on `db` (rlgemm.Handle(database=db), rlgemm.configure(database=db)) then serves them with the tuned
    kernels."""
    import torch

    weights = [m.weight.dtype for m in model.modules() if isinstance(m, torch.nn.Linear)]
    dtype = "bf16" if weights and weights[0] == torch.bfloat16 else "fp16"
    return tune_shapes(linear_shapes(model, batch_sizes, forward), budget=budget, db=db, backend=backend,
                       extra_args=extra_args, cli=cli, dtype=dtype)
