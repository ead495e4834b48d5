"""ALiBi (alibi_slopes=, FlashAttention's): -slope[b, h] * |i + s_k - s_q - j| added to every score after
softcap, with s_q / s_k each sequence's used lengths. out, lse, dq, dk, dv are written by the extension into
NaN-poisoned buffers and every element is checked (FA3's rule, checks.py) against float64 attention with the
term built here; the front ends (flash_attn_func / varlen / packed, fastattn.forward / backward) must give
the same bits; refusals name the argument. torch (when installed): autograd (eager, the custom ops,
torch.compile(fullgraph=True)) gives q, k, v, a bias their gradients and the slopes none. CUDA (sm90: head
dims <= 128 forward, 96 / 128 backward) runs only with a device; the rest on the CPU backend."""
import numpy as np
import pytest

import attn_reference as ref
import fastattn
from checks import FLOAT32_FLOOR, assert_close, assert_lse_close, randn
from fastattn import _C, _core

DTYPES = {"f32": np.float32, "f16": np.float16}

# (b, s_q, s_k, h, h_kv, d, causal, window, softcap)
CASES = {
    "one_query": (3, 1, 17, 2, 1, 16, False, (-1, -1), 0.0),
    "gqa_sq_lt_sk": (2, 17, 113, 6, 2, 32, False, (-1, -1), 0.0),
    "sq_gt_sk": (2, 113, 17, 4, 4, 32, False, (-1, -1), 0.0),
    "causal_sq_lt_sk_mqa": (1, 17, 113, 4, 1, 64, True, (-1, -1), 0.0),
    "causal_sq_gt_sk": (2, 113, 17, 2, 2, 32, True, (-1, -1), 0.0),  # rows 0..95 keep no key
    "local_sq_gt_sk": (2, 57, 40, 4, 2, 32, False, (7, 3), 0.0),
    "softcap_causal": (1, 23, 23, 2, 2, 128, True, (-1, -1), 3.0),
}


def alibi_term(slopes, s_q, s_k):
    """FlashAttention's ALiBi term in float64, (b or 1, h, s_q, s_k): -slope * |i + s_k - s_q - j|."""
    sl = np.asarray(slopes, np.float64)
    sl = sl[None] if sl.ndim == 1 else sl
    i = np.arange(s_q)[:, None]
    j = np.arange(s_k)[None, :]
    return -sl[:, :, None, None] * np.abs(i + s_k - s_q - j)


def draw_slopes(rng, b, h, dims):
    """float32 slopes in [0.01, 1) (FA's geometric slopes lie in (0, 1]): (h,) or (b, h)."""
    return rng.uniform(0.01, 1.0, (h,) if dims == 1 else (b, h)).astype(np.float32)


def floor_of(dtype):
    return FLOAT32_FLOOR if dtype == np.float32 else 0.0


def run_forward(q, k, v, **kw):
    """(out, lse) written by the extension into NaN-filled buffers; kw as fastattn.forward's."""
    varlen = kw.get("cu_seqlens_q") is not None
    out = np.full(q.shape[:-1] + v.shape[-1:], np.nan, q.dtype)
    lse_shape = (q.shape[1], q.shape[0]) if varlen else (q.shape[0], q.shape[2], q.shape[1])
    lse = np.full(lse_shape, np.nan, np.float32)
    _C.forward(q, k, v, out, lse, _core.make_options(head_dim=q.shape[-1], **kw), 0)
    return out, lse


def run_backward(dout, q, k, v, out, lse, **kw):
    """(dq, dk, dv) written by the extension into NaN-filled buffers."""
    dq, dk, dv = (np.full(x.shape, np.nan, x.dtype) for x in (q, k, v))
    _C.backward(dout, q, k, v, out, lse, dq, dk, dv, _core.make_options(head_dim=q.shape[-1], **kw), 0)
    return dq, dk, dv


def case_inputs(rng, case, dtype, dims):
    b, s_q, s_k, h, h_kv, d, causal, window, softcap = CASES[case]
    q, dout = randn(rng, (b, s_q, h, d), dtype), randn(rng, (b, s_q, h, d), dtype)
    k, v = randn(rng, (b, s_k, h_kv, d), dtype), randn(rng, (b, s_k, h_kv, d), dtype)
    mask = dict(causal=causal, window=window, softcap=softcap)
    return q, k, v, dout, draw_slopes(rng, b, h, dims), mask


def lib_kw(mask, slopes):
    """fastattn's keywords for a reference mask dict (window -> window_size) plus the slopes."""
    return dict(causal=mask["causal"], window_size=mask["window"], softcap=mask["softcap"], alibi_slopes=slopes)


