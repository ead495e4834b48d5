"""The GPU backward through torch autograd: dq, dk, dv against float64 torch autograd with FA3's
rule, every element, over odd sizes, s_q != s_k, GQA, varlen with empty sequences, causal, local
and softcap; poisoned outputs; deterministic mode bitwise repeatable. (torch.compile of forward
and backward: test_torch.py, on the CPU and on CUDA.) Skipped with the reason when there is no
GPU or this build has no CUDA backward; a head dim the backward rejects must be rejected clearly."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: CUDA backward tests skipped")
import fastattn  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("no CUDA device visible to torch: CUDA backward tests skipped", allow_module_level=True)
if not fastattn.cuda_available():
    pytest.skip("fastattn was built without CUDA kernels (or sees no device): CUDA backward tests "
                "skipped", allow_module_level=True)

import torch_reference as tref  # noqa: E402
from checks import assert_close  # noqa: E402
from fastattn import _C, _core  # noqa: E402

DTYPES = {"bf16": (torch.bfloat16, "bfloat16"), "f16": (torch.float16, np.float16)}
# The lowp estimate's float32 matmuls must not run in TF32 (it would be less precise than the kernel).
torch.backends.cuda.matmul.allow_tf32 = False


def _probe_backward():
    """None when the CUDA backward runs, else the reason this build has none (the module skips)."""
    q = torch.randn(1, 8, 1, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    try:
        fastattn.flash_attn_func(q, q, q).sum().backward()
    except NotImplementedError as e:
        return str(e)
    return None


_NO_BACKWARD = _probe_backward()
if _NO_BACKWARD is not None:
    pytest.skip(f"this build has no CUDA backward: {_NO_BACKWARD}", allow_module_level=True)


def forward_or_skip(fn, *args, **kw):
    """The forward, or skip naming the forward kernel this build lacks (not what is tested here)."""
    try:
        return fn(*args, **kw)
    except NotImplementedError as e:
        pytest.skip(f"no GPU forward kernel for this case in this build: {e}")


def backward_or_clear_refusal(out, dout, d):
    """out.backward(dout); a case the GPU backward does not take (a head dim) must be refused with
    NotImplementedError naming the head dim, never a crash or a wrong answer: then skip with it."""
    try:
        out.backward(dout)
    except NotImplementedError as e:
        assert str(d) in str(e) and ("head" in str(e) or "dim" in str(e)), f"unclear refusal: {e}"
        pytest.skip(f"the GPU backward refuses d={d} clearly: {e}")


def rand(shape, dtype, requires_grad=False, gen=None):
    x = torch.randn(shape, device="cuda", dtype=torch.float32, generator=gen).to(dtype)
    return x.requires_grad_(requires_grad)


def np64(x):
    return x.detach().to("cpu", torch.float64).numpy()


def seeded():
    """A CUDA generator seeded freshly each test, the seed printed so a failure can be replayed."""
    seed = int(np.random.SeedSequence().entropy % (2**31))
    print(f"torch cuda seed {seed}")
    return torch.Generator(device="cuda").manual_seed(seed)


def check_grads(got, q, k, v, dout, rdt, tdt, **kw):
    """FA3's rule on dq, dk, dv: float64 autograd is the truth, lowp_backward the precision term."""
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    tref.attention(*leaves, **kw).backward(dout.double())
    lowp = tref.lowp_backward(q, k, v, dout, tdt, **kw)
    for name, g, leaf, rlp in zip(("dq", "dk", "dv"), got, leaves, lowp):
        assert g.dtype == tdt and g.shape == leaf.shape, f"{name}: {g.dtype} {tuple(g.shape)}"
        assert_close(name, np64(g), np64(leaf.grad), np64(rlp), rdt)


