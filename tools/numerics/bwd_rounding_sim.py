#!/usr/bin/env python3
"""CPU model of the Hopper backward's arithmetic, against tests/gpu/bwd_sm90_test.cpp's tolerance.

What it models, per (batch, head), with fp32 results rounded where the kernels round them:
  inputs   q, k, v, dO ~ N(0, 1) as float32, rounded to the input dtype (the test draws them so;
           --seed reproduces the test's exact draw: std::mt19937 + libstdc++'s
           normal_distribution<float>, q then k then v then dO, (b, s, h, d) order)
  forward  S = q k^T (fp32), m = row max, P = exp2(S scale log2e - m scale log2e) (fp32),
           l = sum P (fp32, of the unrounded P), O = (P rounded to the dtype) v (fp32) / l,
           rounded to the dtype; lse = (m scale log2e + log2 l) ln 2 (fp32)
           (src/cuda/common/online_softmax.cuh; s_k <= 128 is one key block: no rescale)
  preproc  D = rowsum(dO * O) in fp32 from the ROUNDED O; lse_log2 = lse log2e (fp32)
  backward P = exp2(S scale log2e - lse_log2) (fp32, FMA), dP = dO v^T (fp32),
           dS = P (dP - D) (fp32 P, kernel.cuh ds_phase), P and dS rounded to the dtype for the MMAs,
           dV = P^T dO, dK = scale dS^T q, dQ: per key block of 128 dS K in fp32, the blocks' partials
           added in a random order (the fp32 atomics), then scale * dQ rounded (postprocess)
  test     ref = float64 backward (src/reference/naive_backward.cpp); base = the same with P and dS
           rounded to the dtype (through float, as util::round_to); check_grad's
           err = max|g - ref|, base_err = max|round(base) - ref|, step = (max|ref| + 0.3) * 2^-8
           (bf16) or 2^-11 (fp16); a miss is err > 2 base_err + step.
Not modelled: the tensor cores' own fp32 accumulation order/truncation and ex2.approx's ~2 ulp
(both ~1e-7 relative, far below the dtype's 2^-9 / 2^-12).

--d-exact computes D from the float64 O instead (the ablation: is the miss D's rounded-O term?).
--fa3-atol uses FA3's gradient atol instead of `step`: 2 * max|(ref + 0.3) - 0.3 - ref| with ref
rounded to the dtype and the arithmetic in the dtype (hopper/test_flash_attn.py's `dq_atol`).
"""
import argparse
import ctypes
import math
import random
import sys

import numpy as np

LOG2E = 1.4426950408889634
BLOCK_N = 128  # keys per CTA at d 128 (the dQ partials added by atomics)


# ---- dtype rounding (round to nearest even, through float32 as util::round_to does) ----
def round_dtype(x, dt):
    """float64/float32 array -> float64 array of the nearest dtype values (through float32)."""
    f = np.asarray(x, dtype=np.float64).astype(np.float32)
    if dt == "fp16":
        return f.astype(np.float16).astype(np.float64)
    b = f.view(np.uint32).astype(np.uint64)
    odd = (b >> 16) & 1
    r = ((b + 0x7FFF + odd) >> 16) << 16
    return r.astype(np.uint32).view(np.float32).astype(np.float64)


def f32(x):
    return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)


# ---- the test's input generator (std::mt19937 + libstdc++ normal_distribution<float>) ----
_libm = ctypes.CDLL("libm.so.6")
_libm.logf.restype = ctypes.c_float
_libm.logf.argtypes = [ctypes.c_float]


def _f(x):
    return float(np.float32(x))


