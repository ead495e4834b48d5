"""The additive bias (bias= on forward / backward / flash_attn_func / varlen, SDPA's float attn_mask):
numpy calls against a float64 reference (shapes 2-D to 4-D, broadcast query / key dims, -inf entries
and rows, causal, varlen), dbias against the float64 gradient; torch autograd's gradient to the bias
(eager, the custom op under torch.compile(fullgraph=True)) against PyTorch's SDPA in float64; and, with a
device, the CUDA forward with a bf16 bias and SDPA's float mask on CUDA. torch tests skip without torch."""
import numpy as np
import pytest

import fastattn


def reference(q, k, v, bias4, causal=False):
    """float64 (out, lse, P-and-dS helper) of fixed-length (b, s, h, d) arrays with a 4-D bias."""
    b, s_q, h, d = q.shape
    s_k, h_kv = k.shape[1], k.shape[2]
    kk = np.repeat(k.astype(np.float64), h // h_kv, axis=2)
    vv = np.repeat(v.astype(np.float64), h // h_kv, axis=2)
    s = np.einsum("bihd,bjhd->bhij", q.astype(np.float64), kk) / np.sqrt(d)
    bias_h = np.repeat(bias4[:, :, :s_q, :s_k].astype(np.float64), h // bias4.shape[1], axis=1)  # head h: h // g
    s = s + np.broadcast_to(bias_h, (b, h, s_q, s_k))
    if causal:  # bottom-right aligned
        keep = np.arange(s_k)[None, :] <= np.arange(s_q)[:, None] + s_k - s_q
        s = np.where(keep, s, -np.inf)
    m = s.max(-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m_safe)
    l = p.sum(-1, keepdims=True)
    p = np.where(l > 0, p / np.where(l > 0, l, 1), 0.0)
    out = np.einsum("bhij,bjhd->bihd", p, vv)
    lse = np.where(l[..., 0] > 0, (m_safe + np.log(np.where(l > 0, l, 1)))[..., 0], -np.inf)
    return out, lse, p, vv


def ref_dbias(p, vv, dout, bias4_shape):
    """dL/dbias = P * (dP - D), summed to bias4's (batch, heads) broadcast."""
    dp = np.einsum("bihd,bjhd->bhij", dout.astype(np.float64), vv)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    s_q, s_k = ds.shape[2:]
    full = np.zeros(ds.shape[:2] + bias4_shape[2:])
    full[:, :, :s_q, :s_k] = ds
    if bias4_shape[0] == 1:
        full = full.sum(0, keepdims=True)
    heads = bias4_shape[1]
    return full.reshape(full.shape[0], heads, -1, *full.shape[2:]).sum(2)


def qkv(rng, b=2, s_q=17, s_k=23, h=4, h_kv=2, d=32):
    return [rng.standard_normal(s).astype(np.float32) for s in ((b, s_q, h, d), (b, s_k, h_kv, d), (b, s_k, h_kv, d))]


@pytest.mark.parametrize("shape", [(17, 23), (4, 17, 23), (2, 1, 17, 23), (1, 2, 20, 30), (2, 4, 1, 23), (1, 1, 17, 1)])
@pytest.mark.parametrize("causal", [False, True])
def test_numpy_forward_backward_dbias(rng, shape, causal):
    q, k, v = qkv(rng)
    bias = (rng.standard_normal(shape) * 2).astype(np.float32)
    bias4 = bias.reshape((1,) * (4 - len(shape)) + shape)
    bias4 = np.broadcast_to(bias4, bias4.shape[:2] + (17 if bias4.shape[2] == 1 else bias4.shape[2],
                                                      23 if bias4.shape[3] == 1 else bias4.shape[3]))
    out, lse = fastattn.forward(q, k, v, causal=causal, bias=bias)
    ref_out, ref_lse, p, vv = reference(q, k, v, bias4, causal)
    np.testing.assert_allclose(out, ref_out, atol=2e-5)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)
    dout = rng.standard_normal(out.shape).astype(np.float32)
    dq, dk, dv, dbias = fastattn.backward(dout, q, k, v, out, lse, causal=causal, bias=bias, dbias=True)
    assert dbias.dtype == np.float32 and dbias.shape == bias4.shape
    np.testing.assert_allclose(dbias, ref_dbias(p, vv, dout, bias4.shape), atol=2e-5)


def test_neginf_rows_and_entries(rng):
    q, k, v = qkv(rng)
    bias = rng.standard_normal((4, 17, 23)).astype(np.float32)
    bias[:, 5] = -np.inf            # row 5 keeps nothing: out 0, lse -inf
    bias[:, :, ::3] = -np.inf       # every third key masked
    out, lse = fastattn.forward(q, k, v, bias=bias)
    ref_out, ref_lse, _, _ = reference(q, k, v, bias[None])
    assert np.all(out[:, 5] == 0) and np.all(lse[:, :, 5] == -np.inf)
    np.testing.assert_allclose(out, ref_out, atol=2e-5)


def test_varlen_bias(rng):
    lens_q, lens_k = [5, 0, 17], [9, 3, 23]
    cu_q = np.array([0, 5, 5, 22], np.int32)
    cu_k = np.array([0, 9, 12, 35], np.int32)
    q = rng.standard_normal((22, 4, 32)).astype(np.float32)
    k, v = (rng.standard_normal((35, 2, 32)).astype(np.float32) for _ in range(2))
    bias = rng.standard_normal((3, 4, 17, 23)).astype(np.float32)
    out = fastattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 17, 23, bias=bias)
    for b in range(3):
        if lens_q[b] == 0:
            continue
        qs, ks = q[cu_q[b]:cu_q[b + 1]][None], k[cu_k[b]:cu_k[b + 1]][None]
        vs = v[cu_k[b]:cu_k[b + 1]][None]
        ref, _, _, _ = reference(qs, ks, vs, bias[b:b + 1])
        np.testing.assert_allclose(out[cu_q[b]:cu_q[b + 1]], ref[0], atol=2e-5)


def test_refusals_name_the_bias(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="^bias: expected 2 to 4 dims"):
        fastattn.forward(q, k, v, bias=np.zeros((23,), np.float32))
    with pytest.raises(ValueError, match="bias: dim 1 \\(bias_heads\\) is 3"):
        fastattn.forward(q, k, v, bias=np.zeros((1, 3, 17, 23), np.float32))
    with pytest.raises(ValueError, match="bias: dim 3 \\(cols\\) is 22"):
        fastattn.forward(q, k, v, bias=np.zeros((17, 22), np.float32))
    out, lse = fastattn.forward(q, k, v)
    with pytest.raises(ValueError, match="^dbias: asked for without a bias"):
        fastattn.backward(out, q, k, v, out, lse, dbias=True)


def test_sdpa_float_mask_of_one_dim_broadcasts(rng):
    """Review s39: a (s_k,) float attn_mask broadcasts over the rows as SDPA's does (and as a bool (s_k,) mask
    did here); it was refused ("bias: expected 2 to 4 dims")."""
    q = rng.standard_normal((2, 3, 17, 16)).astype(np.float32)
    k = rng.standard_normal((2, 3, 23, 16)).astype(np.float32)
    v = rng.standard_normal((2, 3, 23, 16)).astype(np.float32)
    mask = rng.standard_normal(23).astype(np.float32)
    mask[[0, 5]] = -np.inf
    got = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    want, _, _, _ = reference(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3),
                              np.broadcast_to(mask, (1, 1, 17, 23)))
    np.testing.assert_allclose(np.asarray(got), want.transpose(0, 2, 1, 3), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.bool_])
