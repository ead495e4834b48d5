"""hf_attention's sliding_window and float attention masks with real bias values, on numpy arrays (the CPU
backend; runs in CI without torch or transformers): every output element against an explicit float64
softmax(scale * q k^T + add) v (attn_reference.forward's add=), where `add` is 0 / -inf from transformers' own masking rule (written
out here from masking_utils: key j kept for query i when j <= i and j > i - sliding_window, positions
counted so that the queries are the last s_q of s_k) or the float mask itself. Odd sizes, windows
smaller and larger than s_k, decode (s_q 1) against a cache, -inf and dtype-minimum entries, fully
masked rows (0), and the blind plan (no value read: what runs under CUDA-graph capture)."""
import types

import numpy as np
import pytest

import attn_reference as ref
from checks import FLOAT32_FLOOR, assert_close
from fastattn import _hf_masks, hf_attention

CAUSAL = types.SimpleNamespace(is_causal=True)
BIDIRECTIONAL = types.SimpleNamespace(is_causal=False)


def qkv(rng, b, h, h_kv, s_q, s_k, d=64):
    draw = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    return draw(b, h, s_q, d), draw(b, h_kv, s_k, d), draw(b, h_kv, s_k, d)


def hf_keep(s_q, s_k, sliding_window=None, causal=True):
    """transformers' (s_q, s_k) keep rule for queries at absolute positions s_k - s_q .. s_k - 1:
    causal_mask_function (kv_idx <= q_idx) AND sliding_window_overlay (kv_idx > q_idx - sliding_window);
    not causal: sliding_window_bidirectional_overlay (|q_idx - kv_idx| <= sliding_window)."""
    q_idx = np.arange(s_q)[:, None] + (s_k - s_q)
    kv_idx = np.arange(s_k)[None, :]
    if causal:
        keep = kv_idx <= q_idx
        return keep if sliding_window is None else keep & (kv_idx > q_idx - sliding_window)
    return np.ones((s_q, s_k), bool) if sliding_window is None else np.abs(q_idx - kv_idx) <= sliding_window


def check(out, q, k, v, add, scale):
    """FA3's rule against the float64 truth, with the float32 estimate as the same-precision bound;
    heads-first (b, h, s, d) inputs, add broadcastable to (b, h, s_q, s_k) with -inf for dropped pairs."""
    arrays = [x.transpose(0, 2, 1, 3) for x in (q, k, v)]
    ref64, _ = ref.forward(*arrays, scale=scale, add=add)
    lowp, _ = ref.forward(*arrays, scale=scale, add=add, dtype=np.float32)
    assert_close("out", out, ref64, lowp, np.float32, FLOAT32_FLOOR)
    return ref64


def additive(keep):
    return np.where(keep, 0.0, -np.inf)


# (b, h, h_kv, s_q, s_k, sliding_window): prefill with windows smaller than, equal to and larger than s_k,
# a window of 1 (only the query's own key), decode steps against a cache longer / shorter than the
# window, odd sizes
WINDOWS = {
    "prefill_w5": (2, 4, 2, 17, 17, 5),
    "prefill_113_w17": (1, 2, 1, 113, 113, 17),
    "prefill_w_eq_sk": (1, 2, 2, 17, 17, 17),
    "prefill_w_gt_sk": (2, 2, 1, 17, 17, 40),
    "prefill_w1": (1, 2, 2, 17, 17, 1),
    "decode_w17": (3, 4, 2, 1, 113, 17),
    "decode_w_gt_sk": (2, 2, 2, 1, 17, 113),
    "decode_sk1": (1, 2, 2, 1, 1, 4),
}


@pytest.mark.parametrize("case", list(WINDOWS))
def test_sliding_window_without_mask(rng, case):
    """No mask (transformers' unpadded batch): the window still applies, bottom-right aligned."""
    b, h, h_kv, s_q, s_k, w = WINDOWS[case]
    q, k, v = qkv(rng, b, h, h_kv, s_q, s_k)
    out, weights = hf_attention.attention_forward(CAUSAL, q, k, v, None, scaling=0.11, sliding_window=w)
    assert weights is None and out.shape == (b, s_q, h, 64)
    check(out, q, k, v, additive(hf_keep(s_q, s_k, w)), 0.11)