def check_forward(out, lse, q, k, v, slopes, dtype, **mask):
    add = alibi_term(slopes, q.shape[1], k.shape[1])
    r64, lse64 = ref.forward(q, k, v, add=add, **mask)
    rlp, _ = ref.forward(q, k, v, add=add, dtype=dtype, **mask)
    assert_close("out", out, r64, rlp, dtype, floor_of(dtype))
    assert_lse_close(lse, lse64)


def check_backward(grads, q, k, v, dout, slopes, dtype, **mask):
    add = alibi_term(slopes, q.shape[1], k.shape[1])
    exact = ref.backward(q, k, v, dout, add=add, **mask)
    lowp = ref.backward(q, k, v, dout, add=add, dtype=dtype, **mask)
    for name, got, r64, rlp in zip(("dq", "dk", "dv"), grads, exact, lowp):
        assert_close(name, got, r64, rlp, dtype, floor_of(dtype))


@pytest.mark.parametrize("dims", [1, 2], ids=["slopes_h", "slopes_bh"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("case", list(CASES))
def test_forward_backward(rng, case, dtype, dims):
    q, k, v, dout, slopes, mask = case_inputs(rng, case, DTYPES[dtype], dims)
    kw = lib_kw(mask, slopes)
    out, lse = run_forward(q, k, v, **kw)
    check_forward(out, lse, q, k, v, slopes, DTYPES[dtype], **mask)
    grads = run_backward(dout, q, k, v, out, lse, **kw)
    check_backward(grads, q, k, v, dout, slopes, DTYPES[dtype], **mask)


def test_reference_term_is_not_a_no_op(rng):
    """Guards the checks above: with these slopes the ALiBi answer is far from the plain one, so a library
    that dropped (or mis-signed) the term could not pass them."""
    q, k, v, _, slopes, mask = case_inputs(rng, "gqa_sq_lt_sk", np.float32, 2)
    plain, _ = ref.forward(q, k, v, **mask)
    for sign in (1, -1):
        alibi, _ = ref.forward(q, k, v, add=sign * alibi_term(slopes, 17, 113), **mask)
        assert np.abs(alibi - plain).max() > 0.1
    out, lse = run_forward(q, k, v, **lib_kw(mask, -slopes))  # a negative slope is FA's formula too
    check_forward(out, lse, q, k, v, -slopes, np.float32, **mask)


def test_front_ends_pass_the_slopes(rng):
    """flash_attn_func, the packed variants and fastattn.forward / backward run the same kernel on the same
    inputs as the extension call above: the same bits."""
    q, k, v, dout, slopes, mask = case_inputs(rng, "causal_sq_gt_sk", np.float32, 2)
    kw = lib_kw(mask, slopes)
    want_out, want_lse = run_forward(q, k, v, **kw)
    got = fastattn.flash_attn_func(q, k, v, return_attn_probs=True, **kw)
    for name, a, b in zip(("out", "lse"), got, (want_out, want_lse)):
        np.testing.assert_array_equal(a, b, err_msg=name)
    np.testing.assert_array_equal(fastattn.forward(q, k, v, **kw)[0], want_out)
    np.testing.assert_array_equal(fastattn.flash_attn_kvpacked_func(q, np.stack([k, v], axis=2), **kw), want_out)
    want_grads = run_backward(dout, q, k, v, want_out, want_lse, **kw)
    for name, a, b in zip(("dq", "dk", "dv"), fastattn.backward(dout, q, k, v, want_out, want_lse, **kw), want_grads):
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_qkvpacked(rng):
    q, k, v, _, slopes, mask = case_inputs(rng, "softcap_causal", np.float32, 1)
    out = fastattn.flash_attn_qkvpacked_func(np.stack([q, k, v], axis=2), **lib_kw(mask, slopes))
    np.testing.assert_array_equal(out, run_forward(q, k, v, **lib_kw(mask, slopes))[0])


def test_slope_layouts_give_the_same_bits(rng):
    """(h,) slopes, the same slopes repeated per batch row, and strided views of both (the front end copies
    a non-unit last stride; a padded batch stride is read as it lies) are one computation."""
    q, k, v, _, slopes, mask = case_inputs(rng, "local_sq_gt_sk", np.float32, 1)
    want = fastattn.flash_attn_func(q, k, v, **lib_kw(mask, slopes))
    wide = np.zeros((2, 3 * slopes.size), np.float32)
    wide[:, : 3 * slopes.size : 3] = slopes
    for layout in (np.tile(slopes, (2, 1)), wide[0, ::3], wide[:, ::3]):
        np.testing.assert_array_equal(fastattn.flash_attn_func(q, k, v, **lib_kw(mask, layout)), want)
    padded = np.zeros((2, slopes.size + 5), np.float32)
    padded[:, : slopes.size] = slopes
    np.testing.assert_array_equal(fastattn.flash_attn_func(q, k, v, **lib_kw(mask, padded[:, : slopes.size])), want)


# ---- varlen ------------------------------------------------------------------------------------

# Per sequence (len_q, len_k): s_q < s_k, no queries, s_q = s_k (odd), one query with no key, s_q > s_k.
VARLEN = [(5, 9), (0, 3), (17, 17), (1, 0), (113, 40)]


def varlen_inputs(rng, dims, h=4, h_kv=2, d=32):
    lens_q, lens_k = zip(*VARLEN)
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q, dout = randn(rng, (int(cu_q[-1]), h, d)), randn(rng, (int(cu_q[-1]), h, d))
    k, v = randn(rng, (int(cu_k[-1]), h_kv, d)), randn(rng, (int(cu_k[-1]), h_kv, d))
    index = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=max(lens_q), max_seqlen_k=max(lens_k))
    return q, k, v, dout, draw_slopes(rng, len(VARLEN), h, dims), index


def sequence_slopes(slopes, b):
    return slopes if slopes.ndim == 1 else slopes[b]


def varlen_reference(q, k, v, dout, slopes, cu_q, cu_k, used_q, used_k, dtype=np.float64, **mask):
    """Per sequence: (out, lse, dq, dk, dv) of float64 attention with its own ALiBi term (i, j from the
    sequence's start, its used lengths); rows past the used lengths are NaN (not compared)."""
    out, lse = np.full(q.shape, np.nan), np.full((q.shape[1], q.shape[0]), np.nan)
    grads = [np.full(x.shape, np.nan) for x in (q, k, v)]
    for b in range(len(cu_q) - 1):
        q0, k0, n_q, n_k = int(cu_q[b]), int(cu_k[b]), int(used_q[b]), int(used_k[b])
        qs, ks, vs, ds = q[None, q0:q0 + n_q], k[None, k0:k0 + n_k], v[None, k0:k0 + n_k], dout[None, q0:q0 + n_q]
        add = alibi_term(sequence_slopes(slopes, b), n_q, n_k)
        o, l = ref.forward(qs, ks, vs, add=add, dtype=dtype, **mask)
        out[q0:q0 + n_q], lse[:, q0:q0 + n_q] = o[0], l[0]
        if n_q and n_k:
            g = ref.backward(qs, ks, vs, ds, add=add, dtype=dtype, **mask)
        else:  # an empty side: the other side's gradients are 0
            g = [np.zeros(x.shape) for x in (qs, ks, vs)]
        for full, part, start, n in zip(grads, g, (q0, k0, k0), (n_q, n_k, n_k)):
            full[start:start + n] = part[0]
    return out, lse, grads


@pytest.mark.parametrize("mask", ["none", "causal", "local"])
@pytest.mark.parametrize("dims", [1, 2], ids=["slopes_h", "slopes_bh"])
def test_varlen(rng, dims, mask):
    q, k, v, dout, slopes, index = varlen_inputs(rng, dims)
    masks = {"none": {}, "causal": dict(causal=True), "local": dict(window=(7, 3))}
    m = masks[mask]
    kw = dict(index, causal=m.get("causal", False), window_size=m.get("window", (-1, -1)), alibi_slopes=slopes)
    out, lse = run_forward(q, k, v, **kw)
    grads = run_backward(dout, q, k, v, out, lse, **kw)
    cu_q, cu_k = index["cu_seqlens_q"], index["cu_seqlens_k"]
    lens = (np.diff(cu_q), np.diff(cu_k))
    r64 = varlen_reference(q, k, v, dout, slopes, cu_q, cu_k, *lens, **m)
    rlp = varlen_reference(q, k, v, dout, slopes, cu_q, cu_k, *lens, dtype=np.float32, **m)
    assert_close("out", out, r64[0], rlp[0], np.float32, FLOAT32_FLOOR)
    assert_lse_close(lse, r64[1])
    for name, got, g64, glp in zip(("dq", "dk", "dv"), grads, r64[2], rlp[2]):
        assert_close(name, got, g64, glp, np.float32, FLOAT32_FLOOR)
    api = fastattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, index["max_seqlen_q"], index["max_seqlen_k"],
                                          causal=kw["causal"], window_size=kw["window_size"], alibi_slopes=slopes)
    np.testing.assert_array_equal(api, out)


