"""rlgemm for Python: tuned fp16 GEMM kernels as PyTorch operators.

    import rlgemm                                  # registers torch.ops.rlgemm.mm and torch.ops.rlgemm.linear
    y = rlgemm.linear(x, weight, bias)             # x (..., K) fp16 CUDA, weight (N, K), bias (N,) or None
    rlgemm.swap_linears(model)                     # every suitable nn.Linear now runs on rlgemm (training too)

The operators are registered in C++ (rlgemm/csrc/ops.cpp, see rlgemm.ops) and call librlgemm.so through its C
API; where the library is looked for is described in rlgemm._library (set RLGEMM_LIBRARY=/path/to/librlgemm.so
to choose). Without PyTorch only the library layer (rlgemm.Handle, rlgemm.version) is available.
"""
from ._library import (ERROR_INVALID_INPUT, ERROR_NO_DEVICE, ERROR_OUT_OF_MEMORY, ERROR_RUNTIME, Handle,
                       LibraryNotFound, RlgemmError, candidate_paths, library, version)

try:
    import torch as _torch  # noqa: F401
except ImportError:  # the library layer works without PyTorch
    _torch = None

if _torch is not None:
    from .nn import RlgemmLinear, swap_linears, why_not_swappable
    from .ops import (BACKEND, configure, describe, first_use_seconds, handle, linear, mm, prepare, prepare_model,
                      stats)

from .tune import linear_shapes, tune_model, tune_shapes

__version__ = "0.1.0"
