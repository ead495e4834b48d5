"""flash_attn_with_kvcache on the CPU backend (numpy) against the numpy model: the cache updated
in place (positions, rotary both styles, cache_batch_idx, pages), out/lse by FA3's rule, every
cache_seqlens edge, and paged vs contiguous bit for bit. ALiBi (alibi_slopes=) against a float64 reference
(kvcache_model.alibi_kvcache_reference), on numpy arrays (the DLPack path) and torch tensors (the views path) when torch is installed."""
import importlib.util

import numpy as np
import pytest

import fastattn
from checks import FLOAT32_FLOOR, assert_close, assert_lse_close, randn
from kvcache_model import alibi_kvcache_reference, model, rotary_angles


def _ulp_close(name, got, want, dtype):
    """Rotated values may round the other way than the float64 model: one ulp of the dtype."""
    eps = np.finfo(dtype).eps
    tol = eps * np.maximum(np.abs(want), 2.0 ** -14) + 2.0 ** -22
    err = np.abs(got.astype(np.float64) - want)
    assert (err <= tol).all(), f"{name}: max error {err.max():.3g}"


def _case(rng, dtype, b=3, s_q=1, h=4, h_kv=2, d=32, s_cache=64, s_new=1, rot=0, cache_rows=None):
    q = randn(rng, (b, s_q, h, d), dtype)
    kc = randn(rng, (cache_rows or b, s_cache, h_kv, d), dtype)
    vc = randn(rng, (cache_rows or b, s_cache, h_kv, d), dtype)
    k = randn(rng, (b, s_new, h_kv, d), dtype)
    v = randn(rng, (b, s_new, h_kv, d), dtype)
    cos = sin = None
    if rot:
        cos, sin = (x.astype(dtype) for x in rotary_angles(s_cache, rot))
    return q, kc, vc, k, v, cos, sin


def _check(q, kc, vc, k, v, cos, sin, dtype, seqlens, **kw):
    interleaved = kw.pop("rotary_interleaved", True)
    want = model(q, kc, vc, k, v, cos, sin, seqlens, kw.get("cache_batch_idx"), kw.get("cache_leftpad"),
                 kw.get("block_table"), kw.get("causal", False), kw.get("window_size", (-1, -1)),
                 kw.get("softcap", 0.0), interleaved, dtype)
    out, lse = fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cos, sin, cache_seqlens=seqlens,
                                                rotary_interleaved=interleaved,
                                                return_softmax_lse=True, **kw)
    kc_want, vc_want, out64, lse64, outlp = want
    if cos is not None:
        _ulp_close("k_cache", kc, kc_want, dtype)
    else:
        np.testing.assert_array_equal(kc.astype(np.float64), kc_want)
    np.testing.assert_array_equal(vc.astype(np.float64), vc_want)
    floor = FLOAT32_FLOOR if dtype == np.float32 else 0.0
    assert_close("out", out, out64, outlp, dtype, floor)
    assert_lse_close(lse, lse64)
    return out, lse


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
def test_decode_seqlen_edges(rng, dtype):
    """cache_seqlens 0, 1 and full after the append."""
    case = _case(rng, dtype)
    _check(*case, dtype, np.array([0, 1, 63], np.int32))


def test_no_new_tokens_and_whole_cache(rng):
    q, kc, vc, k, v, _, _ = _case(rng, np.float32, s_new=0)
    _check(q, kc, vc, k, v, None, None, np.float32, np.array([0, 1, 64], np.int32))
    out = fastattn.flash_attn_with_kvcache(q, kc, vc)  # no cache_seqlens: every cached token
    want = model(q, kc, vc)
    assert_close("out", out, want[2], want[4], np.float32, FLOAT32_FLOOR)


def test_int_cache_seqlens(rng):
    case = _case(rng, np.float32, s_new=2, s_q=2)
    _check(*case, np.float32, 7, causal=True)