def test_varlen_seqused_sets_the_diagonal(rng):
    """With seqused, s_q and s_k of the term are the used lengths (FA's |i + s_k - s_q - j| per sequence), not
    the cu_seqlens spans: the reference below builds it from the used lengths only."""
    q, k, v, dout, slopes, index = varlen_inputs(rng, 2)
    cu_q, cu_k = index["cu_seqlens_q"], index["cu_seqlens_k"]
    used_q = np.array([3, 0, 17, 1, 60], np.int32)
    used_k = np.array([9, 2, 11, 0, 31], np.int32)
    kw = dict(index, seqused_q=used_q, seqused_k=used_k, causal=True, alibi_slopes=slopes)
    out, lse = run_forward(q, k, v, **kw)
    grads = run_backward(dout, q, k, v, out, lse, **kw)
    r64 = varlen_reference(q, k, v, dout, slopes, cu_q, cu_k, used_q, used_k, causal=True)
    rlp = varlen_reference(q, k, v, dout, slopes, cu_q, cu_k, used_q, used_k, dtype=np.float32, causal=True)
    assert_close("out", out, r64[0], rlp[0], np.float32, FLOAT32_FLOOR)
    assert_lse_close(lse, r64[1])
    for name, got, g64, glp in zip(("dq", "dk", "dv"), grads, r64[2], rlp[2]):
        assert_close(name, got, g64, glp, np.float32, FLOAT32_FLOOR)


