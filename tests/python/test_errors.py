"""Every argument's error path: the right exception type and a message naming the argument."""
import numpy as np
import pytest

import fastattn
from checks import randn


def qkv(rng, b=1, s_q=8, s_k=8, h=2, h_kv=2, d=32, dtype=np.float32):
    return (randn(rng, (b, s_q, h, d), dtype), randn(rng, (b, s_k, h_kv, d), dtype),
            randn(rng, (b, s_k, h_kv, d), dtype))


def varlen_inputs(rng, lens=(3, 5)):
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    t = int(cu[-1])
    return randn(rng, (t, 2, 32)), randn(rng, (t, 2, 32)), randn(rng, (t, 2, 32)), cu


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_wrong_ndim(rng, which):
    args = dict(zip("qkv", qkv(rng)))
    args[which] = args[which][0]
    with pytest.raises(ValueError, match=rf"^{which}: expected 4 dimensions"):
        fastattn.flash_attn_func(args["q"], args["k"], args["v"])


def test_dtype_mismatch(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="dtype"):
        fastattn.flash_attn_func(q, k.astype(np.float16), v)


def test_unsupported_dtype(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match=r"^q: dtype float64 is not supported"):
        fastattn.flash_attn_func(q.astype(np.float64), k, v)
    with pytest.raises(ValueError, match=r"^v: dtype int32 is not supported"):
        fastattn.flash_attn_func(q, k, v.astype(np.int32))


def test_heads_not_divisible(rng):
    q, k, v = qkv(rng, h=3, h_kv=2)
    with pytest.raises(ValueError, match="head"):
        fastattn.flash_attn_func(q, k, v)


def test_head_dim_mismatch(rng):
    q, _, v = qkv(rng)
    k = randn(rng, (1, 8, 2, 64))
    with pytest.raises(ValueError, match="dim"):
        fastattn.flash_attn_func(q, k, v)


def test_batch_mismatch(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="batch"):
        fastattn.flash_attn_func(q, np.concatenate([k, k]), v)


def test_not_an_array(rng):
    q, k, v = qkv(rng)
    with pytest.raises(TypeError, match="^q: expected a numpy, torch or DLPack array"):
        fastattn.flash_attn_func(q.tolist(), k, v)
    with pytest.raises(TypeError, match="^k: "):
        fastattn.flash_attn_func(q, k.tolist(), v)


@pytest.mark.parametrize("window", [(1,), (1, 2, 3), "ab", None])
def test_bad_window(rng, window):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="^window_size"):
        fastattn.flash_attn_func(q, k, v, window_size=window)


@pytest.mark.parametrize("scale", [float("nan"), float("inf")])
def test_bad_scale(rng, scale):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="^softmax_scale"):
        fastattn.flash_attn_func(q, k, v, softmax_scale=scale)


def test_negative_softcap(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="softcap"):
        fastattn.flash_attn_func(q, k, v, softcap=-1.0)


def test_unknown_backend(rng):
    q, k, v = qkv(rng)
    with pytest.raises(ValueError, match="^backend"):
        fastattn.forward(q, k, v, backend="tpu")


def test_keyword_only_after_causal(rng):
    """FA3 has qv at position 6; ours is keyword-only so a positional call cannot mean it."""
    q, k, v = qkv(rng)
    with pytest.raises(TypeError):
        fastattn.flash_attn_func(q, k, v, None, False, (-1, -1))


# ---- varlen -------------------------------------------------------------------------------

def test_varlen_needs_both_cu_seqlens(rng):
    q, k, v, cu = varlen_inputs(rng)
    with pytest.raises(ValueError, match="cu_seqlens"):
        fastattn.flash_attn_varlen_func(q, k, v, cu, None, 5, 5)


def test_varlen_rank(rng):
    q, k, v, cu = varlen_inputs(rng)
    with pytest.raises(ValueError, match=r"^q: expected 3 dimensions \(total_tokens"):
        fastattn.flash_attn_varlen_func(q[None], k, v, cu, cu, 5, 5)


def test_varlen_max_seqlen_type(rng):
    q, k, v, cu = varlen_inputs(rng)
    with pytest.raises(ValueError, match="^max_seqlen_q"):
        fastattn.flash_attn_varlen_func(q, k, v, cu, cu, 5.0, 5)


