#!/usr/bin/env bash
# Compression ratio and load time of raw vs zstd dwell packs, as JSON lines.
#   tests/bench/pack_compression.sh [BUILD_DIR]
# Models: ../shared/models/stories260K.gguf (if present; F32, and converted
# to q8 and q4g128) and a synthetic 1B-shape Llama (2048 wide, 16 layers,
# 8192 FFN; f16 weights of std 0.02, and Q4_0) written with `dwell synth`
# into $DWELL_BENCH_DIR (default /tmp/dwell-bench).
# Load times are warm-cache opens (validation, checksums, decompression),
# medians of 5 runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
work=${DWELL_BENCH_DIR:-/tmp/dwell-bench}
models=${DWELL_MODELS_DIR:-$root/../shared/models}
mkdir -p "$work"
cmake --build "$build" --target dwell-cli dwell-bench-model-open dwell-plugin-cpu dwell-plugin-llama >/dev/null
dwell=$build/bin/dwell
open_bench=$build/bin/dwell-bench-model-open

# "file quant" pairs: stories260K (F32) as it is and converted to int8 per
# channel and int4 in groups of 128; the synthetic 1B-shape model in f16
# and in Q4_0 (its weights are random: they barely compress).
inputs=()
if [ -f "$models/stories260K.gguf" ]; then
  for q in keep q8 q4g128; do inputs+=("$models/stories260K.gguf $q"); done
fi
synth=$work/synth-1B-f16.gguf
if [ ! -f "$synth" ]; then
  "$dwell" synth --n-embd 2048 --n-layer 16 --n-head 32 --n-head-kv 8 --n-ff 8192 --n-vocab 32000 \
    --type f16 -o "$synth" >/dev/null 2>&1
fi
synth_q4=$work/synth-1.1B-Q4_0.gguf
if [ ! -f "$synth_q4" ]; then
  "$dwell" synth --n-embd 2048 --n-layer 16 --n-head 32 --n-head-kv 8 --n-ff 8192 --n-vocab 32000 \
    --type q4_0 -o "$synth_q4" >/dev/null 2>&1
fi
inputs+=("$synth keep" "$synth_q4 keep")

for entry in "${inputs[@]}"; do
  in=${entry% *}
  quant=${entry##* }
  name=$(basename "$in" .gguf)
  for mode in none zstd; do
    out=$work/$name-$quant-$mode.dwell
    start=$(date +%s.%N)
    "$dwell" convert "$in" -o "$out" --quant "$quant" --compress "$mode" -q >/dev/null
    convert_s=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
    size=$(stat -c %s "$out")
    load=$("$open_bench" "$out" 5)
    echo "{\"input\": \"$name\", \"quant\": \"$quant\", \"compress\": \"$mode\", \"gguf_bytes\": $(stat -c %s "$in"), \"pack_bytes\": $size, \"convert_seconds\": $convert_s, \"load\": $load}"
  done
done
