"""A drop-in for torch.nn.functional.scaled_dot_product_attention: (batch, heads, seqlen, dim).

is_causal follows PyTorch, whose causal mask is TOP-LEFT aligned (query i keeps keys j <= i),
while fastattn's causal is bottom-right aligned. The two agree when s_q == s_k; for s_q > s_k the
top-left mask is mapped exactly onto fastattn's window (left unbounded, right = s_q - s_k); for
s_q < s_k it has no exact fastattn equivalent and raises NotImplementedError.
"""
from __future__ import annotations

import math

import warnings

import numpy as np

from ._arrays import arrays_for, torch_module
from .interface import attention


def _causal_window(s_q, s_k):
    """fastattn (causal, window_size) equal to PyTorch's top-left causal mask for (s_q, s_k)."""
    if s_q == s_k:
        return True, (-1, -1)
    if s_q > s_k:
        return False, (-1, s_q - s_k)
    raise NotImplementedError(
        f"is_causal=True with seqlen_q={s_q} < seqlen_k={s_k}: PyTorch's causal mask is top-left "
        "aligned, fastattn's is bottom-right aligned (as FlashAttention), and the top-left mask "
        "has no exact fastattn equivalent here; use fastattn.flash_attn_func(causal=True) for the "
        "bottom-right mask")


def _check_mask_shape(attn_mask, batch, heads_q, s_q, s_k):
    """PyTorch's broadcast rule for attn_mask (bool and float alike) against (b, h_q, s_q, s_k): missing
    leading dims are 1, and each dim is 1 or the target's. (fastattn's own mask= / bias= take more: mask
    heads dividing h_q, read as grouped (head i takes mask head i // (h_q / mask_heads)), and for bias= more
    rows / cols, as a padded mask; SDPA broadcasts neither, so neither passes here.)"""
    shape = tuple(attn_mask.shape)
    rows_cols = (1,) * (2 - len(shape)) + shape[-2:]
    if rows_cols[0] not in (1, s_q) or rows_cols[1] not in (1, s_k):
        raise ValueError(f"attn_mask: expected a shape broadcastable to (..., {s_q}, {s_k}) (seqlen_q, seqlen_k), "
                         f"got shape {shape}")
    lead = (1,) * (4 - len(shape)) + shape
    for dim, (name, n, target) in enumerate((("batch", lead[0], batch), ("heads", lead[1], heads_q))):
        if n not in (1, target):
            raise ValueError(f"attn_mask: dim {dim} ({name}, of the mask as 4-D) is {n} but must be 1 or {target}: "
                             f"attn_mask broadcasts against (batch, heads_q, seqlen_q, seqlen_k) = "
                             f"({batch}, {heads_q}, {s_q}, {s_k}) by PyTorch's rule (each dim 1 or equal); "
                             f"got shape {shape}")


def _autocast(torch, tensors):
    """PyTorch's autocast rule for SDPA, an op of autocast's lower-precision list: under torch.autocast for
    the device type of query, every floating tensor argument on that device type but float64 ones (q, k, v
    and a float attn_mask; fp16 under a bf16 autocast too) is cast to the autocast dtype (differentiable:
    the gradients reach the caller's tensors in their own dtype). Other tensors as they are."""
    device_type = tensors[0].device.type
    try:
        if not torch.is_autocast_enabled(device_type):
            return tensors
        dtype = torch.get_autocast_dtype(device_type)
    except RuntimeError:  # a device type autocast does not know (meta, ...): no autocast
        return tensors
    return tuple(x.to(dtype) if isinstance(x, torch.Tensor) and x.device.type == device_type and x.is_floating_point()
                 and x.dtype != torch.float64 and x.dtype != dtype else x for x in tensors)


def _mask_4d(attn_mask, s_q, s_k):
    """attn_mask (its shape checked: _check_mask_shape) as fastattn's (mask_batch, mask_heads, s_q, s_k)
    keep-mask: missing leading dims are 1 (mask_batch 1 and mask_heads 1 broadcast in fastattn itself); a
    query or key dim of 1 (PyTorch's broadcast, e.g. a (b, 1, 1, s_k) key-padding mask) is expanded here,
    since the bits hold a row per query and a bit per key."""
    shape = (1,) * (4 - len(attn_mask.shape)) + tuple(attn_mask.shape)
    mask = attn_mask.reshape(shape)
    if shape[2:] == (s_q, s_k):
        return mask
    full = shape[:2] + (s_q, s_k)
    return mask.expand(*full) if hasattr(mask, "expand") else np.broadcast_to(mask, full)


