"""torch.ops.rlgemm.mm / linear on a GPU: against torch.matmul in fp32, under torch.compile (fullgraph), inside
CUDA graphs, swap_linears, and bad inputs. Skips without PyTorch or without a CUDA GPU.

    PYTHONPATH=python RLGEMM_LIBRARY=build/librlgemm.so python -m pytest tests/python -v
"""
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU (torch.cuda.is_available() is False)", allow_module_level=True)

import rlgemm  # noqa: E402  (registers torch.ops.rlgemm.*)

DEV = "cuda"


def reference(a, b_kn):
    return (a.float() @ b_kn.float())


def assert_close(got, ref, k):
    # fp16 output rounding plus fp32 accumulation order over K products of unit-variance inputs.
    tol = 2.0 ** -9 * (ref.abs() + 4 * k ** 0.5)
    err = (got.float() - ref).abs()
    assert torch.isfinite(got).all()
    assert (err <= tol).all(), f"max error {err.max().item():.4g}"


SHAPES = [(1, 8, 8), (7, 72, 24), (100, 200, 136), (257, 520, 1000), (1000, 4096, 512)]


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_mm_matches_matmul(m, n, k):
    a = torch.randn(m, k, device=DEV, dtype=torch.half)
    b = torch.randn(k, n, device=DEV, dtype=torch.half)
    assert_close(torch.ops.rlgemm.mm(a, b), reference(a, b), k)


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_linear_matches_matmul(m, n, k):
    x = torch.randn(m, k, device=DEV, dtype=torch.half)
    w = torch.randn(n, k, device=DEV, dtype=torch.half)
    assert_close(torch.ops.rlgemm.linear(x, w), reference(x, w.t()), k)


def test_linear_flattens_leading_dimensions():
    x = torch.randn(3, 5, 64, device=DEV, dtype=torch.half)
    w = torch.randn(128, 64, device=DEV, dtype=torch.half)
    y = torch.ops.rlgemm.linear(x, w)
    assert y.shape == (3, 5, 128)
    assert_close(y, reference(x.reshape(-1, 64), w.t()).reshape(3, 5, 128), 64)
    assert torch.ops.rlgemm.linear(x[:0], w).shape == (0, 5, 128)


def test_torch_compile_fullgraph():
    w1 = torch.randn(256, 128, device=DEV, dtype=torch.half)
    w2 = torch.randn(128, 256, device=DEV, dtype=torch.half)

    def f(x, b):
        h = torch.relu(torch.ops.rlgemm.linear(x, w1))  # (4, 33, 256): leading dimensions flattened
        return torch.ops.rlgemm.mm(torch.ops.rlgemm.linear(h, w2).reshape(-1, 128), b)

    compiled = torch.compile(f, fullgraph=True)
    x = torch.randn(4, 33, 128, device=DEV, dtype=torch.half)
    b = torch.randn(128, 64, device=DEV, dtype=torch.half)
    got, want = compiled(x, b), f(x, b)
    assert got.shape == (4 * 33, 64)
    torch.testing.assert_close(got, want, rtol=0, atol=0)  # the same kernels, traced


def test_fake_impl_gives_shapes_without_running():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        x = torch.empty(2, 9, 64, device=DEV, dtype=torch.half)
        w = torch.empty(40, 64, device=DEV, dtype=torch.half)
        assert torch.ops.rlgemm.linear(x, w).shape == (2, 9, 40)
        assert torch.ops.rlgemm.mm(x[0], w.t().contiguous()).shape == (9, 40)


def test_cuda_graph_capture_and_replay():
    x = torch.randn(48, 256, device=DEV, dtype=torch.half)
    w = torch.randn(512, 256, device=DEV, dtype=torch.half)
    b = torch.randn(512, 64, device=DEV, dtype=torch.half)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        # Warm-up on the capturing stream: compiles, loads and allocates what the shapes need.
        for _ in range(2):
            torch.ops.rlgemm.mm(torch.ops.rlgemm.linear(x, w), b)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        out = torch.ops.rlgemm.mm(torch.ops.rlgemm.linear(x, w), b)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        h = torch.ops.rlgemm.linear(x, w)
        torch.testing.assert_close(out, torch.ops.rlgemm.mm(h, b), rtol=0, atol=0)
        assert_close(h, reference(x, w.t()), 256)


def test_prepare_then_capture_on_the_default_graph_stream():
    x = torch.randn(24, 128, device=DEV, dtype=torch.half)
    w = torch.randn(64, 128, device=DEV, dtype=torch.half)
    graph = torch.cuda.CUDAGraph()
    rlgemm.prepare(24, 64, 128, "tn")  # kernels are loaded once per process; no workspace for this route
    torch.ops.rlgemm.linear(x, w)
    with torch.cuda.graph(graph):
        y = torch.ops.rlgemm.linear(x, w)
    graph.replay()
    torch.cuda.synchronize()
    assert_close(y, reference(x, w.t()), 128)


def test_swap_linears_keeps_the_model_output():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 64, bias=False),
                                torch.nn.Linear(64, 10)).to(DEV).half()
    x = torch.randn(5, 7, 128, device=DEV, dtype=torch.half)
    want = model(x)
    swapped, left = rlgemm.swap_linears(model)
    assert swapped == ["0", "2"]
    assert "3" in left and "multiples of 8" in left["3"]
    assert isinstance(model[0], rlgemm.RlgemmLinear)
    got = model(x)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    assert sum(rlgemm.stats().values()) > 0


def test_bad_inputs_say_what_to_do():
    a = torch.randn(16, 64, device=DEV, dtype=torch.half)
    b = torch.randn(64, 32, device=DEV, dtype=torch.half)
    with pytest.raises(TypeError, match="float16"):
        torch.ops.rlgemm.mm(a.float(), b)
    with pytest.raises(ValueError, match="CUDA"):
        torch.ops.rlgemm.mm(a.cpu(), b.cpu())
    with pytest.raises(ValueError, match="columns must equal"):
        torch.ops.rlgemm.mm(a, b.t())
    with pytest.raises(ValueError, match="multiple of 8"):
        torch.ops.rlgemm.mm(a, torch.randn(64, 30, device=DEV, dtype=torch.half))
    with pytest.raises(ValueError, match="contiguous"):
        torch.ops.rlgemm.mm(a, torch.randn(32, 64, device=DEV, dtype=torch.half).t())
    with pytest.raises(ValueError, match="16-byte"):
        torch.ops.rlgemm.mm(torch.randn(16 * 64 + 1, device=DEV, dtype=torch.half)[1:].view(16, 64), b)
    with pytest.raises(ValueError, match="2-D"):
        torch.ops.rlgemm.mm(a[None], b)
    with pytest.raises(ValueError, match="weight"):
        torch.ops.rlgemm.linear(a, b)  # weight must be N x K
