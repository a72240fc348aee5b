#!/usr/bin/env bash
# Decode speed and weight bytes read per token at several activation
# sparsities (dwell bench --sparsity, JSON), rounds alternating the
# sparsities so drift on a shared machine spreads over all of them; prints
# the medians over rounds of each figure and the speed-up over sparsity 0.
#
#   tests/bench/sparsity_decode.sh MODEL [THREADS] [ROUNDS] [SPARSITIES...]
#   e.g. tests/bench/sparsity_decode.sh synth-1.1b-q4_0.gguf 2 3 0 0.25 0.4 0.5
#
# DWELL (default build/bin/dwell) is the binary; BENCH_ARGS (default
# "-p 8 -n 64 -r 3") the bench options of every run. Runs under nice -n -5
# when allowed.
set -euo pipefail
model=${1:?usage: $0 MODEL [THREADS] [ROUNDS] [SPARSITIES...]}
threads=${2:-2}
rounds=${3:-3}
shift $(($# < 3 ? $# : 3))
sparsities=("$@")
[ ${#sparsities[@]} -gt 0 ] || sparsities=(0 0.25 0.4 0.5)
dwell=${DWELL:-build/bin/dwell}
read -r -a bench_args <<<"${BENCH_ARGS:--p 8 -n 64 -r 3}"
nice_cmd=(nice -n -5)
"${nice_cmd[@]}" true 2>/dev/null || nice_cmd=()
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  for s in "${sparsities[@]}"; do
    "${nice_cmd[@]}" "$dwell" bench -m "$model" -t "$threads" "${bench_args[@]}" --sparsity "$s" \
      --json 2>/dev/null | sed "s/^/$s /" >>"$out"
  done
done
python3 - "$out" "${sparsities[@]}" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    s, j = line.split(" ", 1)
    rows.setdefault(s, []).append(json.loads(j))
base = None
print(f"{'sparsity':>8} {'achieved':>8} {'tg tok/s':>9} {'speed-up':>8} {'MiB/token':>10} {'dense MiB':>10} {'rounds':>6}")
for s in sys.argv[2:]:
    js = rows[s]
    tg = statistics.median(j["decode_tokens_per_second"]["median"] for j in js)
    sp = [j["sparsity"] for j in js]
    ach = statistics.median(x.get("achieved", 0) for x in sp)
    mib = statistics.median(x.get("weight_bytes_per_token", 0) for x in sp) / 2**20
    dense = statistics.median(x.get("dense_weight_bytes_per_token", 0) for x in sp) / 2**20
    base = base or tg
    print(f"{s:>8} {ach:8.3f} {tg:9.2f} {tg / base:8.2f} {mib:10.1f} {dense:10.1f} {len(js):6d}")
PY
