#!/usr/bin/env bash
# Held-load probe (docs/notes/bench-power.md): build the library, run bench/held-load.py beside nvidia-smi
# sampling every 50 ms, and print a table per phase (ms, SM MHz, power, temperature, clock-event reasons).
export PATH=/usr/local/cuda/bin:$PATH; R=$PWD; OUT=${OUT:-/tmp/out}; mkdir -p $OUT
cd "$(dirname "$0")/.."
cmake -S . -B build-held -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA=ON -DFASTATTN_CUDA_ARCHS=90a -DFASTATTN_TESTS=OFF -DFASTATTN_TOOLS=OFF >/dev/null 2>&1 && cmake --build build-held -j16 --target fastattn > $OUT/build.log 2>&1 || { tail $OUT/build.log; exit 1; }
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active --format=csv,noheader,nounits -lms 50 > $OUT/smi.csv 2>&1 &
SMI=$!
sleep 1
PYTHONWARNINGS=ignore python3 bench/held-load.py build-held/src/libfastattn.so
kill $SMI
python3 - $OUT <<'PY'
import json, sys, datetime, statistics
out = sys.argv[1]; ph = json.load(open(f"{out}/phases.json")); rows = []
for line in open(f"{out}/smi.csv"):
    f = [x.strip() for x in line.split(",")]
    try:
        t = datetime.datetime.strptime(f[0], "%Y/%m/%d %H:%M:%S.%f").timestamp(); rows.append((t, float(f[1]), float(f[3]), float(f[4]), f[5]))
    except Exception: pass
# nvidia-smi timestamps are local time of the machine, as is time.time() via fromtimestamp: compare naive
print("| phase | ms | calls | SM MHz (median, 2nd half) | power W | temp C | J / call | reasons |\n|---|---|---|---|---|---|---|---|")
for p in ph:
    mid = (p["t0"] + p["t1"]) / 2
    sel = [r for r in rows if mid <= r[0] <= p["t1"]]
    if not sel: print(f"| {p['name']} | {p['ms']:.4f} | {p['calls']} | ? | ? | ? | ? | ? |"); continue
    # J / call, not ms x MHz: at the power cap NVML's clock does not track speed (held-load-session18 results)
    mhz, watts = statistics.median(r[1] for r in sel), statistics.median(r[2] for r in sel)
    print(f"| {p['name']} | {p['ms']:.4f} | {p['calls']} | {mhz:.0f} | {watts:.0f} | {statistics.median(r[3] for r in sel):.0f} | {p['ms'] * watts / 1e3:.3f} | {sorted(set(r[4] for r in sel))} |")
PY
