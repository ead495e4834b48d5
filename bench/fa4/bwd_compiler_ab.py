#!/usr/bin/env python3
"""FlashAttention-4's Hopper backward under two PTX compilers (issue #29; docs/notes/bwd-sm90.md, session 52):
its own (the CuTe DSL's embedded one) and a given ptxas (FA4's CUTE_DSL_PTXAS_PATH hook, in flash-attn-4
4.0.0b36), in processes that alternate, so that a difference in FA4's time at d 128 names the compiler as
FA4's ~2 % edge over FA3 (whose kernels, like ours, nvcc 13.0 builds). Each process times _flash_attn_bwd
alone (FA4's forward gives out and lse first), bf16, full mask, median of --iters CUDA-event timings after the
JIT's first call; the cubins of the ptxas runs are kept under --dump (CUTE_DSL_KEEP_CUBIN) for reading
beside ours with fastattn-sass.

    python3 bench/fa4/bwd_compiler_ab.py --site /tmp/site-fa4 --ptxas /usr/local/cuda/bin/ptxas --dump $OUT/fa4

With --vs-site instead of --ptxas, the other side is the same wheels with the DSL's cu13 libs (install.sh
install-cu13), both with their embedded compilers: the CUDA 12 against the CUDA 13 build of the DSL's compiler
(session 56: the cu12 DSL segfaulted loading a ptxas 13.0 cubin). Both sides' cubins go under --dump/<side>.

    python3 bench/fa4/bwd_compiler_ab.py --site /tmp/site-fa4 --vs-site /tmp/site-fa4-cu13 --dump $OUT/fa4
"""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
from cuda_timing import median_ms  # noqa: E402

SHAPES = ((2, 8192, 16, 128), (4, 4096, 16, 128))  # (b, s, h, d): #29's d 128 full shapes


def child(site, shape, iters):
    import site as site_mod
    site_mod.addsitedir(site)  # reads the DSL's .pth file too
    import torch
    from flash_attn.cute import interface as fa4

    b, s, h, d = shape
    torch.manual_seed(0)
    q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    scale = d ** -0.5
    out, lse = fa4._flash_attn_fwd(q, k, v, softmax_scale=scale, causal=False, return_lse=True)[:2]

    def run():
        return fa4._flash_attn_bwd(q, k, v, out, dout, lse, softmax_scale=scale, causal=False)[:3]
    ms = median_ms(torch, run, runs=iters)  # its first calls compile
    flops = 2.5 * 4 * b * h * s * s * d  # backward = 2.5 x the forward's 4 b h s^2 d
    print(f"RESULT {b}x{s}x{h}x{d} {ms:.4f} ms {flops / ms / 1e9:.1f} TFLOPS", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--site", required=True, help="where bench/fa4/install.sh put FA4 (/tmp/site-fa4)")
    side = ap.add_mutually_exclusive_group(required=True)
    side.add_argument("--ptxas", help="the ptxas to compare with FA4's embedded compiler")
    side.add_argument("--vs-site", help="FA4 with the DSL's cu13 libs (/tmp/site-fa4-cu13), embedded compilers both")
    ap.add_argument("--dump", default="fa4-dump", help="cubins (CUTE_DSL_KEEP_CUBIN): the ptxas runs', or both sites'")
    ap.add_argument("--rounds", type=int, default=2, help="process pairs, alternating which compiler goes first")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--shapes", default="all", help="'all', or indices into SHAPES, comma-separated (0: b2 s8k, 1: b4 s4k)")
    ap.add_argument("--child", nargs=4, type=int, metavar=("B", "S", "H", "D"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.site, tuple(args.child), args.iters)
        return
    shapes = SHAPES if args.shapes == "all" else tuple(SHAPES[int(i)] for i in args.shapes.split(","))
    other = "ptxas" if args.ptxas else "cu13"
    results = {}
    for shape in shapes:
        for r in range(args.rounds):
            for kind in (("embedded", other) if r % 2 == 0 else (other, "embedded")):
                env = dict(os.environ, FLASH_ATTENTION_CUTE_DSL_CACHE_ENABLED="0")  # compile in every process
                env.pop("CUTE_DSL_PTXAS_PATH", None)
                site = args.vs_site if kind == "cu13" else args.site
                if kind != "embedded" or args.vs_site:
                    dump = os.path.join(args.dump, kind) if args.vs_site else args.dump
                    os.makedirs(dump, exist_ok=True)
                    env.update(CUTE_DSL_KEEP_CUBIN="1", CUTE_DSL_KEEP_PTX="1", CUTE_DSL_DUMP_DIR=dump)
                if kind == "ptxas":
                    env.update(CUTE_DSL_PTXAS_PATH=args.ptxas)
                p = subprocess.run([sys.executable, __file__, "--site", site, "--ptxas", "-",
                                    "--iters", str(args.iters), "--child", *map(str, shape)],
                                   env=env, capture_output=True, text=True, timeout=600)
                line = next((x for x in p.stdout.splitlines() if x.startswith("RESULT")), None)
                if line is None:
                    print(f"{kind} {shape}: failed\n{p.stdout[-1500:]}\n{p.stderr[-3000:]}", flush=True)
                    continue
                print(f"{kind:8s} {line}", flush=True)
                results.setdefault((shape, kind), []).append(float(line.split()[2]))
    print(f"\n| b x s x h x d | embedded ms | {other} ms | {other} / embedded |\n|---|---|---|---|")
    for shape in shapes:
        e, p = results.get((shape, "embedded")), results.get((shape, other))
        if e and p:
            em, pm = statistics.median(e), statistics.median(p)
            print(f"| {'x'.join(map(str, shape))} | {em:.4f} | {pm:.4f} | {pm / em:.4f} |")


if __name__ == "__main__":
    main()