@pytest.mark.parametrize("interleaved", [True, False], ids=["interleaved", "neox"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
def test_rotary(rng, interleaved, causal):
    case = _case(rng, np.float16, s_q=3, s_new=3, rot=16, d=48)
    _check(*case, np.float16, np.array([0, 9, 61], np.int32), causal=causal, rotary_interleaved=interleaved)


def test_local_window_softcap(rng):
    case = _case(rng, np.float32, s_q=4, s_new=4, rot=32)
    _check(*case, np.float32, np.array([20, 3, 40], np.int32), window_size=(6, 0), softcap=4.0)


def test_cache_batch_idx_and_leftpad(rng):
    case = _case(rng, np.float32, s_new=2, s_q=2, cache_rows=5, rot=16)
    _check(*case, np.float32, np.array([10, 0, 30], np.int32), cache_batch_idx=np.array([4, 0, 2], np.int32),
           cache_leftpad=np.array([3, 0, 29], np.int32), causal=True)


def test_paged_equals_contiguous_bitwise(rng):
    dtype = np.float16
    q, kc, vc, k, v, cos, sin = _case(rng, dtype, s_q=2, s_new=2, rot=16)
    seqlens = np.array([5, 0, 40], np.int32)
    page, pps = 16, 4
    order = rng.permutation(3 * pps + 2).astype(np.int32)
    table = order[:3 * pps].reshape(3, pps)
    kp = randn(rng, (3 * pps + 2, page, 2, 32), dtype)
    vp = randn(rng, (3 * pps + 2, page, 2, 32), dtype)
    for b in range(3):
        for i in range(pps):
            kp[table[b, i]] = kc[b, i * page:(i + 1) * page]
            vp[table[b, i]] = vc[b, i * page:(i + 1) * page]
    kw = dict(cache_seqlens=seqlens, causal=True, return_softmax_lse=True)
    out_c, lse_c = fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cos, sin, **kw)
    out_p, lse_p = fastattn.flash_attn_with_kvcache(q, kp, vp, k, v, cos, sin, block_table=table, **kw)
    np.testing.assert_array_equal(out_c, out_p)
    np.testing.assert_array_equal(lse_c, lse_p)
    for b in range(3):
        for i in range(pps):
            np.testing.assert_array_equal(kp[table[b, i]], kc[b, i * page:(i + 1) * page])
            np.testing.assert_array_equal(vp[table[b, i]], vc[b, i * page:(i + 1) * page])


def test_appended_slot_belongs_to_one_sequence(rng):
    """Two entries on one cache row: refused with an append (entry 1 would read entry 0's new token, or both
    write one slot), allowed without one (beams reading a shared row); the refusal writes nothing."""
    q, kc, vc, k, v, _, _ = _case(rng, np.float32, cache_rows=3)
    idx = np.array([1, 1, 2], np.int32)
    seqlens = np.array([4, 4, 9], np.int32)
    kc0 = kc.copy()
    with pytest.raises(ValueError, match=r"^cache_batch_idx: batch entries 1 and 0 share cache row 1, where entry 1 "
                                         r"appends positions \[4, 5\) and entry 0 uses \[0, 5\)"):
        fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=seqlens, cache_batch_idx=idx)
    np.testing.assert_array_equal(kc, kc0)
    table = np.array([[0, 1, 2, 3], [0, 4, 5, 6], [7, 8, 9, 10]], np.int32)  # entries 0 and 1 share page 0
    kp, vp = randn(rng, (11, 16, 2, 32), np.float32), randn(rng, (11, 16, 2, 32), np.float32)
    with pytest.raises(ValueError, match=r"^page_table: batch entries 0 and 1 share page 0"):
        fastattn.flash_attn_with_kvcache(q, kp, vp, k, v, cache_seqlens=np.array([3, 20, 5], np.int32),
                                         block_table=table)
    # Page 0 full and read-only (both entries past it): allowed; without an append a shared row is too.
    fastattn.flash_attn_with_kvcache(q, kp, vp, k, v, cache_seqlens=np.array([16, 20, 5], np.int32),
                                     block_table=table)
    _check(q, kc, vc, None, None, None, None, np.float32, seqlens, cache_batch_idx=idx)


def test_errors(rng):
    q, kc, vc, k, v, _, _ = _case(rng, np.float32)
    with pytest.raises(ValueError, match="^cache_seqlens: required with k_new/v_new"):
        fastattn.flash_attn_with_kvcache(q, kc, vc, k, v)
    with pytest.raises(ValueError, match="cache_seqlens: entry 2 is 64 but must be in"):
        fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=np.array([0, 0, 64], np.int32))
    with pytest.raises(ValueError, match="block_table and page_table"):
        t = np.zeros((3, 4), np.int32)
        fastattn.flash_attn_with_kvcache(q, kc, vc, block_table=t, page_table=t)
    with pytest.raises(ValueError, match="^num_splits"):
        fastattn.flash_attn_with_kvcache(q, kc, vc, num_splits=-1)


# ---- ALiBi over the cache (alibi_slopes=) ----------------------------------------------------------------

def _torch_or_skip():
    return pytest.importorskip("torch", reason="torch is not installed: torch ALiBi KV-cache tests skipped")