# (b, s_q, s_k, h, h_kv, d, causal, window, softcap)
CASES = {
    "one_row_d64": (3, 1, 1, 2, 2, 64, False, (-1, -1), 0.0),
    "s17_causal_d128": (2, 17, 17, 4, 4, 128, True, (-1, -1), 0.0),
    "s113_gqa4_d128": (1, 113, 113, 8, 2, 128, False, (-1, -1), 0.0),
    "s4097_causal_d64": (1, 4097, 4097, 1, 1, 64, True, (-1, -1), 0.0),
    "mqa8_causal_sq_lt_sk": (2, 77, 333, 8, 1, 128, True, (-1, -1), 0.0),
    "causal_sq_gt_sk": (1, 257, 129, 2, 2, 64, True, (-1, -1), 0.0),
    "causal_one_query": (4, 1, 1000, 4, 2, 128, True, (-1, -1), 0.0),
    "local_64_0": (2, 512, 512, 2, 2, 128, False, (64, 0), 0.0),
    "local_two_sided_gqa": (1, 200, 260, 4, 1, 64, False, (17, 33), 0.0),
    "local_left_only_sq_gt_sk": (1, 300, 100, 2, 2, 64, False, (0, -1), 0.0),
    "softcap_causal": (2, 150, 150, 2, 2, 128, True, (-1, -1), 30.0),
    "softcap_gqa_d96": (1, 129, 140, 4, 2, 96, False, (-1, -1), 5.0),
    # d 192 / 256: the 64-key split shape (src/cuda/sm90/bwd/config.h)
    "s113_gqa4_d256": (1, 113, 113, 8, 2, 256, False, (-1, -1), 0.0),
    "causal_sq_gt_sk_d256": (2, 257, 129, 2, 2, 256, True, (-1, -1), 0.0),
    "local_softcap_d256": (1, 300, 333, 2, 1, 256, False, (40, 7), 30.0),
    "s17_causal_d192": (2, 17, 130, 4, 4, 192, True, (-1, -1), 0.0),
}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_grads(case, dtype):
    b, s_q, s_k, h, h_kv, d, causal, window, softcap = CASES[case]
    tdt, rdt = DTYPES[dtype]
    gen = seeded()
    q = rand((b, s_q, h, d), tdt, True, gen)
    k, v = (rand((b, s_k, h_kv, d), tdt, True, gen) for _ in range(2))
    dout = rand((b, s_q, h, d), tdt, gen=gen)
    out = forward_or_skip(fastattn.flash_attn_func, q, k, v, causal=causal, window_size=window,
                          softcap=softcap)
    backward_or_clear_refusal(out, dout, d)
    check_grads((q.grad, k.grad, v.grad), q, k, v, dout, rdt, tdt, causal=causal, window=window,
                softcap=softcap)


def test_outputs_poisoned():
    """Every element of dq, dk, dv is written (NaN-filled outputs, rows keeping no key included)."""
    gen = seeded()
    q = rand((2, 100, 4, 128), torch.bfloat16, gen=gen)
    k, v = (rand((2, 37, 2, 128), torch.bfloat16, gen=gen) for _ in range(2))
    dout = rand(q.shape, torch.bfloat16, gen=gen)
    kw = dict(causal=True, window_size=(-1, -1))
    out, lse = fastattn.forward(q, k, v, **kw)  # s_q > s_k causal: the first 63 rows keep no key
    dq, dk, dv = (torch.full_like(x, float("nan")) for x in (q, k, v))
    opts = _core.make_options(head_dim=128, **kw)
    _C.backward(dout, q, k, v, out, lse, dq, dk, dv, opts, torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    assert (dq[:, :63] == 0).all(), "rows that keep no key must get dq = 0"
    check_grads((dq, dk, dv), q, k, v, dout, "bfloat16", torch.bfloat16, causal=True)


@pytest.mark.parametrize("grad_kind", ["expanded", "transposed", "sliced"])
def test_strided_gradients_and_inputs(grad_kind):
    """Autograd hands backward whatever layout the next op produced: a stride-0 expanded gradient
    (out.sum()), a transposed one, or one sliced from a wider buffer; inputs strided too."""
    gen = seeded()
    wide = rand((2, 130, 4, 3 * 128), torch.bfloat16, gen=gen)  # q, k, v as views of one qkv buffer
    q, k, v = (t.detach().requires_grad_() for t in wide.split(128, dim=-1))
    out = fastattn.flash_attn_func(q, k, v, causal=True)
    if grad_kind == "expanded":
        loss, dout = out.float().sum(), torch.ones_like(out)
    elif grad_kind == "transposed":
        w = rand((2, 4, 130, 128), torch.bfloat16, gen=gen)
        loss, dout = (out.float() * w.transpose(1, 2).float()).sum(), w.transpose(1, 2)
    else:
        w = rand((2, 130, 4, 256), torch.bfloat16, gen=gen)[..., 64:192]
        loss, dout = (out.float() * w.float()).sum(), w
    loss.backward()
    check_grads((q.grad, k.grad, v.grad), q, k, v, dout.contiguous(), "bfloat16", torch.bfloat16, causal=True)


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_varlen_grads_with_empty_sequences(dtype):
    tdt, rdt = DTYPES[dtype]
    gen = seeded()
    lens_q, lens_k = [0, 130, 1, 257, 64, 17], [10, 130, 0, 300, 64, 17]
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(lens_q)]), dtype=torch.int32, device="cuda")
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(lens_k)]), dtype=torch.int32, device="cuda")
    q = rand((sum(lens_q), 8, 128), tdt, True, gen)
    k, v = (rand((sum(lens_k), 2, 128), tdt, True, gen) for _ in range(2))
    dout = rand(q.shape, tdt, gen=gen)
    fastattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lens_q), max(lens_k),
                                    causal=True).backward(dout)
    got = (q.grad, k.grad, v.grad)
    for i in range(len(lens_q)):
        q0, q1, k0, k1 = int(cu_q[i]), int(cu_q[i + 1]), int(cu_k[i]), int(cu_k[i + 1])
        if q1 == q0 or k1 == k0:  # an empty side: the other side's gradients are zero
            assert (got[0][q0:q1] == 0).all() and (got[1][k0:k1] == 0).all() and (got[2][k0:k1] == 0).all()
            continue
        sl = [slice(q0, q1), slice(k0, k1), slice(k0, k1)]
        one = [x[s][None] for x, s in zip((q, k, v), sl)]
        check_grads([g[s][None] for g, s in zip(got, sl)], *one, dout[q0:q1][None], rdt, tdt,
                    causal=True)


