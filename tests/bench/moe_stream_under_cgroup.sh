#!/usr/bin/env bash
# A mixture-of-experts model streamed expert by expert under a real memory
# limit, beside llama.cpp.
#   tests/bench/moe_stream_under_cgroup.sh [--small] [MODEL.gguf]
# MODEL defaults to a synthetic Qwen3-30B-A3B-shaped qwen3moe in Q4_0 (48
# layers, hidden 2048, 128 experts with FFN 768, 8 used, 32 query / 4 KV
# heads of 128, vocab 151936: about 17 GB), written with `dwell synth` into
# $DWELL_BENCH_DIR (default /tmp/dwell-bench) if missing. --small writes and
# runs a scaled shape of the same kind instead (8 layers, hidden 512, 64
# experts with FFN 512, 4 used, 8 / 2 heads of 64, vocab 8192: ~240 MB), to
# try the script in a few minutes.
#
# 1. Measures this machine's storage read rate on MODEL (O_DIRECT, 16 MiB
#    reads, median of 5 passes; the first pass after dropping the page cache
#    is reported apart).
# 2. Reference: greedy text with every weight in memory (mapped), when
#    MemAvailable exceeds the file by 10 %; skipped (said so) otherwise.
# 3. In a memory cgroup (v2 memory.max, else v1) whose limit is the weight
#    budget (DWELL_BUDGET_FRACTION of the file, default 0.25) + 256 MiB:
#    the same greedy run with --weights stream (tokens compared), then
#    `dwell bench --json` twice: greedy decoding (a synthetic model's
#    greedy text settles into a few tokens, whose experts then stay cached)
#    and --decode-tokens random (ids from a fixed seed: varied routing, the
#    storage reads of real text); cgroup peak and OOM kills after each run.
# 4. llama-bench on the same GGUF in the same cgroup if
#    $LLAMA_CPP_DIR/build/bin/llama-bench exists (decode only, DWELL_LLAMA_N
#    tokens, stopped after DWELL_LLAMA_TIMEOUT s).
#
# Prints one JSON line per bench run and the roofline fraction:
#   tok/s ÷ (read rate ÷ bytes read per token)
# (null where nothing was read).
# Needs root (cgroup creation). DWELL_BUILD_DIR, DWELL_BENCH_N (16),
# DWELL_BENCH_R (2), DWELL_RUN_N (32, tokens of the greedy comparison).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${DWELL_BUILD_DIR:-$root/build}
work=${DWELL_BENCH_DIR:-/tmp/dwell-bench}
fraction=${DWELL_BUDGET_FRACTION:-0.25}
n_gen=${DWELL_BENCH_N:-16}
reps=${DWELL_BENCH_R:-2}
run_n=${DWELL_RUN_N:-32}
llama_n=${DWELL_LLAMA_N:-4}
llama_timeout=${DWELL_LLAMA_TIMEOUT:-900}
small=false
if [ "${1:-}" = "--small" ]; then
  small=true
  shift
fi
mkdir -p "$work"
cmake --build "$build" --target dwell-cli dwell-plugin-cpu dwell-plugin-qwen3moe >/dev/null
dwell=$build/bin/dwell

if $small; then
  model=${1:-$work/synth-qwen3moe-small-Q4_0.gguf}
  shape=(--n-embd 512 --n-layer 8 --n-head 8 --n-head-kv 2 --head-dim 64 --n-ff 512
    --n-expert 64 --n-expert-used 4 --n-vocab 8192)
else
  model=${1:-$work/synth-qwen3moe-30B-A3B-Q4_0.gguf}
  shape=(--n-embd 2048 --n-layer 48 --n-head 32 --n-head-kv 4 --head-dim 128 --n-ff 768
    --n-expert 128 --n-expert-used 8 --n-vocab 151936)
fi
if [ ! -f "$model" ]; then
  echo "writing $model ..." >&2
  "$dwell" synth --arch qwen3moe "${shape[@]}" --type q4_0 -o "$model" >/dev/null
fi

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }

# --- the storage read rate of the roofline ----------------------------------
dd_rate() {
  dd if="$model" of=/dev/null bs=16M iflag=direct 2>&1 |
    awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "bytes") b = $(i - 1); s = $(NF - 3); print b / s }'
}
drop_caches
first_read_bps=$(dd_rate)
read_bps=$(for i in 1 2 3 4 5; do dd_rate; done | sort -g | sed -n 3p)

# --- cgroup -------------------------------------------------------------------
file_bytes=$(stat -c %s "$model")
budget_mb=$(python3 -c "print(int($file_bytes * $fraction) >> 20)")
limit=$(((budget_mb + 256) << 20))
cg=""
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
  cg=/sys/fs/cgroup/dwell-moe-stream-$$
  mkdir "$cg"
  echo "$limit" >"$cg/memory.max"
  echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
  version=2
elif [ -d /sys/fs/cgroup/memory ]; then
  cg=/sys/fs/cgroup/memory/dwell-moe-stream-$$
  mkdir "$cg"
  echo "$limit" >"$cg/memory.limit_in_bytes"
  echo "$limit" >"$cg/memory.memsw.limit_in_bytes" 2>/dev/null || true
  version=1
else
  echo "no memory cgroup controller on this machine (need cgroup v1 or v2 with memory)" >&2
  exit 1