# ---- refusals ----------------------------------------------------------------------------------

def refusal_inputs(rng):
    q = randn(rng, (2, 9, 4, 16))
    k = randn(rng, (2, 12, 2, 16))
    return q, k, np.full(4, 0.5, np.float32)


@pytest.mark.parametrize("slopes, exc, pattern", [
    (np.full(4, 0.5, np.float64), ValueError, r"^alibi_slopes: dtype float64 is not supported \(the slopes are float32"),
    (np.full(4, 0.5, np.float16), ValueError, r"^alibi_slopes: dtype float16 is not supported"),
    (np.full(4, 1, np.int32), ValueError, r"^alibi_slopes: dtype int32 is not supported"),
    (np.full(3, 0.5, np.float32), ValueError, r"^alibi_slopes: shape \(3\) but its last dim must be heads_q 4"),
    (np.full(2, 0.5, np.float32), ValueError, r"^alibi_slopes: shape \(2\) but its last dim must be heads_q 4"),
    (np.full((3, 4), 0.5, np.float32), ValueError, r"^alibi_slopes: shape \(3, 4\) but its first dim must be batch 2"),
    (np.full((1, 4), 0.5, np.float32), ValueError, r"^alibi_slopes: shape \(1, 4\) but its first dim must be batch 2"),
    (np.full((2, 2, 4), 0.5, np.float32), ValueError, r"^alibi_slopes: expected 1 dim \(heads_q\) or 2 dims"),
    (np.array(0.5, np.float32), ValueError, r"^alibi_slopes: expected 1 to 4 dimensions, got 0"),
    ([0.5] * 4, TypeError, r"^alibi_slopes: expected"),
])
def test_refusals(rng, slopes, exc, pattern):
    q, k, _ = refusal_inputs(rng)
    with pytest.raises(exc, match=pattern):
        fastattn.flash_attn_func(q, k, k, alibi_slopes=slopes)
    with pytest.raises(exc, match=pattern):
        fastattn.forward(q, k, k, alibi_slopes=slopes)
    out, lse = fastattn.forward(q, k, k)
    with pytest.raises(exc, match=pattern):
        fastattn.backward(out, q, k, k, out, lse, alibi_slopes=slopes)


def test_varlen_batch_is_the_sequence_count(rng):
    q, k, v, _, _, index = varlen_inputs(rng, 1)
    slopes = np.full((len(VARLEN) + 1, 4), 0.5, np.float32)
    with pytest.raises(ValueError, match=rf"^alibi_slopes: shape \(6, 4\) but its first dim must be batch {len(VARLEN)}"):
        fastattn.flash_attn_varlen_func(q, k, v, index["cu_seqlens_q"], index["cu_seqlens_k"], 113, 40,
                                        alibi_slopes=slopes)


@pytest.mark.parametrize("bad", ["float16", "int32", "strided"])
def test_extension_validates_the_slopes_itself(rng, bad):
    """_C callers skip the front end's checks: the C++ layer refuses by name (no crash, no silent misread)."""
    q, k, slopes = refusal_inputs(rng)
    given = {"float16": slopes.astype(np.float16), "int32": slopes.astype(np.int32),
             "strided": np.repeat(slopes, 2)[::2]}[bad]
    with pytest.raises(ValueError, match="^alibi_slopes: "):
        _C.forward(q, k, k, np.empty_like(q), None, _C.Options(alibi_slopes=given), 0)


