#!/usr/bin/env bash
# ctest Sdk.OutOfTreeBackendPluginBuildsAndRuns: installs this build with
# `cmake --install` into a temp prefix, builds samples/backend-skeleton out
# of tree against it (find_package(dwell)), and runs the installed `dwell`
# with the skeleton first in the manifest: the skeleton must take the adds
# and muls, and the text must equal the cpu backend's alone.
# Exit 77 (skipped) when the model is missing.
set -euo pipefail
build=$1 source=$2
model=${DWELL_MODELS_DIR:-$source/../shared/models}/stories260K.gguf
[ -f "$model" ] || { echo "SKIPPED: model $model not found"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/samples/backend-skeleton" -B "$work/skeleton" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/skeleton" >/dev/null
[ -f "$work/skeleton/libdwell-skeleton.so" ] || { echo "the skeleton plugin was not built"; exit 1; }

cat >"$work/skeleton.toml" <<TOML
[[backend]]
plugin = "skeleton"
[[backend]]
plugin = "cpu"
[plugins]
search_paths = ["$work/skeleton"]
TOML
printf '[[backend]]\nplugin = "cpu"\n' >"$work/cpu.toml"
run() {
  "$work/prefix/bin/dwell" run -m "$model" -p "Once upon a time" -n 32 --temp 0 -v --manifest "$1"
}
run "$work/skeleton.toml" >"$work/skeleton.out" 2>"$work/skeleton.err"
run "$work/cpu.toml" >"$work/cpu.out" 2>/dev/null
grep -q "skeleton/skeleton0: .*add" "$work/skeleton.err" ||
  { echo "the skeleton took no adds:"; cat "$work/skeleton.err"; exit 1; }
grep -q "skeleton/skeleton0: .*mul" "$work/skeleton.err" ||
  { echo "the skeleton took no muls:"; cat "$work/skeleton.err"; exit 1; }
cmp -s "$work/skeleton.out" "$work/cpu.out" ||
  { echo "the text differs from the cpu backend's:"; diff "$work/cpu.out" "$work/skeleton.out"; exit 1; }
grep -m1 "skeleton/skeleton0" "$work/skeleton.err"
head -c 200 "$work/skeleton.out"; echo
