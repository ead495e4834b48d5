"""torch integration on the CPU backend: values, gradients, custom ops, torch.compile."""
import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed: torch integration tests skipped")

import attn_reference as ref  # noqa: E402
import fastattn  # noqa: E402
import torch_reference  # noqa: E402
from checks import FLOAT32_FLOOR, assert_close  # noqa: E402

DTYPES = {"f32": (torch.float32, np.float32), "bf16": (torch.bfloat16, "bfloat16"),
          "f16": (torch.float16, np.float16)}


def _floor(name):
    return FLOAT32_FLOOR if name == "f32" else 0.0


def rand(rng, shape, dtype, requires_grad=False):
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(dtype)
    return x.requires_grad_(requires_grad)


def np64(x):
    return x.detach().to(torch.float64).numpy()


# (b, s_q, s_k, h, h_kv, d, causal, window, softcap)
CASES = {
    "gqa": (2, 19, 33, 6, 2, 64, False, (-1, -1), 0.0),
    "causal_sq_lt_sk": (1, 7, 29, 2, 2, 32, True, (-1, -1), 0.0),
    "causal_sq_gt_sk": (1, 29, 7, 4, 1, 32, True, (-1, -1), 0.0),
    "local": (2, 40, 40, 2, 2, 64, False, (5, 1), 0.0),
    "softcap": (1, 23, 23, 2, 2, 128, True, (-1, -1), 3.0),
}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_values_and_grads(rng, case, dtype):
    b, s_q, s_k, h, h_kv, d, causal, window, softcap = CASES[case]
    tdt, rdt = DTYPES[dtype]
    q = rand(rng, (b, s_q, h, d), tdt, True)
    k = rand(rng, (b, s_k, h_kv, d), tdt, True)
    v = rand(rng, (b, s_k, h_kv, d), tdt, True)
    dout = rand(rng, (b, s_q, h, d), tdt)
    out = fastattn.flash_attn_func(q, k, v, causal=causal, window_size=window, softcap=softcap)
    assert out.dtype == tdt and out.requires_grad
    out.backward(dout)
    kw = dict(causal=causal, window=window, softcap=softcap)
    arrays = [np64(x) for x in (q, k, v)]
    ref64, _ = ref.forward(*arrays, **kw)
    lowp, _ = ref.forward(*arrays, dtype=rdt, **kw)
    assert_close("out", np64(out), ref64, lowp, rdt, _floor(dtype))
    # gradients: float64 torch autograd is the truth, the numpy estimate gives the precision term
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    torch_reference.attention(*leaves, **kw).backward(dout.double())
    lowp_grads = ref.backward(*arrays, np64(dout), dtype=rdt, **kw)
    for name, got, leaf, rlp in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), leaves, lowp_grads):
        assert got.dtype == tdt
        assert_close(name, np64(got), leaf.grad.numpy(), rlp, rdt, _floor(dtype))


def test_numpy_reference_matches_torch_autograd(rng):
    """The two references agree in float64 (values and gradients)."""
    kw = dict(causal=True, window=(4, -1), softcap=2.0)
    q, k, v = (rng.standard_normal(s) for s in [(2, 9, 4, 16), (2, 12, 2, 16), (2, 12, 2, 16)])
    dout = rng.standard_normal((2, 9, 4, 16))
    leaves = [torch.from_numpy(x).requires_grad_() for x in (q, k, v)]
    out = torch_reference.attention(*leaves, **kw)
    out.backward(torch.from_numpy(dout))
    np.testing.assert_allclose(out.detach().numpy(), ref.forward(q, k, v, **kw)[0], rtol=1e-12, atol=1e-12)
    for leaf, g in zip(leaves, ref.backward(q, k, v, dout, **kw)):
        np.testing.assert_allclose(leaf.grad.numpy(), g, rtol=1e-10, atol=1e-12)


