"""Every argument's error path: the right exception type and a message naming the argument."""
import re

import numpy as np
import pytest

import fastattn
from checks import FLOAT32_FLOOR, assert_close, assert_lse_close, randn


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


# ---- integers the extension takes as int32, cache_seqlens forms (review s51) -----------------------

def _kv_inputs(rng):
    q, kc, vc = randn(rng, (2, 3, 4, 32)), randn(rng, (2, 40, 2, 32)), randn(rng, (2, 40, 2, 32))
    return q, kc, vc, np.array([10, 30], np.int32)


def _int_calls(rng, kind):
    """(argument named in the message, call(value)) for every integer argument that reaches the extension,
    on numpy or torch arrays."""
    def conv(*xs):
        if kind == "numpy":
            return xs
        torch = pytest.importorskip("torch")
        return tuple(torch.from_numpy(x) for x in xs)
    q, k, v = conv(*qkv(rng))
    vq, vk, vv, cu = conv(*varlen_inputs(rng))
    kq, kc, vc, seqlens = conv(*_kv_inputs(rng))
    block = conv(np.ones((1, 1, 1, 1), bool))[0]
    return [
        ("window_size[0] (left)", lambda n: fastattn.flash_attn_func(q, k, v, window_size=(n, 0))),
        ("window_size[1] (right)", lambda n: fastattn.flash_attn_varlen_func(vq, vk, vv, cu, cu, 5, 5,
                                                                            window_size=(-1, n))),
        ("window_size[0] (left)", lambda n: fastattn.flash_attn_with_kvcache(kq, kc, vc, cache_seqlens=seqlens,
                                                                            window_size=(n, 0))),
        ("num_splits", lambda n: fastattn.flash_attn_with_kvcache(kq, kc, vc, cache_seqlens=seqlens, num_splits=n)),
        ("sm_margin", lambda n: fastattn.flash_attn_func(q, k, v, sm_margin=n)),
        ("max_seqlen_q", lambda n: fastattn.flash_attn_varlen_func(vq, vk, vv, cu, cu, n, 5)),
        ("max_seqlen_k", lambda n: fastattn.forward(vq, vk, vv, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_k=n)),
        ("num_threads", lambda n: fastattn.forward(q, k, v, num_threads=n)),
        ("cache_seqlens", lambda n: fastattn.flash_attn_with_kvcache(kq, kc, vc, cache_seqlens=n)),
        ("block_size", lambda n: fastattn.flash_attn_func(q, k, v, block_mask=block, block_size=(n, 128))),
    ]


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("value", [2**31, 2**40, -2**31 - 1], ids=["2^31", "2^40", "-2^31-1"])
def test_ints_past_int32_are_named(rng, kind, value):
    """Integers past int32 gave nanobind's "incompatible function arguments" listing (a TypeError naming no
    argument; an int cache_seqlens torch's overflow RuntimeError); now a ValueError naming the argument and its
    valid range, before the binding."""
    for arg, call in _int_calls(rng, kind):
        tail = r": -?\d+ is outside int32" if arg == "block_size" else r": must be in \[-?\d+, 2147483647\]"
        with pytest.raises(ValueError, match="^" + re.escape(arg) + tail):
            call(value)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_window_size_takes_ints_only(rng, kind):
    """window_size=(2.7, 0) was truncated by int() (ran as (2, 0)); FlashAttention's binding refuses a float.
    Floats and bools raise TypeError; numpy and torch integer scalars run as their value (checked against the
    float64 reference, every element)."""
    torch = pytest.importorskip("torch")
    import torch_reference

    q, k, v = qkv(rng, s_q=9, s_k=13)
    xs = (q, k, v) if kind == "numpy" else tuple(torch.from_numpy(x) for x in (q, k, v))
    kq, kc, vc, seqlens = _kv_inputs(rng)
    kv = (kq, kc, vc, seqlens) if kind == "numpy" else tuple(torch.from_numpy(x) for x in (kq, kc, vc, seqlens))
    for bad, side in (((2.7, 0), "0"), ((2, 0.0), "1"), ((True, 0), "0"), ((np.float64(3), 0), "0"),
                      ((np.bool_(True), 0), "0"), ((torch.tensor(2.0), 0), "0"), ((torch.tensor(True), 0), "0")):
        with pytest.raises(TypeError, match=rf"^window_size\[{side}\] \((left|right)\): expected an int, got"):
            fastattn.flash_attn_func(*xs, window_size=bad)
        with pytest.raises(TypeError, match=rf"^window_size\[{side}\] \((left|right)\): expected an int, got"):
            fastattn.flash_attn_with_kvcache(*kv[:3], cache_seqlens=kv[3], window_size=bad)
    out = fastattn.flash_attn_func(*xs, window_size=(np.int64(3), torch.tensor(1, dtype=torch.int32)))
    t = [torch.from_numpy(x) for x in (q, k, v)]
    ref64 = torch_reference.attention(*t, window=(3, 1)).numpy()
    lowp = ref64.astype(np.float32)  # the reference rounded to float32; FLOAT32_FLOOR covers the accumulation
    assert_close("out", np.asarray(out), ref64, lowp, np.float32, FLOAT32_FLOOR)


