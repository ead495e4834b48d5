#!/usr/bin/env python3
"""FlexAttention's time on the element masks of fastattn_bitmask_bench (tests/gpu/bitmask_bench.cpp).

bf16, b 4, s 8192, h 32, d 128. Draws the masks, writes each packed as fastattn's bitmask words to
DIR/<name>.u32 (uint32 (mask_batch, 1, 8192, 256), C order: bit j % 32 of word j / 32 of row i =
keep(i, j)) for the C++ bench to time fastattn on the same bits, then times torch.compile(flex_attention)
with a BlockMask from create_block_mask of the same mask_mod (its block classification is not timed;
fastattn's prep kernels are part of its timed call). Prints a markdown table (median of 20 calls).
    python3 bench/bitmask_flex.py DIR [--masks-only]
--masks-only writes the mask files and stops (no torch needed): the device recipe times fastattn on
them first, then FlexAttention in the time left.
Masks: docs (8 documents of random lengths per batch entry, bidirectional), docs_causal (the same,
causal), rand50 (every pair kept with probability 1/2, one mask for all), causal (causal as a mask).
"""
import sys

import numpy as np

from cuda_timing import median_ms  # bench/cuda_timing.py (the script's folder)

B, S, H, D, DOCS = 4, 8192, 32, 128, 8


def pack_rows(keep):
    """bool (..., S) -> uint32 (..., S / 32), bit j % 32 of word j / 32 = keep[..., j]."""
    return np.packbits(keep, axis=-1, bitorder="little").view("<u4")


def draw():
    rng = np.random.default_rng(1234)
    doc_ids = np.zeros((B, S), dtype=np.int32)
    for b in range(B):
        cuts = np.sort(rng.choice(np.arange(1, S), DOCS - 1, replace=False))
        doc_ids[b] = np.searchsorted(cuts, np.arange(S), side="right")
    rand = rng.random((S, S), dtype=np.float32) < 0.5
    return doc_ids, rand


def write_masks(out_dir, doc_ids, rand):
    i = np.arange(S)
    causal = i[None, :] <= i[:, None]
    docs = np.stack([pack_rows(doc_ids[b][:, None] == doc_ids[b][None, :]) for b in range(B)])[:, None]
    docs_causal = np.stack([pack_rows((doc_ids[b][:, None] == doc_ids[b][None, :]) & causal) for b in range(B)])[:, None]
    docs.tofile(f"{out_dir}/docs.u32")
    docs_causal.tofile(f"{out_dir}/docs_causal.u32")
    pack_rows(rand)[None, None].tofile(f"{out_dir}/rand50.u32")
    pack_rows(causal)[None, None].tofile(f"{out_dir}/causal.u32")
    kept = {"docs": float(np.mean([(doc_ids[b][:, None] == doc_ids[b][None, :]).mean() for b in range(B)])),
            "rand50": float(rand.mean()), "causal": float(causal.mean())}
    kept["docs_causal"] = float(np.mean([((doc_ids[b][:, None] == doc_ids[b][None, :]) & causal).mean()
                                         for b in range(B)]))
    return kept


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    doc_ids, rand = draw()
    kept = write_masks(out_dir, doc_ids, rand)
    if "--masks-only" in sys.argv[2:]:
        print(f"masks written to {out_dir}: " + ", ".join(f"{k} kept {v:.3f}" for k, v in kept.items()))
        return
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    docs_t = torch.from_numpy(doc_ids).cuda()
    rand_t = torch.from_numpy(rand).cuda()

    def docs_mod(b, h, q, kv):
        return docs_t[b, q] == docs_t[b, kv]

    def docs_causal_mod(b, h, q, kv):
        return (docs_t[b, q] == docs_t[b, kv]) & (q >= kv)

    def rand_mod(b, h, q, kv):
        return rand_t[q, kv]

    def causal_mod(b, h, q, kv):
        return q >= kv

    torch.manual_seed(1)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flex = torch.compile(flex_attention, dynamic=False)
    print(f"FlexAttention (torch {torch.__version__}), bf16 b{B} s{S} h{H} d{D}, BLOCK_SIZE 128; median of 20 calls\n")
    print("| mask | kept share | ms | note |\n|---|---|---|---|")
    dense = median_ms(torch, lambda: flex(q, k, v))
    print(f"| none | 1 | {dense:.3f} | |", flush=True)
    for name, mod, mb in (("docs", docs_mod, B), ("docs_causal", docs_causal_mod, B), ("rand50", rand_mod, None),
                          ("causal", causal_mod, None)):
        try:
            bm = create_block_mask(mod, mb, None, S, S, device="cuda")
            t = median_ms(torch, lambda: flex(q, k, v, block_mask=bm))
            print(f"| {name} | {kept[name]:.3f} | {t:.3f} | |", flush=True)
        except Exception as e:  # noqa: BLE001 - one row's failure, the others still run
            print(f"| {name} | {kept[name]:.3f} | - | {type(e).__name__}: {str(e)[:120]} |", flush=True)


if __name__ == "__main__":
    main()
