#!/usr/bin/env bash
# The layering check passes on the tree as it is, and rejects planted
# violations in a copy of core/, naming the file, the line and the edge:
# an upward include (platform -> llm), a sideways one (graph -> memory,
# same level), a tool in core (model -> dwell/tools) and a flat path.
# Usage: check_layering_test.sh ROOT
set -uo pipefail
root=$(cd "${1:?usage: check_layering_test.sh ROOT}" && pwd)
check=$root/tests/scripts/check_layering.sh
fail() { echo "FAIL: $*"; exit 1; }

out=$("$check" "$root") || fail "the tree itself breaks the layering:"$'\n'"$out"
echo "$out"

work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT
cp -r "$root/core" "$work/core"
plant() {  # plant FILE INCLUDE: adds the include after the file's first line
  sed -i "1a #include \"$2\"" "$work/$1"
}
plant core/platform/text_file.cpp dwell/core/llm/sampler.hpp
plant core/graph/graph.cpp dwell/core/memory/memory_pool.hpp
plant core/model/weight_streamer.cpp dwell/tools/progress_bar.hpp
plant core/kv/kv_cache.cpp kv_page_pool.hpp
out=$("$check" "$work") && fail "planted violations passed:"$'\n'"$out"
echo "$out"
grep -qxF "core/platform/text_file.cpp:2: platform may not include dwell/core/llm/sampler.hpp (llm): llm is not below platform" <<<"$out" ||
  fail "the upward include platform -> llm is not named"
grep -qxF "core/graph/graph.cpp:2: graph may not include dwell/core/memory/memory_pool.hpp (memory): memory is not below graph" <<<"$out" ||
  fail "the sideways include graph -> memory is not named"
grep -qF "core/model/weight_streamer.cpp:2: model may not include dwell/tools/progress_bar.hpp" <<<"$out" ||
  fail "a tool included from core is not named"
grep -qF "core/kv/kv_cache.cpp:2: kv includes \"kv_page_pool.hpp\" by a path that names no folder" <<<"$out" ||
  fail "a flat include path is not named"
[[ $(grep -c 'may not include\|names no folder' <<<"$out") -eq 4 ]] || fail "expected exactly the 4 planted violations"
echo "PASS: the layering check rejects the 4 planted violations"
