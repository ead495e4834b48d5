"""Array-agnostic calls into the extension: check ranks, allocate outputs, pass the stream.

Everything else (dtypes, shapes, strides, GQA ratio, cu_seqlens, windows, head dims a backend
supports) is validated by the C++ API, whose errors arrive as ValueError (invalid argument),
NotImplementedError (not supported by this build or backend) or RuntimeError.
"""
from __future__ import annotations

import math

import numpy as np

from . import _C
from . import _bias, _bit_mask, _block_mask
from ._arrays import arrays_for, same_kind, torch_module
from ._ints import INT32_MAX, int_arg

BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2, "reference": 3}
NO_INDEX = (None, None, None, None)  # (cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k) of a fixed-length call


def window_pair(window_size):
    """(left, right) as two ints; -1 means unbounded on that side. ValueError unless a pair, TypeError
    for a side that is no int (a float is not truncated; FlashAttention's binding refuses it too),
    ValueError for a side outside [-1, 2^31 - 1]."""
    if type(window_size) is tuple and len(window_size) == 2:  # the usual case first: this runs on every call
        left, right = window_size
        if type(left) is int and type(right) is int and -1 <= left <= INT32_MAX and -1 <= right <= INT32_MAX:
            return left, right
    try:
        if isinstance(window_size, (str, bytes)):
            raise TypeError
        left, right = window_size
    except (TypeError, ValueError):
        raise ValueError(f"window_size: expected a pair (left, right) of ints, got {window_size!r}") from None
    note = " (-1 = unbounded)"
    return (int_arg(left, "window_size[0] (left)", -1, INT32_MAX, note),
            int_arg(right, "window_size[1] (right)", -1, INT32_MAX, note))


def check_cu_seqlens(cu_seqlens_q, cu_seqlens_k):
    """ValueError for a cu_seqlens with no entry: varlen needs batch + 1 >= 1 offsets. (The extension reads an
    array without data, as an empty torch tensor's null data pointer, as an absent one, so a varlen call went on
    as a fixed-length one and failed on q's rank.) The extension's own message, said before it can miss it."""
    for name, cu in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k", cu_seqlens_k)):
        shape = getattr(cu, "shape", None)
        if shape is not None and 0 in tuple(shape):
            raise ValueError(f"{name}: needs batch + 1 >= 1 entries but has 0")


def check_rank(x, name, varlen):
    want = 3 if varlen else 4
    layout = "(total_tokens, heads, head_dim)" if varlen else "(batch, seqlen, heads, head_dim)"
    if len(x.shape) != want:
        raise ValueError(f"{name}: expected {want} dimensions {layout}, got shape {tuple(x.shape)}")


def resolve_scale(softmax_scale, head_dim):
    """softmax_scale as a float, 1/sqrt(head_dim) when None; ValueError unless finite. A head_dim < 1
    takes 1.0 for the default: the extension's shape checks refuse it by name (as with a given scale)."""
    if softmax_scale is None:
        scale = head_dim ** -0.5 if head_dim >= 1 else 1.0
    else:
        scale = float(softmax_scale)
    if not math.isfinite(scale):
        raise ValueError(f"softmax_scale: expected a finite number, got {softmax_scale!r}")
    return scale


def check_alibi_dtype(alibi_slopes):
    """ValueError unless the slopes are None or float32 (FlashAttention's rule). The C++ layer checks this
    too, but its array conversion answers a non-float dtype with the dtypes q may take, which misleads here."""
    if alibi_slopes is None:
        return
    if not hasattr(alibi_slopes, "dtype"):
        raise TypeError(f"alibi_slopes: expected an array of q's kind, got {type(alibi_slopes).__name__}")
    dtype = str(alibi_slopes.dtype)
    if dtype not in ("float32", "torch.float32"):
        raise ValueError(f"alibi_slopes: dtype {dtype.replace('torch.', '')} is not supported (the slopes are "
                         "float32, as in FlashAttention)")
    if 0 in tuple(alibi_slopes.shape):  # an empty array's null data would read as no slopes at all
        raise ValueError(f"alibi_slopes: shape {tuple(alibi_slopes.shape)} has no elements; expected (heads_q,) or "
                         "(batch, heads_q)")


