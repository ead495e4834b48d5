#!/usr/bin/env python3
"""The forward with an additive bias against the dense forward and two peers, one H100 call.

b 4, s 8192, h 32, d 128, bf16; bias (1, h, s, s) bf16 (shared by the batch: 4.3 GB). Times (median of
CUDA events over `--runs` calls after 3 warm-ups): fastattn dense, fastattn with the bias (non-causal
and causal), SDPA with the same float attn_mask under the cuDNN and the efficient backend (each where
the installed torch runs it), and torch.compile(flex_attention) with a score_mod that reads the bias
tensor. TFLOPS count 4 b h s^2 d (halved for causal) for every row. Each peer's out is compared with
fastattn's (max abs difference), a sanity check of the bias path on the device. Prints markdown.
    python3 bench/bias_bench.py --lib build-x/src/libfastattn.so [--runs 20] [--s 8192]
fastattn goes through the C ABI (bench/run-peers.py's ctypes structs), so no Python build is needed.
"""
import argparse
import ctypes
import importlib.util
import os

from bitmask_flex import median_ms  # the masked benches' timer (bench/ is on sys.path when run as a script)

HERE = os.path.dirname(os.path.abspath(__file__))


def load_peers_module():
    spec = importlib.util.spec_from_file_location("run_peers", os.path.join(HERE, "run-peers.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def bias_args(rp, fa, q, k, v, out, lse, bias, causal):
    """The C ABI's arguments of our CUDA forward on (b, s, h, d) tensors, with `bias` (or None)."""
    a = rp.FaArgs()
    fa.lib.fastattn_args_init(ctypes.byref(a))
    a.q, a.k, a.v, a.out, a.lse = (fa._tensor(t) for t in (q, k, v, out, lse))
    if bias is not None:
        a.bias = fa._tensor(bias)
    a.causal = int(causal)
    a.backend = 2
    return a


def fastattn_fn(torch, rp, fa, q, k, v, bias, causal):
    """Our forward on (b, s, h, d) tensors through the C ABI, with `bias` (or None)."""
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[0], q.shape[2], q.shape[1], device=q.device, dtype=torch.float32)
    a = bias_args(rp, fa, q, k, v, out, lse, bias, causal)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    ref = ctypes.byref(a)

    def run():
        if fa.lib.fastattn_forward(ref, stream) != 0:
            raise RuntimeError(fa.lib.fastattn_last_error().decode())
        return out
    run.keep = (q, k, v, out, lse, bias, a)  # the struct's raw pointers must stay valid
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--b", type=int, default=4)
    ap.add_argument("--s", type=int, default=8192)
    ap.add_argument("--h", type=int, default=32)
    ap.add_argument("--d", type=int, default=128)
    args = ap.parse_args()
    import torch
    import torch.nn.functional as F

    rp = load_peers_module()
    fa = rp.FastAttn(args.lib)
    b, s, h, d = args.b, args.s, args.h, args.d
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    bias = (torch.randn(1, h, s, s, device="cuda", dtype=torch.bfloat16) * 2).contiguous()
    flops = 4.0 * b * h * s * s * d
    rows = []

    def row(name, fn, causal=False, ref=None):
        try:
            ms = median_ms(torch, fn, args.runs)
        except Exception as e:  # a peer this torch cannot run: say why
            rows.append(f"| {name} | n/a | n/a | {type(e).__name__}: {str(e)[:80]} |")
            return None
        diff = ""
        if ref is not None:
            got = fn()
            if got.shape != ref.shape:
                got = got.transpose(1, 2)
            diff = f"max abs diff vs fastattn bias {float((got.float() - ref.float()).abs().max()):.3g}"
        tf = flops / (2 if causal else 1) / (ms * 1e-3) / 1e12
        rows.append(f"| {name} | {ms:.3f} | {tf:.1f} | {diff} |")
        return ms

    dense = fastattn_fn(torch, rp, fa, q, k, v, None, False)
    with_bias = fastattn_fn(torch, rp, fa, q, k, v, bias, False)
    row("fastattn dense", dense)
    row("fastattn bias (1,h,s,s) bf16", with_bias)
    row("fastattn dense causal", fastattn_fn(torch, rp, fa, q, k, v, None, True), causal=True)
    row("fastattn bias causal", fastattn_fn(torch, rp, fa, q, k, v, bias, True), causal=True)
    ref = with_bias().clone()

    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # SDPA / Flex: (b, h, s, d) views
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        for name, be in (("SDPA cuDNN attn_mask", SDPBackend.CUDNN_ATTENTION),
                         ("SDPA efficient attn_mask", SDPBackend.EFFICIENT_ATTENTION)):
            def sdpa(be=be):
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=bias)
            row(name, sdpa, ref=ref)
    except ImportError as e:
        rows.append(f"| SDPA | n/a | n/a | {e} |")
    try:
        from torch.nn.attention.flex_attention import flex_attention
        flex = torch.compile(flex_attention)
        bias3 = bias[0]

        def score_mod(score, bb, hh, qi, ki):
            return score + bias3[hh, qi, ki]
        row("FlexAttention score_mod(bias)", lambda: flex(qt, kt, vt, score_mod=score_mod), ref=ref)
    except Exception as e:
        rows.append(f"| FlexAttention | n/a | n/a | {type(e).__name__}: {str(e)[:80]} |")

    print(f"# bias forward, b {b} s {s} h {h} d {d} bf16, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print()
    print("| kernel | median ms | TFLOPS | check |")
    print("|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