@pytest.mark.parametrize("mask_shape", [(18, 23), (17, 24), (3, 16, 23), (2, 3, 17, 22)])
def test_sdpa_mask_rows_cols_follow_pytorch(rng, dtype, mask_shape):
    """Review s40: SDPA's attn_mask (float or bool) must be broadcastable to (b, h, s_q, s_k), as PyTorch
    raises otherwise; a float one with more rows or columns ran as a padded bias (fastattn's bias= rule)."""
    q = rng.standard_normal((2, 3, 17, 16)).astype(np.float32)
    k = rng.standard_normal((2, 3, 23, 16)).astype(np.float32)
    mask = rng.standard_normal(mask_shape) > -1 if dtype is np.bool_ else rng.standard_normal(mask_shape).astype(dtype)
    with pytest.raises(ValueError, match=r"^attn_mask: expected a shape broadcastable to \(\.\.\., 17, 23\)"):
        fastattn.scaled_dot_product_attention(q, k, k, attn_mask=mask)


# ---- torch -----------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch", reason="torch is not installed: torch bias tests skipped")


def _sdpa64(torch, q, k, v, bias):
    """PyTorch's SDPA in float64 on (b, s, h, d) tensors (GQA by repeat), out as (b, s, h, d)."""
    g = q.shape[2] // k.shape[2]
    qt, kt, vt = (x.double().transpose(1, 2) for x in (q, k, v))
    kt, vt = kt.repeat_interleave(g, 1), vt.repeat_interleave(g, 1)
    out = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, attn_mask=bias.double())
    return out.transpose(1, 2)


