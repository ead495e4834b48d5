#!/usr/bin/env python3
"""A transformers Llama with fastattn registered as its attention, against SDPA (issue #30).

    python bench/llama_model.py [--seqlen 1500] [--reps 30] [--decode-reps 200] [--out table.md]

The model: LlamaForCausalLM, 4 layers, hidden 2048, 16 query / 4 KV heads of dim 128, MLP 8192,
vocabulary 32000, bf16, random weights (nothing is downloaded). One model, its attention switched
between transformers' "sdpa" and "fastattn" (fastattn.hf_attention.register(): AttentionInterface with
the SDPA mask function: None here (unpadded, s_q 1 or s_q == s_k); a padded batch's 4-D mask runs as bits):
  prefill   model(input_ids) at batch 1, seqlen --seqlen (causal; logits of every position)
  decode    one step of one new token against the prefilled DynamicCache (seqlen + 1 keys); the
            cache is cropped back after each step, so every step sees the same length
Wall time per forward with torch.cuda.synchronize() before and after, the two attentions
interleaved call by call, median (and quartiles) reported. Eager (DynamicCache, fastattn.hf_attention);
with --graphs also the decode step in a CUDA graph: a StaticCache (keys = the preallocated cache;
SDPA masks it, fastattn takes the filled length through flash_attn_with_kvcache's cache_seqlens),
one graph per attention, replays interleaved (each appends one token); and the prefill (no cache)
in a CUDA graph per attention, 3 x --reps replays interleaved: GPU time without the host's work.
The logits of both are compared (max |a - b| against max |b|, and the argmax per position).
--device cpu with --tiny runs a small float32 model on the CPU backend (a smoke test).
"""
import argparse
import statistics
import sys
import time

try:
    import torch
except ImportError:  # --help still works; main() says what is missing
    torch = None

CALLS = [0]  # counted() calls: proof that the model really ran fastattn


def counted(fn):
    """fn, counting its calls in CALLS (the check forwards only; timed forwards run fn itself)."""
    def run(*args, **kwargs):
        CALLS[0] += 1
        return fn(*args, **kwargs)
    return run


def fastattn_static_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                              is_causal=None, position_ids=None, **kwargs):
    """The same over a StaticCache, whose keys are the whole preallocated cache: the filled length
    (the last query's position + 1, on the device: no sync, so a CUDA graph captures it) goes to
    flash_attn_with_kvcache as cache_seqlens (the new keys are already in the cache)."""
    import fastattn

    if attention_mask is not None or position_ids is None:
        raise NotImplementedError("fastattn static attention: needs position_ids and no padding mask")
    CALLS[0] += 1
    filled = (position_ids[:, -1] + 1).to(torch.int32).expand(query.shape[0]).contiguous()
    out = fastattn.flash_attn_with_kvcache(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                                           cache_seqlens=filled, softmax_scale=scaling, causal=True)
    return out, None


