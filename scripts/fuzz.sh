#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang + ASan/UBSan and runs each
# for $DWELL_FUZZ_SECONDS (default 60) from its generated seed corpus.
# Exits non-zero if any fuzzer finds a crash, leak, timeout or sanitizer
# report; the reproducer is left in $DWELL_FUZZ_BUILD/fuzz/artifacts/.
#   DWELL_FUZZ_BUILD    build folder (default <repo>/build-fuzz)
#   DWELL_FUZZ_SECONDS  seconds per fuzzer (default 60)
#   DWELL_FUZZ_JOBS     build parallelism (default nproc)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DWELL_FUZZ_BUILD:-$root/build-fuzz}"
seconds="${DWELL_FUZZ_SECONDS:-60}"
jobs="${DWELL_FUZZ_JOBS:-$(nproc)}"

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
  -DDWELL_PLUGIN_CPU=OFF -DDWELL_PLUGIN_LLAMA=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target gguf_reader_fuzzer pack_reader_fuzzer dwell-fuzz-seeds

status=0
for reader in gguf pack; do
  seeds="$build/fuzz/corpus/$reader"
  work="$build/fuzz/work/$reader"       # grows across runs; new inputs land here
  artifacts="$build/fuzz/artifacts/$reader"
  mkdir -p "$work" "$artifacts"
  echo "fuzz: $reader reader for ${seconds}s" >&2
  log="$build/fuzz/$reader.log"
  if ! "$build/bin/${reader}_reader_fuzzer" -max_total_time="$seconds" -print_final_stats=1 \
      -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts/" "$work" "$seeds" >"$log" 2>&1; then
    echo "fuzz: $reader reader FAILED; see $log and $artifacts/" >&2
    tail -n 40 "$log" >&2
    status=1
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+.*DONE" "$log" >&2 || true
done
exit $status
