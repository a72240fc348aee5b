#!/usr/bin/env bash
# Every relative link in the tree's Markdown, [text](path) or
# [text](path#anchor), names a file or folder that exists, and an anchor
# into a Markdown file names one of its headings (GitHub's slugs), so docs
# that move cannot leave dangling links behind. Usage: docs_links_test.sh [ROOT]
set -uo pipefail
root=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
cd "$root" || exit 1
slugs() {  # the anchors GitHub gives a file's headings
  sed -n 's/^#\{1,6\} \(.*\)$/\1/p' "$1" | tr 'A-Z' 'a-z' | tr -d '`' |
    sed 's/[^a-z0-9 _-]//g; s/ /-/g'
}
bad=0 checked=0
while IFS= read -r -d '' md; do
  dir=$(dirname "$md")
  # Fenced code blocks hold TOML and shell, not links.
  while IFS= read -r target; do
    case $target in http://* | https://* | mailto:*) continue ;; esac
    path=${target%%#*} anchor=
    [[ $target == *#* ]] && anchor=${target#*#}
    file=$md
    if [[ -n $path ]]; then
      file=$dir/$path
      if [[ ! -e $file ]]; then
        echo "$md: link to $target: $path does not exist"; bad=1; continue
      fi
    fi
    if [[ -n $anchor && $file == *.md ]] && ! slugs "$file" | grep -qxF -- "$anchor"; then
      echo "$md: link to $target: no heading '#$anchor' in $file"; bad=1
    fi
    checked=$((checked + 1))
  done < <(awk '/^ *```/ { fence = !fence; next } !fence' "$md" |
             grep -o '\]([^) ]*)' | sed 's/^](//; s/)$//')
done < <(find . \( -name .git -o -name 'build*' -o -name node_modules \) -prune -o \
           -name '*.md' -print0)
[[ $bad == 0 ]] && echo "all $checked relative links resolve"
exit $bad
