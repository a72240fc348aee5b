#!/usr/bin/env bash
# Bytes of weights a mixture-of-experts model reads per decoded token,
# measured from the page tables (see moe_weight_bytes.cpp): one JSON line per
# token (touched, expected = shared weights + the chosen experts, total, the
# experts touched vs chosen per layer), then a summary line. Exit status 1
# when any token read other weight pages than the router's choice implies,
# 77 when this machine cannot measure it.
#
#   tests/bench/moe_weight_bytes.sh [--build DIR] [--dir DIR] [--tokens N] [--threads T]
#       [--type f32|f16] [--n-layer L] [--n-embd E] [--n-ff F] [--n-expert X]
#       [--n-expert-used K] [--seed S]
#
# The model is written to --dir (default: DIR/bench-moe-weight-bytes in the
# build folder), which must not be on tmpfs: the bench drops the file from
# the page cache before every token.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build
dir=
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
bin=$build/bin/dwell-bench-moe-weight-bytes
[ -x "$bin" ] || { echo "moe_weight_bytes.sh: $bin not found; build it with: cmake --build $build --target dwell-bench-moe-weight-bytes" >&2; exit 1; }
exec "$bin" --dir "${dir:-$build/bench-moe-weight-bytes}" "${args[@]}"