def _as_kind(kind, *xs):
    """xs as numpy arrays (the DLPack path) or CPU torch tensors (the views path); None stays None."""
    if kind == "numpy":
        return xs
    torch = _torch_or_skip()
    return tuple(None if x is None else torch.from_numpy(np.array(x)) for x in xs)


def _np(x):
    return None if x is None else np.array(x.numpy() if hasattr(x, "numpy") else x)


ALIBI_SHAPES = {"decode": (1, 1), "chunk": (3, 3), "no_append": (2, 0)}  # (s_q, s_new)


def _alibi_case(rng, shape, dims, leftpad, b=3, h=4, h_kv=2, d=32, s_cache=48):
    """Inputs of one ALiBi call: random lengths (one sequence possibly empty before the append, one that fills
    the cache), left padding within each sequence's cached tokens, slopes in [0.01, 1) of shape (h) or (b, h)."""
    s_q, s_new = ALIBI_SHAPES[shape]
    q = randn(rng, (b, s_q, h, d))
    kc, vc = randn(rng, (b, s_cache, h_kv, d)), randn(rng, (b, s_cache, h_kv, d))
    k = v = None
    if s_new:
        k, v = randn(rng, (b, s_new, h_kv, d)), randn(rng, (b, s_new, h_kv, d))
    seqlens = np.array([rng.integers(0, 4), rng.integers(4, s_cache - s_new), s_cache - s_new], np.int32)
    lp = None
    if leftpad:  # the middle sequence may lose every cached key; the last keeps two (the ALiBi term must show)
        lp = np.array([0, rng.integers(1, seqlens[1] + 1), rng.integers(1, seqlens[2] - 1)], np.int32)
    slopes = rng.uniform(0.01, 1.0, (h,) if dims == 1 else (b, h)).astype(np.float32)
    return q, kc, vc, k, v, seqlens, lp, slopes


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("leftpad", [False, True], ids=["no_leftpad", "leftpad"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dims", [1, 2], ids=["slopes_h", "slopes_bh"])
@pytest.mark.parametrize("shape", list(ALIBI_SHAPES))
def test_alibi_against_reference(rng, shape, dims, causal, leftpad, kind):
    q, kc, vc, k, v, seqlens, lp, slopes = _alibi_case(rng, shape, dims, leftpad)
    kc_want, vc_want, out64, lse64 = alibi_kvcache_reference(q, kc, vc, k, v, seqlens, lp, slopes, causal)
    _, _, out32, _ = alibi_kvcache_reference(q, kc, vc, k, v, seqlens, lp, slopes, causal, np.float32)
    args = _as_kind(kind, q, kc, vc, k, v, seqlens, lp, slopes)
    out, lse = fastattn.flash_attn_with_kvcache(*args[:5], cache_seqlens=args[5], cache_leftpad=args[6],
                                                alibi_slopes=args[7], causal=causal, return_softmax_lse=True)
    np.testing.assert_array_equal(_np(args[1]).astype(np.float64), kc_want)  # appended in place
    np.testing.assert_array_equal(_np(args[2]).astype(np.float64), vc_want)
    assert_close("out", _np(out), out64, out32, np.float32, FLOAT32_FLOOR)
    assert_lse_close(_np(lse), lse64)
    if shape != "no_append":  # the term matters: the same call without it gives another out
        plain = fastattn.flash_attn_with_kvcache(*_as_kind(kind, q, kc, vc, k, v, seqlens, lp)[:5],
                                                 cache_seqlens=args[5], cache_leftpad=args[6], causal=causal)
        assert np.abs(_np(plain)[1:] - _np(out)[1:]).max() > 1e-3


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_alibi_strided_slopes_and_splits(rng, kind):
    """Slopes without a unit last stride are copied (as the non-cache forward does); split-KV gives the same
    out within the tolerance of FA3's rule."""
    q, kc, vc, k, v, seqlens, lp, slopes = _alibi_case(rng, "chunk", 2, True)
    _, _, out64, lse64 = alibi_kvcache_reference(q, kc, vc, k, v, seqlens, lp, slopes, True)
    _, _, out32, _ = alibi_kvcache_reference(q, kc, vc, k, v, seqlens, lp, slopes, True, np.float32)
    strided = np.asfortranarray(slopes)  # (b, h) with strides (4, 12): the last dim not unit
    for num_splits in (1, 3):
        args = _as_kind(kind, q, kc.copy(), vc.copy(), k, v, seqlens, lp, strided)
        slopes_arg = args[7] if kind == "numpy" else args[7].t().contiguous().t()
        assert slopes_arg.strides[-1] != 4 if kind == "numpy" else slopes_arg.stride(-1) != 1
        out, lse = fastattn.flash_attn_with_kvcache(*args[:5], cache_seqlens=args[5], cache_leftpad=args[6],
                                                    alibi_slopes=slopes_arg, causal=True, num_splits=num_splits,
                                                    return_softmax_lse=True)
        assert_close("out", _np(out), out64, out32, np.float32, FLOAT32_FLOOR)
        assert_lse_close(_np(lse), lse64)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_alibi_errors(rng, kind):
    """Slopes of another dtype, shape or array kind are refused by name, before the cache is written."""
    q, kc, vc, k, v, seqlens, _, slopes = _alibi_case(rng, "decode", 1, False)
    q, kc, vc, k, v, seqlens = _as_kind(kind, q, kc, vc, k, v, seqlens)
    before = _np(kc).copy()
    other = "torch" if kind == "numpy" else "numpy"
    cases = [
        (slopes.astype(np.float16), ValueError, "^alibi_slopes: dtype float16 is not supported"),
        (slopes.astype(np.float64), ValueError, "^alibi_slopes: dtype float64 is not supported"),
        (np.ones(5, np.float32), ValueError, r"^alibi_slopes: shape \(5\) but its last dim must be heads_q 4"),
        (np.ones((4, 4), np.float32), ValueError, r"^alibi_slopes: shape \(4, 4\) but its first dim must be batch 3"),
        (np.ones((1, 3, 4), np.float32), ValueError, "^alibi_slopes: expected 1 dim"),
    ]
    for bad, exc, pattern in cases:
        with pytest.raises(exc, match=pattern):
            fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=seqlens,
                                             alibi_slopes=_as_kind(kind, bad)[0])
    if other == "numpy" or importlib.util.find_spec("torch") is not None:
        with pytest.raises(TypeError, match=f"^alibi_slopes: expected a {kind} array like q"):
            fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=seqlens,
                                             alibi_slopes=_as_kind(other, slopes)[0])
    with pytest.raises(TypeError, match="^alibi_slopes: expected an array of q's kind, got list"):
        fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=seqlens, alibi_slopes=[0.5] * 4)
    np.testing.assert_array_equal(_np(kc), before)


