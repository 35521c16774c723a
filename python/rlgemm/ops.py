"""torch.ops.rlgemm.mm and torch.ops.rlgemm.linear: rlgemm's fp16 GEMM as PyTorch operators.

Both are registered with torch.library.custom_op, with fake (meta) implementations, so torch.compile traces
them (fullgraph included) and CUDA graphs capture them. They run on torch.cuda.current_stream().

  torch.ops.rlgemm.mm(a, b)            a: (M, K), b: (K, N)              -> (M, N)   (rlgemm's nn layout)
  torch.ops.rlgemm.linear(x, weight)   x: (..., K), weight: (N, K)       -> (..., N) (tn: x @ weight.T)

Inputs must be fp16 CUDA tensors on one device, contiguous (row-major without gaps) and 16-byte aligned;
K and N multiples of 8. The first call of a shape may compile and load its kernel: call prepare() for the
shapes a CUDA graph will capture, on the capturing stream, before the capture.
"""
import threading

import torch

from . import _library

_handles = {}
_handles_lock = threading.Lock()
_options = {}


def configure(database=None, tuned_table=None, policy=None, prefer_cublaslt=True, cache_dir=None):
    """Options of the handles created from now on (one per device, on first use); by default the environment's
    RLGEMM_DATABASE, RLGEMM_TUNED_TABLE, RLGEMM_POLICY, RLGEMM_PREFER_CUBLASLT (0/1) and RLGEMM_CACHE_DIR
    (cubin cache), else the tuned table built into librlgemm."""
    global _options
    with _handles_lock:
        _options = dict(database=database, tuned_table=tuned_table, policy=policy,
                        prefer_cublaslt=prefer_cublaslt, cache_dir=cache_dir)
        _handles.clear()


def _default_options():
    import os
    if _options:
        return _options
    return dict(database=os.environ.get("RLGEMM_DATABASE"), tuned_table=os.environ.get("RLGEMM_TUNED_TABLE"),
                policy=os.environ.get("RLGEMM_POLICY"),
                prefer_cublaslt=os.environ.get("RLGEMM_PREFER_CUBLASLT", "1") != "0", cache_dir=None)


def handle(device=None):
    """The rlgemm handle of a CUDA device (created on first use)."""
    device = torch.device("cuda", torch.cuda.current_device()) if device is None else torch.device(device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    with _handles_lock:
        h = _handles.get(index)
        if h is None:
            with torch.cuda.device(index):
                h = _library.Handle(**_default_options())
            _handles[index] = h
        return h


def _layout_code(layout):
    if layout in ("nn", _library.LAYOUT_NN):
        return _library.LAYOUT_NN
    if layout in ("tn", _library.LAYOUT_TN):
        return _library.LAYOUT_TN
    raise ValueError(f"rlgemm: layout must be 'nn' (B is K x N) or 'tn' (B is stored N x K), got {layout!r}")


def prepare(m, n, k, layout="tn", device=None, stream=None):
    """Compile and load the kernel of (m, n, k, layout) and allocate its workspace for `stream` (default: the
    current stream), so that later calls on that stream can be captured in a CUDA graph."""
    h = handle(device)
    if stream is None:
        stream = torch.cuda.current_stream(device)
    h.prepare(int(m), int(n), int(k), _layout_code(layout), stream.cuda_stream)


def stats(device=None):
    """Calls served per path (tuned, nearest, policy, default_design, cublaslt) by the device's handle."""
    return handle(device).stats()


def describe(m, n, k, layout="tn", device=None):
    """The route of a shape: which design (or cuBLASLt) serves it, and why."""
    return handle(device).describe(int(m), int(n), int(k), _layout_code(layout))


# ---- checks shared by the real and the fake implementations ----

def _check_tensor(t, name, op, dims):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"rlgemm.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float16:
        raise TypeError(f"rlgemm.{op}: {name} must be float16 (rlgemm computes fp16 GEMMs), got {t.dtype}; "
                        f"convert with {name}.half()")
    if t.device.type not in ("cuda", "meta"):
        raise ValueError(f"rlgemm.{op}: {name} must be on a CUDA device, got {t.device}; move it with {name}.cuda()")
    if dims is not None and t.dim() not in dims:
        want = " or ".join(f"{d}-D" for d in dims)
        raise ValueError(f"rlgemm.{op}: {name} must be {want}, got shape {tuple(t.shape)}")


def _check_extents(op, m, n, k):
    # The problem rules of include/rlgemm/problem.h, checked here too so that a traced graph fails early.
    if isinstance(n, int) and (n <= 0 or n % 8):
        raise ValueError(f"rlgemm.{op}: N = {n} must be a positive multiple of 8 (rows start on 16-byte boundaries)")
    if isinstance(k, int) and (k <= 0 or k % 8):
        raise ValueError(f"rlgemm.{op}: K = {k} must be a positive multiple of 8 (rows start on 16-byte boundaries)")


def _check_layout_in_memory(t, name, op):
    if not t.is_contiguous():
        raise ValueError(f"rlgemm.{op}: {name} must be contiguous (row-major, no gaps between rows), got shape "
                         f"{tuple(t.shape)} with strides {t.stride()}; pass {name}.contiguous()")
    if t.data_ptr() % 16:
        raise ValueError(f"rlgemm.{op}: {name} must start on a 16-byte boundary (its data pointer is "
                         f"{t.data_ptr():#x}, a view at an odd offset); pass {name}.clone()")


def _check_mm(a, b):
    _check_tensor(a, "a", "mm", (2,))
    _check_tensor(b, "b", "mm", (2,))
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"rlgemm.mm: a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns must equal b's "
                         f"rows (b is K x N; for a weight stored N x K use rlgemm.linear)")
    if a.device != b.device:
        raise ValueError(f"rlgemm.mm: a is on {a.device} and b on {b.device}: both must be on one device")
    _check_extents("mm", a.shape[0], b.shape[1], a.shape[1])


