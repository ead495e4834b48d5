#!/usr/bin/env python3
"""ALiBi (alibi_slopes) against the dense call, the same term as a stored bias, and FlexAttention, one GPU call.

b 4, s 8192, h 32, bf16, FlashAttention's standard slopes 2^(-8 (i + 1) / h). Rows, each timed in rounds with the
sides in an order reversed every other round (a round: one warming call and one timed call a side; median over
rounds of CUDA-event times):
  fwd:  fastattn dense, fastattn alibi (computed in the kernel), fastattn bias (the term stored as a (1, h, s, s)
        bf16 bias), FlexAttention with a score_mod computing the term (torch.compile; causal by its block mask),
        SDPA-cuDNN with the stored term as attn_mask (full only);
  bwd:  fastattn dense / alibi backward alone (forward outputs made once), FlexAttention forward + backward (its
        autograd: reported beside our forward + backward).
TFLOPS: forward 4 b h s^2 d, backward 2.5 x that, halved for causal. The check column: max |out - fastattn alibi's
out| (fwd) and max |dq - fastattn alibi's dq| (bwd), a sanity check (the GPU tests check against float64).
    python3 bench/alibi_bench.py --lib build-x/src/libfastattn.so [--rounds 7] [--s 8192] [--d 128,64] [--mode fwd,bwd]
fastattn goes through the C ABI (bench/run-peers.py's ctypes structs, ABI 2), so no Python build is needed.
"""
import argparse
import ctypes
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lib", required=True, help="libfastattn.so (C ABI 2 or newer)")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--b", type=int, default=4)
    ap.add_argument("--s", type=int, default=8192)
    ap.add_argument("--h", type=int, default=32)
    ap.add_argument("--d", default="128", help="head dims, comma-separated (bwd: 96 and 128 only)")
    ap.add_argument("--mode", default="fwd,bwd", help="fwd, bwd or both")
    args = ap.parse_args(argv)
    try:
        args.dims = [int(x) for x in args.d.split(",")]
    except ValueError:
        ap.error(f"--d: {args.d} is not a comma-separated list of head dims")
    args.modes = args.mode.split(",")
    for m in args.modes:
        if m not in ("fwd", "bwd"):
            ap.error(f"--mode: {m} is not fwd or bwd")
    return args


def alibi_slopes(torch, h, device="cuda"):
    """FlashAttention's (and the ALiBi paper's) slopes for h heads, h a power of two: 2^(-8 (i + 1) / h)."""
    return torch.tensor([2.0 ** (-8.0 * (i + 1) / h) for i in range(h)], dtype=torch.float32, device=device)


def alibi_term(torch, slopes, s_q, s_k):
    """-slope * |i + s_k - s_q - j| as a (1, h, s_q, s_k) fp32 tensor (what a stored bias would hold)."""
    i = torch.arange(s_q, device=slopes.device).view(s_q, 1)
    j = torch.arange(s_k, device=slopes.device).view(1, s_k)
    dist = (i + s_k - s_q - j).abs().float()
    return (-slopes.view(-1, 1, 1) * dist).unsqueeze(0)