class TestNormal:
    """Bit-exact twin of `std::mt19937 rng(seed); std::normal_distribution<float> normal(0, 1)`."""

    def __init__(self, seed):
        mt = [seed & 0xFFFFFFFF]
        for i in range(1, 624):
            mt.append((1812433253 * (mt[-1] ^ (mt[-1] >> 30)) + i) & 0xFFFFFFFF)
        self.r = random.Random()
        self.r.setstate((3, tuple(mt) + (624,), None))
        self.saved = None

    def _canon(self):  # generate_canonical<float, 24>: one 32-bit draw
        u = _f(_f(self.r.getrandbits(32)) / 4294967296.0)
        return u if u < 1.0 else float(np.nextafter(np.float32(1), np.float32(0)))

    def __call__(self):
        if self.saved is not None:
            x, self.saved = self.saved, None
            return x
        while True:
            x = _f(_f(2.0 * self._canon()) - 1.0)
            y = _f(_f(2.0 * self._canon()) - 1.0)
            r2 = _f(_f(x * x) + _f(y * y))
            if not (r2 > 1.0 or r2 == 0.0):
                break
        mult = _f(math.sqrt(_f(_f(-2.0 * _libm.logf(r2)) / r2)))
        self.saved = _f(x * mult)
        return _f(y * mult)


def test_inputs(seed, b, sq, sk, d, dt):
    g = TestNormal(seed)
    out = []
    for s in (sq, sk, sk, sq):  # q, k, v, dO; h = 1
        a = np.array([g() for _ in range(b * s * d)], dtype=np.float64).reshape(b, s, d)
        out.append(round_dtype(a, dt))
    return out


# ---- the model ----
def keep_mask(sq, sk, causal):
    i = np.arange(sq)[:, None]
    j = np.arange(sk)[None, :]
    return (j <= i + sk - sq) if causal else np.ones((sq, sk), dtype=bool)


def simulate(q, k, v, do, causal, dt, rng, d_exact=False):
    """q, k, v, do: (n, s, d) float64 holding dtype values. Returns dict of grads: (gpu, ref, base)."""
    n, sq, d = q.shape
    sk = k.shape[1]
    scale = float(np.float32(1.0 / math.sqrt(d)))
    scale_log2 = float(np.float32(scale * LOG2E))
    keep = keep_mask(sq, sk, causal)[None]
    kept_any = keep.any(-1)[..., None]

    # float64 reference and baseline (naive_backward.cpp)
    s64 = q @ k.transpose(0, 2, 1) * scale
    s64 = np.where(keep, s64, -np.inf)
    m64 = s64.max(-1, keepdims=True)
    m64 = np.where(np.isfinite(m64), m64, 0.0)
    e64 = np.where(keep, np.exp(s64 - m64), 0.0)
    p64 = e64 / np.maximum(e64.sum(-1, keepdims=True), 1e-300)
    dp64 = do @ v.transpose(0, 2, 1)
    D64 = (p64 * dp64).sum(-1, keepdims=True)
    ds64 = p64 * (dp64 - D64)
    ref = {
        "dq": (ds64 * scale) @ k,
        "dk": (ds64 * scale).transpose(0, 2, 1) @ q,
        "dv": p64.transpose(0, 2, 1) @ do,
    }
    ds_b = np.where(keep, round_dtype(ds64, dt), 0.0) * scale
    p_b = np.where(keep, round_dtype(p64, dt), 0.0)
    base = {
        "dq": ds_b @ k,
        "dk": ds_b.transpose(0, 2, 1) @ q,
        "dv": p_b.transpose(0, 2, 1) @ do,
    }
    # the candidate baseline: the same, with D from the output of the forward's baseline (P rounded
    # for P V, as naive_forward.cpp) rounded to the dtype: a kernel reads the stored out for D
    o_b = round_dtype((round_dtype(e64, dt) @ v) / np.maximum(e64.sum(-1, keepdims=True), 1e-300), dt)
    ds_o = np.where(keep, round_dtype(p64 * (dp64 - (o_b * do).sum(-1, keepdims=True)), dt), 0.0) * scale
    base_o = {"dq": ds_o @ k, "dk": ds_o.transpose(0, 2, 1) @ q, "dv": base["dv"]}

    # GPU forward (one key block: m is the row max, no rescale)
    s32 = f32(q @ k.transpose(0, 2, 1))
    s32m = np.where(keep, s32, -np.inf)
    m_scaled = f32(np.where(kept_any, s32m.max(-1, keepdims=True), 0.0) * scale_log2)
    pf = np.where(keep, f32(np.exp2(f32(s32 * scale_log2 - m_scaled))), 0.0)
    l = f32(pf.sum(-1, keepdims=True))
    l_safe = np.where(l > 0, l, 1.0)
    o_acc = f32(round_dtype(pf, dt) @ v)
    o = round_dtype(f32(o_acc * f32(1.0 / l_safe)), dt)
    lse = f32((m_scaled + f32(np.log2(l_safe))) * math.log(2.0))
    # preprocess
    if d_exact:
        o = p64 @ v
    D = f32((o * do).sum(-1, keepdims=True))
    lse_log2 = f32(lse * float(np.float32(LOG2E)))
    # main kernel
    p = np.where(keep, f32(np.exp2(f32(s32 * scale_log2 - lse_log2))), 0.0)
    dp = f32(do @ v.transpose(0, 2, 1))
    ds = f32(p * f32(dp - D))
    ds_r = round_dtype(ds, dt)
    p_r = round_dtype(p, dt)
    dv = round_dtype(f32(p_r.transpose(0, 2, 1) @ do), dt)
    dk = round_dtype(f32(scale * f32(ds_r.transpose(0, 2, 1) @ q)), dt)
    nblk = (sk + BLOCK_N - 1) // BLOCK_N
    blk = [slice(c * BLOCK_N, (c + 1) * BLOCK_N) for c in range(nblk)]
    parts = [f32(ds_r[:, :, kb] @ k[:, kb]) for kb in blk]
    acc = np.zeros_like(parts[0])
    for c in rng.permutation(nblk):
        acc = f32(acc + parts[c])
    dq = round_dtype(f32(acc * scale), dt)
    gpu = {"dq": dq, "dk": dk, "dv": dv}
    return {g: (gpu[g], ref[g], base[g], base_o[g]) for g in gpu}


