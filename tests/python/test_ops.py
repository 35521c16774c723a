"""torch.ops.rlgemm.mm / linear on a GPU: against torch.matmul in fp32, under torch.compile (fullgraph, and
reduce-overhead), inside CUDA graphs with no prepare(), threads on cudaStreamPerThread, gradients against torch,
swap_linears in training, and bad inputs. Skips without PyTorch or without a CUDA GPU.

    PYTHONPATH=python RLGEMM_LIBRARY=build/librlgemm.so python -m pytest tests/python -v
"""
import threading

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


@pytest.mark.parametrize("dtype", [torch.half, torch.bfloat16])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_linear_adds_the_bias(m, n, k, dtype):
    # The handle adds the bias (cuBLASLt's epilogue on the floor, a second launch on a kernel route).
    x = torch.randn(m, k, device=DEV, dtype=dtype)
    w = torch.randn(n, k, device=DEV, dtype=dtype)
    bias = 4 * torch.randn(n, device=DEV, dtype=dtype)
    got = torch.ops.rlgemm.linear(x, w, bias)
    want = reference(x, w.t()) + bias.float()
    if dtype == torch.half:
        assert_close(got, want, k)
    else:  # bf16 rounds at 2^-8: two roundings (product, then sum) on a kernel route
        err = (got.float() - want).abs()
        assert torch.isfinite(got).all()
        assert (err <= 2.0 ** -7 * (want.abs() + 4 * k ** 0.5)).all(), f"max error {err.max().item():.4g}"


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


@pytest.fixture
def split_k_table(tmp_path):
    """Handles whose tuned table sends (64, 256, 4096) tn and (64, 4096, 256) nn to a serial split-K design (a
    workspace, flags that other CTAs wait on), served as it is (no first-use check against cuBLASLt, which would
    send these shapes to the floor where the kernel measures slower); restored to the defaults afterwards."""
    major, minor = torch.cuda.get_device_capability()
    design = ("sm90.ws.pingpong/64x128x64/s4/c1x1/raster_m.g8/splitk4.serial/epi_reg" if (major, minor) == (9, 0)
              else "sm80/64x64x64/w32x32/s3/swz/raster_m.g8/splitk3.serial/epi_reg")
    name = torch.cuda.get_device_name()
    table = tmp_path / "tuned.csv"
    table.write_text("gpu,M,N,K,layout,design,time_us,speedup_vs_lt_auto\n"
                     f"{name},64,256,4096,tn,{design},10,1.5\n{name},64,4096,256,nn,{design},10,1.5\n")
    rlgemm.configure(tuned_table=str(table), check_routes=False)
    yield design
    rlgemm.configure()


def test_bias_on_a_split_k_kernel_and_in_a_graph(split_k_table):
    x = torch.randn(64, 4096, device=DEV, dtype=torch.half)
    w = torch.randn(256, 4096, device=DEV, dtype=torch.half)
    bias = torch.randn(256, device=DEV, dtype=torch.half)
    assert rlgemm.describe(64, 256, 4096).startswith("tuned " + split_k_table)
    want = reference(x, w.t()) + bias.float()
    assert_close(torch.ops.rlgemm.linear(x, w, bias), want, 4096)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = torch.ops.rlgemm.linear(x, w, bias)
    out.fill_(float("nan"))
    graph.replay()
    torch.cuda.synchronize()
    assert_close(out, want, 4096)


def test_cuda_graph_capture_needs_no_prepare(split_k_table):
    # Warm-up on the default stream only; torch.cuda.graph captures on a stream of its own.
    x = torch.randn(64, 4096, device=DEV, dtype=torch.half)
    w = torch.randn(256, 4096, device=DEV, dtype=torch.half)
    b = torch.randn(256, 64, device=DEV, dtype=torch.half)
    assert rlgemm.handle().workspace_size(64, 256, 4096, 1) > 0, rlgemm.describe(64, 256, 4096)
    assert rlgemm.describe(64, 256, 4096).startswith("tuned " + split_k_table)
    torch.ops.rlgemm.mm(torch.ops.rlgemm.linear(x, w), b)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = torch.ops.rlgemm.mm(torch.ops.rlgemm.linear(x, w), b)
    for _ in range(3):
        x.copy_(torch.randn_like(x))
        graph.replay()
        h = torch.ops.rlgemm.linear(x, w)  # a direct call between replays: its own workspace
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, torch.ops.rlgemm.mm(h, b), rtol=0, atol=0)
        assert_close(h, reference(x, w.t()), 4096)