fi
cleanup() { [ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true; }
trap cleanup EXIT

reset_peak() {
  if [ "$version" = 1 ]; then echo 0 >"$cg/memory.max_usage_in_bytes"; fi
  if [ "$version" = 2 ]; then echo 0 >"$cg/memory.peak" 2>/dev/null || true; fi
}
peak() { if [ "$version" = 1 ]; then cat "$cg/memory.max_usage_in_bytes"; else cat "$cg/memory.peak" 2>/dev/null || echo 0; fi; }
ooms() {
  if [ "$version" = 1 ]; then awk '/oom_kill / { print $2 }' "$cg/memory.oom_control"
  else awk '/oom_kill / { print $2 }' "$cg/memory.events"; fi
}
in_cgroup() {
  reset_peak
  local before
  before=$(ooms)
  set +e
  sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@" >"$out" 2>"$err"
  rc=$?
  set -e
  run_peak=$(peak)
  run_ooms=$(($(ooms) - before))
}

prompt="Once upon a time"
out=$work/moe-out.txt
err=$work/moe-err.txt

# --- reference in memory, when it fits ---------------------------------------
avail=$(awk '/MemAvailable/ { print $2 * 1024 }' /proc/meminfo)
ref=""
ref_note="in memory"
if python3 -c "import sys; sys.exit(0 if $avail > 1.1 * $file_bytes else 1)"; then
  drop_caches
  ref=$("$dwell" run -m "$model" -p "$prompt" -n "$run_n" --temp 0 --print-ids 2>/dev/null)
else
  ref_note="skipped: MemAvailable $avail < 1.1 x the file ($file_bytes)"
fi

# --- dwell, experts streamed under the limit ---------------------------------
drop_caches
in_cgroup "$dwell" run -m "$model" -p "$prompt" -n "$run_n" --temp 0 --print-ids --weights stream \
  --weight-budget "$budget_mb" -v
run_rc=$rc
run_peak_1=$run_peak
run_ooms_1=$run_ooms
same=null
if [ -n "$ref" ]; then
  same=false
  [ "$rc" = 0 ] && [ "$(cat "$out")" = "$ref" ] && same=true
fi
[ "$rc" = 0 ] || { echo "dwell run failed under the limit:" >&2; tail -3 "$err" >&2; }
plan=$(grep -E '^(weights: experts|experts:)' "$err" | tr '\n' ' ' || true)

for decode in greedy random; do
drop_caches
in_cgroup "$dwell" bench -m "$model" -p 16 -n "$n_gen" -r "$reps" --json --weights stream \
  --weight-budget "$budget_mb" --decode-tokens "$decode"
if [ "$rc" = 0 ]; then bench=$(cat "$out"); else bench=null; tail -3 "$err" >&2; fi
python3 - "$bench" "$plan" <<EOF
import json, sys
bench, plan = json.loads(sys.argv[1]), sys.argv[2]
read_bps = $read_bps
out = {"runtime": "dwell", "decode_tokens": "$decode", "model": "$model", "file_bytes": $file_bytes, "limit_bytes": $limit,
       "weight_budget_mib": $budget_mb, "reference": "$ref_note",
       "tokens_identical_to_in_memory": $( [ "$same" = null ] && echo None || { [ "$same" = true ] && echo True || echo False; } ),
       "run_exit": $run_rc, "run_cgroup_peak_bytes": $run_peak_1, "run_oom_kills": $run_ooms_1,
       "bench_cgroup_peak_bytes": $run_peak, "bench_oom_kills": $run_ooms,
       "read_bytes_per_s": read_bps, "first_read_bytes_per_s": $first_read_bps, "plan": plan}
if bench:
    w = bench["weights"]
    tg = bench["decode_tokens_per_second"]["median"]
    per_token = w["read_bytes_per_token"]
    roof = read_bps / per_token if per_token else None
    out.update({"decode_tok_s": tg, "read_bytes_per_token": per_token, "roofline_tok_s": roof,
                "roofline_fraction": tg / roof if roof else None,
                "experts": w.get("experts"), "wait_ms_per_token": w["wait_ms_per_token"],
                "compute_ms_per_token": w["compute_ms_per_token"]})
print(json.dumps(out))
EOF
done

llama=${LLAMA_CPP_DIR:-}/build/bin/llama-bench
if [ -n "${LLAMA_CPP_DIR:-}" ] && [ -x "$llama" ]; then
  drop_caches
  start=$(date +%s.%N)
  in_cgroup timeout "$llama_timeout" "$llama" -m "$model" -p 0 -n "$llama_n" -r 1 -o json
  secs=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  python3 - "$rc" <<EOF
import json, sys
rc = int(sys.argv[1])
out = {"runtime": "llama.cpp", "limit_bytes": $limit, "exit": rc, "seconds": $secs,
       "n_gen": $llama_n, "cgroup_peak_bytes": $run_peak, "oom_kills": $run_ooms}
if rc == 124:
    out["timed_out_after_s"] = $llama_timeout
    out["decode_tok_s_below"] = ($llama_n + 1) / $llama_timeout
if rc == 0:
    for t in json.load(open("$out")):
        if t.get("n_gen", 0) > 0:
            out["decode_tok_s"] = t["avg_ts"]
print(json.dumps(out))
EOF
else
  echo '{"runtime": "llama.cpp", "skipped": "set LLAMA_CPP_DIR to a checkout with build/bin/llama-bench"}'
fi
