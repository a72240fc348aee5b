#!/usr/bin/env bash
# Runs every libFuzzer target for longer than CI does (default 10 minutes
# each, two at a time, at low priority) and prints the markdown table of
# scripts/fuzz.sh: fuzzer, seconds, executions, corpus size (files),
# findings (crashes, leaks, timeouts, out-of-memory). The table is also
# written to $DWELL_FUZZ_BUILD/fuzz/long-run.md.
#   DWELL_FUZZ_MINUTES   minutes per fuzzer (default 10)
#   DWELL_FUZZ_PARALLEL  fuzzers at once (default 2)
#   DWELL_FUZZ_KEEP_GOING  1 (default): run on after a finding and count them all
#   and every variable scripts/fuzz.sh reads (DWELL_FUZZ_BUILD, DWELL_FUZZERS, ...).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${DWELL_FUZZ_BUILD:-$root/build-fuzz}"
minutes="${DWELL_FUZZ_MINUTES:-10}"
mkdir -p "$build/fuzz"
status=0
DWELL_FUZZ_BUILD="$build" DWELL_FUZZ_SECONDS=$((minutes * 60)) \
  DWELL_FUZZ_PARALLEL="${DWELL_FUZZ_PARALLEL:-2}" DWELL_FUZZ_KEEP_GOING="${DWELL_FUZZ_KEEP_GOING:-1}" \
  nice -n 10 "$root/scripts/fuzz.sh" >"$build/fuzz/long-run.md" || status=$?
cat "$build/fuzz/long-run.md"
exit $status