def make_options(*, head_dim, cu_seqlens_q=None, cu_seqlens_k=None, seqused_q=None, seqused_k=None,
                 max_seqlen_q=0, max_seqlen_k=0, softmax_scale=None, causal=False,
                 window_size=(-1, -1), softcap=0.0, check_index_arrays=True, backend="auto",
                 num_threads=0, deterministic=False, block_mask=None, block_size=_block_mask.DEFAULT_BLOCK_SIZE,
                 bit_mask=None, bias=None, alibi_slopes=None):
    """The extension's Options for one call (scale defaults to 1/sqrt(head_dim)).

    deterministic only affects the backward: dq, dk, dv bitwise equal from run to run.
    block_mask: a 4-D bool / uint8 array of kept (block_q, block_k) = block_size blocks, already
    resolved (_block_mask.resolve), or None. bit_mask: packed element-mask words (_bit_mask.pack) or None.
    bias: a 4-D additive score bias (_bias.bias_4d) or None. alibi_slopes: float32 (heads_q) or
    (batch, heads_q) slopes of q's kind (unit last stride) or None.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend: expected one of {sorted(BACKENDS)}, got {backend!r}")
    scale = resolve_scale(softmax_scale, head_dim)
    left, right = window_pair(window_size)
    block_q, block_k = _block_mask.block_size_pair(block_size)
    return _C.Options(cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, seqused_q=seqused_q,
                      seqused_k=seqused_k, max_seqlen_q=int_arg(max_seqlen_q, "max_seqlen_q", 0),
                      max_seqlen_k=int_arg(max_seqlen_k, "max_seqlen_k", 0), softmax_scale=scale, causal=bool(causal),
                      window_left=left, window_right=right, softcap=float(softcap),
                      check_index_arrays=bool(check_index_arrays), backend=BACKENDS[backend],
                      num_threads=int_arg(num_threads, "num_threads", 0, note=" (0 = all hardware threads)"),
                      deterministic=bool(deterministic),
                      block_mask=block_mask, block_q=block_q, block_k=block_k, bit_mask=bit_mask, bias=bias,
                      alibi_slopes=alibi_slopes)


def _index_arrays(xs, kw):
    """Index arrays among `kw`, stride-fixed by adapter `xs`, None where absent."""
    names = ("cu_seqlens_q", "cu_seqlens_k", "seqused_q", "seqused_k")
    return {n: (None if kw.get(n) is None else xs.unit_last(kw[n])) for n in names if n in kw}


def _resolve_block_mask(xs, kw):
    """kw's block_mask / block_size resolved (a FlexAttention BlockMask becomes its dense blocks),
    the array checked to be of q's kind."""
    mask, size = _block_mask.resolve(kw.get("block_mask"), kw.get("block_size", _block_mask.DEFAULT_BLOCK_SIZE))
    same_kind(xs, [("block_mask", mask)])
    kw["block_mask"], kw["block_size"] = mask, size


def _resolve_bit_mask(xs, kw, k, varlen):
    """kw's mask (a bool keep-mask of every pair) packed into bitmask words of q's kind (bit_mask);
    its key dim checked against k's seqlen (varlen: max_seqlen_k, when given)."""
    mask = kw.pop("mask", None)
    same_kind(xs, [("mask", mask)])
    kw["bit_mask"] = _bit_mask.pack(mask, seqlen_k=_longest(kw, k, varlen, "k"))


def longest_of(max_seqlen, cu_seqlens):
    """The longest sequence of a varlen side: max_seqlen when given (> 0), else the longest of cu_seqlens where
    it can be read without a device sync or a trace (a numpy array, a plain CPU torch tensor outside
    torch.compile), else 0 (unknown). The masks' and biases' checks and broadcasts use it."""
    n = int(max_seqlen or 0)
    if n or cu_seqlens is None:
        return n
    if isinstance(cu_seqlens, np.ndarray):
        return max(0, int(np.diff(cu_seqlens.astype(np.int64)).max())) if cu_seqlens.size > 1 else 0
    torch = torch_module()
    if (torch is not None and type(cu_seqlens) is torch.Tensor and cu_seqlens.device.type == "cpu"
            and cu_seqlens.numel() > 1 and not torch.compiler.is_compiling()):
        return max(0, int((cu_seqlens[1:].long() - cu_seqlens[:-1].long()).max()))
    return 0