def test_cache_seqlens_forms_numpy(rng):
    """numpy's flash_attn_with_kvcache took cache_seqlens=[10, 30] to `.ndim` (AttributeError); it takes what
    the torch path takes: an int (numpy integer scalars too) or an int32 array of q's kind, and names the rest."""
    q, kc, vc, _ = _kv_inputs(rng)
    for name in ("cache_seqlens", "cache_batch_idx", "cache_leftpad"):
        for bad in ([10, 30], (10, 30), 10.0):
            kw = {"cache_seqlens": 10, name: bad}
            pattern = f"^{name}: expected an int or an int32 array, got {type(bad).__name__}"
            with pytest.raises(ValueError, match=pattern):
                fastattn.flash_attn_with_kvcache(q, kc, vc, **kw)
    try:
        import torch
    except ImportError:
        return
    with pytest.raises(TypeError, match="^cache_seqlens: expected a numpy array like q, got Tensor"):
        fastattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=torch.tensor([10, 30], dtype=torch.int32))
    with pytest.raises(ValueError, match="^cache_seqlens: expected an int or an int32 tensor, got list"):
        fastattn.flash_attn_with_kvcache(*(torch.from_numpy(x) for x in (q, kc, vc)), cache_seqlens=[10, 30])


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_integer_scalar_cache_seqlens(rng, kind):
    """A numpy integer scalar fills every row, as an int does: out and lse against the float64 model."""
    from kvcache_model import model

    q, kc, vc, _ = _kv_inputs(rng)
    _, _, out64, lse64, outlp = model(q, kc, vc, seqlens=np.array([17, 17], np.int32))
    args = (q, kc, vc)
    if kind == "torch":
        torch = pytest.importorskip("torch")
        args = tuple(torch.from_numpy(x) for x in args)
    out, lse = fastattn.flash_attn_with_kvcache(*args, cache_seqlens=np.int64(17), return_softmax_lse=True)
    assert_close("out", np.asarray(out), out64, outlp, np.float32, FLOAT32_FLOOR)
    assert_lse_close(np.asarray(lse), lse64)


# ---- head_dim 0 (review s51) ---------------------------------------------------------------------------

def test_head_dim_zero_default_scale(rng):
    """head_dim 0 with the default scale raised ZeroDivisionError (1/sqrt(0) computed before any shape check);
    now the extension's check names it, as with a given scale, on every front end."""
    q = np.zeros((1, 4, 2, 0), np.float32)
    calls = [lambda **kw: fastattn.flash_attn_func(q, q, q, **kw),
             lambda **kw: fastattn.forward(q, q, q, **kw),
             lambda **kw: fastattn.flash_attn_with_kvcache(q, q, q, **kw),
             lambda **kw: fastattn.scaled_dot_product_attention(q, q, q, scale=kw.get("softmax_scale"))]
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        t = torch.from_numpy(q)
        calls += [lambda **kw: fastattn.flash_attn_func(t, t, t, **kw),
                  lambda **kw: fastattn.flash_attn_func(t.requires_grad_(), t, t, **kw),
                  lambda **kw: fastattn.flash_attn_with_kvcache(t.detach(), t.detach(), t.detach(), **kw)]
    for call in calls:
        for kw in ({}, {"softmax_scale": 1.0}):
            with pytest.raises((ValueError, NotImplementedError), match=r"^q: head_dim 0"):
                call(**kw)


# ---- empty cu_seqlens (review s51) ---------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("side", ["q", "k"])
def test_empty_cu_seqlens(rng, kind, side):
    """A cu_seqlens with 0 entries was read as "no cu_seqlens" (the extension takes an empty array for an absent
    one) and the call failed on q's rank ("q: expected 4 dims"); it is named, as varlen needs batch + 1 >= 1."""
    q, k, v, cu = varlen_inputs(rng)
    empty = cu[:0]
    if kind == "torch":
        torch = pytest.importorskip("torch")
        q, k, v, cu, empty = (torch.from_numpy(x) for x in (q, k, v, cu, empty))
    cus = (empty, cu) if side == "q" else (cu, empty)
    pattern = rf"^cu_seqlens_{side}: needs batch \+ 1 >= 1 entries"
    with pytest.raises(ValueError, match=pattern):
        fastattn.flash_attn_varlen_func(q, k, v, *cus, 5, 5)
    with pytest.raises(ValueError, match=pattern):
        fastattn.flash_attn_varlen_func(q[:0], k[:0], v[:0], *cus, 0, 0)
    with pytest.raises(ValueError, match=pattern):
        fastattn.forward(q, k, v, cu_seqlens_q=cus[0], cu_seqlens_k=cus[1], max_seqlen_q=5, max_seqlen_k=5)


_EMPTY_TERMS = {"alibi_slopes": {"alibi_slopes": ((0,), np.float32)},
                "bias": {"bias": ((0, 4, 4), np.float32)},
                "bias_rows": {"bias": ((1, 1, 0, 4), np.float32)},
                "mask": {"mask": ((0, 4, 4), np.bool_)}}


@pytest.mark.parametrize("arg", sorted(_EMPTY_TERMS))
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_empty_score_terms_refused(rng, arg, kind):
    """An empty array has no data address (torch's empty tensors), which the C++ layer reads as "not given":
    an empty alibi_slopes, bias or mask would silently drop the term. Each is refused by name."""
    q = randn(rng, (1, 4, 2, 32), np.float32)
    kw = {k: np.empty(shape, dt) for k, (shape, dt) in _EMPTY_TERMS[arg].items()}
    if kind == "torch":
        torch = pytest.importorskip("torch", reason="torch is not installed: its empty tensors not tested")
        q, kw = torch.from_numpy(q), {k: torch.from_numpy(v) for k, v in kw.items()}
    with pytest.raises(ValueError, match=rf"^{arg.split('_rows')[0]}: shape \("):
        fastattn.flash_attn_func(q, q, q, **kw)
