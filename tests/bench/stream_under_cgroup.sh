#!/usr/bin/env bash
# Streamed weights under a real memory limit, beside llama.cpp.
#   tests/bench/stream_under_cgroup.sh [MODEL.gguf]
# MODEL defaults to the synthetic 1.1B-shape Llama in Q4_0 (2048 wide, 16
# layers, 8192 FFN, vocab 32000), written with `dwell synth` into
# $DWELL_BENCH_DIR (default /tmp/dwell-bench) if missing.
#
# 1. Converts MODEL to a raw and a zstd dwell pack.
# 2. Measures this machine's storage read rate (O_DIRECT, 4 MiB reads, page
#    cache dropped first when permitted) and zstd's decompression rate on the
#    zstd pack's own frames (`zstd -b`, one thread) — the two rates of the
#    stream-mode roofline.
# 3. Reference: greedy text from each pack with the weights in memory.
# 4. Inside a memory cgroup (v2 memory.max, else v1 memory.limit_in_bytes)
#    whose limit is the weight budget (DWELL_BUDGET_FRACTION of the weights,
#    default 0.5) + 96 MiB: the same greedy run with --weights stream
#    (tokens must match), then `dwell bench --json`; the cgroup's peak usage
#    and OOM-kill count are read after each run. The cgroup is removed on exit.
# 5. llama-bench on the same GGUF in the same cgroup, if
#    $LLAMA_CPP_DIR/build/bin/llama-bench exists (mmap, its default): decode
#    only, DWELL_LLAMA_N tokens (4), stopped after DWELL_LLAMA_TIMEOUT s (900).
#
# Prints one JSON line per run and a summary with the roofline:
#   tok/s ÷ min(read rate ÷ bytes read per token,
#               decompression rate ÷ bytes decompressed per token).
# Needs root (cgroup creation). DWELL_BUILD_DIR, DWELL_BENCH_N (16), DWELL_BENCH_R (3).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${DWELL_BUILD_DIR:-$root/build}
work=${DWELL_BENCH_DIR:-/tmp/dwell-bench}
fraction=${DWELL_BUDGET_FRACTION:-0.5}
n_gen=${DWELL_BENCH_N:-16}
reps=${DWELL_BENCH_R:-3}
llama_n=${DWELL_LLAMA_N:-4}
llama_timeout=${DWELL_LLAMA_TIMEOUT:-900}
mkdir -p "$work"
cmake --build "$build" --target dwell-cli dwell-plugin-cpu dwell-plugin-llama >/dev/null
dwell=$build/bin/dwell

model=${1:-$work/synth-1.1B-Q4_0.gguf}
if [ ! -f "$model" ]; then
  echo "writing $model ..." >&2
  "$dwell" synth --n-embd 2048 --n-layer 16 --n-head 32 --n-head-kv 8 --n-ff 8192 --n-vocab 32000 \
    --type q4_0 -o "$model" >/dev/null
fi
name=$(basename "$model" .gguf)
raw=$work/$name.dwell
zst=$work/$name.zst.dwell
[ -f "$raw" ] || "$dwell" convert "$model" -o "$raw" -q >/dev/null
[ -f "$zst" ] || "$dwell" convert "$model" -o "$zst" --compress zstd -q >/dev/null

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || true; }

# --- the two rates of the roofline -------------------------------------------
# O_DIRECT bypasses this kernel's page cache, not a cache below it (a VM's
# host, a drive's own): the first pass after a drop is reported apart, and
# the rate of repeated passes — what a streaming run, which reads the same
# layers every token, meets — is the median of 5, in 16 MiB requests (the
# streamer reads a tensor, or 4 MiB of zstd frames, per request).
dd_rate() {
  dd if="$raw" of=/dev/null bs=16M iflag=direct 2>&1 |
    awk '/copied/ { for (i = 1; i <= NF; i++) if ($i == "bytes") b = $(i - 1); s = $(NF - 3); print b / s }'
}
drop_caches
first_read_bps=$(dd_rate)
read_bps=$(for i in 1 2 3 4 5; do dd_rate; done | sort -g | sed -n 3p)
# zstd -b reports the decompression speed of the file's frames; the pack's
# tensors are compressed at level 9 in independent frames, so the same level
# and block size stand in for them.
unzstd_bps=$(zstd -b9 -e9 -B256KiB -T1 -i3 "$model" 2>&1 | tr '\r' '\n' |
  awk '/MB\/s/ { for (i = 1; i <= NF; i++) if ($i ~ /MB\/s/) v = $(i - 1) } END { print v * 1e6 }')

