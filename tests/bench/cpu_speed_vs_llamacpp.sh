#!/usr/bin/env bash
# dwell's CPU prefill and decode speed beside llama.cpp's, one JSON line per
# thread count.
#   tests/bench/cpu_speed_vs_llamacpp.sh MODEL.gguf [THREADS...]   (default: nproc)
# Runs `dwell bench` and, if $LLAMA_CPP_DIR/build/bin/llama-bench exists,
# llama-bench with the same -p/-n/-r/threads, alternating A B A B so drift
# in a shared machine's load hits both alike; each figure is the median of
# the rounds. The decode roofline ratio is the share of the measured read
# bandwidth (dwell-bench-bandwidth, same thread count) that decode uses:
# weight bytes read per token x decode tok/s / bandwidth; 1.0 is the ceiling.
# The probe runs right after dwell in every round (a shared machine's
# bandwidth drifts between minutes), each round gets its own ratio, and the
# median of those is reported.
# Environment:
#   DWELL_BUILD_DIR   dwell build folder (default <repo>/build)
#   LLAMA_CPP_DIR     a llama.cpp checkout with build/bin/llama-bench built
#   DWELL_BENCH_P / _N / _R      prompt tokens, generated tokens, repetitions
#                                (default 128, 64, 5)
#   DWELL_BENCH_ROUNDS           A B rounds (default 2)
#   DWELL_BENCH_MIB              bandwidth probe buffer in MiB (default 1024)
set -euo pipefail
# jq combines the JSON of both programs; Debian's package is installed if missing.
if ! command -v jq >/dev/null; then
  as_root=(); [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get install -y -qq jq >/dev/null
fi
if [ $# -lt 1 ]; then
  echo "usage: $0 MODEL.gguf [THREADS...]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${DWELL_BUILD_DIR:-$root/build}
model=$1
shift
threads=("$@")
[ ${#threads[@]} -gt 0 ] || threads=("$(nproc)")
p=${DWELL_BENCH_P:-128}
n=${DWELL_BENCH_N:-64}
r=${DWELL_BENCH_R:-5}
rounds=${DWELL_BENCH_ROUNDS:-2}
mib=${DWELL_BENCH_MIB:-1024}
[ -f "$model" ] || { echo "$0: $model: no such file" >&2; exit 1; }

targets=(dwell-cli dwell-manifests dwell-bench-bandwidth)
for plugin in dwell-plugin-cpu dwell-plugin-llama; do
  # Only the plugins this configuration has.
  if cmake --build "$build" --target help | grep -q "^$plugin:"; then targets+=("$plugin"); fi
done
cmake --build "$build" --target "${targets[@]}" >/dev/null
dwell=$build/bin/dwell
probe=$build/bin/dwell-bench-bandwidth

llama_bench=
if [ -n "${LLAMA_CPP_DIR:-}" ] && [ -x "$LLAMA_CPP_DIR/build/bin/llama-bench" ]; then
  llama_bench=$LLAMA_CPP_DIR/build/bin/llama-bench
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for t in "${threads[@]}"; do
  : >"$work/dwell.jsonl"
  : >"$work/llama.jsonl"
  : >"$work/probe.jsonl"
  for ((round = 0; round < rounds; ++round)); do
    "$dwell" bench -m "$model" -p "$p" -n "$n" -r "$r" --threads "$t" --json >>"$work/dwell.jsonl"
    "$probe" --threads "$t" --mib "$mib" >>"$work/probe.jsonl"
    if [ -n "$llama_bench" ]; then
      # One array of test results per run: pp rows have n_gen 0, tg rows n_prompt 0.
      "$llama_bench" -m "$model" -p "$p" -n "$n" -r "$r" -t "$t" -o json 2>/dev/null |
        jq -c . >>"$work/llama.jsonl"
    fi
  done

  jq -n -c --argjson t "$t" --argjson rounds "$rounds" \
    --slurpfile dwell "$work/dwell.jsonl" --slurpfile llama "$work/llama.jsonl" \
    --slurpfile probe "$work/probe.jsonl" '
    def median: sort | if length == 0 then null
      elif length % 2 == 1 then .[length / 2 | floor]
      else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    def ratio(a; b): if a == null or b == null or b == 0 then null else a / b end;
    ($dwell | map(.prefill_tokens_per_second.median) | median) as $dpp |
    ($dwell | map(.decode_tokens_per_second.median) | median) as $dtg |
    ($dwell | map(.ttft_ms.median) | median) as $dttft |
    ($llama | map(.[] | select(.n_prompt > 0 and .n_gen == 0) | .avg_ts) | median) as $lpp |
    ($llama | map(.[] | select(.n_gen > 0 and .n_prompt == 0) | .avg_ts) | median) as $ltg |
    $dwell[0] as $d |
    ([range(0; [$dwell, $probe] | map(length) | min)] |
      map(ratio($d.weight_bytes_per_token * $dwell[.].decode_tokens_per_second.median;
                $probe[.].read_gb_per_s.max * 1e9)) | median) as $roofline |
    {threads: $t, model: $d.model, n_prompt: $d.n_prompt, n_gen: $d.n_gen,
     repetitions: $d.repetitions, rounds: $rounds, backends: $d.backends,
     dwell: {prefill_tokens_per_second: $dpp, decode_tokens_per_second: $dtg, ttft_ms: $dttft,
             peak_rss_bytes: ($dwell | map(.peak_rss_bytes) | max)}}
    + (if ($llama | length) > 0 then
         {llama_cpp: {prefill_tokens_per_second: $lpp, decode_tokens_per_second: $ltg},
          dwell_over_llama_cpp: {prefill: ratio($dpp; $lpp), decode: ratio($dtg; $ltg)}}
       else {} end)
    + {weight_bytes_per_token: $d.weight_bytes_per_token,
       read_gb_per_s: ($probe | map(.read_gb_per_s.max) | median),
       read_gb_per_s_rounds: ($probe | map(.read_gb_per_s.max)),
       decode_roofline_ratio: $roofline}'
done