def test_a_shape_first_seen_inside_a_capture_is_refused_with_the_remedy():
    x = torch.randn(24, 136, device=DEV, dtype=torch.half)
    w = torch.randn(72, 136, device=DEV, dtype=torch.half)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(Exception, match="first seen while its stream is being captured"):
        with torch.cuda.graph(graph):
            torch.ops.rlgemm.linear(x, w)
    rlgemm.prepare(24, 72, 136, "tn")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = torch.ops.rlgemm.linear(x, w)
    graph.replay()
    torch.cuda.synchronize()
    assert_close(y, reference(x, w.t()), 136)


def test_threads_on_cuda_stream_per_thread_get_their_own_workspace(split_k_table):
    w = torch.randn(256, 4096, device=DEV, dtype=torch.half)
    xs = [torch.randn(64, 4096, device=DEV, dtype=torch.half) for _ in range(2)]
    want = [torch.ops.rlgemm.linear(x, w) for x in xs]
    torch.cuda.synchronize()
    got, errors = [None, None], []
    per_thread = torch.cuda.ExternalStream(2)  # cudaStreamPerThread: another stream in each thread

    def worker(i):
        try:
            with torch.cuda.stream(per_thread):
                outs = [torch.ops.rlgemm.linear(xs[i], w) for _ in range(50)]
                torch.cuda.current_stream().synchronize()
            got[i] = outs
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i in range(2):
        for out in got[i]:
            torch.testing.assert_close(out, want[i], rtol=0, atol=0)


def test_torch_compile_reduce_overhead():
    w = torch.randn(512, 256, device=DEV, dtype=torch.half)

    def f(x):
        return torch.relu(torch.ops.rlgemm.linear(x, w))

    compiled = torch.compile(f, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):  # warm-up runs, then recorded graphs replayed
        x = torch.randn(32, 256, device=DEV, dtype=torch.half)
        torch.testing.assert_close(compiled(x).clone(), f(x), rtol=0, atol=0)


def test_gradients_match_torch():
    torch.manual_seed(1)
    x = torch.randn(3, 40, 256, device=DEV, dtype=torch.half, requires_grad=True)
    w = torch.randn(128, 256, device=DEV, dtype=torch.half, requires_grad=True)
    bias = torch.randn(128, device=DEV, dtype=torch.half, requires_grad=True)
    dy = torch.randn(3, 40, 128, device=DEV, dtype=torch.half)
    torch.ops.rlgemm.linear(x, w, bias).backward(dy)
    x32, w32, b32 = (t.detach().float().requires_grad_() for t in (x, w, bias))
    torch.nn.functional.linear(x32, w32, b32).backward(dy.float())
    for got, want, k in ((x.grad, x32.grad, 128), (w.grad, w32.grad, 120), (bias.grad, b32.grad, 120)):
        assert_close(got, want, k)
    a = torch.randn(48, 256, device=DEV, dtype=torch.half, requires_grad=True)
    b = torch.randn(256, 64, device=DEV, dtype=torch.half, requires_grad=True)
    dc = torch.randn(48, 64, device=DEV, dtype=torch.half)
    torch.ops.rlgemm.mm(a, b).backward(dc)
    a32, b32 = (t.detach().float().requires_grad_() for t in (a, b))
    (a32 @ b32).backward(dc.float())
    assert_close(a.grad, a32.grad, 64)
    assert_close(b.grad, b32.grad, 48)


def test_swap_linears_trains_like_torch():
    torch.manual_seed(2)
    ref = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 64, bias=False)).to(DEV)
    ref = ref.half().train()
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 64, bias=False))
    model = model.to(DEV).half().train()
    model.load_state_dict(ref.state_dict())
    swapped, _ = rlgemm.swap_linears(model)
    assert swapped == ["0", "2"]
    x = torch.randn(6, 7, 128, device=DEV, dtype=torch.half)
    for m in (ref, model):
        m(x).float().square().mean().backward()
    for (name, p), (_, q) in zip(model.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=3e-2, atol=3e-3, msg=name)


def assert_close_bf16(got, a, b_kn):
    # Against fp64: bf16 output rounding (half an ulp is 2^-8 relative, twice that allowed) plus fp32
    # accumulation order (2^-16 of the sum of magnitudes), the gate's rule for bf16.
    ref = a.double() @ b_kn.double()
    mag = a.double().abs() @ b_kn.double().abs()
    assert got.dtype == torch.bfloat16
    assert torch.isfinite(got).all()
    err = (got.double() - ref).abs()
    tol = 2.0 ** -7 * ref.abs() + 2.0 ** -16 * mag + 1e-30
    assert (err <= tol).all(), f"max error/tolerance {(err / tol).max().item():.4g}"


