#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/) with clang + ASan/UBSan and runs each
# for $DWELL_FUZZ_SECONDS from its generated seed corpus (and its
# dictionary, tests/fuzz/dicts/<fuzzer>.dict, when there is one), then prints a
# markdown table: fuzzer, seconds, executions, corpus size, findings.
# Exits non-zero if any fuzzer finds a crash, leak, timeout, out-of-memory
# or sanitizer report; the reproducer is left in
# $DWELL_FUZZ_BUILD/fuzz/artifacts/<fuzzer>/ and its log in
# $DWELL_FUZZ_BUILD/fuzz/<fuzzer>.log.
#   DWELL_FUZZ_BUILD     build folder (default <repo>/build-fuzz)
#   DWELL_FUZZ_SECONDS   seconds per fuzzer (default 60)
#   DWELL_FUZZ_PARALLEL  fuzzers run at once (default 1)
#   DWELL_FUZZERS        which fuzzers, separated by spaces (default: all)
#   DWELL_FUZZ_KEEP_GOING  1: run on after a finding (libFuzzer's fork mode),
#                        so a long run reports every finding, not the first
#   DWELL_FUZZ_JOBS      build parallelism (default nproc)
#   DWELL_MODELS_DIR     where tok512.model is (default <repo>/../shared/models)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DWELL_FUZZ_BUILD:-$root/build-fuzz}"
seconds="${DWELL_FUZZ_SECONDS:-60}"
parallel="${DWELL_FUZZ_PARALLEL:-1}"
jobs="${DWELL_FUZZ_JOBS:-$(nproc)}"
models="${DWELL_MODELS_DIR:-$root/../shared/models}"
all_fuzzers="gguf_reader pack_reader manifest tokenizer_model tokenizer_text session_file \
             openai_request device_facts jinja_template"
read -r -a fuzzers <<<"${DWELL_FUZZERS:-$all_fuzzers}"

"$root/scripts/install-deps.sh"
# libFuzzer ships in clang's runtime package, not with the compiler.
if ! command -v clang++ >/dev/null ||
   ! compgen -G "/usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-*.a" >/dev/null; then
  echo "fuzz: installing clang and libFuzzer" >&2
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" apt-get update -qq
  "${as_root[@]}" apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev >/dev/null
fi

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDWELL_FUZZ=ON -DDWELL_SANITIZE=ON -DDWELL_BUILD_TESTS=OFF \
  -DDWELL_PLUGIN_CPU=OFF -DDWELL_PLUGIN_LLAMA=OFF -DDWELL_MODELS_DIR="$models" >/dev/null
targets=()
for f in "${fuzzers[@]}"; do targets+=("${f}_fuzzer"); done
cmake --build "$build" -j"$jobs" --target "${targets[@]}" dwell-fuzz-seeds

# The text fuzzer tokenizes with the real tok512.model when it is at hand.
if [ -f "$models/tok512.model" ]; then
  export DWELL_FUZZ_SPM_MODEL="$models/tok512.model"
fi

# Runs one fuzzer; writes its table row to $build/fuzz/<fuzzer>.row and
# returns non-zero on a finding.
run_one() {
  local f="$1"
  local seeds="$build/fuzz/corpus/$f"
  local work="$build/fuzz/work/$f"  # grows across runs; new inputs land here
  local artifacts="$build/fuzz/artifacts/$f"
  local log="$build/fuzz/$f.log"
  local stamp="$build/fuzz/$f.started"
  mkdir -p "$work" "$artifacts"
  touch "$stamp"
  local extra=()
  [ -f "$root/fuzz/dicts/$f.dict" ] && extra+=(-dict="$root/fuzz/dicts/$f.dict")
  [ "${DWELL_FUZZ_KEEP_GOING:-0}" = 1 ] &&
    extra+=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  local status=0
  "$build/bin/${f}_fuzzer" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=2048 -malloc_limit_mb=2048 "${extra[@]}" -artifact_prefix="$artifacts/" \
    "$work" "$seeds" >"$log" 2>&1 || status=$?
  local execs corpus findings
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  # Fork mode prints no final stats: its last "#N" status line counts them.
  [ -n "$execs" ] || execs=$(sed -n 's/^#\([0-9]*\)[:\t ].*/\1/p' "$log" | tail -n 1)
  corpus=$(find "$work" -type f | wc -l)
  findings=$(find "$artifacts" -type f -newer "$stamp" | wc -l)
  if [ "$status" -ne 0 ] && [ "$findings" -eq 0 ]; then findings=1; fi
  echo "| $f | $seconds | ${execs:-?} | $corpus | $findings |" >"$build/fuzz/$f.row"
  if [ "$status" -ne 0 ] || [ "$findings" -ne 0 ]; then
    echo "fuzz: $f FAILED (exit $status, $findings findings); see $log and $artifacts/" >&2
    tail -n 40 "$log" >&2
    return 1
  fi
  echo "fuzz: $f: ${execs:-?} executions in ${seconds}s, corpus $corpus files" >&2
}

echo "fuzz: ${#fuzzers[@]} fuzzers, ${seconds}s each, $parallel at a time" >&2
status=0
running=0
for f in "${fuzzers[@]}"; do
  if [ "$running" -ge "$parallel" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_one "$f" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done

echo "| fuzzer | seconds | executions | corpus (files) | findings |"
echo "| --- | ---: | ---: | ---: | ---: |"
for f in "${fuzzers[@]}"; do cat "$build/fuzz/$f.row"; done
exit $status
