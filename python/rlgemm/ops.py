"""torch.ops.rlgemm.mm and torch.ops.rlgemm.linear: rlgemm's fp16 GEMM as PyTorch operators.

  torch.ops.rlgemm.mm(a, b)                    a: (M, K), b: (K, N)          -> (M, N)    (rlgemm's nn layout)
  torch.ops.rlgemm.linear(x, weight, bias=None) x: (..., K), weight: (N, K) -> (..., N)  (tn: x @ weight.T + bias)

They are registered in C++ (csrc/ops.cpp): a call goes from the dispatcher to librlgemm on the current CUDA
stream with no Python frame, has meta kernels (torch.compile, fullgraph included) and a backward (autograd).
That library is built against the installed torch at `pip install --no-build-isolation .`, else on first import
(into ~/.cache/rlgemm/ops; one compiler call). Where it cannot be built (no compiler), the operators are
registered in Python over ctypes instead (_ctypes_ops), with a warning: the same results, more host time.
BACKEND says which ("cpp" or "ctypes"); RLGEMM_OPS=ctypes forces the fallback, RLGEMM_OPS_BUILD=0 forbids
building.

Inputs must be fp16 CUDA tensors on one device, contiguous (row-major without gaps) and 16-byte aligned; K and
N multiples of 8. The first call of a shape compiles and loads its kernel; any later call of it can be captured
in a CUDA graph (torch.cuda.graph, torch.compile(mode="reduce-overhead")) with no preparation. A shape first seen
inside a capture is refused: run it once before, or prepare() / prepare_model() it.
"""
import os
import warnings

import torch

from . import _build, _library

BACKEND = None
BACKEND_DETAIL = ""


def _load_cpp():
    if os.environ.get("RLGEMM_OPS") == "ctypes":
        raise _build.BuildError("RLGEMM_OPS=ctypes asks for the fallback")
    path, how = _build.library_for(torch, allow_build=os.environ.get("RLGEMM_OPS_BUILD", "1") != "0")
    torch.ops.load_library(str(path))
    return f"{path} ({how})"


try:
    BACKEND_DETAIL = _load_cpp()
    BACKEND = "cpp"
except Exception as e:  # noqa: BLE001 (any failure to build or load means the fallback, said loudly)
    BACKEND = "ctypes"
    BACKEND_DETAIL = str(e)
    if os.environ.get("RLGEMM_OPS") != "ctypes":
        warnings.warn("rlgemm: the C++ operator library is not available, so torch.ops.rlgemm.* run through the "
                      "ctypes fallback (a Python frame and tens of microseconds more per call): "
                      + str(e).splitlines()[0] + ". Install a C++ compiler and the CUDA headers, or reinstall "
                      "with `pip install --no-build-isolation .`", RuntimeWarning, stacklevel=2)
    from . import _ctypes_ops


def configure(database=None, tuned_table=None, policy=None, prefer_cublaslt=True, cache_dir=None, autotune=False,
              autotune_candidates=4, check_routes=True):
    """Options of the handles created from now on (one per device, on first use); by default the environment's
    RLGEMM_DATABASE, RLGEMM_TUNED_TABLE, RLGEMM_POLICY, RLGEMM_PREFER_CUBLASLT (0/1), RLGEMM_AUTOTUNE (0/1),
    else the tuned table built into librlgemm. autotune: a shape without a tuned row measures the predictor's
    `autotune_candidates` best kernels, and the designs of the two tuned rows nearest to it, against cuBLASLt at
    its first call and keeps the fastest (the choice is
    kept in the cache directory, once per machine). check_routes (RLGEMM_CHECK_ROUTES, default on): a kernel route
    serves eager or captured calls only where it measured faster than the cuBLASLt floor at the shape's first
    use; off, the table's or database's kernel serves as it is."""
    options = dict(database=database, tuned_table=tuned_table, policy=policy, prefer_cublaslt=prefer_cublaslt,
                   cache_dir=cache_dir, autotune=autotune, autotune_candidates=autotune_candidates,
                   check_routes=check_routes)
    if BACKEND == "ctypes":
        _ctypes_ops.configure(**options)
        return
    try:
        path = _library.library_path()
    except _library.LibraryNotFound:
        path = ""  # the first call says where it looked
    torch.ops.rlgemm._configure(path, database or "", tuned_table or "", policy or "", bool(prefer_cublaslt),
                                cache_dir or "", bool(autotune), int(autotune_candidates), bool(check_routes))