@pytest.mark.parametrize("m,n,k", SHAPES)
def test_bf16_mm_and_linear_match_fp64(m, n, k):
    a = torch.randn(m, k, device=DEV, dtype=torch.bfloat16)
    b = torch.randn(k, n, device=DEV, dtype=torch.bfloat16)
    assert_close_bf16(torch.ops.rlgemm.mm(a, b), a, b)
    w = torch.randn(n, k, device=DEV, dtype=torch.bfloat16)
    assert_close_bf16(torch.ops.rlgemm.linear(a, w), a, w.t())
    # Positive inputs: sums grow with K, which a bf16 accumulator could not follow.
    ap, wp = a.abs(), w.abs()
    assert_close_bf16(torch.ops.rlgemm.linear(ap, wp), ap, wp.t())
    assert "bf16" in rlgemm.describe(m, n, k, "tn", dtype=torch.bfloat16) or "cublaslt" in \
        rlgemm.describe(m, n, k, "tn", dtype=torch.bfloat16)


def test_mixed_dtypes_are_refused_clearly():
    x = torch.randn(8, 64, device=DEV, dtype=torch.bfloat16)
    w = torch.randn(16, 64, device=DEV, dtype=torch.half)
    with pytest.raises(TypeError, match="x is torch.bfloat16 and weight is torch.float16"):
        torch.ops.rlgemm.linear(x, w)


class TinyLlama(torch.nn.Module):
    """A Llama-shaped decoder (RMSNorm, q/k/v/o, SwiGLU gate/up/down, lm_head), small enough for a test."""

    def __init__(self, vocab=512, dim=256, heads=4, hidden=688, layers=2):
        super().__init__()
        self.heads = heads
        self.embed = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList()
        for _ in range(layers):
            b = torch.nn.Module()
            b.norm1, b.norm2 = torch.nn.RMSNorm(dim), torch.nn.RMSNorm(dim)
            b.q, b.k, b.v, b.o = (torch.nn.Linear(dim, dim, bias=False) for _ in range(4))
            b.gate, b.up = torch.nn.Linear(dim, hidden, bias=False), torch.nn.Linear(dim, hidden, bias=False)
            b.down = torch.nn.Linear(hidden, dim, bias=False)
            self.blocks.append(b)
        self.norm = torch.nn.RMSNorm(dim)
        self.lm_head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        bsz, seq, dim = x.shape
        for b in self.blocks:
            h = b.norm1(x)
            q, k, v = (t(h).view(bsz, seq, self.heads, -1).transpose(1, 2) for t in (b.q, b.k, b.v))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + b.o(a.transpose(1, 2).reshape(bsz, seq, dim))
            h = b.norm2(x)
            x = x + b.down(torch.nn.functional.silu(b.gate(h)) * b.up(h))
        return self.lm_head(self.norm(x))


def test_bf16_llama_style_model_through_swap_linears():
    torch.manual_seed(0)
    model = TinyLlama().to(DEV).to(torch.bfloat16).eval()
    tokens = torch.randint(0, 512, (2, 37), device=DEV)
    with torch.no_grad():
        want = model.float()(tokens).double()  # the same weights, fp32 throughout
        model.to(torch.bfloat16)
        ref_bf16 = model(tokens)
        swapped, left = rlgemm.swap_linears(model)
        assert len(swapped) == 2 * 7 + 1 and not left
        got = model(tokens)
    assert got.dtype == torch.bfloat16 and torch.isfinite(got).all()
    # rlgemm's bf16 logits are as close to the fp32 model's as torch's own bf16 logits are.
    err_rlgemm = (got.double() - want).abs().mean().item()
    err_torch = (ref_bf16.double() - want).abs().mean().item()
    assert err_rlgemm <= 1.5 * err_torch + 1e-3, (err_rlgemm, err_torch)
    assert (got.argmax(-1) == ref_bf16.argmax(-1)).float().mean().item() > 0.9


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
    before = rlgemm.stats()
    got = model(x)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    # One call per swapped layer, counted on whichever route served it (predicted kernels are on by default).
    after = rlgemm.stats()
    assert sum(after.values()) - sum(before.values()) == 2, (before, after)
    # The layers' shapes were new: their first uses chose a floor each; calls of known shapes add no time.
    spent = rlgemm.first_use_seconds()
    assert set(spent) == {"floor_s", "build_s", "check_s"} and spent["floor_s"] > 0, spent
    model(x)
    assert rlgemm.first_use_seconds() == spent


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
    x = torch.randn(64 * 64 + 4, device=DEV, dtype=torch.half)[4:].view(64, 64)  # 8 bytes off
    with pytest.raises(ValueError, match="x must start on a 16-byte boundary"):
        torch.ops.rlgemm.linear(x, torch.randn(32, 64, device=DEV, dtype=torch.half))
