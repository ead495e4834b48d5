#!/usr/bin/env python3
"""MLA-style decode on the split-D forward: q (b, 1, 128, 576), k (b, s_k, 1, 576), v (b, s_k, 1, 512),
bf16, no mask; fastattn at its heuristic's split count (num_splits 0) and unsplit (num_splits 1),
beside the HBM floor, GPU time only (docs/notes/splitd-sm90.md, "Split-KV decode").

Method (bench/decode.py's): a CUDA graph of --calls calls rotating over K/V copies (>= --rotate-mib in
all, at most 8 copies: each call reads its K/V from HBM, not from the L2 the previous one filled),
replayed --replays times per round, median over 3 rounds (bench/stream_floor.py's per_call_us). HBM floor = K/V
bytes / copy bandwidth measured in the same run (bench/stream_floor.py). K and V are separate
tensors here (K 576 + V 512 columns a key); an MLA kernel that reads V out of K's latent (FlashMLA)
moves 576 only: the "latent floor" column. Peer: SDPA's efficient backend on K/V expanded to 128
heads (stride-0 views; graphs of 2 calls, b 1 only; '-' where it refuses).

With --base-lib OTHER.so the same calls of both libraries are timed in turn (stream_floor.paired_us: the
order rotated each round), and the table gives each side's time and the median per-round ratio lib / base:
two separate runs of this script differ by ~4 % on a shared H200 (docs/notes/splitd-sm90.md, session 46).

usage: python3 bench/mla_decode.py --lib build/src/libfastattn.so [--base-lib base.so] [--out mla.md]
"""
import argparse
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))
H, DQK, DV = 128, 576, 512


