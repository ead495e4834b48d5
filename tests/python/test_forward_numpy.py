"""Forward values on the CPU backend (numpy arrays) against the float64 reference."""
import numpy as np
import pytest

import attn_reference as ref
import fastattn
from checks import FLOAT32_FLOOR, assert_close, assert_lse_close, randn

# (b, s_q, s_k, h, h_kv, d, d_v, causal, window, softcap)
CASES = {
    "dense": (2, 17, 17, 4, 4, 32, 32, False, (-1, -1), 0.0),
    "gqa": (2, 33, 47, 6, 2, 64, 64, False, (-1, -1), 0.0),
    "mqa_causal": (1, 40, 40, 4, 1, 32, 32, True, (-1, -1), 0.0),
    "causal_sq_lt_sk": (2, 5, 33, 2, 2, 32, 32, True, (-1, -1), 0.0),
    "causal_sq_gt_sk": (2, 33, 7, 2, 2, 32, 32, True, (-1, -1), 0.0),
    "local": (1, 64, 64, 2, 2, 64, 64, False, (8, 0), 0.0),
    "local_two_sided": (2, 29, 51, 2, 1, 32, 32, False, (3, 5), 0.0),
    "local_left_only": (1, 50, 50, 2, 2, 32, 32, False, (10, -1), 0.0),
    "softcap": (2, 24, 31, 4, 2, 64, 64, False, (-1, -1), 5.0),
    "softcap_causal": (1, 31, 31, 2, 2, 128, 128, True, (-1, -1), 2.0),
    "single_token": (3, 1, 1, 2, 2, 64, 64, True, (-1, -1), 0.0),
    "odd_113": (1, 113, 113, 1, 1, 64, 64, True, (-1, -1), 0.0),
}
DTYPES = [np.float32, np.float16]


def _floor(dtype):
    return FLOAT32_FLOOR if dtype == np.float32 else 0.0


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f16"])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_flash_attn_func_values(rng, case, dtype):
    b, s_q, s_k, h, h_kv, d, d_v, causal, window, softcap = CASES[case]
    q = randn(rng, (b, s_q, h, d), dtype)
    k = randn(rng, (b, s_k, h_kv, d), dtype)
    v = randn(rng, (b, s_k, h_kv, d_v), dtype)
    out, lse = fastattn.flash_attn_func(q, k, v, causal=causal, window_size=window, softcap=softcap,
                                        return_attn_probs=True)
    assert out.dtype == dtype and lse.dtype == np.float32
    kw = dict(causal=causal, window=window, softcap=softcap)
    ref64, lse64 = ref.forward(q, k, v, **kw)
    lowp, _ = ref.forward(q, k, v, dtype=dtype, **kw)
    assert_close("out", out, ref64, lowp, dtype, _floor(dtype))
    assert_lse_close(lse, lse64)


def test_default_returns_out_only(rng):
    q, k, v = (randn(rng, (1, 8, 2, 32)) for _ in range(3))
    out = fastattn.flash_attn_func(q, k, v)
    assert isinstance(out, np.ndarray) and out.shape == (1, 8, 2, 32)


def test_softmax_scale(rng):
    q, k, v = (randn(rng, (2, 19, 2, 64)) for _ in range(3))
    out = fastattn.flash_attn_func(q, k, v, softmax_scale=0.37)
    ref64, _ = ref.forward(q, k, v, scale=0.37)
    lowp, _ = ref.forward(q, k, v, scale=0.37, dtype=np.float32)
    assert_close("out", out, ref64, lowp, np.float32, FLOAT32_FLOOR)


def test_value_head_dim_differs(rng):
    q, k = randn(rng, (1, 16, 2, 64)), randn(rng, (1, 16, 2, 64))
    v = randn(rng, (1, 16, 2, 32))
    out = fastattn.flash_attn_func(q, k, v, causal=True)
    ref64, _ = ref.forward(q, k, v, causal=True)
    lowp, _ = ref.forward(q, k, v, causal=True, dtype=np.float32)
    assert_close("out", out, ref64, lowp, np.float32, FLOAT32_FLOOR)


def test_strided_inputs(rng):
    """Arbitrary strides except the last: (b, h, s, d) buffers viewed as (b, s, h, d), a head
    slice, and a copy forced by a non-unit last stride."""
    q = np.swapaxes(randn(rng, (2, 3, 21, 32)), 1, 2)             # (2, 21, 3, 32), strided
    k = randn(rng, (2, 25, 6, 32))[:, :, ::2]                     # every other head
    v = np.swapaxes(randn(rng, (2, 25, 32, 3)), 2, 3)             # last stride 3 -> copied
    out = fastattn.flash_attn_func(q, k, v, causal=True)
    ref64, _ = ref.forward(q, k, v, causal=True)
    lowp, _ = ref.forward(q, k, v, causal=True, dtype=np.float32)
    assert_close("out", out, ref64, lowp, np.float32, FLOAT32_FLOOR)


def _pack(rng, lens, h, d, dtype):
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    return randn(rng, (int(cu[-1]), h, d), dtype), cu


VARLEN = {
    "plain": ([5, 17, 1, 30], [7, 17, 9, 30], False, (-1, -1), 0.0),
    "empty_sequences": ([0, 9, 4, 0, 12], [6, 0, 11, 0, 12], True, (-1, -1), 0.0),
    "local_gqa": ([33, 2, 19], [40, 2, 19], False, (4, 2), 0.0),
    "softcap_causal": ([12, 25], [30, 25], True, (-1, -1), 3.0),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=["f32", "f16"])
