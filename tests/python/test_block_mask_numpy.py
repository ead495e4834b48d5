"""Block-sparse masks (block_mask=, block_size=) on the CPU backend with numpy arrays: forward and
backward values against the float64 reference, every element; the masks' forms (bool / uint8,
strided, broadcast dims); rows that keep no key; and the errors, each naming the argument."""
import numpy as np
import pytest

import attn_reference as ref
import fastattn
from checks import FLOAT32_FLOOR, assert_close, assert_lse_close, randn

# (b, s_q, s_k, h, h_kv, d, causal, window, mask dims 0 / 1, block_size, density)
CASES = {
    "dense_blocks": (2, 40, 50, 4, 2, 32, False, (-1, -1), (1, 1), (16, 16), 1.0),
    "sparse": (2, 40, 50, 4, 2, 32, False, (-1, -1), (2, 4), (16, 16), 0.3),
    "per_kv_head_causal": (2, 33, 47, 4, 2, 32, True, (-1, -1), (2, 2), (8, 16), 0.7),
    "unit_blocks_window": (1, 17, 23, 2, 1, 16, False, (5, 3), (1, 2), (1, 1), 0.5),
    "block100_sq_gt_sk": (1, 113, 30, 2, 2, 32, True, (-1, -1), (1, 1), (100, 100), 0.6),
    "block128_odd": (1, 130, 140, 2, 1, 64, False, (-1, -1), (1, 2), (128, 128), 0.5),
    "single_token": (3, 1, 1, 2, 2, 32, False, (-1, -1), (3, 1), (16, 16), 0.5),
    "none_kept": (2, 20, 20, 2, 2, 16, False, (-1, -1), (1, 1), (8, 8), 0.0),
}


def _blocks(rng, b, s_q, s_k, dims, block_size, density, extra=0):
    shape = (b if dims[0] > 1 else 1, dims[1], -(-s_q // block_size[0]) + extra, -(-s_k // block_size[1]) + extra)
    return rng.random(shape) < density


def _inputs(rng, b, s_q, s_k, h, h_kv, d, dtype=np.float32):
    return (randn(rng, (b, s_q, h, d), dtype), randn(rng, (b, s_k, h_kv, d), dtype),
            randn(rng, (b, s_k, h_kv, d), dtype), randn(rng, (b, s_q, h, d), dtype))


def _floor(dtype):
    return FLOAT32_FLOOR if dtype == np.float32 else 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float16], ids=["f32", "f16"])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_forward_and_backward_values(rng, case, dtype):
    b, s_q, s_k, h, h_kv, d, causal, window, dims, size, density = CASES[case]
    q, k, v, dout = _inputs(rng, b, s_q, s_k, h, h_kv, d, dtype)
    mask = _blocks(rng, b, s_q, s_k, dims, size, density)
    kw = dict(causal=causal, window_size=window, block_mask=mask, block_size=size)
    out, lse = fastattn.forward(q, k, v, **kw)
    rkw = dict(causal=causal, window=window, blocks=(mask, *size))
    ref64, lse64 = ref.forward(q, k, v, **rkw)
    assert_close("out", out, ref64, ref.forward(q, k, v, dtype=dtype, **rkw)[0], dtype, _floor(dtype))
    assert_lse_close(lse, lse64)
    grads = fastattn.backward(dout, q, k, v, out, lse, **kw)
    exact, lowp = ref.backward(q, k, v, dout, **rkw), ref.backward(q, k, v, dout, dtype=dtype, **rkw)
    for name, got, r64, rlp in zip(("dq", "dk", "dv"), grads, exact, lowp):
        assert_close(name, got, r64, rlp, dtype, _floor(dtype))


def test_flash_attn_func_takes_the_mask(rng):
    q, k, v, _ = _inputs(rng, 2, 40, 40, 4, 1, 32)
    mask = _blocks(rng, 2, 40, 40, (2, 4), (16, 16), 0.5)
    out, lse = fastattn.flash_attn_func(q, k, v, causal=True, block_mask=mask, block_size=(16, 16),
                                        return_attn_probs=True)
    ref64, lse64 = ref.forward(q, k, v, causal=True, blocks=(mask, 16, 16))
    assert_close("out", out, ref64, ref.forward(q, k, v, causal=True, blocks=(mask, 16, 16), dtype=np.float32)[0],
                 np.float32, FLOAT32_FLOOR)
    assert_lse_close(lse, lse64)


