"""flash_attn_with_kvcache: attention against a KV cache, FlashAttention's signature and semantics.

The cache is updated in place when new keys/values are given; see fastattn/kvcache.h (C++) for
the exact rules (positions, rotary, paged layout, left padding).
"""
from __future__ import annotations

import numpy as np

from . import _C, _core, _fa_compat
from ._arrays import arrays_for, same_kind, torch_module
from ._ints import int_arg
from .interface import _torch_views


def _as_index(xs, x, batch, q, name):
    """cache_seqlens & co as a 1-D int32 array on q's device: an int (or numpy integer scalar) in
    [0, 2^31 - 1] fills one of `batch`; else an array of q's kind (its dtype and shape checked by the
    extension). Anything else (a list, a float) is refused by name, as the torch path does."""
    if x is None:
        return None
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name}: expected an int or an int32 array, got bool")
    if isinstance(x, (int, np.integer)):
        return np.full((batch,), int_arg(x, name, 0), dtype=np.int32)
    if not isinstance(x, np.ndarray) and not hasattr(x, "__dlpack__"):
        raise ValueError(f"{name}: expected an int or an int32 array, got {type(x).__name__}")
    same_kind(xs, [(name, x)])
    return xs.unit_last(x)


def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None,
                            block_table=None, softmax_scale=None, causal=False, window_size=(-1, -1),
                            softcap=0.0, rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                            return_softmax_lse=False, *, page_table=None, pack_gqa=None, sm_margin=0,
                            q_descale=None, k_descale=None, v_descale=None, qv=None, cu_seqlens_q=None,
                            cu_seqlens_k_new=None, max_seqlen_q=None, rotary_seqlens=None,
                            scheduler_metadata=None):
    """Attention of q against a KV cache, appending k/v into it first (FlashAttention's API).

    q: (b, s_q, h, d). k_cache/v_cache: (b_cache, s_cache, h_kv, d|d_v), or with block_table
    (alias page_table, (b, max_pages) int32) paged: (num_pages, page_size, h_kv, d|d_v), page_size a
    multiple of 16. k/v: optional (b, s_new, h_kv, d|d_v), written into the cache at cache_seqlens
    (in place; cache_seqlens is then required). cache_seqlens: int or (b,) int32, the tokens already
    cached. rotary_cos/rotary_sin: (s_ro, rotary_dim / 2), applied to k at positions cache_seqlens + i
    and to q (at cache_seqlens + i when causal or local, else at cache_seqlens); rotary_interleaved
    pairs dims (0, 1), (2, 3)... else (i, i + rotary_dim / 2). cache_batch_idx: (b,) int32 cache
    rows. cache_leftpad: (b,) int32 first valid cache position. Masks are bottom-right aligned on
    the keys [cache_leftpad, cache_seqlens + s_new). num_splits: 0 = heuristic.
    Returns out (b, s_q, h, d_v), or (out, softmax_lse (b, h, s_q) float32) with
    return_softmax_lse=True. On CUDA the index arrays are not copied to the host (no sync; CUDA
    graphs); the caller vouches for them.
    alibi_slopes: None, or FlashAttention's ALiBi slopes, float32 (h,) or (b, h) of q's kind: adds
    -slope[b, h] * |i + s_k - s_q - j| to the score after softcap, s_k the sequence's keys after the
    append counted from cache_leftpad (cache_seqlens + s_new - cache_leftpad) and j counted from
    cache_leftpad (FlashAttention's rule). The CPU backend takes every case; CUDA sm90 runs it unsplit
    (num_splits > 1 with it raises NotImplementedError, "num_splits: ..."); sm80 refuses it by name.
    FA3 keywords: pack_gqa, sm_margin are hints, checked and unused; q/k/v_descale (fp8), qv and
    FA3's varlen-query / rotary_seqlens / scheduler_metadata forms raise NotImplementedError.
    """
    _core.check_alibi_dtype(alibi_slopes)
    _fa_compat.check(num_splits=num_splits, pack_gqa=pack_gqa, sm_margin=sm_margin, q_descale=q_descale,
                     k_descale=k_descale, v_descale=v_descale, qv=qv)
    for name, x in (("cu_seqlens_q", cu_seqlens_q), ("cu_seqlens_k_new", cu_seqlens_k_new),
                    ("max_seqlen_q", max_seqlen_q), ("rotary_seqlens", rotary_seqlens),
                    ("scheduler_metadata", scheduler_metadata)):
        if x is not None:
            raise NotImplementedError(f"{name}: FA3's form of flash_attn_with_kvcache is not supported; "
                                      "q is (b, s_q, h, d) with one s_q for every batch row")
    if block_table is not None and page_table is not None:
        raise ValueError("block_table and page_table: pass one (they are the same argument)")
    pages = block_table if block_table is not None else page_table
    torch = torch_module()
    if torch is not None and isinstance(q, torch.Tensor):
        if q.dim() != 4:
            _core.check_rank(q, "q", varlen=False)
        left, right = _core.window_pair(window_size)
        scale = _core.resolve_scale(softmax_scale, q.shape[-1])
        out, lse = _torch_views().forward_kvcache(
            q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx,
            cache_leftpad, pages, bool(rotary_interleaved), scale, bool(causal), left, right,
            float(softcap), int(num_splits), bool(return_softmax_lse), alibi_slopes)
        return (out, lse) if return_softmax_lse else out
    xs = arrays_for(q, "q")
    same_kind(xs, [("k_cache", k_cache), ("v_cache", v_cache), ("k", k), ("v", v),
                   ("rotary_cos", rotary_cos), ("rotary_sin", rotary_sin), ("block_table", pages),
                   ("alibi_slopes", alibi_slopes)])
    for name, x in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        _core.check_rank(x, name, varlen=False)
    for name, x in (("k_cache", k_cache), ("v_cache", v_cache)):  # the binding takes them as writable arrays
        if isinstance(x, np.ndarray) and not x.flags.writeable:
            raise ValueError(f"{name}: a read-only array (np.broadcast_to, a read-only view) cannot hold the cache, "
                             "which is written in place; pass a writable array")
    batch = q.shape[0]
    q = xs.unit_last(q)
    k = None if k is None else xs.unit_last(k)
    v = None if v is None else xs.unit_last(v)
    rotary_cos = None if rotary_cos is None else xs.unit_last(rotary_cos)
    rotary_sin = None if rotary_sin is None else xs.unit_last(rotary_sin)
    alibi_slopes = None if alibi_slopes is None else xs.unit_last(alibi_slopes)
    left, right = _core.window_pair(window_size)
    scale = _core.resolve_scale(softmax_scale, q.shape[-1])
    out = xs.empty(q, tuple(q.shape[:-1]) + (v_cache.shape[-1],))
    lse = xs.empty(q, (q.shape[0], q.shape[2], q.shape[1]), float32=True)
    # Index arrays are checked (on CuPy one copy to the host); torch's CUDA path above skips that.
    _C.forward_kvcache(
        q, k_cache, v_cache, k, v, out, lse, rotary_cos, rotary_sin,
        _as_index(xs, cache_seqlens, batch, q, "cache_seqlens"),
        _as_index(xs, cache_batch_idx, batch, q, "cache_batch_idx"),
        _as_index(xs, cache_leftpad, batch, q, "cache_leftpad"),
        None if pages is None else _contiguous(xs, pages),
        bool(rotary_interleaved), scale, bool(causal), left, right, float(softcap), int(num_splits),
        True, 0, 0, xs.stream(q), alibi_slopes)
    out, lse = xs.wrap(out), xs.wrap(lse)
    return (out, lse) if return_softmax_lse else out


def _contiguous(xs, x):
    if xs.name == "cupy":
        return xs.cupy.ascontiguousarray(x)
    return np.ascontiguousarray(x)