def test_varlen_grads(rng):
    lens_q, lens_k = [0, 11, 4, 9], [6, 13, 0, 9]
    cu_q = torch.tensor(np.concatenate([[0], np.cumsum(lens_q)]), dtype=torch.int32)
    cu_k = torch.tensor(np.concatenate([[0], np.cumsum(lens_k)]), dtype=torch.int32)
    q = rand(rng, (int(cu_q[-1]), 4, 64), torch.float32, True)
    k = rand(rng, (int(cu_k[-1]), 2, 64), torch.float32, True)
    v = rand(rng, (int(cu_k[-1]), 2, 64), torch.float32, True)
    dout = rand(rng, q.shape, torch.float32)
    out, lse = fastattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 11, 13, causal=True,
                                               return_attn_probs=True)
    assert lse.shape == (4, q.shape[0]) and not lse.requires_grad
    out.backward(dout)
    arrays = [np64(x) for x in (q, k, v)]
    ref64, _ = ref.varlen_forward(*arrays, cu_q.numpy(), cu_k.numpy(), causal=True)
    assert_close("out", np64(out), ref64, ref.round_to(ref64, np.float32), np.float32, FLOAT32_FLOOR)
    grads64 = ref.varlen_backward(*arrays, np64(dout), cu_q.numpy(), cu_k.numpy(), causal=True)
    for name, got, g in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), grads64):
        assert_close(name, np64(got), g, ref.round_to(g, np.float32), np.float32, FLOAT32_FLOOR)


def test_lse_is_not_differentiable(rng):
    q, k, v = (rand(rng, (1, 8, 2, 32), torch.float32, True) for _ in range(3))
    out, lse = fastattn.flash_attn_func(q, k, v, return_attn_probs=True)
    assert out.requires_grad and not lse.requires_grad
    with pytest.raises(RuntimeError):
        lse.sum().backward()


def test_expanded_grad_output(rng):
    """out.sum().backward() hands backward a stride-0 gradient: it must be handled."""
    q, k, v = (rand(rng, (1, 12, 2, 32), torch.float32, True) for _ in range(3))
    fastattn.flash_attn_func(q, k, v, causal=True).sum().backward()
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    torch_reference.attention(*leaves, causal=True).sum().backward()
    for got, leaf in zip((q.grad, k.grad, v.grad), leaves):
        torch.testing.assert_close(got.double(), leaf.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("s_q, s_k", [(16, 16), (24, 9)])
@pytest.mark.parametrize("gqa", [False, True])
def test_sdpa_matches_torch(rng, s_q, s_k, gqa):
    """Against torch's own SDPA, including its top-left causal mask when s_q > s_k."""
    h_kv = 2 if gqa else 4
    q = rand(rng, (2, 4, s_q, 64), torch.float32, True)
    k = rand(rng, (2, h_kv, s_k, 64), torch.float32, True)
    v = rand(rng, (2, h_kv, s_k, 64), torch.float32, True)
    ours = fastattn.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa, scale=0.2)
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    theirs = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=True,
                                                              enable_gqa=gqa, scale=0.2)
    torch.testing.assert_close(ours.double(), theirs, rtol=1e-5, atol=1e-5)
    dout = torch.randn_like(ours)
    ours.backward(dout)
    theirs.backward(dout.double())
    for got, leaf in zip((q.grad, k.grad, v.grad), leaves):
        torch.testing.assert_close(got.double(), leaf.grad, rtol=1e-4, atol=1e-5)


def test_mixed_array_kinds(rng):
    q = rand(rng, (1, 8, 2, 32), torch.float32)
    with pytest.raises(TypeError, match="^k: expected a torch array"):
        fastattn.flash_attn_func(q, q.numpy(), q)
    with pytest.raises(TypeError, match="^cu_seqlens_q: expected a torch tensor"):
        fastattn.flash_attn_varlen_func(q[0], q[0], q[0], np.array([0, 8], np.int32),
                                        torch.tensor([0, 8], dtype=torch.int32), 8, 8)


def test_errors_through_custom_op(rng):
    q = rand(rng, (1, 8, 3, 32), torch.float32)
    k = rand(rng, (1, 8, 2, 32), torch.float32)
    with pytest.raises(ValueError, match="head"):
        fastattn.flash_attn_func(q, k, k)


def _sample_args(rng, varlen):
    if varlen:
        cu = torch.tensor([0, 5, 5, 12], dtype=torch.int32)
        q, k, v = (rand(rng, (12, 4, 32), torch.float32, True) for _ in range(3))
        return (q, k, v, cu, cu, None, None, 7, 7, 0.25, True, -1, -1, 0.0)
    q = rand(rng, (2, 9, 4, 32), torch.float32, True)
    k, v = (rand(rng, (2, 11, 2, 32), torch.float32, True) for _ in range(2))
    return (q, k, v, None, None, None, None, 0, 0, 0.25, False, 3, 2, 1.5)


