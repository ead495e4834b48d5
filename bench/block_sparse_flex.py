#!/usr/bin/env python3
"""FlexAttention's time on the block masks of fastattn_block_sparse_bench (tests/gpu/block_sparse_bench.cpp).

bf16, b 4, s 8192, h 32, d 128, blocks 128 x 128, a random mask per (batch, head) for each density;
causal off and on. Writes each mask to DIR/mask_<density>.u8 (uint8 (4, 32, 64, 64), C order) for
the C++ bench to time fastattn on the same blocks, then times torch.compile(flex_attention) with a
BlockMask built from the block tensor (no mask_mod evaluation over 8k x 8k: the kept blocks are
Flex's full blocks, and with causal the kept diagonal blocks are its partial ones under a causal
mask_mod). Prints a markdown table (median of 20 calls, CUDA events).
    python3 bench/block_sparse_flex.py DIR
"""
import sys

from cuda_timing import median_ms  # bench/cuda_timing.py (the script's folder)

B, S, H, D, BLK = 4, 8192, 32, 128, 128
NB = S // BLK
DENSITIES = [("1", 1.0), ("0.5", 0.5), ("0.25", 0.25), ("0.1", 0.1), ("0", 0.0)]


def draw_masks(torch, out_dir):
    masks = {}
    for name, density in DENSITIES:
        g = torch.Generator().manual_seed(1234 + int(density * 1000))
        m = (torch.rand(B, H, NB, NB, generator=g) < density) if density < 1.0 else torch.ones(B, H, NB, NB, dtype=torch.bool)
        m.to(torch.uint8).numpy().tofile(f"{out_dir}/mask_{name}.u8")
        masks[name] = m
    return masks


def ordered(torch, blocks):
    """Flex's (count, indices) of a bool block tensor: the kept blocks of each row first, ascending."""
    counts = blocks.sum(-1).to(torch.int32)
    idx = torch.argsort((~blocks).to(torch.int8), dim=-1, stable=True).to(torch.int32)
    return counts, idx


def block_mask(torch, m, causal):
    from torch.nn.attention.flex_attention import BlockMask
    m = m.cuda()
    if not causal:
        full_n, full_i = ordered(torch, m)
        part_n, part_i = torch.zeros_like(full_n), torch.zeros_like(full_i)
        mask_mod = None
    else:
        q = torch.arange(NB, device="cuda")
        diag = q[:, None] == q[None, :]
        below = q[:, None] > q[None, :]
        part_n, part_i = ordered(torch, m & diag)
        full_n, full_i = ordered(torch, m & below)

        def mask_mod(b, h, qi, kv):
            return qi >= kv
    return BlockMask.from_kv_blocks(part_n, part_i, full_n, full_i, BLOCK_SIZE=BLK, mask_mod=mask_mod)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    import torch
    masks = draw_masks(torch, out_dir)
    from torch.nn.attention.flex_attention import flex_attention
    torch.manual_seed(1)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flex = torch.compile(flex_attention, dynamic=False)
    print(f"FlexAttention (torch {torch.__version__}), bf16 b{B} s{S} h{H} d{D}, blocks {BLK} x {BLK}; median of 20 calls\n")
    print("| causal | mask | ms | / its dense | note |\n|---|---|---|---|---|")
    for causal in (False, True):
        dense_bm = block_mask(torch, torch.ones(B, H, NB, NB, dtype=torch.bool), causal)
        dense = median_ms(torch, lambda: flex(q, k, v, block_mask=dense_bm))
        print(f"| {'yes' if causal else 'no'} | none (all-ones BlockMask) | {dense:.3f} | 1 | |", flush=True)
        for name, _ in DENSITIES:
            try:
                bm = block_mask(torch, masks[name], causal)
                t = median_ms(torch, lambda: flex(q, k, v, block_mask=bm))
                print(f"| {'yes' if causal else 'no'} | {name} | {t:.3f} | {t / dense:.3f} | |", flush=True)
            except Exception as e:  # noqa: BLE001 - one row's failure, the others still run
                print(f"| {'yes' if causal else 'no'} | {name} | - | - | {type(e).__name__}: {str(e)[:120]} |", flush=True)


if __name__ == "__main__":
    main()