def test_alibi_paged_and_indexed_equal_contiguous(rng):
    """The slopes follow the sequence (batch row b of q), not its cache row or pages: a paged cache and one
    reached through cache_batch_idx give the contiguous cache's out and lse bit for bit."""
    q, kc, vc, k, v, seqlens, _, slopes = _alibi_case(rng, "chunk", 2, False, s_cache=64)
    kw = dict(cache_seqlens=seqlens, alibi_slopes=slopes, causal=True, window_size=(20, 1), return_softmax_lse=True)
    out_c, lse_c = fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, **kw)
    page, pps = 16, 4
    table = rng.permutation(3 * pps + 2)[:3 * pps].astype(np.int32).reshape(3, pps)
    kp, vp = randn(rng, (3 * pps + 2, page, 2, 32)), randn(rng, (3 * pps + 2, page, 2, 32))
    rows = np.array([3, 0, 1], np.int32)
    ki, vi = randn(rng, (4, 64, 2, 32)), randn(rng, (4, 64, 2, 32))
    for b in range(3):
        ki[rows[b]], vi[rows[b]] = kc[b], vc[b]
        for i in range(pps):
            kp[table[b, i]], vp[table[b, i]] = kc[b, i * page:(i + 1) * page], vc[b, i * page:(i + 1) * page]
    out_p, lse_p = fastattn.flash_attn_with_kvcache(q, kp, vp, k, v, block_table=table, **kw)
    out_i, lse_i = fastattn.flash_attn_with_kvcache(q, ki, vi, k, v, cache_batch_idx=rows, **kw)
    for out, lse in ((out_p, lse_p), (out_i, lse_i)):
        np.testing.assert_array_equal(out, out_c)
        np.testing.assert_array_equal(lse, lse_c)


def test_read_only_cache_refused_by_name(rng):
    """A read-only numpy cache (np.broadcast_to) is refused by name, not by the binding's signature listing."""
    q, kc, vc, k, v, _, _ = _case(rng, np.float32)
    for name, ro in (("k_cache", dict(k_cache=np.broadcast_to(kc[:1], kc.shape), v_cache=vc)),
                     ("v_cache", dict(k_cache=kc, v_cache=np.broadcast_to(vc[:1], vc.shape)))):
        with pytest.raises(ValueError, match=rf"^{name}: a read-only array"):
            fastattn.flash_attn_with_kvcache(q, cache_seqlens=np.array([1, 2, 3], np.int32), **ro)
