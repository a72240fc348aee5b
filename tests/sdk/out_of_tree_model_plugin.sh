#!/usr/bin/env bash
# ctest Sdk.OutOfTreeModelPluginBuildsAndRuns: installs this build with
# `cmake --install` into a temp prefix, builds samples/model-plugin out of
# tree against it (find_package(dwell)), turns stories260K.gguf into a
# model of the sample's architecture ("sample-llama": general.architecture
# and the llama.* keys renamed, tensors unchanged) and runs the installed
# `dwell` on it. The sample plugin must serve it, and its greedy text must
# equal the llama plugin's on the original file. A file missing a key the
# sample needs must be refused with one line naming that key. The model kit
# it uses must be compiled into it (nothing but dwell_plugin_query exported).
# Exit 77 (skipped) when the model is missing.
set -euo pipefail
build=$1 source=$2 rename=$3
model=${DWELL_MODELS_DIR:-$source/../shared/models}/stories260K.gguf
[ -f "$model" ] || { echo "SKIPPED: model $model not found"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "$1"; [ $# -gt 1 ] && cat "$2"; exit 1; }

cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/samples/model-plugin" -B "$work/sample" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/sample" >/dev/null
plugin=$work/sample/libdwell-sample-llama.so
[ -f "$plugin" ] || fail "the sample model plugin was not built"

# KIT model compiled the installed kit's sources into the plugin: no kit
# library is needed at run time, and no C++ symbol of dwell's leaves the
# module; only dwell_plugin_query does.
[ -f "$work/prefix/share/dwell/kit/model/model_kit.hpp" ] || fail "the installed SDK has no model kit"
readelf -d "$plugin" >"$work/needed.out"
! grep NEEDED "$work/needed.out" | grep -q dwell || fail "the plugin links a dwell library:" "$work/needed.out"
nm -DC --defined-only "$plugin" | sed 's/^[0-9a-f]* [A-Za-z] //' >"$work/exports.out"
grep -qx dwell_plugin_query "$work/exports.out" || fail "dwell_plugin_query is not exported:" "$work/exports.out"
! grep -q '^dwell::' "$work/exports.out" || fail "the plugin exports kit symbols:" "$work/exports.out"

"$rename" "$model" "$work/sample-llama.gguf" sample-llama
"$rename" "$model" "$work/no-blocks.gguf" sample-llama --drop sample-llama.block_count

# One manifest for both runs: the cpu backend, and the sample's build
# folder among the plugin folders (model plugins are found by scanning them).
cat >"$work/cpu.toml" <<TOML
[[backend]]
plugin = "cpu"
[plugins]
search_paths = ["$work/sample"]
TOML
run() {
  "$work/prefix/bin/dwell" run -m "$1" -p "Once upon a time" -n 32 --temp 0 -v \
    --manifest "$work/cpu.toml"
}
run "$model" >"$work/llama.out" 2>"$work/llama.err" ||
  fail "dwell run on the original model failed:" "$work/llama.err"
run "$work/sample-llama.gguf" >"$work/sample.out" 2>"$work/sample.err" ||
  fail "dwell run on the sample-llama model failed:" "$work/sample.err"

grep -q "model $model: llama by the llama plugin" "$work/llama.err" ||
  fail "the llama plugin did not serve the original model:" "$work/llama.err"
grep -q "model $work/sample-llama.gguf: sample-llama by the sample-llama plugin ($plugin)" \
  "$work/sample.err" || fail "the sample plugin did not serve the sample-llama model:" "$work/sample.err"
[ -s "$work/llama.out" ] || fail "the llama plugin generated no text:" "$work/llama.err"
cmp -s "$work/llama.out" "$work/sample.out" ||
  { echo "the sample's text differs from the llama plugin's:"; diff "$work/llama.out" "$work/sample.out"; exit 1; }

# Without -v, stderr holds only the error.
if "$work/prefix/bin/dwell" run -m "$work/no-blocks.gguf" -p "Once" -n 1 \
  --manifest "$work/cpu.toml" >/dev/null 2>"$work/no-blocks.err"; then
  fail "a model without sample-llama.block_count was accepted"
fi
[ "$(wc -l <"$work/no-blocks.err")" -eq 1 ] || fail "the refusal is not one line:" "$work/no-blocks.err"
grep -q "metadata key sample-llama.block_count is missing" "$work/no-blocks.err" ||
  fail "the refusal does not name the missing key:" "$work/no-blocks.err"

grep -m1 "by the sample-llama plugin" "$work/sample.err"
cat "$work/no-blocks.err"
head -c 200 "$work/sample.out"; echo
