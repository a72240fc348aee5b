#!/usr/bin/env bash
# ctest Sdk.OutOfTreeCApiAppBuildsAndRuns: installs this build into a temp
# prefix, then, as an application developer would:
#  - compiles dwell.h alone, with only -I<prefix>/include, as C (C99, C11)
#    and C++ (C++11, C++20), -Wall -Wextra -pedantic -Werror;
#  - builds tests/sdk/capi-app out of tree with find_package(dwell) and
#    target_link_libraries(app dwell::capi), and runs it on stories260K:
#    its stdout must be the text alone, equal to the installed `dwell run`'s
#    greedy text, and every library log line must have come through its
#    callback (a plugin's line included), none written by the library.
# Exit 77 (skipped) when the model is missing, after the header checks.
# A fifth argument: the sanitizer flags the app is built with (those of a
# sanitized libdwell).
set -euo pipefail
build=$1 source=$2 cc=$3 cxx=$4 sanitize=${5:-}
model=${DWELL_MODELS_DIR:-$source/../shared/models}/stories260K.gguf
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
inc=$work/prefix/include
printf '#include <dwell.h>\nint main(void) { return dwell_capi_version() == 0; }\n' >"$work/alone.c"
cp "$work/alone.c" "$work/alone.cpp"
for std in c99 c11; do
  "$cc" -std=$std -Wall -Wextra -pedantic -Werror -I"$inc" -c "$work/alone.c" -o "$work/alone.o" ||
    { echo "dwell.h does not compile alone as $std"; exit 1; }
done
for std in c++11 c++20; do
  "$cxx" -std=$std -Wall -Wextra -pedantic -Werror -I"$inc" -c "$work/alone.cpp" -o "$work/alone.o" ||
    { echo "dwell.h does not compile alone as $std"; exit 1; }
done

[ -f "$model" ] || { echo "SKIPPED: model $model not found"; exit 77; }
cmake -S "$source/tests/sdk/capi-app" -B "$work/app" -G Ninja -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_EXE_LINKER_FLAGS="$sanitize" >/dev/null
cmake --build "$work/app" >/dev/null
printf '[[backend]]\nplugin = "cpu"\n[cpu]\nthreads = 2\n' >"$work/cpu.toml"
prompt="Once upon a time"
"$work/app/capi-app" "$work/cpu.toml" "$model" "$prompt" 24 >"$work/app.out" 2>"$work/app.err" ||
  { echo "capi-app failed:"; cat "$work/app.err"; exit 1; }
"$work/prefix/bin/dwell" run -m "$model" -p "$prompt" -n 24 --temp 0 --manifest "$work/cpu.toml" \
  >"$work/dwell.out" 2>/dev/null
cmp -s "$work/app.out" "$work/dwell.out" ||
  { echo "the app's stdout differs from dwell run's text:"; diff "$work/dwell.out" "$work/app.out"; exit 1; }
if grep -v '^log ' "$work/app.err"; then
  echo "the library wrote the lines above to stderr itself, not through the callback"; exit 1
fi
grep -q '^log 1: backend cpu/cpu0 selected' "$work/app.err" ||
  { echo "no info line reached the callback:"; cat "$work/app.err"; exit 1; }
tail -n 1 "$work/app.err"
cat "$work/app.out"