@pytest.mark.parametrize("varlen", [False, True], ids=["fixed", "varlen"])
def test_opcheck_fwd(rng, varlen):
    torch.library.opcheck(torch.ops.fastattn.fwd.default, _sample_args(rng, varlen))


@pytest.mark.parametrize("varlen", [False, True], ids=["fixed", "varlen"])
def test_opcheck_bwd(rng, varlen):
    args = _sample_args(rng, varlen)
    q, k, v = (x.detach() for x in args[:3])
    out, lse = torch.ops.fastattn.fwd(q, k, v, *args[3:])
    dout = torch.randn_like(out)
    torch.library.opcheck(torch.ops.fastattn.bwd.default, (dout, q, k, v, out, lse) + args[3:])


def _model(q, k, v, cu_q, cu_k):
    a = fastattn.flash_attn_func(q, k, v, causal=True, softcap=2.0)
    b = fastattn.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                              v.transpose(1, 2), enable_gqa=True).transpose(1, 2)
    c = fastattn.flash_attn_varlen_func(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu_q,
                                        cu_k, 16, 16, window_size=(4, 4))
    return (a * b).sum() + c.square().sum()


def _compile_inputs(rng):
    q = rand(rng, (2, 16, 4, 32), torch.float32, True)
    k, v = (rand(rng, (2, 16, 2, 32), torch.float32, True) for _ in range(2))
    cu = torch.tensor([0, 16, 32], dtype=torch.int32)
    return q, k, v, cu, cu


def test_compile_has_no_graph_breaks(rng):
    args = _compile_inputs(rng)
    explanation = torch._dynamo.explain(_model)(*args)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_matches_eager(rng, backend):
    """fullgraph=True raises on any graph break; values and gradients equal the eager run."""
    torch._dynamo.reset()
    args = _compile_inputs(rng)
    compiled = torch.compile(_model, fullgraph=True, backend=backend)
    loss = compiled(*args)
    loss.backward()
    grads = [x.grad.clone() for x in args[:3]]
    for x in args[:3]:
        x.grad = None
    eager = _model(*args)
    eager.backward()
    torch.testing.assert_close(loss, eager)
    for g, x in zip(grads, args[:3]):
        torch.testing.assert_close(g, x.grad)


@pytest.mark.parametrize("scale", [float("nan"), float("inf")])
def test_non_finite_scale_is_refused(rng, scale):
    """NaN means "default scale" inside the C ABI: it must never get there from a user value."""
    q = rand(rng, (1, 8, 2, 32), torch.float32)
    with pytest.raises(ValueError, match="^softmax_scale"):
        fastattn.flash_attn_func(q, q, q, softmax_scale=scale)
    with pytest.raises(ValueError, match="^scale"):
        fastattn.scaled_dot_product_attention(q, q, q, scale=scale)


# --- backward: gradcheck, deterministic, torch.compile of forward + backward -------------------

@pytest.mark.parametrize("case", ["gqa_causal", "local_softcap", "varlen"])
def test_gradcheck_cpu_backend(rng, case):
    """torch.autograd.gradcheck on the CPU backend: its analytic dq, dk, dv (fastattn::bwd) against
    central differences of fastattn::fwd. The CPU backend takes float32 at most (no float64), so
    eps and the tolerances are float32's: a wrong mask, scale or softcap term errs by far more."""
    kw, varlen = {}, case == "varlen"
    if case == "gqa_causal":
        shapes, kw = [(1, 5, 4, 8), (1, 7, 2, 8), (1, 7, 2, 8)], dict(causal=True)
    elif case == "local_softcap":
        shapes, kw = [(2, 6, 2, 8), (2, 6, 1, 8), (2, 6, 1, 8)], dict(window_size=(2, 1), softcap=1.5)
    else:
        shapes = [(9, 2, 8), (11, 2, 8), (11, 2, 8)]
        cu_q, cu_k = (torch.tensor(c, dtype=torch.int32) for c in ([0, 4, 4, 9], [0, 6, 6, 11]))
    q, k, v = (rand(rng, s, torch.float32, True) for s in shapes)

    def fn(q, k, v):
        if varlen:
            return fastattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 6, causal=True)
        return fastattn.flash_attn_func(q, k, v, **kw)
    with pytest.warns(UserWarning, match="double precision"):  # float32: gradcheck says so
        assert torch.autograd.gradcheck(fn, (q, k, v), eps=2e-3, atol=2e-3, rtol=2e-2)