def fa3_atol(ref, dt, axes):
    """2 * max|(ref + 0.3) - 0.3 - ref| in the dtype's arithmetic (FA3's gradient atol)."""
    r = round_dtype(ref, dt)
    return 2 * np.abs(round_dtype(round_dtype(r + 0.3, dt) - 0.3, dt) - r).max(axis=axes)


RULES = {
    "test": "2 base_err + step (bwd_sm90_test.cpp today)",
    "2step": "2 base_err + 2 step",
    "fa3": "2 base_err + FA3's atol, 2 max|(ref + 0.3) - 0.3 - ref| in the dtype",
    "baseO": "2 base_err + step, the baseline's D = rowsum(dO * its forward's out rounded to the dtype)",
}


def check(gpu, ref, base, base_o, dt):
    """check_grad, one test case per row of axis 0: err and each rule's bound (dict)."""
    axes = tuple(range(1, gpu.ndim))
    err = np.abs(gpu - ref).max(axis=axes)
    base_err = np.abs(round_dtype(base, dt) - ref).max(axis=axes)
    base_o_err = np.abs(round_dtype(base_o, dt) - ref).max(axis=axes)
    ref_max = np.abs(ref).max(axis=axes)
    step = (ref_max + 0.3) * (1.0 / 256 if dt == "bf16" else 1.0 / 2048)
    bounds = {
        "test": 2 * base_err + step,
        "2step": 2 * base_err + 2 * step,
        "fa3": 2 * base_err + fa3_atol(ref, dt, axes),
        "baseO": 2 * base_o_err + step,
    }
    return err, base_err, ref_max, bounds


