#!/usr/bin/env bash
# Decode speed with a deep context: dwell's paged KV cache beside llama.cpp,
# on the same file and thread count, one JSON line per KV type.
#   tests/bench/kv_depth_vs_llamacpp.sh MODEL.gguf [KV_TYPES...]   (default: f16)
# dwell: `dwell bench --depth D -p 1 -n N` (the context is filled with D
# tokens once; each repetition forks it and decodes N tokens greedily).
# llama.cpp: llama-bench has no depth option, so decode at depth is the
# time of "-pg D,N" (D prompt tokens, then N generated) minus the time of
# "-p D" from the same run: N tokens generated after D, as dwell measures.
# Runs alternate A B A B; figures are medians over the rounds. Also prints
# dwell's KV bytes per token and peak RSS.
# Environment:
#   DWELL_BUILD_DIR   dwell build folder (default <repo>/build)
#   LLAMA_CPP_DIR     a llama.cpp checkout with build/bin/llama-bench built
#   DWELL_BENCH_DEPTH / _N / _R / _ROUNDS / _THREADS
#                     depth (2048), generated tokens (128), repetitions (3),
#                     rounds (2), threads (nproc)
set -euo pipefail
if ! command -v jq >/dev/null; then
  as_root=(); [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get install -y -qq jq >/dev/null
fi
if [ $# -lt 1 ]; then
  echo "usage: $0 MODEL.gguf [KV_TYPES...]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${DWELL_BUILD_DIR:-$root/build}
model=$1
shift
types=("$@")
[ ${#types[@]} -gt 0 ] || types=(f16)
depth=${DWELL_BENCH_DEPTH:-2048}
n=${DWELL_BENCH_N:-128}
r=${DWELL_BENCH_R:-3}
rounds=${DWELL_BENCH_ROUNDS:-2}
threads=${DWELL_BENCH_THREADS:-$(nproc)}
[ -f "$model" ] || { echo "$0: $model: no such file" >&2; exit 1; }

targets=(dwell-cli dwell-manifests)
for plugin in dwell-plugin-cpu dwell-plugin-llama; do
  if cmake --build "$build" --target help | grep -q "^$plugin:"; then targets+=("$plugin"); fi
done
cmake --build "$build" --target "${targets[@]}" >/dev/null
dwell=$build/bin/dwell
llama_bench=
if [ -n "${LLAMA_CPP_DIR:-}" ] && [ -x "$LLAMA_CPP_DIR/build/bin/llama-bench" ]; then
  llama_bench=$LLAMA_CPP_DIR/build/bin/llama-bench
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ctx=$((depth + n + 64))

for t in "${types[@]}"; do
  : >"$work/dwell.jsonl"
  : >"$work/llama.jsonl"
  for ((round = 0; round < rounds; ++round)); do
    "$dwell" bench -m "$model" --depth "$depth" -p 1 -n "$n" -r "$r" --ctx "$ctx" \
      --kv-type "$t" --threads "$threads" --json >>"$work/dwell.jsonl"
    if [ -n "$llama_bench" ]; then
      # llama.cpp names its types as dwell does, except fp8 (which it lacks);
      # it stores a quantized V cache only with flash attention on.
      fa=0
      case "$t" in f16 | f32) ;; q8_0) fa=1 ;; *) continue ;; esac
      if "$llama_bench" -m "$model" -p "$depth" -n 0 -pg "$depth,$n" -r "$r" -t "$threads" \
        -ctk "$t" -ctv "$t" -fa "$fa" -o json >"$work/llama.json" 2>"$work/llama.err"; then
        jq -c . "$work/llama.json" >>"$work/llama.jsonl"
      else
        echo "$0: llama-bench failed for --kv-type $t: $(tail -1 "$work/llama.err")" >&2
      fi
    fi
  done
  jq -n -c --arg t "$t" --argjson depth "$depth" --argjson n "$n" --argjson threads "$threads" \
    --slurpfile dwell "$work/dwell.jsonl" --slurpfile llama "$work/llama.jsonl" '
    def median: sort | if length == 0 then null
      elif length % 2 == 1 then .[length / 2 | floor]
      else (.[length / 2 - 1] + .[length / 2]) / 2 end;
    ($dwell | map(.decode_tokens_per_second.median) | median) as $dtg |
    # A round whose -pg run took no longer than its -p run (the shared
    # machine slowed the -p run) has no decode time: it is left out and
    # counted in rounds_discarded.
    ($llama | map(
        ((.[] | select(.n_prompt > 0 and .n_gen > 0) | .avg_ns) -
         (.[] | select(.n_prompt > 0 and .n_gen == 0) | .avg_ns)) as $ns |
        if $ns > 0 then $n / ($ns / 1e9) else null end)) as $rounds |
    ($rounds | map(select(. != null)) | median) as $ltg |
    $dwell[0] as $d |
    {model: $d.model, kv_type: $t, depth: $depth, n_gen: $n, threads: $threads,
     llama_cpp_flash_attn: ($t == "q8_0"),
     kv_bytes_per_token: $d.kv_bytes_per_token,
     dwell: {decode_tokens_per_second: $dtg,
             peak_rss_bytes: ($dwell | map(.peak_rss_bytes) | max)}}
    + (if ($llama | length) > 0 then
         {llama_cpp: {decode_tokens_per_second: $ltg,
                      rounds_discarded: ($rounds | map(select(. == null)) | length)},
          dwell_over_llama_cpp: {decode: (if $ltg then $dtg / $ltg else null end)}}
       else {} end)'
done
