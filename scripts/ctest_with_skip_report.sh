#!/usr/bin/env bash
# Runs ctest in BUILD (extra arguments go to ctest), then prints the skip
# report (scripts/skip_report.sh) under its pass line; with CI=true a skip
# not on tests/skip_allowlist.txt fails. A failing ctest still gets its report.
#   scripts/ctest_with_skip_report.sh BUILD [CTEST ARGS...]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: ctest_with_skip_report.sh BUILD [CTEST ARGS...]}
shift
build=$(cd "$build" && pwd)  # ctest reads a relative --output-junit from the build folder
junit=$build/ctest-junit.xml
strict=()
[ "${CI:-}" = true ] && strict=(--strict)
rm -f "$junit"
rc=0
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --output-junit "$junit" "$@" || rc=$?
if [ -f "$junit" ]; then
  # DWELL_SKIP_ALLOWLIST_EXTRA: one more allow-list (the emulated run's).
  lists=("$root/tests/skip_allowlist.txt")
  [ -n "${DWELL_SKIP_ALLOWLIST_EXTRA:-}" ] && lists+=("$DWELL_SKIP_ALLOWLIST_EXTRA")
  "$root/scripts/skip_report.sh" "${strict[@]}" "$junit" "${lists[@]}" || [ $rc -ne 0 ] || rc=1
else
  echo "ctest_with_skip_report.sh: ctest wrote no $junit: no skip report" >&2
  [ $rc -ne 0 ] || rc=1
fi
exit $rc
