#!/usr/bin/env bash
# The core's layering, checked from its includes (CI runs it as a test):
#
#   base -> platform -> memory, graph, formats, thermal -> config -> text
#        -> backend -> kv -> runtime -> model -> scheduler -> session -> llm
#
# A file in core/<folder>/ or core/include/dwell/core/<folder>/ may include
# headers of its own folder and of folders on a lower level, never one on
# its own level or above; nothing in core includes hosts/ (dwell/tools/...,
# the server, the CLI) or tests/. Every violation is printed as
#   FILE:LINE: <folder> may not include <header> (<its folder>): <rule>
# and the script exits 1. Usage: check_layering.sh [ROOT]
set -uo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
cd "$root" || exit 2

declare -A level=(
  [base]=0 [platform]=1 [memory]=2 [graph]=2 [formats]=2 [thermal]=2 [config]=3 [text]=4
  [backend]=5 [kv]=6 [runtime]=7 [model]=8 [scheduler]=9 [session]=10 [llm]=11)

bad=0 checked=0
folder_of() {  # core/<f>/x.cpp or core/include/dwell/core/<f>/x.hpp -> f
  local p=${1#core/}
  p=${p#include/dwell/core/}
  [[ $p == */* ]] && echo "${p%%/*}"
}
while IFS= read -r -d '' file; do
  from=$(folder_of "$file")
  if [[ -z $from ]]; then
    [[ $file == core/include/dwell/core/dwell_core.hpp ]] && continue
    echo "$file: a core file outside every concept folder (put it in one of: ${!level[*]})"
    bad=1; continue
  fi
  if [[ -z ${level[$from]+x} ]]; then
    echo "$file: unknown core folder '$from' (add it to tests/scripts/check_layering.sh with its level)"
    bad=1; continue
  fi
  while IFS=: read -r line inc; do
    checked=$((checked + 1))
    case $inc in
      dwell/core/*/*)
        to=${inc#dwell/core/}; to=${to%%/*}
        if [[ -z ${level[$to]+x} ]]; then
          echo "$file:$line: $from may not include $inc: no core folder '$to'"; bad=1
        elif [[ $to != "$from" && ${level[$to]} -ge ${level[$from]} ]]; then
          echo "$file:$line: $from may not include $inc ($to): $to is not below $from"; bad=1
        fi ;;
      dwell/core/*)
        [[ $inc == dwell/core/dwell_core.hpp ]] &&
          { echo "$file:$line: $from may not include the umbrella header $inc (hosts only)"; bad=1; } ;;
      dwell/tools/* | *server* | *cli_common* | *test* | *gtest*)
        echo "$file:$line: $from may not include $inc: core includes nothing of hosts/ or tests/"
        bad=1 ;;
      dwell/*.h) ;;  # the plain-C SDK headers sit below everything
      *) echo "$file:$line: $from includes \"$inc\" by a path that names no folder (use dwell/core/<folder>/...)"
         bad=1 ;;
    esac
  done < <(grep -n -oE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("[^"]+"|<dwell/[^>]+>)' "$file" |
           sed -E 's/^([0-9]+):[^"<]*["<]([^">]+)[">]$/\1:\2/')
done < <(find core -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) -print0 | sort -z)
if [[ $bad -ne 0 ]]; then
  echo "layering: core includes break the rules above (see the level table in $0)"
  exit 1
fi
echo "layering: $checked includes in core follow the rules"