@pytest.mark.parametrize("d", [192, 256])
def test_large_head_dims(d):
    """d 192 / 256 differentiate on the GPU; a build without their kernels (FASTATTN_HEAD_DIMS)
    must say so naming the head dim, and only then is the test skipped."""
    gen = seeded()
    q = rand((1, 130, 2, d), torch.bfloat16, True, gen)
    k, v = (rand((1, 150, 2, d), torch.bfloat16, True, gen) for _ in range(2))
    dout = rand(q.shape, torch.bfloat16, gen=gen)
    out = forward_or_skip(fastattn.flash_attn_func, q, k, v, causal=True)
    try:
        out.backward(dout)
    except NotImplementedError as e:
        assert str(d) in str(e) and "no CUDA backward kernel" in str(e), f"d={d} refused: {e}"
        pytest.skip(f"this build has no backward kernel for d={d}: {e}")
    check_grads((q.grad, k.grad, v.grad), q, k, v, dout, "bfloat16", torch.bfloat16, causal=True)


def _grads(q, k, v, dout, **kw):
    leaves = [x.detach().requires_grad_() for x in (q, k, v)]
    fastattn.flash_attn_func(*leaves, **kw).backward(dout)
    return [x.grad for x in leaves]


@pytest.mark.parametrize("case", ["gqa8_causal", "mha_full", "local"])
def test_deterministic_is_bitwise_repeatable(case):
    """deterministic=True: dq, dk, dv bitwise equal over repeated runs (atomics would reorder the
    float32 sums of dq, and of dk/dv over a KV head's query heads); still within the rule."""
    h, h_kv, causal, window = {"gqa8_causal": (16, 2, True, (-1, -1)), "mha_full": (4, 4, False, (-1, -1)),
                               "local": (4, 4, False, (64, 0))}[case]
    gen = seeded()
    q = rand((2, 1000, h, 128), torch.bfloat16, gen=gen)
    k, v = (rand((2, 1100, h_kv, 128), torch.bfloat16, gen=gen) for _ in range(2))
    dout = rand(q.shape, torch.bfloat16, gen=gen)
    kw = dict(causal=causal, window_size=window)
    try:
        first = _grads(q, k, v, dout, deterministic=True, **kw)
    except NotImplementedError as e:
        pytest.skip(f"this build's GPU backward has no deterministic mode: {e}")
    for _ in range(4):
        again = _grads(q, k, v, dout, deterministic=True, **kw)
        for name, a, b in zip(("dq", "dk", "dv"), first, again):
            assert torch.equal(a, b), f"{name}: deterministic runs differ (max {float((a - b).abs().max()):.3g})"
    check_grads(first, q, k, v, dout, "bfloat16", torch.bfloat16, causal=causal, window=window)
    default = _grads(q, k, v, dout, **kw)  # the default mode: the same math up to summation order
    check_grads(default, q, k, v, dout, "bfloat16", torch.bfloat16, causal=causal, window=window)


def test_sdpa_backward_matches_torch():
    """SDPA-style: gradients against float64 torch SDPA, GQA and top-left causal with s_q > s_k."""
    gen = seeded()
    q = rand((2, 8, 300, 128), torch.float16, True, gen)
    k, v = (rand((2, 2, 250, 128), torch.float16, True, gen) for _ in range(2))
    dout = rand(q.shape, torch.float16, gen=gen)
    fastattn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).backward(dout)
    bshd = [x.detach().transpose(1, 2) for x in (q, k, v)]
    # PyTorch's top-left causal for s_q > s_k is fastattn's window (-1, s_q - s_k)
    check_grads([x.grad.transpose(1, 2) for x in (q, k, v)], *bshd, dout.transpose(1, 2), np.float16,
                torch.float16, window=(-1, 50))
