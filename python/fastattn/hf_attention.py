"""fastattn as a Hugging Face transformers attention implementation.

    import fastattn.hf_attention
    fastattn.hf_attention.register()                      # once, as "fastattn"
    model.set_attn_implementation("fastattn")             # or attn_implementation="fastattn"

transformers hands its attention function (b, h, s, d) query / key / value (key and value with
the KV heads: GQA as is) and expects (b, s_q, h, d_v) back. Masks are FlashAttention's: causal is
bottom-right aligned, so a decode step (s_q 1) attends to every cached key. Registered with the
flash-attention mask function, so a padding mask reaches the call (and is refused, never dropped);
an unpadded batch passes None. Needs no transformers import except in register().
"""
from __future__ import annotations

from .interface import attention


def attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                      is_causal=None, softcap=None, sliding_window=None, **kwargs):
    """transformers' attention interface over fastattn: ((b, s_q, h, d_v) output, None).

    is_causal defaults to module.is_causal (True when the module has none). Not supported (each
    raises NotImplementedError): attention_mask (padded batches), dropout > 0, sliding_window."""
    if attention_mask is not None:
        raise NotImplementedError("attention_mask: fastattn's transformers attention takes no mask "
                                  "(padded batches are not supported; pass unpadded inputs)")
    if dropout:
        raise NotImplementedError(f"dropout={dropout}: fastattn has no attention dropout")
    if sliding_window is not None:
        raise NotImplementedError("sliding_window: not wired into fastattn's transformers attention")
    causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
    for name, x in (("query", query), ("key", key), ("value", value)):
        if len(x.shape) != 4:
            raise ValueError(f"{name}: expected 4 dimensions (batch, heads, seqlen, head_dim), "
                             f"got shape {tuple(x.shape)}")
    out, _ = attention(query, key, value, softmax_scale=scaling, causal=bool(causal),
                       softcap=float(softcap or 0.0), with_lse=False, heads_first=True)
    return out, None


def register(name="fastattn"):
    """Registers attention_forward with transformers' AttentionInterface (and the flash-attention
    mask function) under `name`."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask

    AttentionInterface.register(name, attention_forward)
    ALL_MASK_ATTENTION_FUNCTIONS.register(name, flash_attention_mask)