def test_varlen_with_empty_sequences(rng):
    lens_q, lens_k = [0, 17, 1, 33], [5, 20, 0, 40]
    cu_q = np.concatenate([[0], np.cumsum(lens_q)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lens_k)]).astype(np.int32)
    q = randn(rng, (int(cu_q[-1]), 4, 32))
    k, v = randn(rng, (int(cu_k[-1]), 2, 32)), randn(rng, (int(cu_k[-1]), 2, 32))
    dout = randn(rng, q.shape)
    mask = rng.random((4, 2, 5, 3)) < 0.6  # per sequence and KV head; 8 x 16 blocks cover 33 x 40
    kw = dict(cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, max_seqlen_q=33, max_seqlen_k=40, causal=True,
              block_mask=mask, block_size=(8, 16))
    out, lse = fastattn.forward(q, k, v, **kw)
    rkw = dict(causal=True, blocks=(mask, 8, 16))
    ref64, lse64 = ref.varlen_forward(q, k, v, cu_q, cu_k, **rkw)
    assert_close("out", out, ref64, ref.round_to(ref64, np.float32), np.float32, FLOAT32_FLOOR)
    assert_lse_close(lse, lse64)
    via_interface = fastattn.flash_attn_varlen_func(q, k, v, cu_q, cu_k, 33, 40, causal=True, block_mask=mask,
                                                    block_size=(8, 16))
    assert np.array_equal(via_interface, out)
    grads = fastattn.backward(dout, q, k, v, out, lse, **kw)
    exact = ref.varlen_backward(q, k, v, dout, cu_q, cu_k, **rkw)
    for name, got, r64 in zip(("dq", "dk", "dv"), grads, exact):
        assert_close(name, got, r64, ref.round_to(r64, np.float32), np.float32, FLOAT32_FLOOR)


def test_no_kept_block_gives_zero_out_minus_inf_lse_zero_grads(rng):
    q, k, v, dout = _inputs(rng, 2, 20, 30, 2, 2, 16)
    mask = np.zeros((2, 1, 2, 1), dtype=np.uint8)
    mask[0, 0, 1, 0] = 1  # only rows 16..19 of batch 0 keep keys
    out, lse = fastattn.forward(q, k, v, block_mask=mask, block_size=(16, 32))
    grads = fastattn.backward(dout, q, k, v, out, lse, block_mask=mask, block_size=(16, 32))
    assert (out[0, :16] == 0).all() and (out[1] == 0).all()
    assert np.isneginf(lse[0, :, :16]).all() and np.isneginf(lse[1]).all() and np.isfinite(lse[0, :, 16:]).all()
    assert (grads[0][0, :16] == 0).all() and (grads[0][1] == 0).all()
    assert (grads[1][1] == 0).all() and (grads[2][1] == 0).all()


def test_forms_of_one_mask_give_the_same_bits(rng):
    """bool, uint8 with any nonzero value, a transposed view, a reversed view and padded dims: the
    same kept blocks, the same result."""
    q, k, v, _ = _inputs(rng, 2, 40, 50, 4, 2, 32)
    mask = _blocks(rng, 2, 40, 50, (2, 2), (16, 16), 0.5)
    base, _ = fastattn.forward(q, k, v, block_mask=mask, block_size=(16, 16))
    bytes_ = mask.astype(np.uint8) * rng.integers(1, 256, mask.shape).astype(np.uint8)
    transposed = np.ascontiguousarray(np.swapaxes(mask, 2, 3)).swapaxes(2, 3)
    reversed_ = np.ascontiguousarray(mask[..., ::-1])[..., ::-1]
    padded = np.zeros(mask.shape[:2] + (mask.shape[2] + 2, mask.shape[3] + 3), dtype=bool)
    padded[:, :, :mask.shape[2], :mask.shape[3]] = mask
    broadcast = np.broadcast_to(mask[:, :1], mask.shape)  # one head's blocks for both (stride 0)
    for form in (bytes_, transposed, reversed_, padded):
        out, _ = fastattn.forward(q, k, v, block_mask=form, block_size=(16, 16))
        assert np.array_equal(out, base)
    out, _ = fastattn.forward(q, k, v, block_mask=broadcast, block_size=16)
    assert np.array_equal(out, fastattn.forward(q, k, v, block_mask=mask[:, :1], block_size=16)[0])


