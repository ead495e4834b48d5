"""flash_attn_with_kvcache on the CPU backend (numpy) against the numpy model: the cache updated
in place (positions, rotary both styles, cache_batch_idx, pages), out/lse by FA3's rule, every
cache_seqlens edge, and paged vs contiguous bit for bit."""
import numpy as np
import pytest

import attn_reference as ref
import fastattn
from checks import FLOAT32_FLOOR, assert_close, assert_lse_close, randn
from kvcache_model import model, rotary_angles


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


def test_errors(rng):
    q, kc, vc, k, v, _, _ = _case(rng, np.float32)
    with pytest.raises(ValueError, match="^cache_seqlens: required with k_new/v_new"):
        fastattn.flash_attn_with_kvcache(q, kc, vc, k, v)
    with pytest.raises(ValueError, match="cache_seqlens: entry 2 is 64 but must be in"):
        fastattn.flash_attn_with_kvcache(q, kc, vc, k, v, cache_seqlens=np.array([0, 0, 64], np.int32))
    with pytest.raises(NotImplementedError, match="^alibi_slopes: ALiBi with a KV cache is not built yet"):
        fastattn.flash_attn_with_kvcache(q, kc, vc, alibi_slopes=np.ones(4, np.float32))
    with pytest.raises(ValueError, match="block_table and page_table"):
        t = np.zeros((3, 4), np.int32)
        fastattn.flash_attn_with_kvcache(q, kc, vc, block_table=t, page_table=t)
    with pytest.raises(ValueError, match="^num_splits"):
        fastattn.flash_attn_with_kvcache(q, kc, vc, num_splits=-1)