@pytest.mark.parametrize("dims", [1, 2], ids=["slopes_h", "slopes_bh"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_kvcache_alibi_is_flash_attn_func_over_the_cached_keys(rng, dims, causal):
    """flash_attn_with_kvcache(alibi_slopes=) over an int cache_seqlens n, nothing appended, is flash_attn_func
    with the same slopes over the cache's first n keys (tests/python/test_kvcache_numpy.py checks every form
    against a reference)."""
    b, s_q, h, h_kv, d, n = 2, 3, 4, 2, 16, 21
    q = randn(rng, (b, s_q, h, d))
    kc, vc = randn(rng, (b, 32, h_kv, d)), randn(rng, (b, 32, h_kv, d))
    slopes = draw_slopes(rng, b, h, dims)
    out, lse = fastattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=n, alibi_slopes=slopes, causal=causal,
                                                num_splits=1, return_softmax_lse=True)
    want, want_lse = fastattn.flash_attn_func(q, kc[:, :n], vc[:, :n], causal=causal, alibi_slopes=slopes,
                                              return_attn_probs=True)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lse, want_lse, rtol=1e-5, atol=1e-6)


# ---- torch -------------------------------------------------------------------------------------

def _torch():
    return pytest.importorskip("torch", reason="torch is not installed: torch ALiBi tests skipped")


TORCH_DTYPES = {"f32": ("float32", np.float32), "bf16": ("bfloat16", "bfloat16"), "f16": ("float16", np.float16)}


def torch_inputs(torch, rng, case, dtype_name, dims, device="cpu"):
    """q, k, v (requiring grad), dout, slopes (requiring grad: autograd must give them none), mask."""
    q, k, v, dout, slopes, mask = case_inputs(rng, case, np.float32, dims)
    tdt = getattr(torch, dtype_name)
    leaves = [torch.from_numpy(x).to(device, tdt).requires_grad_() for x in (q, k, v)]
    return (*leaves, torch.from_numpy(dout).to(device, tdt), torch.from_numpy(slopes).to(device).requires_grad_(),
            mask)


def np64(x):
    return x.detach().to("cpu").double().numpy()


def check_torch_grads(torch, got, q, k, v, dout, slopes, rdt, floor=0.0, **mask):
    """dq, dk, dv against float64 torch autograd with the ALiBi term (the truth) and the numpy same-precision
    estimate (the tolerance's precision term)."""
    add = torch.from_numpy(alibi_term(np64(slopes), q.shape[1], k.shape[1]))
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    import torch_reference

    torch_reference.attention(*leaves, add=add, **mask).backward(dout.double())
    lowp = ref.backward(*(np64(x) for x in (q, k, v)), np64(dout), add=add.numpy(), dtype=rdt, **mask)
    for name, g, leaf, rlp in zip(("dq", "dk", "dv"), got, leaves, lowp):
        assert g.dtype == q.dtype, name
        assert_close(name, np64(g), leaf.grad.numpy(), rlp, rdt, floor)


@pytest.mark.parametrize("dims", [1, 2], ids=["slopes_h", "slopes_bh"])
@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("case", ["gqa_sq_lt_sk", "causal_sq_gt_sk", "local_sq_gt_sk"])
def test_torch_autograd(rng, case, dtype, dims):
    torch = _torch()
    name, rdt = TORCH_DTYPES[dtype]
    q, k, v, dout, slopes, mask = torch_inputs(torch, rng, case, name, dims)
    out = fastattn.flash_attn_func(q, k, v, **lib_kw(mask, slopes))
    add = alibi_term(np64(slopes), q.shape[1], k.shape[1])
    arrays = [np64(x) for x in (q, k, v)]
    assert_close("out", np64(out), ref.forward(*arrays, add=add, **mask)[0],
                 ref.forward(*arrays, add=add, dtype=rdt, **mask)[0], rdt, floor_of(rdt))
    out.backward(dout)
    assert slopes.grad is None, "the slopes get no gradient (as in FlashAttention)"
    check_torch_grads(torch, (q.grad, k.grad, v.grad), q, k, v, dout, slopes, rdt, floor_of(rdt), **mask)


def test_torch_reference_add_matches_numpy(rng):
    """The two float64 references agree on an additive term (values and gradients): ref.backward's add= is
    what the checks above lean on."""
    torch = _torch()
    import torch_reference

    q, k, v = (rng.standard_normal(s) for s in [(2, 9, 4, 16), (2, 12, 2, 16), (2, 12, 2, 16)])
    dout = rng.standard_normal((2, 9, 4, 16))
    add = alibi_term(rng.uniform(0.01, 1, (2, 4)), 9, 12)
    kw = dict(causal=True, window=(5, -1), softcap=2.0)
    leaves = [torch.from_numpy(x).requires_grad_() for x in (q, k, v)]
    out = torch_reference.attention(*leaves, add=torch.from_numpy(add), **kw)
    out.backward(torch.from_numpy(dout))
    np.testing.assert_allclose(out.detach().numpy(), ref.forward(q, k, v, add=add, **kw)[0], rtol=1e-12, atol=1e-12)
    for leaf, g in zip(leaves, ref.backward(q, k, v, dout, add=add, **kw)):
        np.testing.assert_allclose(leaf.grad.numpy(), g, rtol=1e-10, atol=1e-12)