@pytest.mark.parametrize("w", [None, 4])
def test_static_prefill_cuts_keys_first(rng, w):
    """Causal, no mask, 1 < s_q < s_k: transformers' prefill into an empty static cache (its SDPA path cuts
    the keys to s_q: their tail is unwritten); a window then applies among the s_q real keys."""
    q, k, v = qkv(rng, 2, 2, 1, 13, 37)
    k[:, :, 13:] = v[:, :, 13:] = 1e3  # the unwritten tail: must not be read
    out, _ = hf_attention.attention_forward(CAUSAL, q, k, v, None, sliding_window=w)
    check(out, q, k[:, :, :13], v[:, :, :13], additive(hf_keep(13, 13, w)), 64 ** -0.5)


@pytest.mark.parametrize("s_q,s_k,w", [(17, 17, 3), (1, 113, 17), (13, 29, 40)])
def test_bidirectional_sliding_window_without_mask(rng, s_q, s_k, w):
    """Not causal: |i - j| <= sliding_window (transformers' bidirectional overlay), bottom-right."""
    q, k, v = qkv(rng, 1, 2, 2, s_q, s_k)
    out, _ = hf_attention.attention_forward(BIDIRECTIONAL, q, k, v, None, sliding_window=w)
    check(out, q, k, v, additive(hf_keep(s_q, s_k, w, causal=False)), 64 ** -0.5)


def padded_sliding(lengths, s_q, s_k, w):
    """transformers' padded sliding-window mask (b, 1, s_q, s_k), left padding."""
    real = np.arange(s_k)[None, :] >= s_k - np.asarray(lengths)[:, None]
    return (hf_keep(s_q, s_k, w)[None] & real[:, None, :])[:, None]


@pytest.mark.parametrize("form", ["bool", "float32", "float16"])
@pytest.mark.parametrize("s_q,s_k,lengths,w", [(17, 17, (17, 9, 1), 5), (1, 113, (113, 40), 17), (5, 37, (37, 3), 7)])
def test_padded_sliding_mask_is_the_rule(rng, form, s_q, s_k, lengths, w):
    """A padded batch: transformers' mask already holds the window and is run as it is (bits)."""
    q, k, v = qkv(rng, len(lengths), 4, 2, s_q, s_k)
    keep = padded_sliding(lengths, s_q, s_k, w)
    mask = keep if form == "bool" else np.where(keep, 0, np.finfo(form).min).astype(form)
    out, _ = hf_attention.attention_forward(CAUSAL, q, k, v, mask, sliding_window=w)
    check(out, q, k, v, additive(keep), 64 ** -0.5)
    assert np.all(out[~keep[:, 0].any(-1)] == 0)  # padded queries


def test_a_given_mask_is_not_narrowed_by_sliding_window(rng):
    """With a mask, sliding_window adds nothing (transformers' SDPA path): the mask is the whole rule (a
    static sliding cache's rotated slots are not in position order, so a bottom-right window would be
    wrong there; transformers' mask function has placed the window already)."""
    q, k, v = qkv(rng, 2, 2, 2, 17, 17)
    keep = padded_sliding((17, 11), 17, 17, 17)  # plain padded causal
    out, _ = hf_attention.attention_forward(CAUSAL, q, k, v, keep, sliding_window=3)
    check(out, q, k, v, additive(keep), 64 ** -0.5)


@pytest.mark.parametrize("s_q,s_k,w", [(17, 17, 5), (5, 37, 7), (1, 113, 17), (113, 113, 1)])
def test_unpadded_sliding_mask_takes_the_native_window(rng, s_q, s_k, w):
    """A mask equal to the causal window in every batch entry runs fastattn's native window (no bits): the
    same bits as flash_attn's causal window (sliding_window - 1, 0); without sliding_window it runs as
    bits, same values."""
    q, k, v = qkv(rng, 2, 2, 1, s_q, s_k)
    keep = np.broadcast_to(hf_keep(s_q, s_k, w), (2, 1, s_q, s_k))
    assert _hf_masks.read_plan(keep, s_q, s_k, w) == (True, (w - 1, 0), None, None)
    native, _ = hf_attention.attention(q, k, v, causal=True, window_size=(w - 1, 0), with_lse=False,
                                       heads_first=True)
    if s_q == 1 or s_q == s_k:  # and no mask: the same call (1 < s_q < s_k without one cuts the keys)
        assert np.array_equal(hf_attention.attention_forward(CAUSAL, q, k, v, None, sliding_window=w)[0], native)
    got, _ = hf_attention.attention_forward(CAUSAL, q, k, v, keep, sliding_window=w)
    assert np.array_equal(got, native)
    bits, _ = hf_attention.attention_forward(CAUSAL, q, k, v, keep)
    check(bits, q, k, v, additive(keep), 64 ** -0.5)