def test_deterministic_cpu_is_accepted_and_bitwise_equal(rng):
    """deterministic=True on the CPU: accepted, the same bits as the default (always ordered)."""
    q = rand(rng, (2, 33, 6, 32), torch.bfloat16)
    k, v = (rand(rng, (2, 40, 2, 32), torch.bfloat16) for _ in range(2))
    dout = rand(rng, q.shape, torch.bfloat16)
    grads = []
    for det in (True, True, False):
        leaves = [x.clone().requires_grad_() for x in (q, k, v)]
        fastattn.flash_attn_func(*leaves, causal=True, deterministic=det).backward(dout)
        grads.append([x.grad for x in leaves])
    for other in grads[1:]:
        for a, b in zip(grads[0], other):
            assert torch.equal(a, b)


def _cuda_backward_or_skip(device):
    if device == "cuda":
        if not torch.cuda.is_available() or not fastattn.cuda_available():
            pytest.skip("no CUDA device (or fastattn built without CUDA): CUDA case skipped")
        q = torch.randn(1, 8, 1, 64, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        try:
            fastattn.flash_attn_func(q, q, q).sum().backward()
        except NotImplementedError as e:
            pytest.skip(f"this build has no CUDA backward: {e}")


@pytest.mark.parametrize("deterministic", [False, True])
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_compile_traces_forward_and_backward(rng, device, deterministic):
    """torch.compile(fullgraph=True) (a graph break raises): AOTAutograd puts fastattn::fwd in the
    forward graph and fastattn::bwd, carrying the deterministic flag, in the backward graph; the
    compiled gradients equal eager ones (bitwise when deterministic)."""
    _cuda_backward_or_skip(device)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    q = rand(rng, (2, 64, 4, 64), dtype).to(device).requires_grad_()  # d 64: a head dim the GPU has
    k, v = (rand(rng, (2, 64, 2, 64), dtype).to(device).requires_grad_() for _ in range(2))
    cu = torch.tensor([0, 30, 30, 128], dtype=torch.int32, device=device)

    def model(q, k, v):
        a = fastattn.flash_attn_func(q * 2, k, v, causal=True, deterministic=deterministic)
        c = fastattn.flash_attn_varlen_func(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu, cu,
                                            98, 98, window_size=(8, 0), deterministic=deterministic)
        return a.float().square().sum() + c.float().sum()

    backend, graphs = torch_reference.aot_graphs()
    torch._dynamo.reset()
    torch.compile(model, fullgraph=True, backend=backend)(q, k, v).backward()
    assert len(graphs["fw"]) == 1 and len(graphs["bw"]) == 1
    fwd_calls = torch_reference.op_calls(graphs["fw"][0], "fastattn.fwd")
    bwd_calls = torch_reference.op_calls(graphs["bw"][0], "fastattn.bwd")
    assert len(fwd_calls) == 2 and len(bwd_calls) == 2
    assert all(torch_reference.deterministic_flag(n, 17) is deterministic for n in bwd_calls)
    compiled = [x.grad.clone() for x in (q, k, v)]
    for x in (q, k, v):
        x.grad = None
    model(q, k, v).backward()
    for g, x in zip(compiled, (q, k, v)):
        if deterministic or device == "cpu":
            assert torch.equal(g, x.grad)
        else:  # atomics: the same math summed in another order
            torch.testing.assert_close(g, x.grad, rtol=2e-2, atol=2e-2)


# ---- scaled_dot_product_attention: attn_mask broadcast, autocast (review s51) ---------------------------

# PyTorch-accepted attn_mask shapes for (b, h_q, s_q, s_k) = (2, 4, 13, 21): each dim 1 or equal
SDPA_MASK_SHAPES = [(), (21,), (13, 21), (13, 1), (4, 13, 21), (1, 13, 21), (2, 1, 1, 21), (1, 4, 1, 21),
                    (2, 4, 13, 21), (2, 4, 13, 1), (1, 1, 1, 1)]


def _sdpa_mask(rng, shape, kind):
    """A bool keep-mask (every row of its broadcast keeps key 0: no empty rows, which PyTorch's SDPA gives NaN)
    or a finite float mask."""
    if kind == "float":
        return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))
    keep = np.asarray(rng.random(shape) < 0.6)
    if len(shape) and shape[-1] > 1:
        keep[..., 0] = True
    else:
        keep[...] = True
    return torch.from_numpy(np.asarray(keep))