def test_all_kept_equals_no_mask(rng):
    q, k, v, _ = _inputs(rng, 1, 33, 47, 2, 1, 32)
    out, lse = fastattn.forward(q, k, v, causal=True, block_mask=np.ones((1, 1, 1, 1), bool), block_size=(64, 64))
    plain, plain_lse = fastattn.forward(q, k, v, causal=True)
    assert np.array_equal(out, plain) and np.array_equal(lse, plain_lse)


@pytest.mark.parametrize("mask, size, error, match", [
    (np.ones((1, 1, 3, 4), np.float32), (16, 16), ValueError, "^block_mask: expected dtype bool or uint8, got float32"),
    (np.ones((1, 3, 4), bool), (16, 16), ValueError, "^block_mask: expected 4 dimensions"),
    (np.ones((1, 1, 2, 4), bool), (16, 16), ValueError, r"^mask.blocks: dim 2 is 2 but must be >= ceil\(seqlen_q 40"),
    (np.ones((1, 1, 3, 3), bool), (16, 16), ValueError, r"^mask.blocks: dim 3 is 3 but must be >= ceil\(seqlen_k 50"),
    (np.ones((3, 1, 3, 4), bool), (16, 16), ValueError, r"^mask.blocks: dim 0 \(mask_batch\) is 3"),
    (np.ones((1, 3, 3, 4), bool), (16, 16), ValueError, r"^mask.blocks: dim 1 \(mask_heads\) is 3 but must divide heads_q 4"),
    (np.ones((1, 1, 3, 4), bool), (0, 16), ValueError, "^mask.blocks: block_q must be >= 1"),
    (np.ones((1, 1, 3, 4), bool), (16, "x"), ValueError, "^block_size: expected an int or a pair"),
    ([[[[True]]]], (16, 16), TypeError, "^block_mask: expected a numpy, torch or DLPack array"),
])
def test_errors_name_the_argument(rng, mask, size, error, match):
    q, k, v, dout = _inputs(rng, 2, 40, 50, 4, 2, 32)
    with pytest.raises(error, match=match):
        fastattn.forward(q, k, v, block_mask=mask, block_size=size)
    with pytest.raises(error, match=match):
        fastattn.flash_attn_func(q, k, v, block_mask=mask, block_size=size)
    out, lse = fastattn.forward(q, k, v)
    with pytest.raises(error, match=match):
        fastattn.backward(dout, q, k, v, out, lse, block_mask=mask, block_size=size)


def test_kvcache_takes_no_block_mask(rng):
    q, k, v, _ = _inputs(rng, 1, 4, 16, 2, 2, 32)
    with pytest.raises(TypeError, match="block_mask"):
        fastattn.flash_attn_with_kvcache(q, k, v, block_mask=np.ones((1, 1, 1, 1), bool))


def test_block_size_without_a_mask_is_ignored(rng):
    # flash_attn_func / flash_attn_varlen_func unpacked an int block_size as a pair even without a mask
    # (TypeError); fastattn.forward always ignored it there
    q, k, v, _ = _inputs(rng, 2, 17, 23, 2, 1, 16)
    plain = fastattn.flash_attn_func(q, k, v, causal=True)
    for size in (32, (16, 8)):
        assert np.array_equal(fastattn.flash_attn_func(q, k, v, causal=True, block_size=size), plain)
        assert np.array_equal(fastattn.forward(q, k, v, causal=True, block_size=size)[0], plain)
    cu_q, cu_k = np.array([0, 17, 34], np.int32), np.array([0, 23, 46], np.int32)
    vq, vk, vv = q.reshape(34, 2, 16), k.reshape(46, 1, 16), v.reshape(46, 1, 16)
    got = fastattn.flash_attn_varlen_func(vq, vk, vv, cu_q, cu_k, 17, 23, causal=True, block_size=32)
    assert np.array_equal(got, plain.reshape(34, 2, 16))
