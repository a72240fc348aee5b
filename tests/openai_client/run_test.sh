#!/usr/bin/env bash
# ctest OpenAiClient.StreamsAChatCompletion: installs the pinned openai npm
# package into the build folder (npm ci, cached), starts `dwell serve` with
# an API key on a free port, and runs stream_chat.mjs against it.
# Exit 77 (skipped) when node/npm or the model is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1
model=${DWELL_MODELS_DIR:-$here/../../../shared/models}/stories260K.gguf
command -v node >/dev/null && command -v npm >/dev/null || { echo "SKIPPED: node and npm are needed (apt install nodejs npm)"; exit 77; }
[ -f "$model" ] || { echo "SKIPPED: model $model not found"; exit 77; }
work=$build/openai-client
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$here/stream_chat.mjs" "$work/"
if [ ! -d "$work/node_modules/openai" ]; then
  (cd "$work" && npm ci --no-audit --no-fund --loglevel=error) || { echo "npm ci failed (is the npm registry reachable?)" >&2; exit 1; }
fi
. "$here/../../scripts/start_server.sh"
start_server "$build" "$model" --api-key test-key --chat-template chatml
port=$server_port
node "$work/stream_chat.mjs" "http://127.0.0.1:$port/v1" test-key
