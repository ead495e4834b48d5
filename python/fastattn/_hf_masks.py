"""transformers' 4-D attention_mask as the fastattn call that runs it (hf_attention.attention_forward).

A mask holds the whole rule (causal, padding, transformers' sliding window), as transformers' SDPA path
reads it. Two ways to turn it into a call:

- read_plan looks at the values (a device sync per check on CUDA) to take the cheapest exact path: no
  mask, fastattn's native causal or causal-window path (no bits), the element bitmask, or, for a float
  mask holding values other than 0 and the dtype's minimum, the additive bias;
- blind_plan never reads a value (safe under CUDA-graph capture and tracing): a bool mask always runs as
  bits, a float mask always as a bias. Correct by construction, slower when the mask was plain causal.

numpy masks with numpy inputs work the same way (no device, so read_plan always)."""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ._arrays import torch_module

FULL = (-1, -1)  # flash_attn_func's window_size for no window


class MaskPlan(NamedTuple):
    causal: bool
    window: tuple  # flash_attn_func's window_size (left, right), bottom-right aligned
    mask: Any  # a bool keep-mask (b, 1 or h, s_q, s_k) for the bitmask path, or None
    bias: Any  # an additive float bias (b, 1 or h, 1 or s_q, s_k), -inf where dropped, or None


def is_torch(x):
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def _lib(x):
    return torch_module() if is_torch(x) else np


def _kind(mask):
    """"bool" or "float" (transformers' additive form); any other dtype is refused by name."""
    lib = _lib(mask)
    if mask.dtype == (np.bool_ if lib is np else lib.bool):
        return "bool"
    floating = mask.is_floating_point() if lib is not np else np.issubdtype(mask.dtype, np.floating)
    if not floating:
        raise NotImplementedError(f"attention_mask: expected a bool or float mask, got dtype {mask.dtype}")
    return "float"


def _dropped(cut):
    """Where a float mask drops its pair: the dtype's minimum (transformers' fill value) or -inf."""
    return cut <= _lib(cut).finfo(cut.dtype).min


def _bias(cut):
    """A float mask as fastattn's additive bias: dropped entries become -inf, so they mask exactly (the
    dtype's minimum added to a score is finite, and a row of only such entries would average every value,
    as transformers' eager path does; fastattn gives such a row 0, as with bits)."""
    if is_torch(cut):  # a Python scalar: no host-to-device copy (CUDA-graph capture allows none)
        return torch_module().where(_dropped(cut), float("-inf"), cut)
    return np.where(_dropped(cut), np.asarray(float("-inf"), dtype=cut.dtype), cut)


def _rows_per_query(keep, s_q, s_k):
    """A query dim of 1 broadcast to s_q: the bits hold a row per query."""
    if keep.shape[2] == s_q:
        return keep
    full = (keep.shape[0], keep.shape[1], s_q, s_k)
    return keep.expand(*full) if is_torch(keep) else np.broadcast_to(keep, full)


def mask_tensors(attention_mask, s_q, s_k, as_bias):
    """(keep-mask, None) for the bitmask path or (None, bias) for the bias path, reading no value: the
    tensors a plan runs with, built again per call from the mask (hf_attention caches plans without
    them, so a cached plan holds no (b, s_q, s_k) copy of a mask after its forward)."""
    cut = attention_mask[:, :, :, :s_k]
    if as_bias:
        return None, _bias(cut)
    return _rows_per_query(cut if _kind(cut) == "bool" else cut == 0, s_q, s_k), None


def blind_plan(attention_mask, s_q, s_k):
    """The plan without reading a value: bits for a bool mask, a bias for a float one."""
    as_bias = _kind(attention_mask) == "float"
    return MaskPlan(False, FULL, *mask_tensors(attention_mask, s_q, s_k, as_bias))


def read_plan(attention_mask, s_q, s_k, sliding_window=None):
    """The cheapest exact plan, from the values: an all-kept mask runs with none; one equal in every
    batch entry to bottom-right causal runs the native causal path, or, with sliding_window, to
    transformers' causal window (key j kept for query i when 0 <= i + s_k - s_q - j < sliding_window) the
    native window (sliding_window - 1, 0); any other bool or 0 / minimum mask runs as bits; a float mask
    with other values (a real bias) runs as the bias."""
    cut = attention_mask[:, :, :, :s_k]
    if _kind(cut) == "float":
        keep = cut == 0
        if not bool((keep | _dropped(cut)).all()):
            return MaskPlan(False, FULL, *mask_tensors(attention_mask, s_q, s_k, True))
    else:
        keep = cut
    if bool(keep.all()):
        return MaskPlan(False, FULL, None, None)
    lib = _lib(keep)
    if lib is np:
        rows, cols = np.arange(s_q)[:, None], np.arange(s_k)[None, :]
    else:
        rows = lib.arange(s_q, device=keep.device)[:, None]
        cols = lib.arange(s_k, device=keep.device)[None, :]
    if s_q <= s_k:
        behind = rows + (s_k - s_q) - cols  # how far key j lies behind query i (bottom-right)
        if bool((keep == (behind >= 0)).all()):
            return MaskPlan(True, FULL, None, None)
        if sliding_window is not None and bool((keep == ((behind >= 0) & (behind < sliding_window))).all()):
            return MaskPlan(True, (sliding_window - 1, 0), None, None)
    return MaskPlan(False, FULL, _rows_per_query(keep, s_q, s_k), None)