def test_torch_inference_and_expanded_slopes(rng):
    """Without autograd (the DLPack path) and with slopes expanded over the batch (stride 0): the numpy bits."""
    torch = _torch()
    q, k, v, _, slopes, mask = case_inputs(rng, "causal_sq_lt_sk_mqa", np.float32, 1)
    want = run_forward(q, k, v, **lib_kw(mask, slopes))[0]
    tq, tk, tv, ts = (torch.from_numpy(x) for x in (q, k, v, slopes))
    got = fastattn.flash_attn_func(tq, tk, tv, **lib_kw(mask, ts))
    np.testing.assert_array_equal(got.numpy(), want)
    expanded = ts.expand(q.shape[0], -1)
    got = fastattn.flash_attn_func(tq.requires_grad_(), tk, tv, **lib_kw(mask, expanded))  # the views path
    np.testing.assert_array_equal(got.detach().numpy(), want)


def test_torch_bias_and_alibi_gradients(rng):
    """A bias that requires grad beside ALiBi (the CPU backend takes both): dbias through fastattn::bwd_dbias,
    which carries the slopes; the slopes still get no gradient."""
    torch = _torch()
    q, k, v, dout, slopes, mask = torch_inputs(torch, rng, "causal_sq_lt_sk_mqa", "float32", 2)
    bias = torch.from_numpy(rng.standard_normal((1, 4, 17, 113)).astype(np.float32)).requires_grad_()
    out = fastattn.flash_attn_func(q, k, v, bias=bias, **lib_kw(mask, slopes))
    out.backward(dout)
    assert slopes.grad is None
    add = torch.from_numpy(alibi_term(np64(slopes), 17, 113))
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v, bias)]
    import torch_reference

    want = torch_reference.attention(*leaves[:3], add=add + leaves[3], **mask)
    want.backward(dout.double())
    assert (out.double() - want).abs().max().item() < 2e-5
    for name, g, leaf in zip(("dq", "dk", "dv", "dbias"), (q.grad, k.grad, v.grad, bias.grad), leaves):
        err = (g.double() - leaf.grad).abs().max().item()
        assert err < 5e-5, f"{name}: {err}"


def test_torch_refusals(rng):
    torch = _torch()
    q, k, v, _, _, _ = torch_inputs(torch, rng, "gqa_sq_lt_sk", "float32", 1)
    with pytest.raises(ValueError, match=r"^alibi_slopes: dtype int64 is not supported"):
        fastattn.flash_attn_func(q, k, v, alibi_slopes=torch.ones(6, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"^alibi_slopes: shape \(5\) but its last dim must be heads_q 6"):
        fastattn.flash_attn_func(q, k, v, alibi_slopes=torch.ones(5))  # autograd: the views path
    with pytest.raises(ValueError, match=r"^alibi_slopes: shape \(3, 6\) but its first dim must be batch 2"):
        fastattn.flash_attn_func(q.detach(), k.detach(), v.detach(), alibi_slopes=torch.ones(3, 6))  # DLPack
    with pytest.raises(TypeError, match="^alibi_slopes: expected a torch array like q"):
        fastattn.flash_attn_func(q, k, v, alibi_slopes=np.ones(6, np.float32))
    with pytest.raises(ValueError, match="^alibi_slopes: device meta is not supported"):
        fastattn.flash_attn_func(q, k, v, alibi_slopes=torch.ones(6, device="meta"))
    args = (q.detach(), k.detach(), v.detach(), None, None, None, None, 0, 0, 0.25, False, -1, -1, 0.0, False,
            None, 128, 128, None, None)
    with pytest.raises(ValueError, match=r"^alibi_slopes: dtype fp16 but expected fp32"):
        torch.ops.fastattn.fwd(*args, torch.ones(6, dtype=torch.float16))  # the op: the C++ layer's check


def _op_args(torch, rng):
    q = torch.from_numpy(randn(rng, (2, 9, 4, 32))).requires_grad_()
    k, v = (torch.from_numpy(randn(rng, (2, 11, 2, 32))).requires_grad_() for _ in range(2))
    slopes = torch.from_numpy(draw_slopes(rng, 2, 4, 2))
    return (q, k, v, None, None, None, None, 0, 0, 0.25, True, -1, -1, 0.0, False, None, 128, 128, None, None, slopes)


def test_opcheck(rng):
    """Schemas, fake kernels and autograd registration of the ops with the slopes (fwd, bwd, bwd_dbias)."""
    torch = _torch()
    args = _op_args(torch, rng)
    torch.library.opcheck(torch.ops.fastattn.fwd.default, args)
    args = tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in args)
    out, lse = torch.ops.fastattn.fwd(*args)
    dout = torch.randn_like(out)
    torch.library.opcheck(torch.ops.fastattn.bwd.default, (dout, *args[:3], out, lse, *args[3:]))
    bias = torch.randn(1, 4, 9, 11)
    with_bias = (dout, *args[:3], out, lse, *args[3:-2], bias, args[-1])
    torch.library.opcheck(torch.ops.fastattn.bwd_dbias.default, with_bias)