def load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default="")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--sk", default="4096,16384")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--replays", type=int, default=10)
    ap.add_argument("--rotate-mib", type=int, default=200)
    ap.add_argument("--base-lib", default="", help="a second libfastattn.so timed in turn with --lib (paired A/B)")
    args = ap.parse_args()
    if args.base_lib:
        return paired(args)

    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    rp = load("run_peers", "run-peers.py")
    fa = rp.FastAttn(args.lib)
    dev = torch.device("cuda")
    floor = load("stream_floor", "stream_floor.py")
    copy_bw = floor.copy_bandwidth()

    def graph_us(fn):
        """stream_floor's graph timing (median over rounds of replays, per call). fn(i): call i, made
        inside the capture so that it runs on the capture stream (forward_fn takes the current one)."""
        return floor.per_call_us(fn, calls=args.calls, replays=args.replays, rounds=3)

    rows = []
    for b in (int(x) for x in args.batches.split(",")):
        for sk in (int(x) for x in args.sk.split(",")):
            kv_bytes = b * sk * (DQK + DV) * 2
            copies = max(1, min(8, -(-(args.rotate_mib << 20) // kv_bytes)))
            torch.manual_seed(0)
            qs = [torch.randn(b, 1, H, DQK, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
            ks = [torch.randn(b, sk, 1, DQK, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
            vs = [torch.randn(b, sk, 1, DV, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
            r = {"b": b, "sk": sk, "floor": kv_bytes / copy_bw * 1e6,
                 "latent": b * sk * DQK * 2 / copy_bw * 1e6}
            for name, splits in (("heur", 0), ("ns1", 1)):
                r[name] = graph_us(lambda i, n=splits: fa.forward_fn(torch, qs[i % copies], ks[i % copies],
                                                                     vs[i % copies], False, (-1, -1), n)())
            # check the heuristic's output against SDPA-math in fp32 on copy 0 (8 heads are enough)
            out = fa.forward_fn(torch, qs[0], ks[0], vs[0], False, (-1, -1), 0)()
            torch.cuda.synchronize()
            qt = qs[0][:, :, :8].transpose(1, 2).float()
            kt = ks[0].transpose(1, 2).float().expand(b, 8, sk, DQK)
            vt = vs[0].transpose(1, 2).float().expand(b, 8, sk, DV)
            ref = F.scaled_dot_product_attention(qt, kt, vt).transpose(1, 2)
            r["err"] = (out[:, :, :8].float() - ref).abs().max().item()
            r["sdpa"] = None
            if b == 1:
                qt = qs[0].transpose(1, 2)
                kt = ks[0].transpose(1, 2).expand(b, H, sk, DQK)
                vt = vs[0].transpose(1, 2).expand(b, H, sk, DV)
                def sdpa(_):
                    with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):
                        return F.scaled_dot_product_attention(qt, kt, vt)
                try:
                    sdpa(0)  # eagerly first: a refusal must not happen inside a capture
                    r["sdpa"] = floor.per_call_us(sdpa, calls=2, replays=5, rounds=3)
                except RuntimeError as e:
                    r["sdpa_err"] = str(e).splitlines()[0][:80]
            rows.append(r)
            print(r, flush=True)
            del qs, ks, vs
            torch.cuda.empty_cache()

    lines = [f"# MLA decode (h 128/1, d 576/512, s_q 1, bf16), {torch.cuda.get_device_name()}, "
             f"copy bandwidth {copy_bw / 1e9:.0f} GB/s",
             "",
             f"Graphs of {args.calls} calls over rotating K/V copies, {args.replays} replays a round, median of 3 rounds, us per call; "
             "(x) = time / the K+V floor. heuristic: num_splits 0; ns1: unsplit. SDPA-EA: b 1 only.",
             "",
             "| b | s_k | K+V floor | latent floor | fastattn heuristic | fastattn ns1 | SDPA-EA (expanded) | max err vs fp32 |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        sd = f"{r['sdpa']:.1f}" if r["sdpa"] is not None else "-"
        lines.append(f"| {r['b']} | {r['sk']} | {r['floor']:.1f} | {r['latent']:.1f} | "
                     f"{r['heur']:.1f} ({r['heur'] / r['floor']:.2f}x) | {r['ns1']:.1f} ({r['ns1'] / r['floor']:.2f}x) | "
                     f"{sd} | {r['err']:.2e} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


def paired(args):
    """--base-lib: base and lib timed in turn on the same calls (heuristic split and unsplit)."""
    import torch

    rp = load("run_peers", "run-peers.py")
    floor = load("stream_floor", "stream_floor.py")
    libs = [rp.FastAttn(args.base_lib), rp.FastAttn(args.lib)]
    dev = torch.device("cuda")
    lines = [f"# MLA decode A/B (h 128/1, d 576/512, s_q 1, bf16), {torch.cuda.get_device_name()}",
             "", f"base {args.base_lib}, lib {args.lib}: graphs of {args.calls} calls, {args.replays} replays a round, "
             "15 rounds in turn (order rotated); us per call (median), ratio lib / base (median of rounds, 25-75 %).",
             "", "| b | s_k | splits | base us | lib us | lib / base |", "|---|---|---|---:|---:|---|"]
    for b in (int(x) for x in args.batches.split(",")):
        for sk in (int(x) for x in args.sk.split(",")):
            copies = max(1, min(8, -(-(args.rotate_mib << 20) // (b * sk * (DQK + DV) * 2))))
            torch.manual_seed(0)
            qs = [torch.randn(b, 1, H, DQK, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
            ks = [torch.randn(b, sk, 1, DQK, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
            vs = [torch.randn(b, sk, 1, DV, device=dev, dtype=torch.bfloat16) for _ in range(copies)]
            for name, splits in (("heuristic", 0), ("1", 1)):
                fns = [lambda i, fa=fa: fa.forward_fn(torch, qs[i % copies], ks[i % copies], vs[i % copies], False,
                                                      (-1, -1), splits)() for fa in libs]
                (tb, tl), [(r, lo, hi)] = floor.paired_us(fns, calls=args.calls, replays=args.replays)
                lines.append(f"| {b} | {sk} | {name} | {tb:.1f} | {tl:.1f} | {r:.4f} [{lo:.4f}, {hi:.4f}] |")
                print(lines[-1], flush=True)
            del qs, ks, vs
            torch.cuda.empty_cache()
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