def _check_linear(x, weight):
    _check_tensor(x, "x", "linear", None)
    _check_tensor(weight, "weight", "linear", (2,))
    if x.dim() < 1:
        raise ValueError("rlgemm.linear: x must have at least one dimension (..., K)")
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"rlgemm.linear: x is {tuple(x.shape)} and weight is {tuple(weight.shape)}: x's last "
                         f"dimension must equal weight's columns (weight is N x K, as in nn.Linear)")
    if x.device != weight.device:
        raise ValueError(f"rlgemm.linear: x is on {x.device} and weight on {weight.device}: both must be on one device")
    _check_extents("linear", x.numel() // max(1, x.shape[-1]), weight.shape[0], weight.shape[1])


def _gemm(a2, b, out, layout, op):
    m, k = a2.shape
    n = out.shape[1]
    if m == 0:
        return out
    for t, name in ((a2, "a" if op == "mm" else "x"), (b, "b" if op == "mm" else "weight")):
        _check_layout_in_memory(t, name, op)
    stream = torch.cuda.current_stream(a2.device).cuda_stream
    handle(a2.device).hgemm(stream, m, n, k, a2.data_ptr(), b.data_ptr(), layout, out.data_ptr())
    return out


@torch.library.custom_op("rlgemm::mm", mutates_args=())
def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (M, K) @ b (K, N) in fp16 with fp32 accumulation."""
    _check_mm(a, b)
    out = torch.empty((a.shape[0], b.shape[1]), dtype=torch.float16, device=a.device)
    return _gemm(a, b, out, _library.LAYOUT_NN, "mm")


@mm.register_fake
def _mm_fake(a, b):
    _check_mm(a, b)
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.custom_op("rlgemm::linear", mutates_args=())
def linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x (..., K) @ weight (N, K).T -> (..., N), as nn.Linear without bias."""
    _check_linear(x, weight)
    n, k = weight.shape
    if x.numel() == 0:
        return x.new_empty((*x.shape[:-1], n))
    _check_layout_in_memory(x, "x", "linear")  # before reshape, which would copy a strided x silently
    x2 = x.reshape(-1, k)
    out = torch.empty((x2.shape[0], n), dtype=torch.float16, device=x.device)
    _gemm(x2, weight, out, _library.LAYOUT_TN, "linear")
    return out.reshape(*x.shape[:-1], n)


@linear.register_fake
def _linear_fake(x, weight):
    _check_linear(x, weight)
    return x.new_empty((*x.shape[:-1], weight.shape[0]))
