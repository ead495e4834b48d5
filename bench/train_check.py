#!/usr/bin/env python3
"""Training check (issue #29): a small causal transformer trained with fastattn's attention and
with PyTorch's SDPA from the same seed gives loss curves that agree within noise.

Task (synthetic, generated on the device, nothing downloaded): each sequence is a first-order
Markov chain over the vocabulary for its first half and a copy of that half after it, so the
second half's loss falls to ~0 only once attention learns to look back (an induction task: the
attention forward and backward carry the learning, not just the MLPs).

Runs, same data batches in all three:
  fastattn  seed A, attention = fastattn.flash_attn_func(causal=True)  (its backward: fastattn::bwd)
  sdpa      seed A, attention = torch SDPA (is_causal=True)
  sdpa-B    seed B (another initialisation), SDPA: the noise between two equally valid runs
Criterion (printed and in the JSON), over the last quarter of the steps ("window"):
  gap   = mean |loss_fastattn - loss_sdpa| per step
  noise = mean |loss_sdpa-B - loss_sdpa| per step
  pass when gap <= max(noise, 0.01 nats), the first step's losses agree (the same forward math:
  <= 0.02 in bf16, 1e-4 in float32), and both runs learned (window mean <= 0.8 x the first loss).
Writes train_check.json and train_check.png (matplotlib) into --out; exit 1 when it fails.

  python3 bench/train_check.py --out out/train          # GPU: bf16, 300 steps x 3 runs (meant to take < 90 s on an H100)
  python3 bench/train_check.py --device cpu --steps 20  # CPU backend, tiny config (seconds)
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

CONFIGS = {  # layers, d_model, heads, seqlen, batch, vocab
    "cuda": dict(layers=4, d_model=512, heads=8, seqlen=1024, batch=16, vocab=512),
    "cpu": dict(layers=2, d_model=64, heads=2, seqlen=48, batch=4, vocab=64),
}
GAP_FLOOR = 0.01  # nats: below this two curves are the same for any purpose
LEARNED = 0.8     # the window mean must fall to this fraction of the first loss


def attention_fn(kind, deterministic):
    """(b, s, h, d) -> (b, s, h, d) causal attention, fastattn's or SDPA's."""
    if kind == "fastattn":
        import fastattn

        return lambda q, k, v: fastattn.flash_attn_func(q, k, v, causal=True, deterministic=deterministic)
    return lambda q, k, v: F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True).transpose(1, 2)


class Block(nn.Module):
    def __init__(self, d_model, heads, attend):
        super().__init__()
        self.heads, self.attend = heads, attend
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv, self.proj = nn.Linear(d_model, 3 * d_model), nn.Linear(d_model, d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        b, s, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.heads, c // self.heads).unbind(2)
        x = x + self.proj(self.attend(q, k, v).reshape(b, s, c))
        return x + self.mlp(self.ln2(x))


class Model(nn.Module):
    def __init__(self, cfg, attend):
        super().__init__()
        self.tok = nn.Embedding(cfg["vocab"], cfg["d_model"])
        self.pos = nn.Embedding(cfg["seqlen"], cfg["d_model"])
        self.blocks = nn.ModuleList(Block(cfg["d_model"], cfg["heads"], attend) for _ in range(cfg["layers"]))
        self.ln = nn.LayerNorm(cfg["d_model"])
        self.head = nn.Linear(cfg["d_model"], cfg["vocab"], bias=False)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.ln(x))


def batches(cfg, steps, device, seed=1234):
    """The same token batches for every run: a Markov chain's first half, copied after it."""
    gen = torch.Generator(device="cpu").manual_seed(seed)
    v, half = cfg["vocab"], cfg["seqlen"] // 2
    # each token has 4 likely successors: the first half has ~log(4) nats of entropy per token
    succ = torch.randint(0, v, (v, 4), generator=gen)
    for _ in range(steps):
        toks = torch.empty(cfg["batch"], half, dtype=torch.long)
        toks[:, 0] = torch.randint(0, v, (cfg["batch"],), generator=gen)
        pick = torch.randint(0, 4, (cfg["batch"], half), generator=gen)
        for t in range(1, half):
            toks[:, t] = succ[toks[:, t - 1], pick[:, t]]
        yield torch.cat([toks, toks], dim=1).to(device)


def train(kind, init_seed, cfg, args, data):
    torch.manual_seed(init_seed)
    model = Model(cfg, attention_fn(kind, args.deterministic)).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warmup = max(1, args.steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: min(1.0, (i + 1) / warmup))
    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.device == "cuda")
    losses = []
    t0 = time.time()
    for tokens in data:
        with autocast:
            logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.detach())
    losses = [float(x) for x in losses]  # one sync at the end
    return losses, time.time() - t0


