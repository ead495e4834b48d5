#!/usr/bin/env bash
# A/B timing of kernel variants on the GPU machine: the method behind the bench/results/*-ab-*.md
# tables. Each variant is a source tree; it is built for sm_90a (library and CLI, no tests, no
# probed kernels), then every shape is timed by `fastattn run` (3 warm-ups, median of 20 CUDA-event
# timings, no reference check) after 250 ms idle, over R rounds with the variants' order rotated
# from round to round. Prints a markdown table (also written to --out): per shape and variant the
# median of the rounds and the rounds, and ratio = first variant's ms / this one's (> 1: faster).
#
# usage: bench/ab.sh [--rounds R] [--out FILE] [--dims "64;128"] [--field backward] NAME=TREE... -- SHAPE=FLAGS...
#   NAME=TREE     a variant: a name for the table and a source tree (its build goes to TREE/build-ab)
#   SHAPE=FLAGS   a shape: a name and the `fastattn run` flags, e.g. 'd128-s8k-causal=--batch 2
#                 --seqlen 8192 --heads 16 --kv-heads 16 --dim 128 --causal'; each shape names its
#                 mask (--causal, --no-causal or --window): the CLI's default is causal
#   --dims        FASTATTN_HEAD_DIMS of the builds (default: all)
#   --field       which pass's median the table shows: forward (default) or backward (the shapes'
#                 flags then include --backward)
set -euo pipefail
rounds=3 out="" dims="" field=forward
variants=() shapes=()
while (($#)); do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --dims) dims=$2; shift 2 ;;
    --field) field=$2; shift 2 ;;
    --) shift; shapes=("$@"); break ;;
    *=*) variants+=("$1"); shift ;;
    *) echo "ab.sh: unexpected '$1' (see the usage at the top)" >&2; exit 2 ;;
  esac
done
((${#variants[@]} >= 1 && ${#shapes[@]} >= 1)) || { echo "ab.sh: need NAME=TREE... -- SHAPE=FLAGS..." >&2; exit 2; }
# `fastattn run` is causal unless told otherwise: a shape must say its mask, so a row named "full"
# cannot time the causal problem.
for s in "${shapes[@]}"; do
  [[ " ${s#*=} " =~ \ --(causal|no-causal|window)\  ]] ||
    { echo "ab.sh: shape '${s%%=*}' names no mask: add --causal, --no-causal or --window L,R" >&2; exit 2; }
done
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH

names=() clis=()
for v in "${variants[@]}"; do
  name=${v%%=*} tree=$(cd "${v#*=}" && pwd)
  echo "==> build $name ($tree)" >&2
  cmake -S "$tree" -B "$tree/build-ab" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFASTATTN_CUDA_ARCHS=90a \
    -DFASTATTN_TESTS=OFF -DFASTATTN_TOOLS=OFF -DFASTATTN_PROFILE=OFF ${dims:+"-DFASTATTN_HEAD_DIMS=$dims"} \
    >"$tree/build-ab.log" 2>&1 || { tail -20 "$tree/build-ab.log" >&2; exit 1; }
  cmake --build "$tree/build-ab" -j "$(nproc)" --target fastattn_cli >>"$tree/build-ab.log" 2>&1 ||
    { tail -20 "$tree/build-ab.log" >&2; exit 1; }
  names+=("$name")
  clis+=("$tree/build-ab/cli/fastattn")
done

results=$(mktemp)  # shape \t variant \t round \t ms
n=${#names[@]}
for ((r = 0; r < rounds; ++r)); do
  for s in "${shapes[@]}"; do
    for ((i = 0; i < n; ++i)); do
      j=$(((i + r) % n))
      sleep 0.25
      json=$(mktemp)
      # shellcheck disable=SC2086  # the flags are meant to split
      if "${clis[$j]}" run --device cuda --quiet --check-rows 0 --json "$json" ${s#*=} >/dev/null 2>&1; then
        ms=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]]["ms"])' "$json" "$field")
      else
        ms=nan
      fi
      rm -f "$json"
      printf '%s\t%s\t%s\t%s\n' "${s%%=*}" "${names[$j]}" "$r" "$ms" >>"$results"
    done
  done
  echo "==> round $((r + 1)) of $rounds done" >&2
done

python3 - "$results" "${names[@]}" <<'PY' | tee ${out:+"$out"}
import collections, math, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
names = sys.argv[2:]
shapes = list(dict.fromkeys(r[0] for r in rows))
ms = collections.defaultdict(list)
for shape, name, rnd, t in rows:
    ms[shape, name].append(float(t))
head = "| shape | " + " | ".join(f"{n} ms (rounds)" for n in names)
head += "".join(f" | {n}/{names[0]}" for n in names[1:]) + " |"
print(head)
print("|" + "---|" * (1 + len(names) + len(names) - 1))
def med(x):
    x = [v for v in x if not math.isnan(v)]
    return statistics.median(x) if x else float("nan")
for s in shapes:
    cells = [f"{med(ms[s, n]):.4f} ({', '.join(f'{v:.4f}' for v in ms[s, n])})" for n in names]
    base = med(ms[s, names[0]])
    ratios = [f"{base / med(ms[s, n]):.3f}" for n in names[1:]]
    print(f"| {s} | " + " | ".join(cells + ratios) + " |")
PY
rm -f "$results"
