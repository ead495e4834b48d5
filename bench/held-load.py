# Held load: fastattn vs cuDNN (and FA3 with $FASTATTN_FA3_LIB) on a few shapes, each back to back for
# 3 s after 1.5 s idle, $HELD_REPS times (default 2);
# run by bench/held-load.sh beside nvidia-smi sampling clocks and power every 50 ms. Prints per-phase
# ms (median of the last 50 calls) and writes phase wall times to $OUT/phases.json (docs/notes/bench-power.md).
import importlib.util, sys, time, statistics, json, os
import torch
spec = importlib.util.spec_from_file_location("rp", "bench/run-peers.py"); rp = importlib.util.module_from_spec(spec); spec.loader.exec_module(rp)
fa = rp.FastAttn(sys.argv[1])
out = os.environ.get("OUT", "/tmp")
from torch.nn.attention import SDPBackend, sdpa_kernel
fa3 = rp.Fa3(os.environ["FASTATTN_FA3_LIB"]) if os.environ.get("FASTATTN_FA3_LIB") else None
reps = int(os.environ.get("HELD_REPS", "2"))
shapes = [("d128 s8k full", 2, 8192, 16, 16, 128, False, torch.bfloat16),
          ("d128 s8k causal", 2, 8192, 16, 16, 128, True, torch.bfloat16),
          ("d128 s4k full", 4, 4096, 16, 16, 128, False, torch.bfloat16),
          ("gqa fp16", 4, 4096, 64, 8, 128, False, torch.float16)]
phases = []
def timed(name, fn, seconds):
    torch.cuda.synchronize(); t0 = time.time(); ev = []
    n = 0
    while time.time() - t0 < seconds:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); ev.append((s, e)); n += 1
        if len(ev) > 60: ev[0][1].synchronize(); ev.pop(0)  # bounded queue, never idle
    torch.cuda.synchronize(); t1 = time.time()
    ms = statistics.median(s.elapsed_time(e) for s, e in ev[-50:])
    phases.append(dict(name=name, t0=t0, t1=t1, ms=ms, calls=n)); print(f"{name:40s} {ms:.4f} ms  {n} calls", flush=True)
for (nm, b, s, h, hk, d, causal, dt) in shapes:
    q = torch.randn(b, s, h, d, device="cuda", dtype=dt); k = torch.randn(b, s, hk, d, device="cuda", dtype=dt); v = torch.randn(b, s, hk, d, device="cuda", dtype=dt)
    ours = fa.forward_fn(torch, q, k, v, causal, (-1, -1))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    if h != hk: kt, vt = (x.repeat_interleave(h // hk, dim=1) for x in (kt, vt))
    def cud():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    theirs = fa3.forward_fn(torch, q, k, v, causal, (-1, -1)) if fa3 else None
    for rep in range(reps):
        time.sleep(1.5); timed(f"{nm} fastattn #{rep}", ours, 3.0)
        if theirs:
            time.sleep(1.5); timed(f"{nm} fa3 #{rep}", theirs, 3.0)
        time.sleep(1.5); timed(f"{nm} cudnn #{rep}", cud, 3.0)
json.dump(phases, open(f"{out}/phases.json", "w"), indent=1)
