"""hf_attention's attention_mask on numpy arrays (the CPU backend; runs in CI without torch): transformers'
4-D masks, bool and float (0 / the dtype's minimum), against the float64 reference with the same keep-mask;
an exactly causal or all-kept mask takes the native path (the same bits as no mask); padded query rows
give 0; a non-4-D mask, other dtypes, position_bias and s_aux are refused by name. Sliding windows and
float masks with real bias values: test_hf_attention_window_bias.py."""
import types

import numpy as np
import pytest

import attn_reference as ref
import fastattn
from checks import FLOAT32_FLOOR, assert_close
from fastattn import _hf_masks, hf_attention

MODULE = types.SimpleNamespace(is_causal=True)


def qkv(rng, b, h, h_kv, s_q, s_k, d=64):
    draw = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    return draw(b, h, s_q, d), draw(b, h_kv, s_k, d), draw(b, h_kv, s_k, d)


def padded_causal(lengths, s_q, s_k, left):
    """transformers' padded causal mask (b, 1, s_q, s_k), True = attend: bottom-right causal AND the key
    is a real token (left or right padding)."""
    keep = np.zeros((len(lengths), 1, s_q, s_k), bool)
    causal = ref.keep_mask(s_q, s_k, causal=True)
    for b, n in enumerate(lengths):
        real = np.zeros(s_k, bool)
        if left:
            real[s_k - n:] = True
        else:
            real[:n] = True
        keep[b, 0] = causal & real[None, :]
    return keep


def as_float(keep, dtype=np.float32):
    return np.where(keep, 0.0, np.finfo(dtype).min).astype(dtype)


def check(out, q, k, v, keep, scale=None):
    arrays = [x.transpose(0, 2, 1, 3).astype(np.float64) for x in (q, k, v)]
    blocks = (keep, 1, 1)
    ref64, _ = ref.forward(*arrays, scale=scale, blocks=blocks)
    lowp, _ = ref.forward(*arrays, scale=scale, blocks=blocks, dtype=np.float32)
    assert_close("out", out.astype(np.float64), ref64, lowp, np.float32, FLOAT32_FLOOR)


# (b, h, h_kv, s_q, s_k, lengths, left padding): prefill with left / right padding, a chunk after a cache,
# a decode step, odd sizes
CASES = {
    "prefill_left": (3, 4, 2, 17, 17, (17, 9, 1), True),
    "prefill_right": (2, 2, 2, 33, 33, (20, 33), False),
    "chunk_left": (2, 4, 1, 5, 37, (37, 12), True),
    "decode_left": (3, 2, 2, 1, 113, (113, 40, 7), True),
}


@pytest.mark.parametrize("form", ["bool", "float32", "float16"])
@pytest.mark.parametrize("case", list(CASES))
def test_padded_batch_against_reference(rng, case, form):
    b, h, h_kv, s_q, s_k, lengths, left = CASES[case]
    q, k, v = qkv(rng, b, h, h_kv, s_q, s_k)
    keep = padded_causal(lengths, s_q, s_k, left)
    mask = keep if form == "bool" else as_float(keep, np.dtype(form))
    out, weights = hf_attention.attention_forward(MODULE, q, k, v, mask, scaling=0.1)
    assert weights is None and out.shape == (b, s_q, h, 64)
    check(out, q, k, v, np.broadcast_to(keep, (b, h, s_q, s_k)), scale=0.1)
    fully_padded = ~keep.any(axis=-1)[:, 0]  # (b, s_q): queries that see no key
    assert np.all(out[fully_padded] == 0)


def test_longer_mask_is_cut_and_query_dim_broadcasts(rng):
    q, k, v = qkv(rng, 2, 2, 2, 7, 19)
    keep = rng.random((2, 1, 1, 25)) < 0.6  # a key-padding mask with a longer key dim (a static cache)
    out, _ = hf_attention.attention_forward(MODULE, q, k, v, keep)
    check(out, q, k, v, np.broadcast_to(keep[..., :19], (2, 2, 7, 19)))


@pytest.mark.parametrize("s_q,s_k", [(17, 17), (1, 40), (5, 37)])
def test_causal_or_full_mask_takes_the_native_path(rng, s_q, s_k):
    q, k, v = qkv(rng, 2, 2, 2, s_q, s_k)
    causal = np.broadcast_to(ref.keep_mask(s_q, s_k, causal=True), (2, 1, s_q, s_k))
    native = hf_attention.attention(q, k, v, causal=True, with_lse=False, heads_first=True)[0]
    full, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=False), q, k, v, None)
    native_plan = (s_q > 1, (-1, -1), None, None)  # one query's causal row keeps every key: no mask at all
    assert _hf_masks.read_plan(causal, s_q, s_k) == native_plan
    assert _hf_masks.read_plan(as_float(causal), s_q, s_k) == native_plan
    assert _hf_masks.read_plan(np.ones((2, 1, s_q, s_k), bool), s_q, s_k) == (False, (-1, -1), None, None)
    got, _ = hf_attention.attention_forward(types.SimpleNamespace(is_causal=False), q, k, v, as_float(causal))
    assert np.array_equal(got, native)
    got, _ = hf_attention.attention_forward(MODULE, q, k, v, np.ones((2, 1, s_q, s_k), bool))
    assert np.array_equal(got, full)  # a mask holds the causal rule: is_causal is not added to it


def test_refusals_name_the_argument(rng):
    q, k, v = qkv(rng, 1, 2, 2, 8, 8)
    for name in ("position_bias", "s_aux"):  # they change the math: refused, not dropped
        with pytest.raises(NotImplementedError, match=name):
            hf_attention.attention_forward(MODULE, q, k, v, None, **{name: np.zeros((1, 2, 8, 8), np.float32)})
    with pytest.raises(ValueError, match="sliding_window: expected None or an int >= 1"):
        hf_attention.attention_forward(MODULE, q, k, v, None, sliding_window=0)
    with pytest.raises(NotImplementedError, match="attention_mask: expected transformers' 4-D"):
        hf_attention.attention_forward(MODULE, q, k, v, np.ones((1, 8), bool))  # flash-attention's 2-D form
    with pytest.raises(NotImplementedError, match="attention_mask: expected a bool or float mask"):
        hf_attention.attention_forward(MODULE, q, k, v, np.ones((1, 1, 8, 8), np.int64))