@pytest.mark.parametrize("compiled", [False, True])
def test_torch_autograd_bias_gradient(rng, compiled):
    torch = _torch()
    q, k, v = (torch.from_numpy(x).requires_grad_() for x in qkv(rng))
    bias = torch.from_numpy(rng.standard_normal((4, 1, 23)).astype(np.float32)).requires_grad_()
    fn = lambda q, k, v, b: fastattn.flash_attn_func(q, k, v, causal=True, bias=b)  # noqa: E731
    if compiled:
        fn = torch.compile(fn, fullgraph=True)
    out = fn(q, k, v, bias)
    causal = torch.ones(17, 23, dtype=torch.bool).tril(23 - 17)
    ref = _sdpa64(torch, q, k, v, bias.double().masked_fill(~causal, float("-inf")))
    assert (out.double() - ref).abs().max().item() < 2e-5
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v, bias), g)
    want = torch.autograd.grad(ref, (q, k, v, bias), g.double())
    assert got[3].shape == bias.shape and got[3].dtype == bias.dtype
    for a, b in zip(got, want):
        assert (a.double() - b).abs().max().item() < 5e-5


def test_sdpa_float_mask_is_a_bias(rng):
    torch = _torch()
    q, k, v = (torch.from_numpy(x).transpose(1, 2) for x in qkv(rng, h_kv=4))
    mask = torch.from_numpy(rng.standard_normal((1, 4, 17, 23)).astype(np.float32))
    mask[..., 3] = float("-inf")
    got = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask.double())
    assert (got.double() - want).abs().max().item() < 2e-5
    keep = torch.rand(17, 23) < 0.7  # boolean masks stay bitmasks
    got = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=keep)
    assert (got.double() - want).abs().max().item() < 2e-5


def _cuda(torch):
    if not (torch.cuda.is_available() and fastattn.cuda_available()):
        pytest.skip("no CUDA device")


@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [False, True])
def test_cuda_forward_with_bias(rng, dtype_name, causal):
    torch = _torch()
    _cuda(torch)
    dt = getattr(torch, dtype_name)
    q, k, v = (torch.from_numpy(x).to("cuda", dt) for x in qkv(rng, b=2, s_q=300, s_k=517, h=8, h_kv=2, d=128))
    bias = torch.from_numpy((rng.standard_normal((2, 8, 300, 517)) * 2).astype(np.float32)).to("cuda", dt)
    bias[:, :, 7] = float("-inf")
    out = fastattn.flash_attn_func(q, k, v, causal=causal, bias=bias)
    b64 = bias.double()
    if causal:
        keep = torch.ones(300, 517, dtype=torch.bool, device="cuda").tril(517 - 300)
        b64 = b64.masked_fill(~keep, float("-inf"))
    ref = torch.nan_to_num(_sdpa64(torch, q, k, v, b64))  # the -inf row: SDPA gives NaN, fastattn 0
    err = (out.double() - ref).abs().max().item()
    assert err < (2e-2 if dt == torch.bfloat16 else 4e-3), err
    assert torch.all(out[:, 7] == 0)


def test_cuda_sdpa_float_mask(rng):
    torch = _torch()
    _cuda(torch)
    q, k, v = (torch.randn(2, 8, 1000, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    mask = torch.randn(2, 1, 1000, 1000, device="cuda", dtype=torch.bfloat16)
    got = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    want = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask.double())
    assert (got.double() - want).abs().max().item() < 2e-2
