#!/usr/bin/env bash
# scripts/skip_report.sh against a JUnit file in ctest's format: a gtest
# skip and a script skip (exit 77, "SKIPPED: ...") on the allow-list pass
# under --strict; one that is not fails it and is named; the grouped count
# is printed either way.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
report=$root/scripts/skip_report.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

cat >"$work/allow.txt" <<'LIST'
# comment lines and blank lines are ignored

: CPU lacks [a-z0-9]+$
^Script\.Skips: the &lt;host&gt; has no widget$
LIST
case_xml() {  # name status output
  printf '\t<testcase name="%s" classname="%s" time="0.1" status="%s">\n' "$1" "$1" "$2"
  [ "$2" = notrun ] && printf '\t\t<skipped message="skipped"/>\n'
  printf '\t\t<system-out>%s\n</system-out>\n\t</testcase>\n' "$3"
}
{
  echo '<?xml version="1.0" encoding="UTF-8"?>'
  echo '<testsuite name="t" tests="4" failures="0" skipped="2">'
  case_xml "Simd/Levels.Dot/neon  # GetParam() = 4-byte object &lt;03-00&gt;" notrun \
    "[ RUN      ] Simd/Levels.Dot/neon
../tests/x.cpp:10: Skipped
CPU lacks neon
[  SKIPPED ] Simd/Levels.Dot/neon (0 ms)"
  case_xml "Script.Skips" notrun "starting
SKIPPED: the &amp;lt;host&amp;gt; has no widget"
  case_xml "Plain.Passes" run "[ RUN      ] Plain.Passes
[       OK ] Plain.Passes (0 ms)"
} >"$work/allowed.xml"

out=$("$report" --strict "$work/allowed.xml" "$work/allow.txt" 2>&1) ||
  fail "listed skips failed --strict: $out"
grep -q '^skipped: 2 (0 not on the allow-list' <<<"$out" || fail "wrong count: $out"
grep -q '1 CPU lacks neon' <<<"$out" || fail "no group for the gtest reason: $out"

# One more skip, for a reason nobody reviewed (a missing package).
sed 's#</testsuite>##' "$work/allowed.xml" >"$work/unlisted.xml"
{
  case_xml "OpenCl.Runs" notrun "../tests/o.cpp:49: Skipped
no usable OpenCL device: libOpenCL.so.1 not found"
  echo '</testsuite>'
} >>"$work/unlisted.xml"
out=$("$report" --strict "$work/unlisted.xml" "$work/allow.txt" 2>&1) &&
  fail "an unlisted skip passed --strict: $out"
grep -q '^skipped: 3 (1 not on the allow-list' <<<"$out" || fail "wrong count: $out"
grep -q 'OpenCl.Runs: no usable OpenCL device' <<<"$out" || fail "unlisted skip not named: $out"
# Without --strict (a developer's run) it is reported, not fatal.
"$report" "$work/unlisted.xml" "$work/allow.txt" >/dev/null || fail "non-strict run failed"
echo "skip report: 3 cases passed"