def torch_deterministic(x, bias=None):
    """PyTorch's torch.use_deterministic_algorithms switch for a torch tensor (fastattn's backward then
    accumulates in a fixed order, as SDPA's promise requires); False for other arrays (no autograd).
    The CUDA backward of an additive bias has no ordered mode yet: under warn_only=True it runs in the
    default mode after a warning (PyTorch's rule for an op without a deterministic kernel); with the
    switch fully on the backward refuses it by name."""
    torch = torch_module()
    if torch is None or not isinstance(x, torch.Tensor) or not torch.are_deterministic_algorithms_enabled():
        return False
    if bias is not None and x.is_cuda and torch.is_deterministic_algorithms_warn_only_enabled():
        if torch.is_grad_enabled():
            warnings.warn("fastattn: the CUDA backward of an additive bias (a float attn_mask) has no deterministic "
                          "mode yet; under torch.use_deterministic_algorithms(True, warn_only=True) it runs in the "
                          "default mode, whose gradient sums are not ordered", UserWarning, stacklevel=3)
        return False
    return True


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """softmax(query @ key^T * scale [+ causal mask]) @ value over (b, h, s, d) arrays.

    query (b, h_q, s_q, d), key (b, h_kv, s_k, d), value (b, h_kv, s_k, d_v); h_kv != h_q needs
    enable_gqa=True and h_q % h_kv == 0. Returns (b, h_q, s_q, d_v) (a transposed view of a
    (b, s_q, h_q, d_v) buffer, as PyTorch's flash backend does). Differentiable for torch tensors.
    attn_mask: None or a bool mask broadcastable to (b, h_q, s_q, s_k), True = take part (PyTorch's
    boolean convention), run as fastattn's element bitmask (docs/masks.md); not with is_causal (as
    PyTorch); torch calls with it are differentiable (the backward applies the same bits). A float
    (fp32 / bf16 / fp16) attn_mask is PyTorch's additive mask: run as fastattn's additive bias
    (docs/masks.md, Additive bias; -inf entries mask), differentiable in q, k, v and in the mask when it
    requires grad.
    attn_mask's shape follows PyTorch's broadcast rule against (b, h_q, s_q, s_k): each dim equal or 1
    (ValueError otherwise, naming attn_mask). Under torch.autocast (the inputs' device type) q, k, v and a
    float attn_mask are cast to the autocast dtype first, as PyTorch's SDPA does (float64 ones excepted).
    Not supported: dropout_p > 0 (NotImplementedError).
    """
    is_bias = False
    if attn_mask is not None:
        dtype = str(getattr(attn_mask, "dtype", type(attn_mask).__name__))
        is_bias = dtype not in ("bool", "torch.bool")
        if is_causal:
            raise ValueError("attn_mask: not with is_causal=True (as PyTorch): AND the causal mask into attn_mask")
        if len(attn_mask.shape) > 4:
            raise ValueError(f"attn_mask: expected at most 4 dimensions, got shape {tuple(attn_mask.shape)}")
    if not 0.0 <= float(dropout_p) <= 1.0:
        raise ValueError(f"dropout_p: expected a probability in [0, 1], got {dropout_p}")
    if dropout_p != 0.0:
        raise NotImplementedError(f"dropout_p={dropout_p}: fastattn has no attention dropout; "
                                  "pass dropout_p=0.0")
    if scale is not None and not math.isfinite(float(scale)):
        raise ValueError(f"scale: expected a finite number, got {scale!r}")
    for name, x in (("query", query), ("key", key), ("value", value)):
        if len(x.shape) != 4:
            raise ValueError(f"{name}: expected 4 dimensions (batch, heads, seqlen, head_dim), "
                             f"got shape {tuple(x.shape)}")
    h_q, h_kv = query.shape[1], key.shape[1]
    if h_q != h_kv and not enable_gqa:
        raise ValueError(f"enable_gqa: query has {h_q} heads and key {h_kv}; "
                         "pass enable_gqa=True for grouped-query attention")
    if attn_mask is not None:
        _check_mask_shape(attn_mask, query.shape[0], h_q, query.shape[2], key.shape[2])
    torch = torch_module()
    if torch is not None and isinstance(query, torch.Tensor):
        query, key, value, attn_mask = _autocast(torch, (query, key, value, attn_mask))
    if attn_mask is not None and is_bias:  # additive: fastattn's bias (broadcast like SDPA's, _bias.bias_4d)
        if len(attn_mask.shape) < 2:  # (s_k,) or a scalar broadcasts as SDPA's does (and as a bool mask here)
            attn_mask = attn_mask.reshape((1,) * (2 - len(attn_mask.shape)) + tuple(attn_mask.shape))
        out, _ = attention(query, key, value, softmax_scale=scale, with_lse=False, heads_first=True, bias=attn_mask,
                           deterministic=torch_deterministic(query, attn_mask))
        return arrays_for(query, "query").swap12(out)
    if attn_mask is not None:  # broadcastable to (b, h_q, s_q, s_k): fastattn's 4-D mask
        out, _ = attention(query, key, value, softmax_scale=scale, with_lse=False, heads_first=True,
                           mask=_mask_4d(attn_mask, query.shape[2], key.shape[2]), deterministic=torch_deterministic(query))
        return arrays_for(query, "query").swap12(out)
    causal, window = _causal_window(query.shape[2], key.shape[2]) if is_causal else (False, (-1, -1))
    if torch is not None and isinstance(query, torch.Tensor):
        out, _ = attention(query, key, value, softmax_scale=scale, causal=causal, window_size=window,
                           deterministic=torch.are_deterministic_algorithms_enabled(), with_lse=False,
                           heads_first=True)
        return out.transpose(1, 2)
    xs = arrays_for(query, "query")
    out, _ = attention(query, key, value, softmax_scale=scale, causal=causal, window_size=window,
                       with_lse=False, heads_first=True)
    return xs.swap12(out)
