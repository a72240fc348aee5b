#!/usr/bin/env bash
# Reads the JUnit file ctest wrote (ctest --output-junit) and prints the
# skipped tests' count grouped by reason. A skip whose "NAME: reason" no line
# of the allow-list matches is unexpected: listed, and with --strict (CI)
# the script exits 1, so a missing install step cannot pass as green.
#   scripts/skip_report.sh [--strict] JUNIT_XML [ALLOW_LIST...]
# ALLOW_LIST defaults to tests/skip_allowlist.txt (several: a skip on any
# of them is expected): extended regular expressions, one a line, '#'
# starts a comment line.
# The reason is the line after gtest's "Skipped", else a line starting
# "SKIPPED: " (the script-driven tests' convention), else the last line the
# test printed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
strict=0
if [ "${1:-}" = --strict ]; then
  strict=1
  shift
fi
junit=${1:?usage: skip_report.sh [--strict] JUNIT_XML [ALLOW_LIST...]}
shift
allows=("$@")
[ ${#allows[@]} -gt 0 ] || allows=("$root/tests/skip_allowlist.txt")
[ -f "$junit" ] || { echo "skip_report.sh: $junit not found (run ctest with --output-junit)" >&2; exit 2; }
for allow in "${allows[@]}"; do
  [ -f "$allow" ] || { echo "skip_report.sh: allow-list $allow not found" >&2; exit 2; }
done
allow_names=$(for allow in "${allows[@]}"; do basename "$allow"; done | paste -sd+ -)

# One "NAME<TAB>REASON" line per skipped test.
skipped=$(awk '
  function unescape(s) {
    gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&quot;/, "\"", s)
    gsub(/&apos;/, "\047", s); gsub(/&#10;/, " ", s); gsub(/&amp;/, "\\&", s)
    return s
  }
  function finish() {
    if (!notrun) return
    r = gtest_reason != "" ? gtest_reason : (marked != "" ? marked : last)
    if (r == "") r = "(no reason printed)"
    print name "\t" r
  }
  /<testcase / {
    finish()
    notrun = ($0 ~ /status="notrun"/)
    name = $0
    sub(/.*<testcase name="/, "", name)
    sub(/".*/, "", name)
    name = unescape(name)
    sub(/  # GetParam\(\).*/, "", name)
    gtest_reason = ""; marked = ""; last = ""; after_skipped = 0; in_out = 0
    next
  }
  /<system-out>/ { in_out = 1; sub(/.*<system-out>/, "") }
  in_out {
    line = $0
    if (line ~ /<\/system-out>/) { sub(/<\/system-out>.*/, "", line); in_out = 0 }
    line = unescape(line)
    sub(/\r$/, "", line)
    if (after_skipped && gtest_reason == "" && line != "") gtest_reason = line
    after_skipped = (line ~ /: Skipped$/)
    if (marked == "" && line ~ /^SKIPPED: /) { marked = line; sub(/^SKIPPED: /, "", marked) }
    if (line != "" && line !~ /^\[/ && line !~ /: Skipped$/) last = line
  }
  END { finish() }
' "$junit")

total=0
unexpected=()
if [ -n "$skipped" ]; then
  total=$(printf '%s\n' "$skipped" | wc -l)
  patterns=$(cat "${allows[@]}" | grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' || true)
  while IFS=$'\t' read -r name reason; do
    if [ -z "$patterns" ] || ! printf '%s: %s\n' "$name" "$reason" | grep -Eq -f <(printf '%s\n' "$patterns"); then
      unexpected+=("$name: $reason")
    fi
  done <<<"$skipped"
fi

echo "skipped: $total (${#unexpected[@]} not on the allow-list $allow_names)"
if [ "$total" -gt 0 ]; then
  # Grouped by reason, the names of a group's ops and types folded so that
  # one design decision reads as one line.
  printf '%s\n' "$skipped" | cut -f2 | sed -E 's/declines [A-Za-z0-9_]+:/declines …:/' |
    sort | uniq -c | sort -rn | sed 's/^/  /'
fi
if [ ${#unexpected[@]} -gt 0 ]; then
  echo "unexpected skips (install what they need, or add a reviewed line to $allow_names):"
  printf '  %s\n' "${unexpected[@]}" | head -20
  [ ${#unexpected[@]} -le 20 ] || echo "  … and $((${#unexpected[@]} - 20)) more"
  if [ $strict -eq 1 ]; then
    echo "skip_report.sh: ${#unexpected[@]} unexpected skips: failing (CI)" >&2
    exit 1
  fi
fi
exit 0