# --- cgroup -------------------------------------------------------------------
weight_bytes=$("$dwell" bench -m "$raw" -p 1 -n 1 -r 1 --json 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["weight_bytes"])')
budget_mb=$(python3 -c "print(int($weight_bytes * $fraction) >> 20)")
limit=$(((budget_mb + 96) << 20))
cg=""
if [ -f /sys/fs/cgroup/cgroup.controllers ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
  cg=/sys/fs/cgroup/dwell-stream-$$
  mkdir "$cg"
  echo "$limit" >"$cg/memory.max"
  echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
  version=2
elif [ -d /sys/fs/cgroup/memory ]; then
  cg=/sys/fs/cgroup/memory/dwell-stream-$$
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
  # v2: memory.peak is per cgroup lifetime (resettable from Linux 6.12 by writing).
  if [ "$version" = 2 ]; then echo 0 >"$cg/memory.peak" 2>/dev/null || true; fi
}
peak() { if [ "$version" = 1 ]; then cat "$cg/memory.max_usage_in_bytes"; else cat "$cg/memory.peak" 2>/dev/null || echo 0; fi; }
ooms() {
  if [ "$version" = 1 ]; then awk '/oom_kill / { print $2 }' "$cg/memory.oom_control"
  else awk '/oom_kill / { print $2 }' "$cg/memory.events"; fi
}
# Runs "$@" inside the cgroup; stdout to $out, exit status to $rc.
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
out=$work/out.txt
err=$work/err.txt
results=()
for pack in "$raw" "$zst"; do
  kind=raw
  [ "$pack" = "$zst" ] && kind=zstd
  drop_caches
  ref=$("$dwell" run -m "$pack" -p "$prompt" -n 32 --temp 0 --no-echo 2>/dev/null)

  drop_caches
  in_cgroup "$dwell" run -m "$pack" -p "$prompt" -n 32 --temp 0 --no-echo --weights stream \
    --weight-budget "$budget_mb"
  same=false
  [ "$rc" = 0 ] && [ "$(cat "$out")" = "$ref" ] && same=true
  run_rc=$rc
  [ "$rc" = 0 ] || { echo "dwell run ($kind) failed under the limit:" >&2; tail -3 "$err" >&2; }

  drop_caches
  in_cgroup "$dwell" bench -m "$pack" -p 16 -n "$n_gen" -r "$reps" --json --weights stream \
    --weight-budget "$budget_mb"
  if [ "$rc" = 0 ]; then bench=$(cat "$out"); else bench=null; tail -3 "$err" >&2; fi
  line=$(python3 - "$kind" "$bench" <<EOF
import json, sys
kind, bench = sys.argv[1], json.loads(sys.argv[2])
read_bps, unzstd_bps = $read_bps, $unzstd_bps
out = {"runtime": "dwell", "pack": kind, "limit_bytes": $limit, "weight_budget_mib": $budget_mb,
       "tokens_identical_to_in_memory": "$same" == "true", "run_exit": $run_rc,
       "cgroup_peak_bytes": $run_peak, "oom_kills": $run_ooms,
       "read_bytes_per_s": read_bps, "first_read_bytes_per_s": $first_read_bps,
       "zstd_decompress_bytes_per_s": unzstd_bps}
if bench:
    w = bench["weights"]
    # Reading and decompressing run as a pipeline: the slower stage bounds.
    limits = [read_bps / w["read_bytes_per_token"]] if w["read_bytes_per_token"] else []
    if kind == "zstd" and w["decompressed_bytes_per_token"]:
        limits.append(unzstd_bps / w["decompressed_bytes_per_token"])
    roof = min(limits) if limits else None
    tg = bench["decode_tokens_per_second"]["median"]
    out.update({"decode_tok_s": tg, "roofline_tok_s": roof, "roofline_ratio": tg / roof if roof else None,
                "overlap": w["overlap"], "peak_rss_bytes": bench["peak_rss_bytes"], "weights": w})
print(json.dumps(out))
EOF
)
  echo "$line"
  results+=("$line")
done

# dwell with the weights mapped and no limit, for scale.
"$dwell" bench -m "$raw" -p 16 -n "$n_gen" -r "$reps" --json 2>/dev/null |
  python3 -c "import json, sys; j = json.load(sys.stdin); print(json.dumps({'runtime': 'dwell', 'weights': 'mmap', 'limit_bytes': None, 'decode_tok_s': j['decode_tokens_per_second']['median'], 'peak_rss_bytes': j['peak_rss_bytes']}))"

llama=${LLAMA_CPP_DIR:-}/build/bin/llama-bench
if [ -n "${LLAMA_CPP_DIR:-}" ] && [ -x "$llama" ]; then
  drop_caches
  # Decode only, few tokens: under the limit its mapping thrashes.
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
    # llama-bench runs a warm-up pass before the timed one: at least
    # n_gen + 1 tokens did not finish in the time allowed.
    out["decode_tok_s_below"] = ($llama_n + 1) / $llama_timeout
if rc == 0:
    for t in json.load(open("$out")):
        if t.get("n_gen", 0) > 0:
            out["decode_tok_s"] = t["avg_ts"]
        elif t.get("n_prompt", 0) > 0:
            out["prefill_tok_s"] = t["avg_ts"]
print(json.dumps(out))
EOF
  # The same without a limit, for scale.
  "$llama" -m "$model" -p 0 -n "$n_gen" -r "$reps" -o json >"$out" 2>"$err" &&
    python3 -c "import json; t = json.load(open('$out'))[0]; print(json.dumps({'runtime': 'llama.cpp', 'limit_bytes': None, 'decode_tok_s': t['avg_ts']}))"
else
  echo '{"runtime": "llama.cpp", "skipped": "set LLAMA_CPP_DIR to a checkout with build/bin/llama-bench"}'
fi
