"""fastattn as a Hugging Face transformers attention implementation.

    import fastattn.hf_attention
    fastattn.hf_attention.register()                      # once, as "fastattn"
    model.set_attn_implementation("fastattn")             # or attn_implementation="fastattn"

transformers hands its attention function (b, h, s, d) query / key / value (key and value with
the KV heads: GQA as is) and expects (b, s_q, h, d_v) back. Without a mask, causal is FlashAttention's
bottom-right alignment, so a decode step (s_q 1) attends to every cached key. Registered with the SDPA
mask function: an unpadded batch passes None (transformers skips the mask exactly when s_q is 1 or
s_q == s_k, where both alignments agree), a padded one a 4-D (b, 1, s_q, s_k) mask that already holds the
causal rule; it runs as fastattn's element bitmask (docs/masks.md). Needs no transformers import except
in register().
"""
from __future__ import annotations

import weakref

import numpy as np

from ._arrays import torch_module
from .interface import attention

# The last mask seen and what it reduced to: transformers hands the same mask tensor to every layer of
# one forward, so the value checks (a device sync each) run once per forward, not once per layer.
_last = {"ref": None, "key": None, "plan": None}


def _is_torch(x):
    torch = torch_module()
    return torch is not None and isinstance(x, torch.Tensor)


def _keep_mask(mask):
    """transformers' 4-D mask as a bool keep-mask: bool as is (True = attend); a float (additive) mask
    only when every entry is 0 (keep) or the dtype's min / -inf (drop), as transformers builds them;
    any other value is a real bias, which this transformers path does not take yet (NotImplementedError;
    fastattn.flash_attn_func(bias=) does). torch or numpy."""
    lib = torch_module() if _is_torch(mask) else np
    if mask.dtype == (np.bool_ if lib is np else lib.bool):
        return mask
    floating = mask.is_floating_point() if lib is not np else np.issubdtype(mask.dtype, np.floating)
    if not floating:
        raise NotImplementedError(f"attention_mask: expected a bool or float mask, got dtype {mask.dtype}")
    keep = mask == 0
    drop = (mask == lib.finfo(mask.dtype).min) | (mask == float("-inf"))
    if not bool((keep | drop).all()):
        raise NotImplementedError("attention_mask: a float mask with values other than 0 and the dtype's minimum "
                                  "(-inf) is an additive bias, which fastattn's transformers attention does not take "
                                  "yet (flash_attn_func(bias=) does)")
    return keep


def _plan(attention_mask, s_q, s_k):
    """(causal, keep-mask or None) for transformers' 4-D mask cut to s_k keys: an all-kept mask runs
    without one, a mask equal to bottom-right causal in every batch entry runs fastattn's native causal
    path (no bits)."""
    keep = _keep_mask(attention_mask[:, :, :, :s_k])
    if bool(keep.all()):
        return False, None
    if _is_torch(keep):
        rows = torch_module().arange(s_q, device=keep.device)[:, None]
        cols = torch_module().arange(s_k, device=keep.device)[None, :]
    else:
        rows, cols = np.arange(s_q)[:, None], np.arange(s_k)[None, :]
    if s_q <= s_k and bool((keep == (cols <= rows + (s_k - s_q))).all()):
        return True, None
    if keep.shape[2] != s_q:  # a query dim of 1 (broadcast): the bits hold a row per query
        full = (keep.shape[0], keep.shape[1], s_q, s_k)
        keep = keep.expand(*full) if _is_torch(keep) else np.broadcast_to(keep, full)
    return False, keep


def _cached_plan(attention_mask, s_q, s_k):
    if not _is_torch(attention_mask):  # numpy: no device sync to save
        return _plan(attention_mask, s_q, s_k)
    try:  # inference-mode tensors have no version counter: no caching for them
        key = (attention_mask.data_ptr(), tuple(attention_mask.shape), tuple(attention_mask.stride()),
               attention_mask.dtype, attention_mask._version, s_q, s_k)
    except RuntimeError:
        return _plan(attention_mask, s_q, s_k)
    ref = _last["ref"]() if _last["ref"] is not None else None
    if ref is attention_mask and _last["key"] == key:
        return _last["plan"]
    plan = _plan(attention_mask, s_q, s_k)
    _last.update(ref=weakref.ref(attention_mask), key=key, plan=plan)
    return plan


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      is_causal=None, softcap=None, sliding_window=None, **kwargs):
    """transformers' attention interface over fastattn: ((b, s_q, h, d_v) output, None).

    is_causal defaults to module.is_causal (True when the module has none); it applies only without a
    mask (a mask holds the causal rule, as transformers' SDPA path reads it). attention_mask: None or a
    4-D (b or 1, 1 or h, s_q or 1, >= s_k) mask (torch; numpy with numpy inputs), bool (True = attend)
    or float with entries 0 / the dtype's minimum (transformers' additive form); keys past s_k are cut
    (as transformers' SDPA path). A row that keeps no key (a padded query) gets 0. Gradients flow
    through fastattn's autograd, whose backward applies the same bits. Not supported (each raises
    NotImplementedError): a float mask with other values (a bias), dropout > 0, sliding_window."""
    if dropout:
        raise NotImplementedError(f"dropout={dropout}: fastattn has no attention dropout")
    if sliding_window is not None:
        raise NotImplementedError("sliding_window: not wired into fastattn's transformers attention")
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    for name, x in (("query", query), ("key", key), ("value", value)):
        if len(x.shape) != 4:
            raise ValueError(f"{name}: expected 4 dimensions (batch, heads, seqlen, head_dim), "
                             f"got shape {tuple(x.shape)}")
    mask = None
    if attention_mask is not None:
        if not hasattr(attention_mask, "dtype") or not hasattr(attention_mask, "shape"):
            raise NotImplementedError(f"attention_mask: expected an array, got {type(attention_mask).__name__}")
        s_q, s_k = query.shape[2], key.shape[2]
        if len(attention_mask.shape) != 4 or attention_mask.shape[2] not in (1, s_q) or attention_mask.shape[3] < s_k:
            raise NotImplementedError(f"attention_mask: expected transformers' 4-D (batch, 1, {s_q}, >= {s_k}) "
                                      f"mask, got shape {tuple(attention_mask.shape)} (register() sets the SDPA "
                                      "mask function)")
        causal, mask = _cached_plan(attention_mask, s_q, s_k)
    out, _ = attention(query, key, value, softmax_scale=scaling, causal=bool(causal),
                       softcap=float(softcap or 0.0), with_lse=False, heads_first=True, mask=mask)
    return out, None


def register(name="fastattn"):
    """Registers attention_forward with transformers' AttentionInterface (and the SDPA mask function:
    None for unpadded batches, else a 4-D bool mask) under `name`."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(name, attention_forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask)
