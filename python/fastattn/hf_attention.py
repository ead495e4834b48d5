"""fastattn as a Hugging Face transformers attention implementation.

    import fastattn.hf_attention
    fastattn.hf_attention.register()                      # once, as "fastattn"
    model.set_attn_implementation("fastattn")             # or attn_implementation="fastattn"

transformers hands its attention function (b, h, s, d) query / key / value (key and value with the KV
heads: GQA as is) and expects (b, s_q, h, d_v) back. Registered with the SDPA mask function, so the
rules are those of transformers' SDPA path:

- no mask (an unpadded batch where transformers can skip it): causal is bottom-right, so a decode step
  (s_q 1) sees every cached key; with 1 < s_q < s_k (transformers skips the mask there only for a
  prefill into an empty static cache) the keys past s_q are cut first, as its SDPA path does;
  sliding_window applies as fastattn's local window (sliding_window - 1, 0): key j kept for query i
  when 0 <= i - j < sliding_window (transformers' masking_utils; its flash path's window is the same);
- a 4-D (b, 1, s_q, s_k) mask holds the whole rule (causal, padding, the window of sliding layers):
  a bool or 0 / dtype-minimum float mask runs as fastattn's element bitmask, or as its native causal /
  causal-window path when it equals one; a float mask with other values runs as fastattn's additive
  bias (the minimum and -inf masking) (docs/masks.md). Reading a mask's values costs a device sync, once
  per mask tensor; under CUDA-graph capture, torch.compile, or with read_mask_values = False, no value
  is read and a bool mask always runs as bits, a float one as a bias (exact, slower where the mask was
  plain causal).

Needs no transformers import except in register(); the mask rules live in _hf_masks.
"""
from __future__ import annotations

import weakref

from . import _hf_masks
from .interface import _is_compiling, attention
from .sdpa import _autocast, torch_deterministic

# Set False to never read a mask's values on the host: every new mask tensor then costs no device sync,
# and a bool mask always runs as bits, a float one as a bias (exact, slower where the mask was plain
# causal or all-kept). Under CUDA-graph capture and torch.compile the values are never read either way.
read_mask_values = True

# kwargs of transformers' attention interface that change the math and that fastattn does not take:
# refused by name rather than dropped silently
_UNSUPPORTED = ("position_bias", "s_aux")

# The last few masks seen and what they reduced to: transformers hands the same mask tensor to every layer
# of one forward (one per layer kind: Gemma-2 / 3 and Qwen2 alternate a sliding and a full one), so the
# value checks (a device sync each) run once per mask per forward, not once per layer.
# A cached plan keeps no tensor: its keep-mask or bias is built again per call from the mask (views, or
# one elementwise kernel for a float mask), so no (b, s_q, s_k) copy outlives the forward.
_CACHED_MASKS = 4
_recent = []  # (weak reference, key, plan without tensors, bits?, bias?), newest last


def _cached_plan(attention_mask, s_q, s_k, sliding_window):
    if not _hf_masks.is_torch(attention_mask):  # numpy: no device sync to save
        return _hf_masks.read_plan(attention_mask, s_q, s_k, sliding_window)
    try:  # inference-mode tensors have no version counter: no caching for them
        key = (attention_mask.data_ptr(), tuple(attention_mask.shape), tuple(attention_mask.stride()),
               attention_mask.dtype, attention_mask._version, s_q, s_k, sliding_window)
    except RuntimeError:
        return _hf_masks.read_plan(attention_mask, s_q, s_k, sliding_window)
    for ref, seen, light, needs_bits, needs_bias in _recent:
        if ref() is attention_mask and seen == key:
            if not (needs_bits or needs_bias):
                return light
            mask, bias = _hf_masks.mask_tensors(attention_mask, s_q, s_k, as_bias=needs_bias)
            return light._replace(mask=mask, bias=bias)
    plan = _hf_masks.read_plan(attention_mask, s_q, s_k, sliding_window)
    light = plan._replace(mask=None, bias=None)
    _recent.append((weakref.ref(attention_mask), key, light, plan.mask is not None, plan.bias is not None))
    del _recent[:-_CACHED_MASKS]
    return plan


def _may_read(mask):
    """Whether the mask's values may be read on the host: not for torch under CUDA-graph capture (a sync
    there breaks the capture) or tracing (the values are not known), nor when read_mask_values is off."""
    if not _hf_masks.is_torch(mask):
        return True
    if not read_mask_values:
        return False
    import torch

    if _is_compiling(torch):
        return False
    return not (mask.is_cuda and torch.cuda.is_current_stream_capturing())