def _longest(kw, k, varlen, side):
    """The longest sequence of one side ("q" or "k"): the fixed seqlen, else longest_of(max_seqlen_<side>,
    cu_seqlens_<side>)."""
    if not varlen:
        return k.shape[1]
    return longest_of(kw.get(f"max_seqlen_{side}"), kw.get(f"cu_seqlens_{side}"))


def _resolve_bias(xs, kw, q, k, varlen):
    """kw's bias as 4-D (_bias.bias_4d) of q's kind, its query / key dims of size 1 broadcast."""
    bias = kw.get("bias")
    if bias is None:
        return
    same_kind(xs, [("bias", bias)])
    kw["bias"] = xs.unit_last(_bias.bias_4d(bias, _longest(kw, q, varlen, "q"), _longest(kw, k, varlen, "k")))


def _resolve_alibi(xs, kw):
    """kw's alibi_slopes checked to be float32 of q's kind, with a unit last stride."""
    slopes = kw.get("alibi_slopes")
    if slopes is None:
        return
    same_kind(xs, [("alibi_slopes", slopes)])
    check_alibi_dtype(slopes)
    kw["alibi_slopes"] = xs.unit_last(slopes)


def forward(q, k, v, **kw):
    """(out, lse) of attention for any supported array kind; keyword arguments as make_options.
    block_mask: a 4-D bool / uint8 array (mask_batch, mask_heads, q_blocks, k_blocks) of kept blocks
    of block_size = (block_q, block_k) (default (128, 128)), or a FlexAttention BlockMask
    (docs/masks.md). mask: a bool keep-mask of every (query, key) pair, (s_q, s_k), (mask_heads, s_q,
    s_k) or (mask_batch, mask_heads, s_q, s_k), True = keep (SDPA's boolean attn_mask; ANDed with
    causal / window_size; packed into bits here, on the mask's device). bias: an additive score bias
    (float / bf16 / fp16 array of q's kind), (s_q, s_k), (heads, s_q, s_k) or (batch, heads, s_q, s_k),
    query / key dims of size 1 broadcast, added after softcap (docs/masks.md, Additive bias).
    alibi_slopes: FlashAttention's ALiBi, float32 (heads_q) or (batch, heads_q) of q's kind: adds
    -slope[b, h] * |i + s_k - s_q - j| to the score after softcap (s_q, s_k: each sequence's lengths).

    Fixed length: q (b, s_q, h, d), k/v (b, s_k, h_kv, d|d_v) -> out (b, s_q, h, d_v),
    lse (b, h, s_q) float32. Varlen (cu_seqlens_q/k given): q (total_q, h, d) ->
    out (total_q, h, d_v), lse (h, total_q).
    """
    xs = arrays_for(q, "q")
    same_kind(xs, [("k", k), ("v", v)] + [(n, kw.get(n)) for n in
                                          ("cu_seqlens_q", "cu_seqlens_k", "seqused_q", "seqused_k")])
    varlen = kw.get("cu_seqlens_q") is not None or kw.get("cu_seqlens_k") is not None
    if varlen:
        check_cu_seqlens(kw.get("cu_seqlens_q"), kw.get("cu_seqlens_k"))
    for name, x in (("q", q), ("k", k), ("v", v)):
        check_rank(x, name, varlen)
    q, k, v = xs.unit_last(q), xs.unit_last(k), xs.unit_last(v)
    kw.update(_index_arrays(xs, kw))
    _resolve_block_mask(xs, kw)
    _resolve_bit_mask(xs, kw, k, varlen)
    _resolve_bias(xs, kw, q, k, varlen)
    _resolve_alibi(xs, kw)
    opts = make_options(head_dim=q.shape[-1], **kw)
    out = xs.empty(q, tuple(q.shape[:-1]) + (v.shape[-1],))
    if varlen:
        lse_shape = (q.shape[1], q.shape[0])
    else:
        lse_shape = (q.shape[0], q.shape[2], q.shape[1])
    lse = xs.empty(q, lse_shape, float32=True)
    _C.forward(q, k, v, out, lse, opts, xs.stream(q))
    return xs.wrap(out), xs.wrap(lse)