def register(count=False):
    """"fastattn": the package's registration (fastattn.hf_attention: SDPA masks, (b, h, s, d)
    tensors read as they lie); "fastattn_static": the StaticCache variant above. count: through
    counted()."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, flash_attention_mask

    from fastattn import hf_attention

    hf_attention.register("fastattn")
    if count:
        AttentionInterface.register("fastattn", counted(hf_attention.attention_forward))
    AttentionInterface.register("fastattn_static", fastattn_static_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register("fastattn_static", flash_attention_mask)


def build_model(args, dtype, device):
    from transformers import LlamaConfig, LlamaForCausalLM

    if args.tiny:
        cfg = dict(hidden_size=256, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                   intermediate_size=512, vocab_size=1000)
    else:
        cfg = dict(hidden_size=2048, num_attention_heads=16, num_key_value_heads=4, head_dim=128,
                   intermediate_size=8192, vocab_size=32000)
    config = LlamaConfig(num_hidden_layers=args.layers, max_position_embeddings=max(4096, 2 * args.seqlen),
                         **cfg)
    config._attn_implementation = "sdpa"
    torch.manual_seed(args.seed)
    with torch.device(device):
        model = LlamaForCausalLM(config).to(dtype)
    return model.eval()


def use(model, impl):
    """Switches every layer's attention (they share the config object)."""
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:
        model.config._attn_implementation = impl
    assert model.config._attn_implementation == impl, model.config._attn_implementation


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def progress(msg):
    print(f"[llama_model {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def interleaved(model, impls, calls, reps, device, prepare=None):
    """Wall time (s) per call for each implementation, the implementations taking turns."""
    times = {impl: [] for impl in impls}
    for i in range(reps):
        for impl in impls:
            use(model, impl)
            if prepare is not None:
                prepare(impl)
            sync(device)
            t0 = time.perf_counter()
            calls[impl]()
            sync(device)
            times[impl].append(time.perf_counter() - t0)
        if reps >= 10 and (i + 1) % max(1, reps // 4) == 0:
            progress(f"  {i + 1}/{reps} rounds")
    return times


def summary(ts):
    q = statistics.quantiles(ts, n=4) if len(ts) >= 4 else [min(ts), statistics.median(ts), max(ts)]
    return statistics.median(ts) * 1e3, q[0] * 1e3, q[2] * 1e3


def compare(name, got, want):
    got, want = got.float(), want.float()
    rel = ((got - want).abs().max() / want.abs().max()).item()
    agree = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
    ok = rel < 2e-2 and agree > 0.95
    progress(f"{name} logits fastattn vs sdpa: max|diff|/max|sdpa| {rel:.2e}, argmax agree {agree:.1%}"
             f" -> {'close' if ok else 'NOT CLOSE'}")
    return rel, agree, ok


def warm_up(fn, calls=2):
    """fn run on a side stream before its capture (lazy initialisations, allocator pools)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(calls):
            fn()
    torch.cuda.current_stream().wait_stream(side)


def capture(fn):
    """(graph, output) of fn captured in a CUDA graph."""
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    return g, out


def replay_interleaved(graphs, reps):
    """Replays {label: (graph, output, ...)} in turns, reps + 1 times: ({label: times of replays 2..},
    {label: output of the first replay})."""
    times, first = {label: [] for label in graphs}, {}
    for i in range(reps + 1):
        for label, (g, out, *_) in graphs.items():
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            g.replay()
            torch.cuda.synchronize()
            if i == 0:
                first[label] = out.clone()
            else:
                times[label].append(time.perf_counter() - t0)
    return times, first


def graph_decode(model, args, ids, step_ids, device):
    """A decode step against a StaticCache, captured in a CUDA graph per implementation and replayed
    (each replay appends one token: the position advances on the device, as in a serving loop).
    Returns ({impl: replay times}, {impl: first replay's logits})."""
    from transformers import StaticCache

    cfg, graphs = model.config, {}
    impls = {"sdpa": "sdpa", "fastattn": "fastattn_static"}
    for label, impl in impls.items():
        use(model, impl)
        cache = StaticCache(config=cfg, max_cache_len=args.seqlen + args.decode_reps + 64)
        model(ids, past_key_values=cache, position_ids=torch.arange(args.seqlen, device=device)[None], use_cache=True)
        pos = torch.full((1, 1), args.seqlen, dtype=torch.long, device=device)
        tok = step_ids.clone()

        def step(cache=cache, pos=pos, tok=tok):
            logits = model(tok, past_key_values=cache, position_ids=pos, use_cache=True).logits
            pos.add_(1)
            return logits
        warm_up(step)
        pos.fill_(args.seqlen)  # the warm-up steps are overwritten: the first replay is token seqlen
        for layer in cache.layers:
            layer.cumulative_length.fill_(args.seqlen)
        g, out = capture(step)
        # The graph reads and writes these tensors by address: they must outlive it (a freed cache or
        # token tensor is reused by the next implementation's allocations, and the replay then
        # scribbles on them: the illegal address seen before this was kept).
        graphs[label] = (g, out, (cache, pos, tok))
    return replay_interleaved(graphs, args.decode_reps)  # first: the step at position seqlen, as the eager check's


def graph_prefill(model, ids, reps):
    """The prefill (no cache) captured in a CUDA graph per implementation and replayed, the two
    taking turns: GPU time without transformers' host work, which in eager mode hides the attention
    kernels' share (~2 %) in its spread. Returns ({impl: replay times}, {impl: logits})."""
    graphs = {}
    for impl in ("sdpa", "fastattn"):
        use(model, impl)

        def forward():
            return model(ids, use_cache=False).logits
        warm_up(forward)
        graphs[impl] = capture(forward)
    return replay_interleaved(graphs, reps)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seqlen", type=int, default=1500, help="prefill length (batch 1)")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--reps", type=int, default=30, help="timed prefills per implementation")
    ap.add_argument("--decode-reps", type=int, default=200, help="timed decode steps per implementation")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--tiny", action="store_true", help="a small model (smoke test)")
    ap.add_argument("--graphs", action="store_true",
                    help="also the decode step in a CUDA graph over a StaticCache (docs/notes/inference.md)")
    ap.add_argument("--out", default=None, help="also write the table (markdown) here")
    args = ap.parse_args()
    if torch is None:
        sys.exit("llama_model.py: needs torch and transformers (pip install torch transformers)")

    import transformers
    from transformers import DynamicCache

    import fastattn

    device = args.device
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    register(count=True)
    progress(f"torch {torch.__version__}, transformers {transformers.__version__}, fastattn "
             f"{fastattn.__version__}; building the model")
    model = build_model(args, dtype, device)
    cfg = model.config
    impls = ["sdpa", "fastattn"]
    gen = torch.Generator(device="cpu").manual_seed(args.seed + 1)
    ids = torch.randint(0, cfg.vocab_size, (1, args.seqlen), generator=gen).to(device)
    step_ids = torch.randint(0, cfg.vocab_size, (1, 1), generator=gen).to(device)

    results = {}
    with torch.no_grad():
        # Prefill: the logits checked, then timed.
        logits, caches = {}, {}
        for impl in impls:
            use(model, impl)
            cache = DynamicCache(config=cfg) if "config" in DynamicCache.__init__.__code__.co_varnames else DynamicCache()
            logits[impl] = model(ids, past_key_values=cache, use_cache=True).logits
            caches[impl] = cache
        sync(device)
        assert CALLS[0] == args.layers, f"fastattn ran {CALLS[0]} times in a {args.layers}-layer forward"
        register()  # the timed forwards call fastattn.hf_attention.attention_forward itself
        check_prefill = compare("prefill", logits["fastattn"], logits["sdpa"])
        del logits
        prefill_calls = {impl: (lambda: model(ids, use_cache=True)) for impl in impls}
        progress(f"prefill b1 s{args.seqlen}: warm-up, then {args.reps} timed rounds")
        interleaved(model, impls, prefill_calls, args.warmup, device)
        t = interleaved(model, impls, prefill_calls, args.reps, device)
        results["prefill"] = {impl: summary(t[impl]) for impl in impls}

        # Decode: each implementation steps against its own prefilled cache, cropped back after.
        def crop(impl):
            extra = caches[impl].get_seq_length() - args.seqlen
            if extra > 0:
                caches[impl].crop(-extra)

        def step(impl):
            return model(step_ids, past_key_values=caches[impl], use_cache=True).logits

        step_logits = {}
        for impl in impls:
            use(model, impl)
            step_logits[impl] = step(impl)
            crop(impl)
        check_decode = compare("decode step", step_logits["fastattn"], step_logits["sdpa"])
        decode_calls = {impl: (lambda impl=impl: step(impl)) for impl in impls}

        progress(f"decode step (1 token, {args.seqlen + 1} keys): warm-up, then {args.decode_reps} timed rounds")
        interleaved(model, impls, decode_calls, max(args.warmup, 10), device, prepare=crop)
        t = interleaved(model, impls, decode_calls, args.decode_reps, device, prepare=crop)
        results["decode step"] = {impl: summary(t[impl]) for impl in impls}
        checks = [check_prefill, check_decode]
        if device == "cuda" and args.graphs:
            progress(f"decode step in a CUDA graph (StaticCache of {args.seqlen + args.decode_reps + 64}): capture, "
                     f"then {args.decode_reps} replays each")
            t, first = graph_decode(model, args, ids, step_ids, device)
            checks.append(compare("graph decode step", first["fastattn"], first["sdpa"]))
            results["decode step, CUDA graph"] = {impl: summary(t[impl]) for impl in impls}
            progress(f"prefill in a CUDA graph: capture, then {3 * args.reps} replays each")
            t, first = graph_prefill(model, ids, 3 * args.reps)
            checks.append(compare("graph prefill", first["fastattn"], first["sdpa"]))
            results["prefill, CUDA graph"] = {impl: summary(t[impl]) for impl in impls}

    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    lines = [f"# transformers Llama, fastattn vs SDPA ({name}, torch {torch.__version__}, transformers "
             f"{transformers.__version__}, {time.strftime('%Y-%m-%d')})", "",
             f"{args.layers} layers, hidden {cfg.hidden_size}, h {cfg.num_attention_heads}/"
             f"{cfg.num_key_value_heads}, d {cfg.head_dim}, MLP {cfg.intermediate_size}, vocab "
             f"{cfg.vocab_size}, {str(dtype).replace('torch.', '')}, random weights, batch 1, eager unless 'CUDA graph'; "
             "wall time per forward (synchronized), median [quartiles] of the interleaved runs", "",
             "| forward | sdpa ms | fastattn ms | sdpa / fastattn | logits max rel diff | argmax agree |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for (label, r), (rel, agree, _) in zip(results.items(), checks):
        s, f = r["sdpa"], r["fastattn"]
        what = f"{label} (s {args.seqlen})" if label.startswith("prefill") else f"{label} ({args.seqlen + 1} keys)"
        if label.startswith("decode") and "graph" in label:
            what = f"{label} ({args.seqlen + 1}+ keys, StaticCache)"
        lines.append(f"| {what} | {s[0]:.3f} [{s[1]:.3f}, {s[2]:.3f}] | {f[0]:.3f} [{f[1]:.3f}, {f[2]:.3f}] | "
                     f"{s[0] / f[0]:.3f} | {rel:.2e} | {agree:.1%} |")
    text = "\n".join(lines)
    print(text, flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0 if all(c[2] for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
