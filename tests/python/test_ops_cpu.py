"""The operators without a GPU: registration, the C++ library in use, the rules and their messages, meta shapes,
autograd through meta tensors, and torch.compile(fullgraph=True) tracing (run on meta tensors). Skips without
PyTorch.

    PYTHONPATH=python python -m pytest tests/python/test_ops_cpu.py -v
"""
import pytest

torch = pytest.importorskip("torch")

import rlgemm  # noqa: E402  (registers torch.ops.rlgemm.*)

H = torch.float16


def meta(*shape, dtype=H, requires_grad=False):
    return torch.empty(*shape, device="meta", dtype=dtype, requires_grad=requires_grad)


def test_the_cpp_operators_are_registered():
    # The fallback is allowed only where it was asked for; CI builds the C++ library.
    assert rlgemm.BACKEND == "cpp", rlgemm.ops.BACKEND_DETAIL
    assert torch._C._dispatch_has_kernel_for_dispatch_key("rlgemm::linear", "CUDA")
    assert torch._C._dispatch_has_kernel_for_dispatch_key("rlgemm::linear", "Meta")
    assert torch._C._dispatch_has_kernel_for_dispatch_key("rlgemm::mm", "Autograd")
    schema = str(torch.ops.rlgemm.linear.default._schema)
    assert "Tensor? bias=None" in schema, schema


def test_meta_shapes():
    assert torch.ops.rlgemm.linear(meta(2, 9, 64), meta(40, 64)).shape == (2, 9, 40)
    bf16 = torch.ops.rlgemm.linear(meta(2, 9, 64, dtype=torch.bfloat16), meta(40, 64, dtype=torch.bfloat16))
    assert bf16.shape == (2, 9, 40) and bf16.dtype == torch.bfloat16
    assert torch.ops.rlgemm.mm(meta(9, 64, dtype=torch.bfloat16), meta(64, 40, dtype=torch.bfloat16)).dtype == torch.bfloat16
    assert torch.ops.rlgemm.linear(meta(2, 9, 64), meta(40, 64), meta(40)).shape == (2, 9, 40)
    assert torch.ops.rlgemm.linear(meta(64), meta(40, 64)).shape == (40,)
    assert torch.ops.rlgemm.mm(meta(9, 64), meta(64, 40)).shape == (9, 40)
    assert torch.ops.rlgemm.linear(meta(0, 64), meta(40, 64)).shape == (0, 40)


@pytest.mark.parametrize("call,kind,pattern", [
    (lambda: torch.ops.rlgemm.mm(torch.randn(4, 8), torch.randn(8, 8)), TypeError, r"a must be float16 .* got torch\.float32"),
    (lambda: torch.ops.rlgemm.linear(torch.randn(4, 8).bfloat16(), torch.randn(8, 8).bfloat16()), ValueError,
     r"x must be on a CUDA device, got cpu"),
    (lambda: torch.ops.rlgemm.linear(meta(4, 8, dtype=torch.bfloat16), meta(16, 8)), TypeError,
     r"x is torch\.bfloat16 and weight is torch\.float16: the operands must have one dtype"),
    (lambda: torch.ops.rlgemm.mm(meta(4, 8), meta(8, 8, dtype=torch.bfloat16)), TypeError,
     r"a is torch\.float16 and b is torch\.bfloat16: the operands must have one dtype"),
    (lambda: torch.ops.rlgemm.linear(meta(4, 8, dtype=torch.bfloat16), meta(16, 8, dtype=torch.bfloat16), meta(16)),
     TypeError, r"x is torch\.bfloat16 and bias is torch\.float16"),
    (lambda: torch.ops.rlgemm.mm(meta(4, 8, dtype=torch.float8_e4m3fn), meta(8, 8)), TypeError,
     r"a must be float16 or bfloat16 .* got torch\.[Ff]loat8_e4m3fn"),
    (lambda: torch.ops.rlgemm.mm(torch.randn(4, 8).half(), torch.randn(8, 8).half()), ValueError,
     r"a must be on a CUDA device, got cpu; move it with a\.cuda\(\)"),
    (lambda: torch.ops.rlgemm.mm(meta(4, 8), meta(16, 8)), ValueError, r"a's columns must equal b's rows"),
    (lambda: torch.ops.rlgemm.linear(meta(4, 8), meta(16, 24)), ValueError, r"x's last dimension must equal"),
    (lambda: torch.ops.rlgemm.mm(meta(4, 16), meta(16, 12)), ValueError, r"N = 12 must be a positive multiple of 8"),
    (lambda: torch.ops.rlgemm.linear(meta(4, 12), meta(16, 12)), ValueError, r"K = 12 must be a positive multiple of 8"),
    (lambda: torch.ops.rlgemm.mm(meta(4, 8), meta(16, 8).t()), ValueError, r"b must be contiguous .* strides \(1, 8\)"),
    (lambda: torch.ops.rlgemm.linear(meta(8, 4).t(), meta(16, 8)), ValueError, r"x must be contiguous"),
    (lambda: torch.ops.rlgemm.mm(meta(1, 4, 8), meta(8, 8)), ValueError, r"a must be 2-D, got shape \(1, 4, 8\)"),
    (lambda: torch.ops.rlgemm.linear(meta(4, 8), meta(16, 8), meta(8)), ValueError, r"bias must hold one value per"),
    (lambda: torch.ops.rlgemm.linear(meta(4, 8), meta(16, 8), meta(16, dtype=torch.float32)), TypeError,
     r"bias must be float16"),
    (lambda: torch.ops.rlgemm.linear(meta(4, 8), meta(16, 8), meta(32)[::2]), ValueError,
     r"bias must be contiguous .* strides \(2,\)"),
])
def test_bad_inputs_name_the_rule(call, kind, pattern):
    with pytest.raises(kind, match=pattern):
        call()


