"""Element masks (mask=, a bool keep-mask of every pair, packed into fastattn's bitmask words) on the
CPU backend with numpy arrays: the packing against its definition, forward and backward values
against the float64 reference (an element mask is a block mask of 1 x 1 blocks there), every element;
2-, 3- and 4-D masks (broadcast dims), causal / windows, GQA, rows that keep no key; an all-True mask
equal to no mask bit for bit; and the errors, each naming the argument."""
import numpy as np
import pytest

import attn_reference as ref
import fastattn
from checks import FLOAT32_FLOOR, assert_close, assert_lse_close, randn
from fastattn import _bit_mask

# (b, s_q, s_k, h, h_kv, d, causal, window, mask shape (None: the full (b, h, s_q, s_k)), density)
CASES = {
    "shared_2d": (2, 40, 50, 4, 2, 32, False, (-1, -1), "2d", 0.5),
    "per_head_3d_causal": (2, 33, 47, 4, 2, 32, True, (-1, -1), "3d", 0.7),
    "full_4d_window": (2, 17, 23, 2, 1, 16, False, (5, 3), "4d", 0.5),
    "per_kv_head_sq_gt_sk": (1, 113, 30, 4, 2, 32, True, (-1, -1), "kv", 0.6),
    "sparse_odd": (1, 70, 97, 2, 1, 64, False, (-1, -1), "4d", 0.1),
    "single_token": (3, 1, 1, 2, 2, 32, False, (-1, -1), "4d", 0.5),
    "none_kept": (2, 20, 20, 2, 2, 16, False, (-1, -1), "2d", 0.0),
}


def _mask(rng, b, s_q, s_k, h, h_kv, form, density):
    shape = {"2d": (s_q, s_k), "3d": (h, s_q, s_k), "4d": (b, h, s_q, s_k), "kv": (1, h_kv, s_q, s_k)}[form]
    return rng.random(shape) < density


def _as_blocks(mask):
    """The reference's form of an element mask: a 4-D mask of 1 x 1 blocks."""
    m = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
    return (m, 1, 1)