@pytest.mark.parametrize("bad, pattern", [
    ("int64", r"cu_seqlens_q: expected dtype int32"),
    ("2d", r"cu_seqlens_q: expected 1 dimension"),
])
def test_cu_seqlens_array_checks(rng, bad, pattern):
    q, k, v, cu = varlen_inputs(rng)
    wrong = {"int64": cu.astype(np.int64), "2d": cu[None]}[bad]
    with pytest.raises(ValueError, match=pattern):
        fastattn.flash_attn_varlen_func(q, k, v, wrong, cu, 5, 5)


@pytest.mark.parametrize("values", [[0, 5, 3], [1, 3, 8], [0, 3, 9]],
                         ids=["decreasing", "not_from_zero", "past_total"])
def test_cu_seqlens_values(rng, values):
    q, k, v, cu = varlen_inputs(rng)
    with pytest.raises(ValueError, match="cu_seqlens_q"):
        fastattn.flash_attn_varlen_func(q, k, v, np.array(values, np.int32), cu, 5, 5)


def test_cu_seqlens_size_mismatch(rng):
    q, k, v, cu = varlen_inputs(rng)
    with pytest.raises(ValueError, match="cu_seqlens"):
        fastattn.flash_attn_varlen_func(q, k, v, cu, np.array([0, 8], np.int32), 5, 8)


def test_max_seqlen_too_small(rng):
    q, k, v, cu = varlen_inputs(rng)
    with pytest.raises(ValueError, match="max_seqlen_q"):
        fastattn.flash_attn_varlen_func(q, k, v, cu, cu, 2, 5)


def test_seqused_too_long(rng):
    q, k, v, cu = varlen_inputs(rng)
    with pytest.raises(ValueError, match="seqused_k"):
        fastattn.flash_attn_varlen_func(q, k, v, cu, cu, 5, 5,
                                        seqused_k=np.array([4, 5], np.int32))


# ---- SDPA ----------------------------------------------------------------------------------

def bhsd(rng, b=1, h=2, h_kv=2, s_q=8, s_k=8, d=32):
    return (randn(rng, (b, h, s_q, d)), randn(rng, (b, h_kv, s_k, d)), randn(rng, (b, h_kv, s_k, d)))


def test_sdpa_attn_mask(rng):
    q, k, v = bhsd(rng)
    # a float mask is an additive bias now (test_bias.py checks its values); a bad shape is named
    # a (s_k,) mask broadcasts as SDPA's (review s39; test_bias.py checks its values): a short one is named,
    # by PyTorch's rule for attn_mask's last two dims (review s40)
    bad_shape = "^attn_mask: expected a shape broadcastable to \\(\\.\\.\\., 8, 8\\)"
    with pytest.raises(ValueError, match=bad_shape):
        fastattn.scaled_dot_product_attention(q, k, v, attn_mask=np.zeros((5,), np.float32))
    with pytest.raises(ValueError, match="^attn_mask: expected at most 4 dimensions"):
        fastattn.scaled_dot_product_attention(q, k, v, attn_mask=np.zeros((1, 1, 1, 8, 8), np.float32))
    with pytest.raises(ValueError, match=bad_shape):
        fastattn.scaled_dot_product_attention(q, k, v, attn_mask=np.zeros((7, 8), np.float32))


def test_sdpa_dropout(rng):
    q, k, v = bhsd(rng)
    with pytest.raises(NotImplementedError, match="^dropout_p=0.1"):
        fastattn.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    with pytest.raises(ValueError, match="^dropout_p"):
        fastattn.scaled_dot_product_attention(q, k, v, dropout_p=1.5)


def test_sdpa_gqa_needs_flag(rng):
    q, k, v = bhsd(rng, h=4, h_kv=2)
    with pytest.raises(ValueError, match="^enable_gqa"):
        fastattn.scaled_dot_product_attention(q, k, v)


def test_sdpa_causal_top_left_short_queries(rng):
    q, k, v = bhsd(rng, s_q=4, s_k=9)
    with pytest.raises(NotImplementedError, match="top-left"):
        fastattn.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_sdpa_rank(rng):
    q, k, v = bhsd(rng)
    with pytest.raises(ValueError, match="^query: expected 4 dimensions"):
        fastattn.scaled_dot_product_attention(q[0], k, v)


def test_sdpa_scale(rng):
    q, k, v = bhsd(rng)
    with pytest.raises(ValueError, match="^scale"):
        fastattn.scaled_dot_product_attention(q, k, v, scale=float("nan"))