@pytest.mark.parametrize("with_bias", [False, True], ids=["alibi", "alibi_and_bias"])
def test_compile_fullgraph(rng, with_bias):
    """torch.compile(fullgraph=True) (a graph break raises) traces fastattn::fwd with the slopes into the forward
    graph and fastattn::bwd (bwd_dbias with a bias that requires grad) with them into the backward graph;
    the compiled values and gradients are the eager ones, bit for bit (the CPU backend is ordered)."""
    torch = _torch()
    import torch_reference

    q, k, v, _, slopes, _ = torch_inputs(torch, rng, "gqa_sq_lt_sk", "float32", 1)
    cu = torch.tensor([0, 7, 17, 34], dtype=torch.int32)
    slopes_bh = torch.from_numpy(draw_slopes(rng, 3, 6, 2))
    bias = torch.from_numpy(randn(rng, (6, 17, 113))).requires_grad_() if with_bias else None

    def model(q, k, v, slopes, bias):
        a = fastattn.flash_attn_func(q, k, v, causal=True, alibi_slopes=slopes, bias=bias)
        c = fastattn.flash_attn_varlen_func(q.flatten(0, 1), k[:, :17].flatten(0, 1), v[:, :17].flatten(0, 1),
                                            cu, cu, 17, 17, window_size=(4, 1), alibi_slopes=slopes_bh)
        return a.square().sum() + c.sum()

    backend, graphs = torch_reference.aot_graphs()
    torch._dynamo.reset()
    loss = torch.compile(model, fullgraph=True, backend=backend)(q, k, v, slopes, bias)
    loss.backward()
    fwd_calls = torch_reference.op_calls(graphs["fw"][0], "fastattn.fwd")
    bwd_calls = torch_reference.op_calls(graphs["bw"][0], "fastattn.bwd")
    assert len(fwd_calls) == 2 and len(bwd_calls) == 2
    for node, position in [(n, 20) for n in fwd_calls] + [(n, 23) for n in bwd_calls]:  # the ops' last argument
        given = node.args[position] if len(node.args) > position else node.kwargs.get("alibi_slopes")
        assert given is not None, node.format_node()
    assert any("bwd_dbias" in str(n.target) for n in bwd_calls) == with_bias
    inputs = (q, k, v) + ((bias,) if with_bias else ())
    compiled = [x.grad.clone() for x in inputs]
    for x in inputs:
        x.grad = None
    eager = model(q, k, v, slopes, bias)
    eager.backward()
    assert torch.equal(loss, eager)
    for g, x in zip(compiled, inputs):
        assert torch.equal(g, x.grad)
    assert slopes.grad is None


# ---- CUDA (sm90) -------------------------------------------------------------------------------

def _cuda_torch():
    torch = _torch()
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device visible to torch: CUDA ALiBi tests skipped")
    if not fastattn.cuda_available():
        pytest.skip("fastattn was built without CUDA kernels (or sees no device): CUDA ALiBi tests skipped")
    torch.backends.cuda.matmul.allow_tf32 = False  # the lowp estimate's float32 matmuls must not run in TF32
    return torch


def cuda_forward_or_skip(fn, *args, **kw):
    """The forward; a device the ALiBi forward does not run on (sm90 only) must refuse it by name, then skip."""
    try:
        return fn(*args, **kw)
    except NotImplementedError as e:
        assert str(e).startswith("alibi_slopes: the CUDA forward with ALiBi runs on sm90"), f"unclear refusal: {e}"
        pytest.skip(f"the ALiBi forward runs on sm90 only: {e}")


def cuda_inputs(torch, rng, b, s_q, s_k, h, h_kv, d, dims):
    def rand(shape):
        return torch.from_numpy(randn(rng, shape)).to("cuda", torch.bfloat16).requires_grad_()

    q, k, v = rand((b, s_q, h, d)), rand((b, s_k, h_kv, d)), rand((b, s_k, h_kv, d))
    dout = torch.from_numpy(randn(rng, (b, s_q, h, d))).to("cuda", torch.bfloat16)
    return q, k, v, dout, torch.from_numpy(draw_slopes(rng, b, h, dims)).cuda()