def run_forward(xs, q, k, v, index_arrays, max_seqlen_q, max_seqlen_k, scale, causal, window_left,
                window_right, softcap, check_index_arrays, backend=0, num_threads=0, block_mask=None,
                block_size=_block_mask.DEFAULT_BLOCK_SIZE, bit_mask=None, bias=None, alibi_slopes=None):
    """forward() with every argument already checked and resolved (ranks, array kinds, scale as a
    float, the window as two ints): the per-call path of the front ends, which resolve once.

    index_arrays: (cu_seqlens_q, cu_seqlens_k, seqused_q, seqused_k), None where absent.
    block_mask: an array of q's kind or None; block_size: (block_q, block_k) ints. bit_mask: packed
    element-mask words of q's kind (_bit_mask.pack) or None. bias: a 4-D bias of q's kind (_bias.bias_4d) or None.
    alibi_slopes: float32 slopes of q's kind (checked: check_alibi_dtype) or None.
    """
    q, k, v = xs.unit_last(q), xs.unit_last(k), xs.unit_last(v)
    if bias is not None:
        bias = xs.unit_last(bias)
    if alibi_slopes is not None:
        alibi_slopes = xs.unit_last(alibi_slopes)
    cu_q, cu_k, used_q, used_k = index_arrays
    if cu_q is not None or cu_k is not None or used_q is not None or used_k is not None:
        cu_q, cu_k, used_q, used_k = (None if x is None else xs.unit_last(x) for x in index_arrays)
    opts = _C.Options(cu_q, cu_k, used_q, used_k, max_seqlen_q, max_seqlen_k, scale, causal,
                      window_left, window_right, softcap, check_index_arrays, backend, num_threads,
                      False, block_mask, *block_size, bit_mask, bias, alibi_slopes)
    shape = q.shape
    out = xs.empty(q, (*shape[:-1], v.shape[-1]))
    if cu_q is not None or cu_k is not None:
        lse = xs.empty(q, (shape[1], shape[0]), float32=True)
    else:
        lse = xs.empty(q, (shape[0], shape[2], shape[1]), float32=True)
    _C.forward(q, k, v, out, lse, opts, xs.stream(q))
    return xs.wrap(out), xs.wrap(lse)


def backward(dout, q, k, v, out, lse, **kw):
    """(dq, dk, dv) of forward's out given its gradient dout; same keywords as forward, plus
    deterministic=True for gradients bitwise equal from run to run (GPU: ordered accumulation).
    Pass the forward's block_mask / block_size, mask, bias or alibi_slopes again: the backward applies the
    same mask and score terms (the slopes get no gradient, as in FlashAttention). dbias=True (with a bias):
    returns (dq, dk, dv, dbias), dbias float32 in the bias's 4-D shape (after the left unsqueeze and the
    broadcast of size-1 query / key dims), broadcast dims summed."""
    want_dbias = bool(kw.pop("dbias", False))
    xs = arrays_for(q, "q")
    same_kind(xs, [("dout", dout), ("k", k), ("v", v), ("out", out), ("lse", lse)])
    varlen = kw.get("cu_seqlens_q") is not None or kw.get("cu_seqlens_k") is not None
    if varlen:
        check_cu_seqlens(kw.get("cu_seqlens_q"), kw.get("cu_seqlens_k"))
    for name, x in (("q", q), ("k", k), ("v", v), ("out", out), ("dout", dout)):
        check_rank(x, name, varlen)
    dout, q, k, v, out = (xs.unit_last(x) for x in (dout, q, k, v, out))
    lse = xs.unit_last(lse)
    kw.update(_index_arrays(xs, kw))
    _resolve_block_mask(xs, kw)
    _resolve_bit_mask(xs, kw, k, varlen)
    _resolve_bias(xs, kw, q, k, varlen)
    _resolve_alibi(xs, kw)
    if want_dbias and kw.get("bias") is None:
        raise ValueError("dbias: asked for without a bias (pass bias=, the forward's bias)")
    opts = make_options(head_dim=q.shape[-1], **kw)
    dq, dk, dv = xs.empty(q, tuple(q.shape)), xs.empty(k, tuple(k.shape)), xs.empty(v, tuple(v.shape))
    if not want_dbias:
        _C.backward(dout, q, k, v, out, lse, dq, dk, dv, opts, xs.stream(q))
        return xs.wrap(dq), xs.wrap(dk), xs.wrap(dv)
    dbias = xs.empty(q, tuple(kw["bias"].shape), float32=True)
    _C.backward(dout, q, k, v, out, lse, dq, dk, dv, opts, xs.stream(q), dbias)
    return xs.wrap(dq), xs.wrap(dk), xs.wrap(dv), xs.wrap(dbias)