def verdict(curves, bf16):
    fa, sd, sb = curves["fastattn"], curves["sdpa"], curves["sdpa-B"]
    n = len(fa)
    w = slice(n - max(1, n // 4), n)

    def mean(xs):
        return sum(xs) / len(xs)
    gap = mean([abs(a - b) for a, b in zip(fa[w], sd[w])])
    noise = mean([abs(a - b) for a, b in zip(sb[w], sd[w])])
    first_tol = 0.02 if bf16 else 1e-4
    checks = {
        "first step agrees": abs(fa[0] - sd[0]) <= first_tol,
        "gap within noise": gap <= max(noise, GAP_FLOOR),
        "both learned": max(mean(fa[w]), mean(sd[w])) <= LEARNED * fa[0],
        "finite": all(math.isfinite(x) for x in fa + sd + sb),
    }
    return dict(window_steps=[w.start, n], gap=gap, noise=noise, floor=GAP_FLOOR,
                first_step=[fa[0], sd[0]], first_tol=first_tol,
                window_mean={k: mean(v[w]) for k, v in curves.items()}, checks=checks,
                passed=all(checks.values()))


def plot(curves, v, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, dx) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, height_ratios=[3, 1])
    for name, style in (("sdpa-B", ":"), ("sdpa", "-"), ("fastattn", "--")):
        ax.plot(curves[name], style, label=name, linewidth=1.2)
    ax.set_ylabel("training loss (nats)")
    ax.set_title(f"fastattn vs SDPA, same seed: gap {v['gap']:.4f}, seed noise {v['noise']:.4f} "
                 f"({'pass' if v['passed'] else 'FAIL'})", fontsize=10)
    ax.legend()
    steps = range(len(curves["sdpa"]))
    dx.plot(steps, [a - b for a, b in zip(curves["fastattn"], curves["sdpa"])], label="fastattn - sdpa")
    dx.plot(steps, [a - b for a, b in zip(curves["sdpa-B"], curves["sdpa"])], ":", label="sdpa-B - sdpa")
    dx.axvspan(*v["window_steps"], alpha=0.1)
    dx.set_xlabel("step")
    dx.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=None, help="default: 300 on cuda, 20 on cpu")
    ap.add_argument("--lr", type=float, default=None, help="default: 1e-3 on cuda, 3e-3 on cpu")
    ap.add_argument("--deterministic", action="store_true", help="fastattn's deterministic backward")
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    args = ap.parse_args(argv)
    cfg = dict(CONFIGS[args.device])
    args.steps = args.steps or (300 if args.device == "cuda" else 20)
    args.lr = args.lr or (1e-3 if args.device == "cuda" else 3e-3)
    os.makedirs(args.out, exist_ok=True)
    data = list(batches(cfg, args.steps, args.device))
    curves, seconds = {}, {}
    for name, kind, seed in (("fastattn", "fastattn", 0), ("sdpa", "sdpa", 0), ("sdpa-B", "sdpa", 1)):
        curves[name], seconds[name] = train(kind, seed, cfg, args, data)
        print(f"{name:9s} {seconds[name]:6.1f} s  loss {curves[name][0]:.3f} -> {curves[name][-1]:.3f}", flush=True)
    v = verdict(curves, bf16=args.device == "cuda")
    meta = dict(device=torch.cuda.get_device_name() if args.device == "cuda" else "CPU",
                torch=torch.__version__, date=time.strftime("%Y-%m-%d %H:%M:%S"), config=cfg,
                steps=args.steps, lr=args.lr, dtype="bf16 autocast" if args.device == "cuda" else "float32",
                deterministic=args.deterministic, seconds=seconds)
    with open(os.path.join(args.out, "train_check.json"), "w") as f:
        json.dump(dict(meta=meta, verdict=v, curves=curves), f, indent=1)
    plot(curves, v, os.path.join(args.out, "train_check.png"))
    every = max(1, args.steps // 6)
    print(f"\n| step | fastattn | sdpa | sdpa-B |\n|---|---|---|---|")
    for i in list(range(0, args.steps, every)) + [args.steps - 1]:
        print(f"| {i} | {curves['fastattn'][i]:.4f} | {curves['sdpa'][i]:.4f} | {curves['sdpa-B'][i]:.4f} |")
    print(f"\nwindow steps {v['window_steps'][0]}-{v['window_steps'][1] - 1}: gap {v['gap']:.4f}, noise "
          f"{v['noise']:.4f} (floor {GAP_FLOOR}); " + ", ".join(f"{k}: {'ok' if ok else 'FAIL'}"
                                                              for k, ok in v["checks"].items()))
    print(f"train_check: {'PASS' if v['passed'] else 'FAIL'} ({sum(seconds.values()):.0f} s of training)")
    return 0 if v["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
