#!/usr/bin/env bash
# The soak run (tests/bench/soak.cpp): N generations (default 1000) with random
# valid parameters and random cancellations, on several sessions driven
# from several threads, on stories260K. Prints one JSON line: the soak's
# own figures (generations, completed, cancellations, failures, RSS at the
# start, every tenth of the run, the end and the peak) plus the sanitizer
# of the build, what LeakSanitizer found at exit (ASan builds; null
# elsewhere) and how much RSS grew from the first tenth to the end.
# Fails on any failure, any leak or sanitizer report, or (without a
# sanitizer, whose quarantine keeps freed memory resident) RSS growing by
# more than 10% after the first tenth.
#
#   tests/bench/soak.sh [--build DIR] [--model FILE] [--generations N] [--threads N]
#                 [--sessions-per-thread N] [--cancel-percent P] [--seed S]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build
model=${DWELL_MODELS_DIR:-$root/../shared/models}/stories260K.gguf
generations=1000
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --generations) generations=$2; shift 2 ;;
    --threads|--sessions-per-thread|--cancel-percent|--seed) args+=("$1" "$2"); shift 2 ;;
    *) echo "soak.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "soak.sh: model $model not found (set DWELL_MODELS_DIR or --model)" >&2; exit 77; }
[ -x "$build/bin/dwell-soak" ] ||
  { echo "soak.sh: $build/bin/dwell-soak not built (cmake --build $build --target dwell-soak)" >&2; exit 1; }

sanitize=$(sed -n 's/^DWELL_SANITIZE:[A-Z]*=//p' "$build/CMakeCache.txt" | tr '[:upper:]' '[:lower:]')
case $sanitize in
  thread) kind=thread ;;
  on|yes|y|true|1|address) kind=address ;;
  *) kind=none ;;
esac
if [ $kind = address ]; then
  # The same settings as scripts/test.sh (see there for use_tls=0).
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export LSAN_OPTIONS=${LSAN_OPTIONS:-use_tls=0:print_suppressions=0:suppressions=$root/scripts/lsan.supp}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
elif [ $kind = thread ]; then
  export TSAN_OPTIONS=${TSAN_OPTIONS:-suppressions=$root/scripts/tsan.supp:second_deadlock_stack=1}
fi

err=$(mktemp)
trap 'rm -f "$err"' EXIT
status=0
out=$("$build/bin/dwell-soak" -m "$model" --generations "$generations" ${args[@]+"${args[@]}"} \
  2>"$err") || status=$?

leaks=null
if [ $kind = address ]; then
  leaks=$(sed -n 's/.*SUMMARY: AddressSanitizer: \([0-9]*\) byte(s) leaked.*/\1/p' "$err" | head -1)
  leaks=${leaks:-0}
fi
reports=$(grep -c -E '^(==[0-9]+==ERROR|WARNING: ThreadSanitizer|SUMMARY: (Address|Undefined|Thread)Sanitizer)' \
  "$err" || true)
first=$(printf '%s' "$out" | sed -n 's/.*"rss_samples_kb":\[\([0-9]*\).*/\1/p')
end=$(printf '%s' "$out" | sed -n 's/.*"rss_end_kb":\([0-9]*\).*/\1/p')
growth=null
[ -n "$first" ] && [ -n "$end" ] && growth=$(awk -v a="$first" -v b="$end" 'BEGIN {printf "%.4f", b / a}')
[ -n "$out" ] || out='{}'
echo "${out%\}},\"sanitizer\":\"$kind\",\"leaked_bytes\":$leaks,\"sanitizer_reports\":$reports,\"rss_growth_ratio\":$growth,\"exit_status\":$status}"

ok=1
[ "$status" -eq 0 ] || ok=0
[ "$reports" -eq 0 ] || ok=0
[ "$leaks" = null ] || [ "$leaks" -eq 0 ] || ok=0
if [ $kind = none ] && [ "$growth" != null ]; then
  awk -v g="$growth" 'BEGIN {exit !(g <= 1.10)}' || ok=0
fi
if [ $ok -eq 0 ]; then
  echo "soak.sh: the soak run failed; the end of its stderr:" >&2
  tail -n 40 "$err" >&2
  exit 1
fi
