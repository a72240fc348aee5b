#!/usr/bin/env bash
# ctest Sdk.Abi10PluginsRunOnTheCurrentRuntime: a backend plugin and a
# model plugin built against the frozen ABI 1.0 headers (tests/sdk/abi-1.0,
# their only SDK include path) load in this build's runtime and generate:
# `dwell devices` lists both as ABI 1.0; the 1.0 backend takes the adds and
# muls (placement log) and the text equals the cpu backend's alone; the 1.0
# model plugin serves its architecture with the same text as the current
# llama plugin; with streamed weights the 1.0 backend is kept off the nodes
# that read them. Exit 77 (skipped) when the model is missing.
set -euo pipefail
build=$1 source=$2 rename=$3 plugins=$4
model=${DWELL_MODELS_DIR:-$source/../shared/models}/stories260K.gguf
[ -f "$model" ] || { echo "SKIPPED: model $model not found"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "$1"; [ $# -gt 1 ] && cat "$2"; exit 1; }
dwell=$build/bin/dwell
backend=$plugins/libdwell-abi10-addmul.so
sample=$plugins/libdwell-sample-llama.so
[ -f "$backend" ] && [ -f "$sample" ] || fail "the ABI 1.0 plugins are not built in $plugins"

"$rename" "$model" "$work/sample-llama.gguf" sample-llama
cat >"$work/abi10.toml" <<TOML
[[backend]]
plugin = "abi10-addmul"
[[backend]]
plugin = "cpu"
[plugins]
search_paths = ["$plugins"]
TOML
printf '[[backend]]\nplugin = "cpu"\n[plugins]\nsearch_paths = ["%s"]\n' "$plugins" >"$work/cpu.toml"

"$dwell" devices --manifest "$work/abi10.toml" >"$work/devices.out" 2>&1 ||
  fail "dwell devices failed:" "$work/devices.out"
grep -q "abi10-addmul 1.0.0  ABI 1.0  backend  $backend" "$work/devices.out" ||
  fail "dwell devices does not list the 1.0 backend as ABI 1.0:" "$work/devices.out"
grep -q "sample-llama 0.1.0  ABI 1.0  model  $sample" "$work/devices.out" ||
  fail "dwell devices does not list the 1.0 model plugin as ABI 1.0:" "$work/devices.out"

run() {
  "$dwell" run -m "$1" -p "Once upon a time" -n 32 --temp 0 -v --manifest "$work/$2.toml"
}
run "$model" cpu >"$work/reference.out" 2>"$work/reference.err" ||
  fail "dwell run with the cpu backend failed:" "$work/reference.err"
run "$model" abi10 >"$work/backend.out" 2>"$work/backend.err" ||
  fail "dwell run with the 1.0 backend failed:" "$work/backend.err"
run "$work/sample-llama.gguf" abi10 >"$work/both.out" 2>"$work/both.err" ||
  fail "dwell run with both 1.0 plugins failed:" "$work/both.err"

[ -s "$work/reference.out" ] || fail "the cpu backend generated no text:" "$work/reference.err"
for err in backend both; do
  grep -q "abi10-addmul/addmul0: .* nodes, .*\[add.*mul" "$work/$err.err" ||
    fail "the 1.0 backend took no adds and muls ($err run):" "$work/$err.err"
done
grep -q "model $work/sample-llama.gguf: sample-llama by the sample-llama plugin ($sample)" \
  "$work/both.err" || fail "the 1.0 model plugin did not serve sample-llama:" "$work/both.err"
for out in backend both; do
  cmp -s "$work/reference.out" "$work/$out.out" ||
    { echo "the $out run's text differs from the cpu backend's alone:";
      diff "$work/reference.out" "$work/$out.out"; exit 1; }
done

# Streamed weights change address between steps, which a 1.0 backend cannot
# be told (DWELL_TENSOR_VOLATILE is 1.2): it keeps the adds, loses the muls
# by a norm weight, saying why, and the text stays the same.
"$dwell" run -m "$model" -p "Once upon a time" -n 32 --temp 0 -v --manifest "$work/abi10.toml" \
  --weights stream --weight-budget 1 >"$work/stream.out" 2>"$work/stream.err" ||
  fail "dwell run with streamed weights and the 1.0 backend failed:" "$work/stream.err"
grep -q "abi10-addmul/addmul0: .* nodes, .*\[addx10\]" "$work/stream.err" ||
  fail "with streamed weights the 1.0 backend should take only the adds:" "$work/stream.err"
grep -q "mul -> cpu/cpu0 (declined by abi10-addmul/addmul0: built against dwell ABI 1.0, which predates streamed weights" \
  "$work/stream.err" || fail "the 1.0 backend's refusal of streamed weights is not reported:" "$work/stream.err"
cmp -s "$work/reference.out" "$work/stream.out" ||
  { echo "the streamed run's text differs from the cpu backend's alone:";
    diff "$work/reference.out" "$work/stream.out"; exit 1; }

grep -E "ABI 1.0" "$work/devices.out"
grep -m1 "abi10-addmul/addmul0:" "$work/both.err"
grep -m1 "by the sample-llama plugin" "$work/both.err"
head -c 200 "$work/both.out"; echo