@pytest.mark.parametrize("causal, window", [(True, (-1, -1)), (False, (-1, -1)), (False, (40, 7))],
                         ids=["causal", "full", "local"])
@pytest.mark.parametrize("dims", [1, 2], ids=["slopes_h", "slopes_bh"])
def test_cuda_forward_backward_d128_bf16(rng, dims, causal, window):
    torch = _cuda_torch()
    import torch_reference

    q, k, v, dout, slopes = cuda_inputs(torch, rng, 2, 257, 300, 8, 2, 128, dims)
    kw = dict(causal=causal, window_size=window, alibi_slopes=slopes)
    out = cuda_forward_or_skip(fastattn.flash_attn_func, q, k, v, **kw)
    mask = dict(causal=causal, window=window)
    add = alibi_term(np64(slopes), 257, 300)
    arrays = [np64(x) for x in (q, k, v)]
    assert_close("out", np64(out), ref.forward(*arrays, add=add, **mask)[0],
                 ref.forward(*arrays, add=add, dtype="bfloat16", **mask)[0], "bfloat16")
    with torch.no_grad():  # the DLPack path: the same kernel
        assert torch.equal(fastattn.flash_attn_func(q, k, v, **kw), out)
    out.backward(dout)
    torch.cuda.synchronize()
    leaves = [x.detach().double().requires_grad_() for x in (q, k, v)]
    t_add = torch.from_numpy(add).cuda()
    torch_reference.attention(*leaves, add=t_add, **mask).backward(dout.double())
    lowp = torch_reference.lowp_backward(q, k, v, dout, torch.bfloat16, add=t_add, **mask)
    for name, g, leaf, rlp in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), leaves, lowp):
        assert_close(name, np64(g), np64(leaf.grad), np64(rlp), "bfloat16")
    assert slopes.grad is None


def test_cuda_varlen_d128(rng):
    """Varlen on the GPU: each sequence's own diagonal (an empty sequence among them) and (batch, h) slopes."""
    torch = _cuda_torch()
    q, k, v, _, slopes, index = varlen_inputs(rng, 2, h=4, h_kv=2, d=128)
    cu_q, cu_k = index["cu_seqlens_q"], index["cu_seqlens_k"]
    tq, tk, tv = (torch.from_numpy(x).to("cuda", torch.bfloat16) for x in (q, k, v))
    out = cuda_forward_or_skip(fastattn.flash_attn_varlen_func, tq, tk, tv, torch.from_numpy(cu_q).cuda(),
                               torch.from_numpy(cu_k).cuda(), index["max_seqlen_q"], index["max_seqlen_k"],
                               causal=True, alibi_slopes=torch.from_numpy(slopes).cuda())
    arrays = [np64(x) for x in (tq, tk, tv)]
    lens = (np.diff(cu_q), np.diff(cu_k))
    r64 = varlen_reference(*arrays, arrays[0], slopes, cu_q, cu_k, *lens, causal=True)
    rlp = varlen_reference(*arrays, arrays[0], slopes, cu_q, cu_k, *lens, dtype="bfloat16", causal=True)
    assert_close("out", np64(out), r64[0], rlp[0], "bfloat16")


@pytest.mark.parametrize("d, extra, pattern", [
    (64, {}, "runs head dims 96 and 128"),
    (128, dict(deterministic=True), "has no deterministic mode yet"),
    (128, dict(softcap=5.0), "takes no softcap yet"),
])
def test_cuda_backward_refusals(rng, d, extra, pattern):
    """What the sm90 ALiBi backward does not take is refused by name at backward time (the forward ran)."""
    torch = _cuda_torch()
    q, k, v, dout, slopes = cuda_inputs(torch, rng, 1, 70, 90, 4, 2, d, 1)
    out = cuda_forward_or_skip(fastattn.flash_attn_func, q, k, v, causal=True, alibi_slopes=slopes, **extra)
    with pytest.raises(NotImplementedError, match=f"^alibi_slopes: the CUDA backward with ALiBi {pattern}"):
        out.backward(dout)


def test_cuda_alibi_with_bias_refused(rng):
    torch = _cuda_torch()
    q, k, v, _, slopes = cuda_inputs(torch, rng, 1, 70, 90, 4, 2, 128, 1)
    bias = torch.zeros(1, 4, 70, 90, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(NotImplementedError, match="^alibi_slopes: the CUDA forward takes ALiBi or a bias, not both"):
        fastattn.flash_attn_func(q, k, v, alibi_slopes=slopes, bias=bias)
