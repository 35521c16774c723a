"""The fallback operators, where the C++ operator library (csrc/ops.cpp) cannot be built (no compiler, no CUDA
headers): torch.ops.rlgemm.mm and torch.ops.rlgemm.linear as torch.library.custom_op in Python, calling
librlgemm through ctypes. Same schemas, checks and messages as the C++ ones, but every call runs Python code
(tens of microseconds), and inside a CUDA graph capture the workspace comes from PyTorch's caching allocator
here too.
"""
import threading
from typing import Optional

import torch

from . import _library

_handles = {}
_handles_lock = threading.Lock()
_options = {}


def configure(**options):
    global _options
    with _handles_lock:
        _options = dict(options)
        _handles.clear()


def _default_options():
    if _options:
        return _options
    return _library.options_from_environment()


def handle(index):
    with _handles_lock:
        h = _handles.get(index)
        if h is None:
            with torch.cuda.device(index):
                h = _library.Handle(**_default_options())
            _handles[index] = h
        return h


# ---- checks shared by the real and the fake implementations (the C++ library's, in Python) ----

# The element types rlgemm computes, with their C API codes.
_DTYPES = {torch.float16: _library.DTYPE_FP16, torch.bfloat16: _library.DTYPE_BF16}


def _check_tensor(t, name, op, dims):
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"rlgemm.{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in _DTYPES:
        raise TypeError(f"rlgemm.{op}: {name} must be float16 or bfloat16 (rlgemm computes fp16 and bf16 GEMMs), "
                        f"got {t.dtype}; convert with {name}.half() or {name}.bfloat16()")
    if t.device.type not in ("cuda", "meta"):
        raise ValueError(f"rlgemm.{op}: {name} must be on a CUDA device, got {t.device}; move it with {name}.cuda()")
    if dims is not None and t.dim() != dims:
        raise ValueError(f"rlgemm.{op}: {name} must be {dims}-D, got shape {tuple(t.shape)}")


def _check_same_dtype(t, name, first, first_name, op):
    # One element type for every operand: a kernel reads and writes one type, and rlgemm converts nothing.
    if t.dtype != first.dtype:
        raise TypeError(f"rlgemm.{op}: {first_name} is {first.dtype} and {name} is {t.dtype}: the operands must "
                        f"have one dtype (rlgemm computes float16 or bfloat16 GEMMs, not mixed ones); convert with "
                        f"{name}.to({first_name}.dtype)")


def _check_extents(op, n, k):
    # The problem rules of include/rlgemm/problem.h, checked here too so that a traced graph fails early.
    if n <= 0 or n % 8:
        raise ValueError(f"rlgemm.{op}: N = {n} must be a positive multiple of 8 (rows start on 16-byte boundaries)")
    if k <= 0 or k % 8:
        raise ValueError(f"rlgemm.{op}: K = {k} must be a positive multiple of 8 (rows start on 16-byte boundaries)")


def _check_contiguous(t, name, op):
    if not t.is_contiguous():
        raise ValueError(f"rlgemm.{op}: {name} must be contiguous (row-major, no gaps between rows), got shape "
                         f"{tuple(t.shape)} with strides {t.stride()}; pass {name}.contiguous()")


def _check_aligned(t, name, op):
    if t.data_ptr() % 16:
        raise ValueError(f"rlgemm.{op}: {name} must start on a 16-byte boundary (its data pointer is "
                         f"{t.data_ptr():#x}, a view at an odd offset); pass {name}.clone()")


def _check_mm(a, b):
    _check_tensor(a, "a", "mm", 2)
    _check_tensor(b, "b", "mm", 2)
    _check_same_dtype(b, "b", a, "a", "mm")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"rlgemm.mm: a is {tuple(a.shape)} and b is {tuple(b.shape)}: a's columns must equal b's "
                         f"rows (b is K x N; for a weight stored N x K use rlgemm.linear)")
    if a.device != b.device:
        raise ValueError(f"rlgemm.mm: a is on {a.device} and b on {b.device}: both must be on one device")
    _check_extents("mm", b.shape[1], a.shape[1])
    _check_contiguous(a, "a", "mm")
    _check_contiguous(b, "b", "mm")


