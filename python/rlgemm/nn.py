"""Swapping a model's nn.Linear layers for rlgemm."""
import torch
from torch import nn

from . import ops  # noqa: F401  (registers torch.ops.rlgemm.*)

_linear = torch.ops.rlgemm.linear.default


class RlgemmLinear(nn.Module):
    """nn.Linear computed by torch.ops.rlgemm.linear (fp16 or bf16, CUDA), bias included; trains too (the operator has a
    backward). Shares the original layer's parameters."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features = linear.in_features
        self.out_features = linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias

    def forward(self, x):
        if not x.is_contiguous():
            x = x.contiguous()
        return _linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def why_not_swappable(linear: nn.Linear):
    """Why rlgemm cannot serve this layer, or None when it can."""
    w = linear.weight
    if w.dtype not in (torch.float16, torch.bfloat16):
        return f"weight is {w.dtype}, rlgemm computes float16 and bfloat16"
    if linear.bias is not None and linear.bias.dtype != w.dtype:
        return f"bias is {linear.bias.dtype} and weight {w.dtype}: rlgemm needs one dtype"
    if w.device.type != "cuda":
        return f"weight is on {w.device}, rlgemm runs on CUDA devices"
    if linear.in_features % 8 or linear.out_features % 8:
        return (f"{linear.in_features} -> {linear.out_features} features: rlgemm needs multiples of 8")
    if not w.is_contiguous():
        return "weight is not contiguous"
    return None


def swap_linears(model: nn.Module, skip=()):
    """Replaces, in place, every nn.Linear of `model` that rlgemm can serve (fp16 or bf16 CUDA weights, feature counts
    multiples of 8; names in `skip` are left alone) by an RlgemmLinear sharing its parameters. Returns
    (swapped names, {left-alone name: reason})."""
    swapped, left = [], {}
    for name, module in list(model.named_modules()):
        if not isinstance(module, nn.Linear) or isinstance(module, RlgemmLinear):
            continue
        if name in skip:
            left[name] = "skipped by the caller"
            continue
        why = why_not_swappable(module)
        if why:
            left[name] = why
            continue
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, RlgemmLinear(module))
        swapped.append(name)
    return swapped, left