def _window(sliding_window, causal):
    """transformers' sliding window as flash_attn_func's window_size. Causal: key j kept for query i
    when i - j < sliding_window (masking_utils' sliding_window_overlay, kv_idx > q_idx - sliding_window;
    its flash path passes (sliding_window - 1, sliding_window - 1) with causal: the same keys), so
    (sliding_window - 1, 0). Not causal: |i - j| <= sliding_window (masking_utils' bidirectional overlay).
    Bottom-right aligned, so a decode step keeps the last sliding_window keys."""
    if sliding_window is None:
        return _hf_masks.FULL
    if isinstance(sliding_window, bool) or int(sliding_window) != sliding_window or sliding_window < 1:
        raise ValueError(f"sliding_window: expected None or an int >= 1, got {sliding_window!r}")
    w = int(sliding_window)
    return (w - 1, 0) if causal else (w, w)


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      is_causal=None, softcap=None, sliding_window=None, **kwargs):
    """transformers' attention interface over fastattn: ((b, s_q, h, d_v) output, None).

    is_causal defaults to module.is_causal (True when the module has none); it applies only without a
    mask (a mask holds the causal rule, as transformers' SDPA path reads it). Without a mask, causal is
    bottom-right except where 1 < s_q < s_k: there keys past s_q are cut first (transformers' SDPA path:
    its mask function passes None then only for a prefill into an empty static cache, whose tail keys
    are unwritten). sliding_window (an int >= 1) applies without a mask (_window); a mask already holds
    it (transformers builds sliding layers' masks with it) and is taken as the whole rule.
    attention_mask: None or a 4-D (b or 1, 1 or h, s_q or 1, >= s_k) mask (torch; numpy with numpy
    inputs), bool (True = attend: bits) or float (additive: 0 / the dtype's minimum run as bits, other
    values as fastattn's bias, minimum / -inf entries masking); keys past s_k are cut (as transformers'
    SDPA path). A row that keeps no key (a padded query) gets 0. Gradients flow through fastattn's
    autograd. Under torch.autocast q, k, v are cast as PyTorch's SDPA casts them (sdpa._autocast). Refused by
    name (NotImplementedError): dropout > 0, position_bias, s_aux."""
    if dropout:
        raise NotImplementedError(f"dropout={dropout}: fastattn has no attention dropout")
    for name in _UNSUPPORTED:
        if kwargs.get(name) is not None:
            raise NotImplementedError(f"{name}: not supported by fastattn's transformers attention")
    causal = bool(getattr(module, "is_causal", True) if is_causal is None else is_causal)
    for name, x in (("query", query), ("key", key), ("value", value)):
        if len(x.shape) != 4:
            raise ValueError(f"{name}: expected 4 dimensions (batch, heads, seqlen, head_dim), "
                             f"got shape {tuple(x.shape)}")
    if _hf_masks.is_torch(query):
        # transformers' SDPA path leaves the cast to SDPA's autocast rule: under AMP with fp32 weights q and k
        # come fp32 (RoPE's fp32 cos / sin promote them) and v bf16, and SDPA casts all three
        query, key, value = _autocast(_hf_masks.torch_module(), (query, key, value))
    window = _window(sliding_window, causal)
    s_q, s_k = query.shape[2], key.shape[2]
    mask = bias = None
    if attention_mask is None:
        if causal and 1 < s_q < s_k:
            key, value = key[:, :, :s_q], value[:, :, :s_q]
    else:
        if not hasattr(attention_mask, "dtype") or not hasattr(attention_mask, "shape"):
            raise NotImplementedError(f"attention_mask: expected an array, got {type(attention_mask).__name__}")
        if len(attention_mask.shape) != 4 or attention_mask.shape[2] not in (1, s_q) or attention_mask.shape[3] < s_k:
            raise NotImplementedError(f"attention_mask: expected transformers' 4-D (batch, 1, {s_q}, >= {s_k}) "
                                      f"mask, got shape {tuple(attention_mask.shape)} (register() sets the SDPA "
                                      "mask function)")
        if _may_read(attention_mask):
            plan = _cached_plan(attention_mask, s_q, s_k, None if sliding_window is None else int(sliding_window))
        else:
            plan = _hf_masks.blind_plan(attention_mask, s_q, s_k)
        causal, window, mask, bias = plan
        if bias is not None and bias.dtype != query.dtype:  # the CUDA forward takes a bias of q's dtype
            bias = bias.to(query.dtype) if _hf_masks.is_torch(bias) else bias.astype(query.dtype)
    out, _ = attention(query, key, value, softmax_scale=scaling, causal=causal, window_size=window,
                       softcap=float(softcap or 0.0), with_lse=False, heads_first=True, mask=mask, bias=bias,
                       deterministic=torch_deterministic(query, bias))
    return out, None


def register(name="fastattn"):
    """Registers attention_forward with transformers' AttentionInterface (and the SDPA mask function:
    None for unpadded batches, else a 4-D bool mask) under `name`."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(name, attention_forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, sdpa_mask)
