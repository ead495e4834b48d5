"""FlashAttention 2/3 keyword compatibility of flash_attn_func / flash_attn_varlen_func: scheduling hints
are accepted and leave the result unchanged; features fastattn lacks are refused by name."""
import numpy as np
import pytest

import fastattn
from checks import randn


def qkv(rng, b=2, s_q=17, s_k=113, h=4, h_kv=2, d=32):
    return (randn(rng, (b, s_q, h, d)), randn(rng, (b, s_k, h_kv, d)), randn(rng, (b, s_k, h_kv, d)))


@pytest.mark.parametrize("hints", [dict(num_splits=0), dict(num_splits=1), dict(num_splits=7),
                                   dict(pack_gqa=True), dict(pack_gqa=False), dict(sm_margin=8),
                                   dict(dropout_p=0.0), dict(dropout_p=np.float32(0.0)),
                                   dict(dropout_p=np.float64(0.0))])
def test_hints_change_nothing(rng, hints):
    q, k, v = qkv(rng)
    plain = fastattn.flash_attn_func(q, k, v, causal=True, return_attn_probs=True)
    hinted = fastattn.flash_attn_func(q, k, v, causal=True, return_attn_probs=True, **hints)
    for a, b in zip(plain, hinted):  # the same kernel, the same inputs: bitwise equal
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_varlen_hints_change_nothing(rng):
    lens = (1, 17, 5)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    t = int(cu[-1])
    q, k, v = randn(rng, (t, 2, 32)), randn(rng, (t, 2, 32)), randn(rng, (t, 2, 32))
    plain = fastattn.flash_attn_varlen_func(q, k, v, cu, cu, 17, 17)
    hinted = fastattn.flash_attn_varlen_func(q, k, v, cu, cu, 17, 17, num_splits=3, pack_gqa=True, sm_margin=4)
    np.testing.assert_array_equal(np.asarray(plain), np.asarray(hinted))


REFUSED = [
    (dict(dropout_p=0.1), NotImplementedError, "^dropout_p"),
    (dict(dropout_p=1.5), ValueError, "^dropout_p"),
    (dict(dropout_p="0"), TypeError, "^dropout_p"),
    (dict(dropout_p=np.bool_(False)), TypeError, "^dropout_p"),
    (dict(dropout_p=np.float32(0.1)), NotImplementedError, "^dropout_p"),
    (dict(q_descale=np.ones(1, np.float32)), NotImplementedError, "^q_descale"),
    (dict(k_descale=np.ones(1, np.float32)), NotImplementedError, "^k_descale"),
    (dict(v_descale=np.ones(1, np.float32)), NotImplementedError, "^v_descale"),
    (dict(qv=np.ones(1, np.float32)), NotImplementedError, "^qv"),
    (dict(num_splits=-1), ValueError, "^num_splits"),
    (dict(num_splits=2.5), TypeError, "^num_splits"),
    (dict(num_splits=True), TypeError, "^num_splits"),
    (dict(sm_margin=-1), ValueError, "^sm_margin"),
    (dict(pack_gqa=1), TypeError, "^pack_gqa"),
]


@pytest.mark.parametrize("kw, exc, pattern", REFUSED)
def test_refused_by_name(rng, kw, exc, pattern):
    q, k, v = qkv(rng)
    with pytest.raises(exc, match=pattern):
        fastattn.flash_attn_func(q, k, v, **kw)
    cu = np.array([0, 3, 8], np.int32)
    qv_, kv_, vv_ = randn(rng, (8, 2, 32)), randn(rng, (8, 2, 32)), randn(rng, (8, 2, 32))
    with pytest.raises(exc, match=pattern):
        fastattn.flash_attn_varlen_func(qv_, kv_, vv_, cu, cu, 5, 5, **kw)


def kvcache_inputs(rng):
    q = randn(rng, (2, 3, 4, 32))
    kc, vc = randn(rng, (2, 113, 2, 32)), randn(rng, (2, 113, 2, 32))
    return q, kc, vc, np.array([17, 100], np.int32)


def test_kvcache_hints_change_nothing(rng):
    q, kc, vc, seqlens = kvcache_inputs(rng)
    plain = fastattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, causal=True, num_splits=1,
                                             return_softmax_lse=True)
    hinted = fastattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, causal=True, num_splits=1,
                                              return_softmax_lse=True, pack_gqa=False, sm_margin=4)
    for a, b in zip(plain, hinted):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


KVCACHE_REFUSED = [
    (dict(alibi_slopes=np.ones(4, np.float16)), ValueError, "^alibi_slopes: dtype float16 is not supported"),
    (dict(q_descale=np.ones(1, np.float32)), NotImplementedError, "^q_descale"),
    (dict(qv=np.ones(1, np.float32)), NotImplementedError, "^qv"),
    (dict(cu_seqlens_q=np.array([0, 3, 6], np.int32)), NotImplementedError, "^cu_seqlens_q"),
    (dict(cu_seqlens_k_new=np.array([0, 1, 2], np.int32)), NotImplementedError, "^cu_seqlens_k_new"),
    (dict(max_seqlen_q=3), NotImplementedError, "^max_seqlen_q"),
    (dict(rotary_seqlens=np.array([1, 2], np.int32)), NotImplementedError, "^rotary_seqlens"),
    (dict(scheduler_metadata=np.zeros(4, np.int32)), NotImplementedError, "^scheduler_metadata"),
    (dict(num_splits=-1), ValueError, "^num_splits"),
    (dict(pack_gqa="yes"), TypeError, "^pack_gqa"),
    (dict(sm_margin=-2), ValueError, "^sm_margin"),
]


@pytest.mark.parametrize("kw, exc, pattern", KVCACHE_REFUSED)
def test_kvcache_refused_by_name(rng, kw, exc, pattern):
    q, kc, vc, seqlens = kvcache_inputs(rng)
    with pytest.raises(exc, match=pattern):
        fastattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, **kw)


# Review s40: FA2's flash_attn_func is (q, k, v, dropout_p, softmax_scale, causal, ...); ours follows FA3's
# (q, k, v, softmax_scale, causal). An FA2 call passing dropout_p (and softmax_scale) by position ran with
# softmax_scale = dropout_p (0.0 at inference: every key weighted alike) and causal = FA2's softmax_scale
# (None: not causal; a float: causal), status ok. Both values are refused now, naming FA2's order.
@pytest.mark.parametrize("args, exc", [((0.0,), ValueError), ((0.0, None), ValueError),
                                       ((0.1, 0.125), TypeError), ((0.1, None), TypeError)])
def test_fa2_positional_dropout_refused(rng, args, exc):
    q, k, v = qkv(rng)
    with pytest.raises(exc, match="FA2 passes"):
        fastattn.flash_attn_func(q, k, v, *args)


def test_causal_flags_that_fa3_takes_still_run(rng):
    """The check above refuses only None / floats for causal and 0 for softmax_scale: bools (Python and numpy)
    and the ints 0 / 1 run, with the same answer as the Python bool."""
    q, k, v = qkv(rng)
    want = np.asarray(fastattn.flash_attn_func(q, k, v, 0.2, True))
    for flag in (np.bool_(True), 1):
        np.testing.assert_array_equal(np.asarray(fastattn.flash_attn_func(q, k, v, 0.2, flag)), want)
    np.testing.assert_array_equal(np.asarray(fastattn.flash_attn_func(q, k, v, 0.2, 0)),
                                  np.asarray(fastattn.flash_attn_func(q, k, v, 0.2, False)))
    with pytest.raises(TypeError, match="^causal"):
        fastattn.flash_attn_func(q, k, v, causal=2)
