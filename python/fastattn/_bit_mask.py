"""mask= of fastattn.forward / fastattn.backward: a boolean keep-mask of every (query, key) pair (SDPA's
boolean attn_mask, True = attend), packed into fastattn's element-bitmask words (docs/masks.md,
"Element bitmasks"): bit j % 32 of word j / 32 of row i = mask[..., i, j].

Shapes: (s_q, s_k), (mask_heads, s_q, s_k) or (mask_batch, mask_heads, s_q, s_k); missing leading dims
and dims of size 1 broadcast (mask_batch 1 or batch, mask_heads dividing heads_q). numpy masks are
packed on the host (np.packbits), torch masks on their own device (no host copy)."""
from __future__ import annotations

import numpy as np

from ._arrays import torch_module


def _as_4d(shape, name):
    if len(shape) < 2 or len(shape) > 4:
        raise ValueError(f"{name}: expected 2 to 4 dimensions ([mask_batch, [mask_heads,]] seqlen_q, seqlen_k), "
                         f"got shape {tuple(shape)}")
    return (1,) * (4 - len(shape)) + tuple(shape)


def _pack_numpy(mask, name):
    if mask.dtype != np.bool_:
        raise ValueError(f"{name}: expected dtype bool (True = keep the pair), got {mask.dtype}")
    m = mask.reshape(_as_4d(mask.shape, name))
    if m.shape[2] == 0:  # no query rows (an empty call): one dropped row, as the words need dims >= 1
        m = np.zeros(m.shape[:2] + (1, m.shape[3]), np.bool_)
    packed = np.packbits(m, axis=-1, bitorder="little")  # (..., ceil(s_k / 8)) bytes
    pad = (-packed.shape[-1]) % 4 if packed.shape[-1] else 4  # no keys: one word of dropped bits
    if pad:
        packed = np.concatenate([packed, np.zeros(packed.shape[:-1] + (pad,), np.uint8)], axis=-1)
    return np.ascontiguousarray(packed).view("<u4")


def _pack_torch(torch, mask, name):
    if mask.dtype != torch.bool:
        raise ValueError(f"{name}: expected dtype torch.bool (True = keep the pair), got {mask.dtype}")
    m = mask.reshape(_as_4d(tuple(mask.shape), name))
    if m.shape[2] == 0:  # no query rows (an empty call): one dropped row, as the words need dims >= 1
        m = torch.zeros(*m.shape[:2], 1, m.shape[3], dtype=torch.bool, device=m.device)
    pad = (-m.shape[-1]) % 32 if m.shape[-1] else 32  # no keys: one word of dropped bits
    if pad:
        m = torch.nn.functional.pad(m, (0, pad))
    bits = m.reshape(*m.shape[:-1], -1, 32).to(torch.int64)
    weights = torch.ones(32, dtype=torch.int64, device=m.device) << torch.arange(32, dtype=torch.int64, device=m.device)
    words = (bits * weights).sum(-1)  # < 2^32: the word as an unsigned value
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32).contiguous()


def _check_keys(shape, name, seqlen_k):
    """The words are rounded up to 32 keys, so the C++ check of their count cannot see a mask a few
    keys short (40 columns for 50 keys: both 2 words); its missing keys would read as dropped."""
    if seqlen_k is not None and seqlen_k > 0 and len(shape) >= 1 and shape[-1] < seqlen_k:
        raise ValueError(f"{name}: its last dim (keys) is {shape[-1]} but seqlen_k is {seqlen_k}: the mask needs a "
                         f"column for every key, got shape {tuple(shape)}")


def pack(mask, name="mask", seqlen_k=None):
    """The packed words (uint32, or int32 for torch) of a bool keep-mask, as an array of its kind;
    None for None. seqlen_k (the longest, when known): the mask's last dim must cover it."""
    if mask is None:
        return None
    shape = tuple(getattr(mask, "shape", ()))
    _check_keys(shape, name, seqlen_k)
    if 2 <= len(shape) <= 4 and 0 in _as_4d(shape, name)[:2]:  # its packed words would have no data address
        raise ValueError(f"{name}: shape {shape} has a mask_batch or mask_heads dim of 0 (they must be 1 or batch, "
                         "and divide heads_q)")
    if isinstance(mask, np.ndarray):
        return _pack_numpy(mask, name)
    torch = torch_module()
    if torch is not None and isinstance(mask, torch.Tensor):
        return _pack_torch(torch, mask, name)
    raise TypeError(f"{name}: expected a numpy or torch bool array, got {type(mask).__name__}")