@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("h_kv", [4, 2, 1], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("shape", SDPA_MASK_SHAPES, ids=str)
def test_sdpa_attn_mask_forms_match_pytorch(rng, shape, h_kv, kind):
    """Every attn_mask shape PyTorch broadcasts to (b, h_q, s_q, s_k), bool and float, with h_kv = h_q and
    under GQA / MQA (the mask's heads are q's heads, whatever h_kv): out and the gradients (and a float mask's)
    against PyTorch's SDPA in float64, every element (FA3's rule, PyTorch's float32 SDPA as the precision term)."""
    q = rand(rng, (2, 4, 13, 32), torch.float32, True)
    k = rand(rng, (2, h_kv, 21, 32), torch.float32, True)
    v = rand(rng, (2, h_kv, 21, 32), torch.float32, True)
    mask = _sdpa_mask(rng, shape, kind)
    if kind == "float":
        mask.requires_grad_()
    out = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    dout = rand(rng, out.shape, torch.float32)
    out.backward(dout)

    def expanded(m):  # PyTorch's math SDPA takes no 1-D float mask: the reference gets the explicit broadcast
        return m.reshape((1,) * (4 - m.dim()) + tuple(m.shape)).expand(2, 4, 13, 21)
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    m64 = mask.detach().double().requires_grad_() if kind == "float" else mask
    want = torch.nn.functional.scaled_dot_product_attention(*leaves, attn_mask=expanded(m64), enable_gqa=True)
    want.backward(dout.double())
    lows = [x.detach().clone().requires_grad_() for x in (q, k, v)]
    m32 = mask.detach().clone().requires_grad_() if kind == "float" else mask
    low = torch.nn.functional.scaled_dot_product_attention(*lows, attn_mask=expanded(m32), enable_gqa=True)
    low.backward(dout)
    assert_close("out", np64(out), np64(want), np64(low), np.float32, FLOAT32_FLOOR)
    pairs = [("dq", q, leaves[0], lows[0]), ("dk", k, leaves[1], lows[1]), ("dv", v, leaves[2], lows[2])]
    if kind == "float":
        pairs.append(("dmask", mask, m64, m32))
    for name, got, ref64, lowp in pairs:
        assert got.grad.shape == got.shape
        # a broadcast mask's gradient sums n entries of dS (0 exactly where the keys are broadcast: softmax is
        # shift-invariant), in float32 in another order than PyTorch's: the floor grows as sqrt(n)
        n = out.numel() // out.shape[-1] * 21 // got.numel() if name == "dmask" else 1
        assert_close(name, np64(got.grad), np64(ref64.grad), np64(lowp.grad), np.float32, FLOAT32_FLOOR * n ** 0.5)


@pytest.mark.parametrize("shape", [(1, 2, 13, 21), (3, 1, 13, 21), (2, 3, 13, 21), (2, 8, 1, 21)], ids=str)
@pytest.mark.parametrize("kind", ["bool", "float"])
def test_sdpa_attn_mask_heads_batch_must_broadcast(rng, shape, kind):
    """A mask head count other than 1 or h_q (PyTorch raises) ran as fastattn's grouped mask (head i took mask head
    i // 2 of a 2-head mask with h_q 4); a batch other than 1 or b went on to the extension's message. Both are
    refused by name, PyTorch's rule spelled out; under GQA too (h_kv = 2 does not make 2 mask heads valid)."""
    q = rand(rng, (2, 4, 13, 32), torch.float32)
    k = rand(rng, (2, 2, 21, 32), torch.float32)
    mask = _sdpa_mask(rng, shape, kind)
    dim = 0 if shape[0] not in (1, 2) else 1
    pattern = (rf"^attn_mask: dim {dim} \({'batch' if dim == 0 else 'heads'}, of the mask as 4-D\) is {shape[dim]} "
               rf"but must be 1 or {(2, 4)[dim]}: .*PyTorch's rule")
    with pytest.raises(RuntimeError):  # PyTorch's own SDPA refuses the mask
        torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask, enable_gqa=True)
    with pytest.raises(ValueError, match=pattern):
        fastattn.scaled_dot_product_attention(q, k, k, attn_mask=mask, enable_gqa=True)
    with pytest.raises(ValueError, match=pattern):  # numpy arrays take the same check
        fastattn.scaled_dot_product_attention(q.numpy(), k.numpy(), k.numpy(), attn_mask=mask.numpy(), enable_gqa=True)