def test_packing_is_the_documented_bit_order(rng):
    for s_k in (1, 31, 32, 33, 70, 128):
        mask = rng.random((2, 3, 5, s_k)) < 0.5
        words = _bit_mask.pack(mask)
        assert words.dtype == np.dtype("<u4") and words.shape == (2, 3, 5, -(-s_k // 32))
        j = np.arange(s_k)
        bits = (words[..., j // 32] >> (j % 32).astype(np.uint32)) & 1
        assert np.array_equal(bits.astype(bool), mask)
        assert (words[..., -1] >> np.uint32(s_k % 32) == 0).all() if s_k % 32 else True  # padding bits clear


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_forward_and_backward_values(rng, case, dtype):
    b, s_q, s_k, h, h_kv, d, causal, window, form, density = CASES[case]
    q, k, v = randn(rng, (b, s_q, h, d), dtype), randn(rng, (b, s_k, h_kv, d), dtype), randn(rng, (b, s_k, h_kv, d), dtype)
    dout = randn(rng, (b, s_q, h, d), dtype)
    mask = _mask(rng, b, s_q, s_k, h, h_kv, form, density)
    kw = dict(causal=causal, window_size=window, mask=mask)
    out, lse = fastattn.forward(q, k, v, **kw)
    rkw = dict(causal=causal, window=window, blocks=_as_blocks(mask))
    ref64, lse64 = ref.forward(q, k, v, **rkw)
    floor = FLOAT32_FLOOR if dtype == np.float32 else 0.0
    assert_close("out", out, ref64, ref.forward(q, k, v, dtype=dtype, **rkw)[0], dtype, floor)
    assert_lse_close(lse, lse64)
    grads = fastattn.backward(dout, q, k, v, out, lse, **kw)
    exact, lowp = ref.backward(q, k, v, dout, **rkw), ref.backward(q, k, v, dout, dtype=dtype, **rkw)
    for name, got, r64, rlp in zip(("dq", "dk", "dv"), grads, exact, lowp):
        assert_close(name, got, r64, rlp, dtype, floor)
    if density == 0.0:
        assert (out == 0).all() and np.isneginf(lse).all() and all((g == 0).all() for g in grads)


def test_all_true_mask_equals_no_mask_bit_for_bit(rng):
    q, k, v, dout = (randn(rng, s, np.float16) for s in ((2, 40, 4, 32), (2, 50, 2, 32), (2, 50, 2, 32), (2, 40, 4, 32)))
    mask = np.ones((40, 50), dtype=bool)
    a, la = fastattn.forward(q, k, v, causal=True, mask=mask)
    b, lb = fastattn.forward(q, k, v, causal=True)
    assert np.array_equal(a, b) and np.array_equal(la, lb)
    ga = fastattn.backward(dout, q, k, v, a, la, causal=True, mask=mask)
    gb = fastattn.backward(dout, q, k, v, b, lb, causal=True)
    assert all(np.array_equal(x, y) for x, y in zip(ga, gb))


def test_varlen_mask_rows_count_from_each_sequence_start(rng):
    lens_q, lens_k = [0, 17, 1, 33], [5, 20, 0, 40]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q = randn(rng, (int(cu_q[-1]), 4, 32))
    k, v = randn(rng, (int(cu_k[-1]), 2, 32)), randn(rng, (int(cu_k[-1]), 2, 32))
    mask = rng.random((4, 2, 33, 40)) < 0.6  # per sequence and KV head
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=33, max_seqlen_k=40, causal=True, mask=mask)
    out, lse = fastattn.forward(q, k, v, **kw)
    ref64, lse64 = ref.varlen_forward(q, k, v, cu_q, cu_k, causal=True, blocks=(mask, 1, 1))
    assert_close("out", out, ref64, ref.round_to(ref64, np.float32), np.float32, FLOAT32_FLOOR)
    assert_lse_close(lse, lse64)


def test_errors_name_the_mask(rng):
    q, k, v = randn(rng, (1, 8, 2, 16)), randn(rng, (1, 10, 2, 16)), randn(rng, (1, 10, 2, 16))
    with pytest.raises(ValueError, match="mask: expected dtype bool"):
        fastattn.forward(q, k, v, mask=np.ones((8, 10), dtype=np.uint8))
    with pytest.raises(ValueError, match="mask: expected 2 to 4 dimensions"):
        fastattn.forward(q, k, v, mask=np.ones(10, dtype=bool))
    with pytest.raises(ValueError, match=r"mask.bits: dim 2 \(rows\) is 7 but must be >= seqlen_q 8"):
        fastattn.forward(q, k, v, mask=np.ones((7, 10), dtype=bool))
    with pytest.raises(ValueError, match=r"mask.bits: dim 1 \(mask_heads\) is 3 but must divide heads_q 2"):
        fastattn.forward(q, k, v, mask=np.ones((3, 8, 10), dtype=bool))
    with pytest.raises(ValueError, match="mask.bits: given together with a block-sparse mask"):
        fastattn.forward(q, k, v, mask=np.ones((8, 10), dtype=bool), block_mask=np.ones((1, 1, 1, 1), bool), block_size=16)
    with pytest.raises(TypeError, match="mask: expected a numpy"):
        fastattn.forward(q, k, v, mask=[[True]])


def test_flash_attn_func_and_varlen_take_the_mask(rng):
    q, k, v = randn(rng, (2, 40, 4, 32)), randn(rng, (2, 50, 2, 32)), randn(rng, (2, 50, 2, 32))
    mask = rng.random((2, 1, 40, 50)) < 0.5
    out, lse = fastattn.flash_attn_func(q, k, v, causal=True, mask=mask, return_attn_probs=True)
    want, want_lse = fastattn.forward(q, k, v, causal=True, mask=mask)
    assert np.array_equal(out, want) and np.array_equal(lse, want_lse)
    cu = np.array([0, 40, 80], np.int32), np.array([0, 50, 100], np.int32)
    out_v = fastattn.flash_attn_varlen_func(q.reshape(80, 4, 32), k.reshape(100, 2, 32), v.reshape(100, 2, 32),
                                            *cu, 40, 50, causal=True, mask=mask)
    assert np.array_equal(out_v, want.reshape(80, 4, 32))


def test_sdpa_boolean_attn_mask(rng):
    """SDPA's (b, h, s, d) layout and boolean attn_mask (True = take part), broadcast in its leading dims,
    against the float64 reference; is_causal with a mask is refused, as PyTorch does."""
    q, k, v = randn(rng, (2, 4, 33, 32)), randn(rng, (2, 2, 47, 32)), randn(rng, (2, 2, 47, 32))
    attn_mask = rng.random((4, 33, 47)) < 0.5  # (h, s_q, s_k): every batch entry
    out = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, enable_gqa=True)
    assert out.shape == (2, 4, 33, 32)
    bshd = [np.swapaxes(x, 1, 2) for x in (q, k, v)]
    ref64, _ = ref.forward(*bshd, blocks=(attn_mask[None], 1, 1))
    assert_close("out", np.swapaxes(out, 1, 2), ref64, ref.round_to(ref64, np.float32), np.float32, FLOAT32_FLOOR)
    with pytest.raises(ValueError, match="attn_mask: not with is_causal"):
        fastattn.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=True, enable_gqa=True)
    with pytest.raises(ValueError, match=r"attn_mask: expected a shape broadcastable to \(\.\.\., 33, 47\)"):
        fastattn.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask[:, :32], enable_gqa=True)