def _check_linear(x, weight, bias):
    _check_tensor(x, "x", "linear", None)
    _check_tensor(weight, "weight", "linear", 2)
    _check_same_dtype(weight, "weight", x, "x", "linear")
    if x.dim() < 1:
        raise ValueError("rlgemm.linear: x must have at least one dimension (..., K)")
    if x.shape[-1] != weight.shape[1]:
        raise ValueError(f"rlgemm.linear: x is {tuple(x.shape)} and weight is {tuple(weight.shape)}: x's last "
                         f"dimension must equal weight's columns (weight is N x K, as in nn.Linear)")
    if x.device != weight.device:
        raise ValueError(f"rlgemm.linear: x is on {x.device} and weight on {weight.device}: both must be on one device")
    _check_extents("linear", weight.shape[0], weight.shape[1])
    if bias is not None:
        _check_tensor(bias, "bias", "linear", 1)
        _check_same_dtype(bias, "bias", x, "x", "linear")
        if bias.shape[0] != weight.shape[0]:
            raise ValueError(f"rlgemm.linear: bias is {tuple(bias.shape)} and weight is {tuple(weight.shape)}: bias "
                             f"must hold one value per output feature (N)")
        if bias.device != weight.device:
            raise ValueError(f"rlgemm.linear: bias is on {bias.device} and weight on {weight.device}: both must be "
                             f"on one device")
    _check_contiguous(x, "x", "linear")  # before the reshape, which would copy a strided x silently
    _check_contiguous(weight, "weight", "linear")
    if bias is not None:
        _check_contiguous(bias, "bias", "linear")


def _gemm(a2, b, out, layout, op, names, bias=None):
    """out = a2 b (+ bias, which the handle adds: in cuBLASLt's epilogue, or on a kernel route right after)."""
    m, k = a2.shape
    n = out.shape[1]
    if m == 0:
        return out
    _check_aligned(a2, names[0], op)
    _check_aligned(b, names[1], op)
    if bias is not None:
        _check_aligned(bias, "bias", op)
    h = handle(a2.device.index)
    stream = torch.cuda.current_stream(a2.device).cuda_stream
    dtype = _DTYPES[a2.dtype]
    ws, bytes_ = None, 0
    if torch.cuda.is_current_stream_capturing():
        bytes_ = h.workspace_size(m, n, k, layout, stream, dtype)
        ws = torch.empty(bytes_, dtype=torch.uint8, device=a2.device) if bytes_ else None
    ws_ptr = ws.data_ptr() if ws is not None else 0
    if bias is not None:
        h.gemm_bias(stream, m, n, k, a2.data_ptr(), b.data_ptr(), layout, out.data_ptr(), dtype, bias.data_ptr(),
                    ws_ptr, bytes_)
    else:
        h.gemm(stream, m, n, k, a2.data_ptr(), b.data_ptr(), layout, out.data_ptr(), dtype, ws_ptr, bytes_)
    return out


@torch.library.custom_op("rlgemm::mm", mutates_args=())
def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    _check_mm(a, b)
    out = torch.empty((a.shape[0], b.shape[1]), dtype=a.dtype, device=a.device)
    return _gemm(a, b, out, _library.LAYOUT_NN, "mm", ("a", "b"))


@mm.register_fake
def _mm_fake(a, b):
    _check_mm(a, b)
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.custom_op("rlgemm::linear", mutates_args=())
def linear(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    _check_linear(x, weight, bias)
    n, k = weight.shape
    out = torch.empty((*x.shape[:-1], n), dtype=x.dtype, device=x.device)
    if x.numel() == 0:
        return out
    _gemm(x.view(-1, k), weight, out.view(-1, n), _library.LAYOUT_TN, "linear", ("x", "weight"), bias)
    return out


@linear.register_fake
def _linear_fake(x, weight, bias=None):
    _check_linear(x, weight, bias)
    return x.new_empty((*x.shape[:-1], weight.shape[0]))


def _linear_setup(ctx, inputs, output):
    x, weight, bias = inputs
    ctx.save_for_backward(x, weight)
    ctx.has_bias = bias is not None


def _linear_backward(ctx, dy):
    # dx = dy W through rlgemm's nn layout; dW = dy^T x through torch (rlgemm has no layout for it).
    x, weight = ctx.saved_tensors
    n, k = weight.shape
    dy2 = dy.reshape(-1, n).contiguous()
    dx = torch.ops.rlgemm.mm(dy2, weight).view(x.shape) if ctx.needs_input_grad[0] else None
    dw = dy2.t() @ x.reshape(-1, k) if ctx.needs_input_grad[1] else None
    db = dy2.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
    return dx, dw, db


def _mm_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _mm_backward(ctx, dc):
    a, b = ctx.saved_tensors
    dc = dc.contiguous()
    da = torch.ops.rlgemm.linear(dc, b) if ctx.needs_input_grad[0] else None
    db = a.t() @ dc if ctx.needs_input_grad[1] else None
    return da, db


linear.register_autograd(_linear_backward, setup_context=_linear_setup)
mm.register_autograd(_mm_backward, setup_context=_mm_setup)