def bias_mask(rng, b, s_q, s_k, dtype, rows=None):
    """A float mask with real bias values, dropped entries (the dtype's minimum and -inf: causal, and a
    few random ones) and, in batch entry 0, one fully dropped query row; rows=1 gives a (b, 1, 1, s_k)
    key-only bias."""
    rows = s_q if rows is None else rows
    m = (rng.standard_normal((b, 1, rows, s_k)) * 2).astype(dtype)
    m[rng.random(m.shape) < 0.15] = -np.inf
    if rows == s_q:
        m[:, :, ~hf_keep(s_q, s_k)] = np.finfo(dtype).min
        m[0, 0, s_q // 2] = np.finfo(dtype).min
    m[-1, 0, -1, 0] = 0.375  # at least one real bias value (the last query keeps key 0)
    return m


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("s_q,s_k", [(1, 1), (1, 17), (17, 17), (5, 113), (113, 113)])
def test_float_mask_with_bias_values(rng, dtype, s_q, s_k):
    """A float mask with values other than 0 / minimum runs as fastattn's bias: softmax(s + mask), the
    minimum and -inf entries masking (a fully masked row gives 0), against the float64 truth."""
    q, k, v = qkv(rng, 2, 4, 2, s_q, s_k)
    mask = bias_mask(rng, 2, s_q, s_k, dtype)
    plan = _hf_masks.read_plan(mask, s_q, s_k)
    assert plan.mask is None and plan.bias is not None and not plan.causal
    out, _ = hf_attention.attention_forward(CAUSAL, q, k, v, mask, scaling=0.2)
    add = np.where(mask <= np.finfo(dtype).min, -np.inf, mask.astype(np.float64))
    ref64 = check(out, q, k, v, add, 0.2)
    dead = np.isneginf(add).all(-1)[:, 0]  # (b, s_q): rows that keep nothing
    assert np.all(out[dead] == 0) and np.all(ref64[dead] == 0)


def test_key_only_bias_longer_than_s_k(rng):
    """A (b, 1, 1, s_k') bias with a longer key dim (a static cache): cut to s_k, broadcast to the queries."""
    q, k, v = qkv(rng, 2, 2, 2, 7, 19)
    mask = bias_mask(rng, 2, 7, 25, np.float32, rows=1)
    out, _ = hf_attention.attention_forward(BIDIRECTIONAL, q, k, v, mask)
    check(out, q, k, v, np.where(mask[..., :19] <= np.finfo(np.float32).min, -np.inf, mask[..., :19]), 64 ** -0.5)


@pytest.mark.parametrize("form", ["bool", "float32"])
def test_blind_plan_gives_the_same_values(rng, form):
    """blind_plan (no value read: CUDA-graph capture, tracing, read_mask_values False) runs a bool mask as
    bits and a float one as a bias, whatever the values: the same results as the checked plan's."""
    q, k, v = qkv(rng, 3, 2, 2, 17, 17)
    keep = padded_sliding((17, 17, 4), 17, 17, 17)
    mask = keep if form == "bool" else np.where(keep, 0, np.finfo(np.float32).min).astype(np.float32)
    plan = _hf_masks.blind_plan(mask, 17, 17)
    assert not plan.causal and plan.window == (-1, -1)
    assert (plan.mask is not None) == (form == "bool") and (plan.bias is not None) == (form != "bool")
    out = hf_attention.attention(q, k, v, causal=False, with_lse=False, heads_first=True, mask=plan.mask,
                                 bias=plan.bias)[0]
    check(out, q, k, v, additive(keep), 64 ** -0.5)