if BACKEND == "cpp":
    configure(**_library.options_from_environment())


def _device_index(device):
    if device is None:
        return torch.cuda.current_device()
    device = torch.device(device)
    return device.index if device.index is not None else torch.cuda.current_device()


def handle(device=None):
    """The rlgemm handle of a CUDA device (created on first use), as a _library.Handle."""
    index = _device_index(device)
    if BACKEND == "ctypes":
        return _ctypes_ops.handle(index)
    return _library.Handle.borrowed(torch.ops.rlgemm._handle(index))


def _layout_code(layout):
    if layout in ("nn", _library.LAYOUT_NN):
        return _library.LAYOUT_NN
    if layout in ("tn", _library.LAYOUT_TN):
        return _library.LAYOUT_TN
    raise ValueError(f"rlgemm: layout must be 'nn' (B is K x N) or 'tn' (B is stored N x K), got {layout!r}")


def _dtype_code(dtype):
    if dtype in (torch.float16, "fp16", "float16"):
        return _library.DTYPE_FP16
    if dtype in (torch.bfloat16, "bf16", "bfloat16"):
        return _library.DTYPE_BF16
    raise TypeError(f"rlgemm: dtype must be torch.float16 or torch.bfloat16, got {dtype!r}")


def prepare(m, n, k, layout="tn", device=None, stream=None, dtype=torch.float16):
    """Compiles, loads and plans the kernel of (m, n, k, layout) in `dtype` now, so that a capture may hold it
    without a warm-up call, and allocates its workspace for `stream` (default: the current stream)."""
    h = handle(device)
    if stream is None:
        stream = torch.cuda.current_stream(device)
    h.prepare(int(m), int(n), int(k), _layout_code(layout), stream.cuda_stream, _dtype_code(dtype))


def prepare_model(model, tokens, backward=None, device=None):
    """prepare() for every shape the rlgemm layers of `model` (RlgemmLinear, after swap_linears) run with the
    given token counts (rows of x: batch x sequence), forward (tn) and, when `backward` (default: the model's
    training mode), the backward's input gradient (nn). Returns the shapes prepared."""
    from .nn import RlgemmLinear
    if backward is None:
        backward = model.training
    shapes = set()
    for module in model.modules():
        if isinstance(module, RlgemmLinear):
            dtype = "bf16" if module.weight.dtype == torch.bfloat16 else "fp16"
            for t in tokens:
                shapes.add((int(t), module.out_features, module.in_features, "tn", dtype))
                if backward:
                    shapes.add((int(t), module.in_features, module.out_features, "nn", dtype))
    for m, n, k, layout, dtype in sorted(shapes):
        prepare(m, n, k, layout, device=device, dtype=dtype)
    return sorted(shapes)


def stats(device=None):
    """Calls served per path (tuned, nearest, policy, default_design, cublaslt, predicted: every route, so the
    values sum to all calls) by the device's handle."""
    return handle(device).stats()


def first_use_seconds(device=None):
    """What the device's handle spent on its shapes' first uses, in seconds: choosing the cuBLASLt floor (floor_s),
    building kernels (build_s) and checking kernel routes against the floor (check_s); later calls add nothing.
    prepare() and prepare_model() move this cost ahead of the first call."""
    return handle(device).first_use_seconds()


def describe(m, n, k, layout="tn", device=None, dtype=torch.float16):
    """The route of a shape in `dtype`: which design (or cuBLASLt) serves it, and why."""
    return handle(device).describe(int(m), int(n), int(k), _layout_code(layout), _dtype_code(dtype))


mm = torch.ops.rlgemm.mm
linear = torch.ops.rlgemm.linear
