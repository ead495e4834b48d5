"""block_mask= / block_size= of the front ends: a 4-D bool or uint8 array of kept blocks
(mask_batch, mask_heads, q_blocks, k_blocks), or a torch FlexAttention BlockMask whose kept blocks
need no mask_mod (docs/masks.md). Never imports torch itself.
"""
from __future__ import annotations

import operator

from ._arrays import torch_module
from ._ints import INT32_MAX, INT32_MIN

DEFAULT_BLOCK_SIZE = (128, 128)  # FlexAttention's default block


def block_size_pair(block_size):
    """(block_q, block_k) as two ints; one int means square blocks."""
    try:
        if isinstance(block_size, (tuple, list)):
            block_q, block_k = block_size
            pair = operator.index(block_q), operator.index(block_k)
        else:
            pair = (operator.index(block_size),) * 2
    except (TypeError, ValueError):
        raise ValueError(f"block_size: expected an int or a pair (block_q, block_k) of ints, got {block_size!r}") from None
    for n in pair:  # the extension's int32 (>= 1 is its own check, which names block_q / block_k)
        if not INT32_MIN <= n <= INT32_MAX:
            raise ValueError(f"block_size: {n} is outside int32 (a block size must be in [1, {INT32_MAX}])")
    return pair


def _flex_block_mask_type():
    """torch's FlexAttention BlockMask class, or None when torch (or FlexAttention) is absent."""
    torch = torch_module()
    if torch is None:
        return None
    try:
        from torch.nn.attention import flex_attention
    except ImportError:
        return None
    return getattr(flex_attention, "BlockMask", None)


def from_flex(block_mask):
    """(dense bool blocks, (block_q, block_k)) of a FlexAttention BlockMask; ValueError when a kept
    block needs its mask_mod (a partial block under a mask_mod other than the no-op): fastattn keeps
    or drops whole blocks and cannot evaluate a mask_mod per element."""
    from torch.nn.attention import flex_attention

    mask_mod = getattr(block_mask, "mask_mod", None)
    no_op = mask_mod is None or mask_mod is getattr(flex_attention, "noop_mask", None)
    partial = block_mask.kv_num_blocks
    if not no_op and partial is not None and bool((partial != 0).any()):
        name = getattr(mask_mod, "__name__", type(mask_mod).__name__)
        raise ValueError(
            f"block_mask: this FlexAttention BlockMask has partial blocks whose pairs its mask_mod ({name}) "
            "decides, and fastattn cannot evaluate a mask_mod: it keeps or drops whole blocks. Build the "
            "BlockMask so that every kept block is a full block (a mask_mod constant on each block, and sequence "
            "lengths that are multiples of BLOCK_SIZE: Flex marks the edge blocks of other lengths partial), or "
            "pass the kept blocks as a bool array with block_size")
    dense = block_mask.to_dense() != 0  # partial and full blocks, (B, H, q_blocks, kv_blocks)
    block_q, block_k = block_mask.BLOCK_SIZE
    return dense, (int(block_q), int(block_k))


def resolve(block_mask, block_size=DEFAULT_BLOCK_SIZE):
    """(array or None, (block_q, block_k)) for a front end's block_mask / block_size arguments."""
    if block_mask is None:
        return None, DEFAULT_BLOCK_SIZE
    torch = torch_module()
    if torch is not None and isinstance(block_mask, torch.Tensor):  # first: Dynamo traces this path
        return block_mask, block_size_pair(block_size)
    flex = _flex_block_mask_type()
    if flex is not None and isinstance(block_mask, flex):
        dense, size = from_flex(block_mask)
        if block_size != DEFAULT_BLOCK_SIZE and block_size_pair(block_size) != size:
            raise ValueError(f"block_size: {block_size!r} differs from the FlexAttention BlockMask's BLOCK_SIZE "
                             f"{size} (leave it out: the BlockMask's own is used)")
        return dense, size
    return block_mask, block_size_pair(block_size)