def test_sdpa_attn_mask_broadcast_over_queries_and_keys(rng):
    """PyTorch's attn_mask broadcasts in every dim: a (b, 1, 1, s_k) key-padding mask, a 1-D (s_k,) mask and
    a (s_q, 1) query mask each give the values of their expanded (b, h, s_q, s_k) form."""
    q, k, v = randn(rng, (2, 4, 33, 32)), randn(rng, (2, 2, 47, 32)), randn(rng, (2, 2, 47, 32))
    bshd = [np.swapaxes(x, 1, 2) for x in (q, k, v)]
    pad = rng.random((2, 1, 1, 47)) < 0.7
    pad[:, :, :, 0] = True  # every row keeps a key
    for attn_mask in (pad, pad[1, 0, 0], rng.random((33, 1)) < 0.5):
        out = fastattn.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, enable_gqa=True)
        full = np.broadcast_to(attn_mask.reshape((1,) * (4 - attn_mask.ndim) + attn_mask.shape), (2, 4, 33, 47))
        ref64, _ = ref.forward(*bshd, blocks=(np.ascontiguousarray(full), 1, 1))
        assert_close("out", np.swapaxes(out, 1, 2), ref64, ref.round_to(ref64, np.float32), np.float32, FLOAT32_FLOOR)
    with pytest.raises(ValueError, match=r"attn_mask: expected a shape broadcastable to \(\.\.\., 33, 47\)"):
        fastattn.scaled_dot_product_attention(q, k, v, attn_mask=pad[..., :46], enable_gqa=True)


def test_mask_short_of_the_keys_is_refused(rng):
    """A mask a few keys short of seqlen_k packs into as many words as a full one (40 and 50 keys: 2 words),
    which the C++ word count cannot see: the Python entry points refuse it by name instead of dropping the
    missing keys."""
    q, k, v = randn(rng, (1, 8, 2, 16)), randn(rng, (1, 50, 2, 16)), randn(rng, (1, 50, 2, 16))
    short = np.ones((8, 40), dtype=bool)
    want = r"mask: its last dim \(keys\) is 40 but seqlen_k is 50"
    with pytest.raises(ValueError, match=want):
        fastattn.forward(q, k, v, mask=short)
    out, lse = fastattn.forward(q, k, v)
    with pytest.raises(ValueError, match=want):
        fastattn.backward(out, q, k, v, out, lse, mask=short)
    with pytest.raises(ValueError, match=want):
        fastattn.flash_attn_func(q, k, v, mask=short)
    cu_q, cu_k = np.array([0, 8], np.int32), np.array([0, 50], np.int32)
    with pytest.raises(ValueError, match=want):
        fastattn.flash_attn_varlen_func(q[0], k[0], v[0], cu_q, cu_k, 8, 50, mask=short)
    with pytest.raises(ValueError, match=want):
        fastattn.forward(q[0], k[0], v[0], cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=8, max_seqlen_k=50,
                         mask=short)
    with pytest.raises(ValueError, match=want):  # varlen without max_seqlen_k: the host cu_seqlens_k's longest
        fastattn.forward(q[0], k[0], v[0], cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, mask=short)
    longer = np.ones((8, 64), dtype=bool)  # more keys than needed: allowed, the extra bits ignored
    a, _ = fastattn.forward(q, k, v, mask=longer)
    assert np.array_equal(a, out)


def test_mask_of_an_empty_call(rng):
    """Calls with no keys or no query rows take a mask of their (empty) shape: out 0, lse -inf, as without
    one (the words get one dropped row / word, since their dims must be >= 1)."""
    q, k, v = randn(rng, (2, 8, 2, 16)), randn(rng, (2, 10, 2, 16)), randn(rng, (2, 10, 2, 16))
    out, lse = fastattn.forward(q, k[:, :0], v[:, :0], mask=np.ones((8, 0), dtype=bool))
    assert (out == 0).all() and np.isneginf(lse).all()
    out, lse = fastattn.forward(q[:, :0], k, v, mask=np.ones((2, 1, 0, 10), dtype=bool))
    assert out.shape == (2, 0, 2, 16) and lse.shape == (2, 2, 0)
    assert _bit_mask.pack(np.ones((3, 0), dtype=bool)).shape == (1, 1, 3, 1)