@pytest.mark.parametrize("case", list(VARLEN), ids=list(VARLEN))
def test_varlen_values(rng, case, dtype):
    lens_q, lens_k, causal, window, softcap = VARLEN[case]
    h, h_kv, d = 4, 2, 64
    q, cu_q = _pack(rng, lens_q, h, d, dtype)
    k, cu_k = _pack(rng, lens_k, h_kv, d, dtype)
    v = randn(rng, k.shape, dtype)
    out, lse = fastattn.flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max(lens_q), max(lens_k), causal=causal, window_size=window,
        softcap=softcap, return_attn_probs=True)
    assert out.shape == q.shape and lse.shape == (h, q.shape[0])
    kw = dict(causal=causal, window=window, softcap=softcap)
    ref64, lse64 = ref.varlen_forward(q, k, v, cu_q, cu_k, **kw)
    lowp, _ = ref.varlen_forward(q, k, v, cu_q, cu_k, dtype=dtype, **kw)
    assert_close("out", out, ref64, lowp, dtype, _floor(dtype))
    assert_lse_close(lse, lse64)


def test_varlen_seqused(rng):
    """seqused caps the tokens of each sequence; rows past the cap are not compared."""
    lens_q, lens_k = [10, 20, 6], [12, 20, 30]
    used_q = np.array([7, 20, 0], dtype=np.int32)
    used_k = np.array([12, 3, 30], dtype=np.int32)
    q, cu_q = _pack(rng, lens_q, 2, 32, np.float32)
    k, cu_k = _pack(rng, lens_k, 2, 32, np.float32)
    v = randn(rng, k.shape)
    out = fastattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 20, 30, seqused_q=used_q,
                                          seqused_k=used_k, causal=True)
    ref64, _ = ref.varlen_forward(q, k, v, cu_q, cu_k, used_q, used_k, causal=True)
    lowp, _ = ref.varlen_forward(q, k, v, cu_q, cu_k, used_q, used_k, causal=True, dtype=np.float32)
    assert_close("out", out, ref64, lowp, np.float32, FLOAT32_FLOOR)


def test_reference_backend_agrees(rng):
    """The low-level forward() reaches the float64 oracle backend too."""
    q, k, v = (randn(rng, (1, 13, 2, 32)) for _ in range(3))
    out, lse = fastattn.forward(q, k, v, causal=True, backend="reference")
    ref64, lse64 = ref.forward(q, k, v, causal=True)
    lowp, _ = ref.forward(q, k, v, causal=True, dtype=np.float32)
    assert_close("out", out, ref64, lowp, np.float32, FLOAT32_FLOOR)
    assert_lse_close(lse, lse64)


def test_info():
    assert fastattn.__version__
    assert isinstance(fastattn.build_info(), str)
    assert isinstance(fastattn.cuda_available(), bool)


class DlpackOnly:
    """A CPU array known only through the DLPack protocol (as JAX on CPU presents itself)."""

    def __init__(self, array):
        self._array = array
        self.shape = array.shape

    def __dlpack__(self, **kw):
        return self._array.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def test_generic_dlpack_producer(rng):
    q, k, v = (randn(rng, (2, 15, 2, 32)) for _ in range(3))
    out = fastattn.flash_attn_func(DlpackOnly(q), DlpackOnly(k), DlpackOnly(v), causal=True)
    assert isinstance(out, np.ndarray)  # no array namespace to hand it back through
    ref64, _ = ref.forward(q, k, v, causal=True)
    lowp, _ = ref.forward(q, k, v, causal=True, dtype=np.float32)
    assert_close("out", out, ref64, lowp, np.float32, FLOAT32_FLOOR)


@pytest.mark.parametrize("num_splits", [1, 3])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_nan_in_a_used_key_makes_its_rows_nan(rng, causal, num_splits):
    # docs/masks.md "NaN": a row that keeps a key whose score is NaN gets out and lse NaN (PyTorch's softmax gives the
    # same), split or not; every other row is what the clean inputs give. The last key is kept by every row under
    # full attention and by the last row under causal; NaN in batch entry 0, KV head 1 (q heads 2, 3) only.
    b, s_q, s_k, h, h_kv, d = 2, 9, 40, 4, 2, 32
    q, k, v = randn(rng, (b, s_q, h, d)), randn(rng, (b, s_k, h_kv, d)), randn(rng, (b, s_k, h_kv, d))
    k_nan = k.copy()
    k_nan[0, s_k - 1, 1, 5] = np.nan
    out, lse = fastattn.flash_attn_func(q, k_nan, v, causal=causal, num_splits=num_splits, return_attn_probs=True)
    ref64, lse64 = ref.forward(q, k, v, causal=causal, window=(-1, -1), softcap=0.0)
    lowp, _ = ref.forward(q, k, v, causal=causal, window=(-1, -1), softcap=0.0, dtype=np.float32)
    hit = np.zeros((b, s_q, h), bool)
    hit[0, :, 2:] = True  # full: every row of those heads keeps the key
    if causal:
        hit[0, :-1, 2:] = False  # bottom-right causal with s_q < s_k: only the last row reaches key s_k - 1
    assert np.isnan(out[hit]).all() and np.isnan(lse.transpose(0, 2, 1)[hit]).all()
    assert np.isfinite(out[~hit]).all() and np.isfinite(lse.transpose(0, 2, 1)[~hit]).all()
    ref64[hit], lowp[hit], out[hit] = 0.0, 0.0, 0.0
    assert_close("out", out, ref64, lowp, np.float32, FLOAT32_FLOOR)
    lse_ref = lse64.copy()
    lse_ref.transpose(0, 2, 1)[hit], lse.transpose(0, 2, 1)[hit] = 0.0, 0.0
    assert_lse_close(lse, lse_ref)