def main(argv=None):
    args = parse_args(argv)
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, HERE)
    from bias_ab import timed_rounds  # one warming and one timed call a side a round, the order reversed every other
    from bias_bench import load_peers_module  # bench/run-peers.py's ctypes structs
    rp = load_peers_module()
    fa = rp.FastAttn(args.lib)
    if fa.abi < 2:
        sys.exit(f"{args.lib}: C ABI {fa.abi} has no alibi_slopes (ABI 2)")
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    b, s, h = args.b, args.s, args.h
    slopes = alibi_slopes(torch, h)
    term16 = alibi_term(torch, slopes, s, s).to(torch.bfloat16).contiguous()  # the stored-bias side

    def call(name, *refs):
        if getattr(fa.lib, name)(*refs) != 0:
            raise RuntimeError(fa.lib.fastattn_last_error().decode())

    def ours(q, k, v, causal, kind, out=None, lse=None):
        """C ABI args of our forward: kind None (dense), 'alibi' or 'bias' (the term stored)."""
        out = torch.full_like(q, float("nan")) if out is None else out
        lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32) if lse is None else lse
        a = rp.FaArgs()
        fa.lib.fastattn_args_init(ctypes.byref(a))
        a.q, a.k, a.v, a.out, a.lse = (fa._tensor(t) for t in (q, k, v, out, lse))
        if kind == "alibi":
            a.alibi_slopes = fa._tensor(slopes)
        elif kind == "bias":
            a.bias = fa._tensor(term16)
        a.causal = int(causal)
        a.backend = 2
        return a, out, lse

    print(f"# ALiBi, b {b} s {s} h {h} bf16, {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"{args.rounds} rounds (median ms; x = time / fastattn alibi's, median of per-round ratios)\n")
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
    flex = torch.compile(flex_attention)

    def score_mod(score, bb, hh, qi, ki):
        return score - slopes[hh] * (qi - ki).abs()  # s_q = s_k: the diagonal offset is 0

    # Causal through Flex's block mask (its empty blocks skipped, as ours are), the term through the score_mod.
    causal_blocks = create_block_mask(lambda bb, hh, qi, ki: qi >= ki, None, None, s, s)

    for d in args.dims:
        torch.manual_seed(0)
        q, k, v, dout = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        flops = 4.0 * b * h * s * s * d
        for causal in (False, True):
            blocks = causal_blocks if causal else None
            if "fwd" in args.modes:
                fns, outs = {}, {}
                for kind in ("alibi", None, "bias"):
                    a, out, lse = ours(q, k, v, causal, kind)
                    ref = ctypes.byref(a)

                    def run(ref=ref, keep=(a, lse)):
                        call("fastattn_forward", ref, stream)
                    name = f"fastattn {kind or 'dense'}"
                    fns[name], outs[name] = run, out
                fns["flex score_mod"] = lambda: flex(qt, kt, vt, score_mod=score_mod, block_mask=blocks)
                if not causal:
                    def sdpa():
                        from torch.nn.attention import SDPBackend, sdpa_kernel
                        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                            return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=term16)
                    fns["sdpa-cudnn attn_mask"] = sdpa
                for n, fn in list(fns.items()):
                    try:
                        got = fn()
                    except Exception as e:  # a peer this torch cannot run: say why, time the rest
                        print(f"{n}: {type(e).__name__}: {str(e)[:100]}")
                        del fns[n]
                        continue
                    if got is not None:
                        outs[n] = got.transpose(1, 2)
                torch.cuda.synchronize()
                t = timed_rounds(torch, fns, args.rounds)
                base = t["fastattn alibi"]
                print(f"fwd d {d} causal {int(causal)}\n\n| side | ms | TFLOPS | x alibi | max abs diff vs alibi |")
                print("|---|---:|---:|---:|---:|")
                for n in fns:
                    ms = statistics.median(t[n])
                    x = statistics.median(a_ / b_ for a_, b_ in zip(t[n], base))
                    diff = float((outs[n].float() - outs["fastattn alibi"].float()).abs().max())
                    tf = flops / (2 if causal else 1) / (ms * 1e-3) / 1e12
                    print(f"| {n} | {ms:.3f} | {tf:.1f} | {x:.3f} | {diff:.3g} |")
                print(flush=True)
            if "bwd" in args.modes and d in (96, 128):
                fns, dqs = {}, {}
                for kind in ("alibi", None):
                    a, out, lse = ours(q, k, v, causal, kind)
                    call("fastattn_forward", ctypes.byref(a), stream)
                    grads = [torch.full_like(x, float("nan")) for x in (q, k, v)]
                    views = [fa._tensor(x) for x in [dout] + grads]
                    refs = [ctypes.byref(a)] + [ctypes.byref(x) for x in views]

                    def run(refs=refs, keep=(a, out, lse, views, grads)):
                        call("fastattn_backward", *refs, stream)
                    name = f"fastattn {kind or 'dense'} bwd"
                    fns[name], dqs[name] = run, grads[0]
                qg, kg, vg = (x.detach().clone().requires_grad_() for x in (qt, kt, vt))

                def flex_fb():
                    o = flex(qg, kg, vg, score_mod=score_mod, block_mask=blocks)
                    qg.grad = kg.grad = vg.grad = None
                    o.backward(dout.transpose(1, 2))
                    return qg.grad
                fns["flex score_mod fwd+bwd"] = flex_fb
                a_f, _, lse_f = ours(q, k, v, causal, "alibi")
                fns["fastattn alibi fwd"] = lambda ref=ctypes.byref(a_f), keep=(a_f, lse_f): call(
                    "fastattn_forward", ref, stream)
                for n, fn in fns.items():
                    got = fn()
                    if n.startswith("flex"):
                        dqs[n] = got.transpose(1, 2)
                torch.cuda.synchronize()
                t = timed_rounds(torch, fns, args.rounds)
                base = t["fastattn alibi bwd"]
                print(f"bwd d {d} causal {int(causal)} (TFLOPS: 2.5 x the forward's FLOPs; flex: fwd + bwd, "
                      f"3.5 x)\n\n| side | ms | TFLOPS | x alibi bwd | max abs dq diff vs alibi |")
                print("|---|---:|---:|---:|---:|")
                for n in fns:
                    ms = statistics.median(t[n])
                    x = statistics.median(a_ / b_ for a_, b_ in zip(t[n], base))
                    mult = 3.5 if n.startswith("flex") else 1.0 if n.endswith("fwd") else 2.5
                    tf = mult * flops / (2 if causal else 1) / (ms * 1e-3) / 1e12
                    diff = f"{float((dqs[n].float() - dqs['fastattn alibi bwd'].float()).abs().max()):.3g}" \
                        if n in dqs else "-"
                    print(f"| {n} | {ms:.3f} | {tf:.1f} | {x:.3f} | {diff} |")
                print(flush=True)
        del q, k, v, dout


if __name__ == "__main__":
    main()
