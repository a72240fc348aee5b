#!/usr/bin/env bash
# ctest Sdk.OutOfTreeBackendPluginBuildsAndRuns: installs this build with
# `cmake --install` into a temp prefix, builds samples/backend-skeleton out
# of tree against it (find_package(dwell)), and runs the installed `dwell`
# with the skeleton first in the manifest: the skeleton must take the adds
# and muls, and the text must equal the cpu backend's alone.
# Before that, the installed dwell-conformance runs on the skeleton with
# its conformance.toml (built beside it): every case passes or is declined
# as expected; a toml that wrongly says it declines add_same fails (an
# unexpected pass), and so does one that omits a decline.
# Exit 77 (skipped) when the model is missing.
set -euo pipefail
build=$1 source=$2
model=${DWELL_MODELS_DIR:-$source/../shared/models}/stories260K.gguf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/samples/backend-skeleton" -B "$work/skeleton" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/skeleton" >/dev/null
[ -f "$work/skeleton/libdwell-skeleton.so" ] || { echo "the skeleton plugin was not built"; exit 1; }

# The OEM path: the installed dwell-conformance on the out-of-tree plugin.
conformance=$work/prefix/bin/dwell-conformance
skeleton_so=$work/skeleton/libdwell-skeleton.so
"$conformance" --plugin "$skeleton_so" >"$work/conformance.out" 2>&1 ||
  { echo "dwell-conformance failed on the skeleton:"; cat "$work/conformance.out"; exit 1; }
grep -q "^expectations: $work/skeleton/libdwell-skeleton.conformance.toml$" "$work/conformance.out" ||
  { echo "dwell-conformance did not read the toml beside the plugin:"; cat "$work/conformance.out"; exit 1; }
counts=$(tail -n 1 "$work/conformance.out")
case $counts in
  *" 3 passed, "*" 0 failed, 0 unexpected passes, 0 unexpected declines") ;;
  *) echo "unexpected counts: $counts"; cat "$work/conformance.out"; exit 1 ;;
esac
echo "dwell-conformance on the skeleton: $counts"

# A toml that says the skeleton declines add_same, which it runs: it fails.
cp "$source/samples/backend-skeleton/conformance.toml" "$work/wrong-pass.toml"
printf '[[decline]]\ncases = ["add_same"]\nreason = "wrongly listed"\n' >>"$work/wrong-pass.toml"
rc=0
"$conformance" --plugin "$skeleton_so" --expectations "$work/wrong-pass.toml" \
  >"$work/wrong-pass.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] && grep -q "^UNEXPECTED PASS  *add_same: " "$work/wrong-pass.out" &&
  grep -q " 1 unexpected passes, 0 unexpected declines$" "$work/wrong-pass.out" ||
  { echo "a wrongly listed add_same did not fail as an unexpected pass (exit $rc):"
    cat "$work/wrong-pass.out"; exit 1; }

# A toml without the add_row decline: the plugin's decline is unexpected.
awk 'BEGIN { RS = ""; ORS = "\n\n" } !/"add_row"/' "$source/samples/backend-skeleton/conformance.toml" \
  >"$work/wrong-decline.toml"
rc=0
"$conformance" --plugin "$skeleton_so" --expectations "$work/wrong-decline.toml" \
  >"$work/wrong-decline.out" 2>&1 || rc=$?
[ "$rc" -eq 1 ] && grep -q "^UNEXPECTED DECLINE  *add_row: the plugin says: add: f32 operands" \
  "$work/wrong-decline.out" && grep -q " 0 unexpected passes, 1 unexpected declines$" "$work/wrong-decline.out" ||
  { echo "an unlisted decline of add_row did not fail as an unexpected decline (exit $rc):"
    cat "$work/wrong-decline.out"; exit 1; }

# The skeleton in generation, beside the cpu backend.
[ -f "$model" ] || { echo "SKIPPED: model $model not found"; exit 77; }
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
