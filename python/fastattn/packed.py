"""FlashAttention's packed-input entry points as thin views over flash_attn_func: qkv (b, s, 3, h, d)
and kv (b, s_k, 2, h_kv, d) are indexed along the packing dim (a view for numpy and torch, so torch
gradients reach the packed tensor), then run as flash_attn_func. Only q, qkv and kv are positional:
FA2 puts dropout_p second and FA3 softmax_scale, so any other positional binding would be wrong for
one of them."""
from __future__ import annotations

from .interface import flash_attn_func


def _unpack(x, name, parts, rank):
    shape = getattr(x, "shape", None)
    if shape is None:
        raise TypeError(f"{name}: expected an array, got {type(x).__name__}")
    if len(shape) != rank or shape[2] != parts:
        want = "(b, s, 3, h, d)" if parts == 3 else "(b, s_k, 2, h_kv, d)"
        raise ValueError(f"{name}: expected shape {want}, got {tuple(shape)}")
    return tuple(x[:, :, i] for i in range(parts))


def flash_attn_qkvpacked_func(qkv, *, softmax_scale=None, causal=False, num_heads_q=None, **options):
    """FA2/FA3 flash_attn_qkvpacked_func: qkv (b, s, 3, h, d); other keywords as flash_attn_func.
    FA3's num_heads_q form (b, s, h_q + 2 * h_kv, d) is refused (NotImplementedError)."""
    if num_heads_q is not None:
        raise NotImplementedError("num_heads_q: FA3's (b, s, h_q + 2 * h_kv, d) packing is not supported; "
                                  "pass qkv as (b, s, 3, h, d) or call flash_attn_func with q, k, v")
    q, k, v = _unpack(qkv, "qkv", 3, 5)
    return flash_attn_func(q, k, v, softmax_scale=softmax_scale, causal=causal, **options)


def flash_attn_kvpacked_func(q, kv, *, softmax_scale=None, causal=False, **options):
    """FA2 flash_attn_kvpacked_func: q (b, s_q, h, d), kv (b, s_k, 2, h_kv, d); other keywords as
    flash_attn_func."""
    k, v = _unpack(kv, "kv", 2, 5)
    return flash_attn_func(q, k, v, softmax_scale=softmax_scale, causal=causal, **options)