def _bf16_rounded(x):
    return x.detach().to(torch.bfloat16).double().requires_grad_(x.requires_grad)


@pytest.mark.parametrize("mask", [None, "bool", "float"])
@pytest.mark.parametrize("h_kv", [4, 2], ids=["mha", "gqa"])
def test_sdpa_autocast_matches_pytorch(rng, h_kv, mask):
    """Under torch.autocast("cpu", bfloat16) PyTorch's SDPA (on autocast's lower-precision list) casts fp32
    q, k, v and a float attn_mask to bf16 and returns bf16; fastattn's SDPA ignored autocast (fp32 out). Now
    the same dtypes, out and the fp32 leaves' gradients (and a float mask's) every element against float64
    SDPA of the bf16-rounded inputs, FA3's rule with PyTorch's autocast SDPA as the precision term."""
    q = rand(rng, (2, 4, 13, 32), torch.float32, True)
    k = rand(rng, (2, h_kv, 21, 32), torch.float32, True)
    v = rand(rng, (2, h_kv, 21, 32), torch.float32, True)
    attn_mask = None if mask is None else _sdpa_mask(rng, (2, 1, 13, 21), mask)
    if mask == "float":
        attn_mask.requires_grad_()
    ins = [q, k, v] + ([attn_mask] if mask == "float" else [])
    theirs_in = [x.detach().clone().requires_grad_() for x in ins]
    dout = rand(rng, (2, 4, 13, 32), torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, enable_gqa=True)
        theirs = torch.nn.functional.scaled_dot_product_attention(
            *theirs_in[:3], attn_mask=theirs_in[3] if mask == "float" else attn_mask, enable_gqa=True)
    assert out.dtype == theirs.dtype == torch.bfloat16
    out.backward(dout)
    theirs.backward(dout)
    ref_in = [_bf16_rounded(x) for x in ins]  # what autocast hands the kernel, exactly
    ref_mask = ref_in[3] if mask == "float" else attn_mask
    want = torch.nn.functional.scaled_dot_product_attention(*ref_in[:3], attn_mask=ref_mask, enable_gqa=True)
    want.backward(dout.double())
    assert_close("out", np64(out), np64(want), np64(theirs), "bfloat16")
    for name, got, ref64, lowp in zip(("dq", "dk", "dv", "dmask"), ins, ref_in, theirs_in):
        assert got.grad.dtype == torch.float32 == lowp.grad.dtype  # through the casts, to the fp32 leaves
        assert_close(name, np64(got.grad), np64(ref64.grad), np64(lowp.grad), "bfloat16")


def test_sdpa_autocast_leaves_float64_and_other_devices_alone(rng):
    """PyTorch's autocast casts no float64 tensor and none of another device type: fastattn's SDPA neither
    (float64 is then refused by the kernels, as without autocast); fp16 under a bf16 autocast is cast, as
    PyTorch does. Values against float64 SDPA of the rounded inputs."""
    q = rand(rng, (1, 2, 9, 16), torch.float16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = fastattn.scaled_dot_product_attention(q, q, q)
        assert out.dtype == torch.nn.functional.scaled_dot_product_attention(q, q, q).dtype == torch.bfloat16
        with pytest.raises(ValueError, match="dtype float64 is not supported"):
            fastattn.scaled_dot_product_attention(q.double(), q.double(), q.double())
    q32 = q.float()
    with torch.autocast("cuda", dtype=torch.float16, enabled=torch.cuda.is_available()):  # CPU tensors: no cast
        out32 = fastattn.scaled_dot_product_attention(q32, q32, q32)
    assert out32.dtype == torch.float32
    r = _bf16_rounded(q)
    want = torch.nn.functional.scaled_dot_product_attention(r, r, r)
    lowp = torch.nn.functional.scaled_dot_product_attention(*(r.to(torch.bfloat16),) * 3)
    assert_close("out", np64(out), np64(want), np64(lowp), "bfloat16")
    want32 = torch.nn.functional.scaled_dot_product_attention(*(q32.double(),) * 3)
    assert_close("out32", np64(out32), np64(want32), np64(torch.nn.functional.scaled_dot_product_attention(
        q32, q32, q32)), np.float32, FLOAT32_FLOOR)
