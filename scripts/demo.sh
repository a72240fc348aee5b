#!/usr/bin/env bash
# Quick start: install what is missing, build, and generate text with the
# speed printed. Uses ../shared/models/stories260K.gguf (or $DWELL_MODELS_DIR)
# when present, else a model written by `dwell synth`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${DWELL_BUILD_DIR:-$root/build}

"$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target dwell-cli dwell-plugin-cpu dwell-plugin-llama dwell-manifests

models=${DWELL_MODELS_DIR:-$root/../shared/models}
model=$models/stories260K.gguf
if [ ! -f "$model" ]; then
  model=$build/synth-llama.gguf
  echo "dwell: $models/stories260K.gguf not found; running a synthetic model with random weights" >&2
  echo "dwell: (for real text, pass any llama GGUF: $build/bin/dwell run -m MODEL.gguf -p PROMPT)" >&2
  [ -f "$model" ] || "$build/bin/dwell" synth --n-embd 256 --n-layer 4 --n-head 8 --n-head-kv 4 --n-ff 688 -o "$model"
fi
exec "$build/bin/dwell" run -m "$model" -p "${DWELL_PROMPT:-Once upon a time}" -n "${DWELL_N_PREDICT:-128}" "$@"
