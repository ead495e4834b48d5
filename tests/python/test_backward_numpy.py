"""Gradients on the CPU backend (numpy, fastattn.backward) against the float64 reference, and
the reference's own gradients against finite differences."""
import numpy as np
import pytest

import attn_reference as ref
import fastattn
from checks import FLOAT32_FLOOR, assert_close, randn

# (b, s_q, s_k, h, h_kv, d, causal, window, softcap)
CASES = {
    "dense": (2, 17, 17, 2, 2, 32, False, (-1, -1), 0.0),
    "gqa_causal_sq_lt_sk": (1, 9, 30, 6, 2, 64, True, (-1, -1), 0.0),
    "causal_sq_gt_sk": (2, 30, 9, 2, 1, 32, True, (-1, -1), 0.0),
    "local": (1, 40, 40, 2, 2, 64, False, (6, 2), 0.0),
    "softcap": (2, 21, 26, 4, 2, 32, False, (-1, -1), 4.0),
}


def _check_grads(grads, q, k, v, dout, dtype, **kw):
    exact = ref.backward(q, k, v, dout, **kw)
    lowp = ref.backward(q, k, v, dout, dtype=dtype, **kw)
    floor = FLOAT32_FLOOR if dtype == np.float32 else 0.0
    for name, got, r64, rlp in zip(("dq", "dk", "dv"), grads, exact, lowp):
        assert got.dtype == dtype
        assert_close(name, got, r64, rlp, dtype, floor)


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_backward_values(rng, case, dtype):
    b, s_q, s_k, h, h_kv, d, causal, window, softcap = CASES[case]
    q = randn(rng, (b, s_q, h, d), dtype)
    k = randn(rng, (b, s_k, h_kv, d), dtype)
    v = randn(rng, (b, s_k, h_kv, d), dtype)
    dout = randn(rng, (b, s_q, h, d), dtype)
    kw = dict(causal=causal, window_size=window, softcap=softcap)
    out, lse = fastattn.forward(q, k, v, **kw)
    grads = fastattn.backward(dout, q, k, v, out, lse, **kw)
    _check_grads(grads, q, k, v, dout, dtype, causal=causal, window=window, softcap=softcap)


def test_backward_varlen_with_empty_sequences(rng):
    lens_q, lens_k = [0, 7, 12, 3], [5, 0, 12, 9]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q = randn(rng, (int(cu_q[-1]), 4, 32))
    k, v = randn(rng, (int(cu_k[-1]), 2, 32)), randn(rng, (int(cu_k[-1]), 2, 32))
    dout = randn(rng, q.shape)
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=12, max_seqlen_k=12, causal=True)
    out, lse = fastattn.forward(q, k, v, **kw)
    grads = fastattn.backward(dout, q, k, v, out, lse, **kw)
    exact = ref.varlen_backward(q, k, v, dout, cu_q, cu_k, causal=True)
    lowp = [ref.round_to(g, np.float32) for g in exact]
    for name, got, r64, rlp in zip(("dq", "dk", "dv"), grads, exact, lowp):
        assert_close(name, got, r64, rlp, np.float32, FLOAT32_FLOOR)


def test_backward_is_deterministic(rng):
    """The CPU backward gives bitwise identical gradients run to run (deterministic=True's promise)."""
    q, k, v, dout = (randn(rng, (2, 37, 4, 64)) for _ in range(4))
    out, lse = fastattn.forward(q, k, v, causal=True)
    first = fastattn.backward(dout, q, k, v, out, lse, causal=True)
    second = fastattn.backward(dout, q, k, v, out, lse, causal=True)
    for a, b in zip(first, second):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("softcap", [0.0, 1.5])
def test_reference_backward_matches_finite_differences(rng, softcap):
    """Guards the reference itself: central differences of sum(out * dout) in float64."""
    q, k, v = (rng.standard_normal(s) for s in [(1, 4, 2, 8), (1, 6, 1, 8), (1, 6, 1, 8)])
    dout = rng.standard_normal((1, 4, 2, 8))
    kw = dict(causal=True, window=(3, -1), softcap=softcap)

    def loss(q_, k_, v_):
        return float((ref.forward(q_, k_, v_, **kw)[0] * dout).sum())

    grads = ref.backward(q, k, v, dout, **kw)
    eps = 1e-6
    for x, g in zip((q, k, v), grads):
        numeric = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            orig = x[idx]
            x[idx] = orig + eps
            plus = loss(q, k, v)
            x[idx] = orig - eps
            minus = loss(q, k, v)
            x[idx] = orig
            numeric[idx] = (plus - minus) / (2 * eps)
        np.testing.assert_allclose(g, numeric, rtol=1e-5, atol=1e-7)