def test_autograd_through_meta_kernels():
    x = meta(3, 5, 64, requires_grad=True)
    w = meta(40, 64, requires_grad=True)
    b = meta(40, requires_grad=True)
    y = torch.ops.rlgemm.linear(x, w, b)
    assert y.requires_grad
    y.sum().backward()
    assert x.grad.shape == x.shape and w.grad.shape == w.shape and b.grad.shape == b.shape
    a, m = meta(8, 64, requires_grad=True), meta(64, 16, requires_grad=True)
    torch.ops.rlgemm.mm(a, m).sum().backward()
    assert a.grad.shape == a.shape and m.grad.shape == m.shape
    with torch.no_grad():
        assert not torch.ops.rlgemm.linear(x, w).requires_grad


def test_torch_compile_fullgraph_traces_the_operators():
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    def f(x, w1, w2, b):
        h = torch.relu(torch.ops.rlgemm.linear(x, w1, b))
        return torch.ops.rlgemm.mm(h.reshape(-1, h.shape[-1]), w2)

    compiled = torch.compile(f, fullgraph=True, backend=backend)
    out = compiled(meta(4, 33, 128), meta(256, 128), meta(256, 64), meta(256))
    assert out.shape == (4 * 33, 64)
    code = graphs[0].code
    assert "rlgemm.linear" in code and "rlgemm.mm" in code


def test_torch_compile_aot_autograd_traces_the_backward():
    def f(x, w):
        return torch.ops.rlgemm.linear(x, w).float().square().mean()

    w = meta(64, 128, requires_grad=True)
    loss = torch.compile(f, fullgraph=True, backend="aot_eager")(meta(16, 128), w)
    loss.backward()
    assert w.grad.shape == w.shape


def test_swap_linears_explains_what_it_leaves():
    model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 10))
    swapped, left = rlgemm.swap_linears(model)
    assert swapped == []
    assert "float32" in left["0"]
    bf16 = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.Linear(32, 16)).to(torch.bfloat16)
    swapped, left = rlgemm.swap_linears(bf16)
    assert swapped == [] and "CUDA" in left["0"]  # bf16 is served; a CPU weight is not
    mixed = torch.nn.Linear(64, 32).to(torch.bfloat16)
    mixed.bias.data = mixed.bias.data.half()
    assert "one dtype" in rlgemm.nn.why_not_swappable(mixed)


def test_the_build_stamp_tracks_torch_and_source(tmp_path, monkeypatch):
    from rlgemm import _build
    stamp = _build.stamp(torch)
    assert torch.__version__ in stamp
    lib = tmp_path / "_ops.so"
    lib.write_bytes(b"x")
    (tmp_path / "_ops.so.stamp").write_text(stamp + "\n")
    assert _build.is_current(lib, torch)
    (tmp_path / "_ops.so.stamp").write_text("torch 0.0 abi 1 source 0\n")
    assert not _build.is_current(lib, torch)