def run_shape(args, sq, sk, b, causal, dt, rng):
    """misses[rule][grad] and worst[rule][grad] (max err / bound) over args.draws test cases."""
    misses = {r: {g: 0 for g in ("dq", "dk", "dv")} for r in RULES}
    worst = {r: {g: 0.0 for g in ("dq", "dk", "dv")} for r in RULES}
    done = 0
    chunk = max(1, min(args.chunk, args.draws))
    while done < args.draws:
        cases = min(chunk, args.draws - done)
        shp = lambda s: (cases * b, s, args.d)
        q, k, v, do = (round_dtype(rng.standard_normal(shp(s)).astype(np.float32), dt) for s in (sq, sk, sk, sq))
        res = simulate(q, k, v, do, causal, dt, rng, args.d_exact)
        for g, arrays in res.items():
            # one test case = b sequences (the test's batch): the max runs over all of them
            arrays = [x.reshape(cases, b * x.shape[1], x.shape[2]) for x in arrays]
            err, _, _, bounds = check(*arrays, dt)
            for r, bound in bounds.items():
                ratio = err / bound
                misses[r][g] += int((ratio > 1).sum())
                worst[r][g] = max(worst[r][g], float(ratio.max()))
        done += cases
    return misses, worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=4000, help="test cases per shape")
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--chunk", type=int, default=500)
    ap.add_argument("--shapes", default="17x17x3,1x1x3,113x113x3", help="sq x sk x batch, comma separated")
    ap.add_argument("--dtypes", default="bf16,fp16")
    ap.add_argument("--causal", default="1,0")
    ap.add_argument("--d-exact", action="store_true", help="D from the float64 O (ablation)")
    ap.add_argument("--seed", type=int, help="replay the test's draw for this seed (one case, shape of --shapes' first)")
    ap.add_argument("--rng", type=int, default=1, help="numpy seed of the sweep")
    args = ap.parse_args()
    rng = np.random.default_rng(args.rng)
    shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]

    if args.seed is not None:
        sq, sk, b = shapes[0]
        dt = args.dtypes.split(",")[0]
        causal = args.causal.split(",")[0] == "1"
        q, k, v, do = test_inputs(args.seed, b, sq, sk, args.d, dt)
        res = simulate(q, k, v, do, causal, dt, rng, args.d_exact)
        for g, (gp, rf, bs, bo) in res.items():
            err, berr, rmax, bounds = check(gp[None], rf[None], bs[None], bo[None], dt)
            i = np.unravel_index(np.abs(gp - rf).argmax(), gp.shape)
            print(f"seed {args.seed} {dt} b{b} sq{sq} sk{sk} d{args.d} causal {int(causal)} {g}: err {err[0]:.17g} "
                  f"base_err {berr[0]:.17g} max|ref| {rmax[0]:.17g}; worst at (b {i[0]}, row {i[1]}, col {i[2]}) "
                  f"ref {rf[i]:.6g} model {gp[i]:.6g}; err / bound: "
                  + ", ".join(f"{r} {err[0] / bd[0]:.3f}" for r, bd in bounds.items()))
        return

    print(f"test cases per shape {args.draws}, d {args.d}, the model's D from the "
          f"{'float64 O (ablation)' if args.d_exact else 'rounded O (as the kernels)'}; rules:")
    for r, text in RULES.items():
        print(f"  {r:6} {text}")
    print("| dtype | causal | sq x sk x b | rule | misses dq / dk / dv | worst err/bound dq / dk / dv |")
    print("|---|---|---|---|---|---|")
    for dt in args.dtypes.split(","):
        for c in args.causal.split(","):
            for sq, sk, b in shapes:
                misses, worst = run_shape(args, sq, sk, b, c == "1", dt, rng)
                for r in RULES:
                    print(f"| {dt} | {c} | {sq}x{sk}x{b} | {r} | " + " / ".join(str(misses[r][g]) for g in misses[r])
                          + " | " + " / ".join(f"{worst[r][g]:.3f}" for g in worst[r]) + " |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
