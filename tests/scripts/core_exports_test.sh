#!/usr/bin/env bash
# libdwell exports its interface (what carries DWELL_CORE_API: what the
# hosts use) and hides the rest; and every program of the build holds one
# core: either the shared libdwell or the static dwell_core_static (the
# tests of internals), never both (two plugin loaders over the same
# dlopen()ed plugins, two sets of types behind one name).
# Usage: core_exports_test.sh BUILD (NM and READELF: the toolchain's, default nm, readelf)
set -uo pipefail
build=$(cd "${1:?usage: core_exports_test.sh BUILD}" && pwd)
lib=$build/lib/libdwell.so
[[ -f $lib ]] || { echo "FAIL: no $lib (build the dwell target)"; exit 1; }
nm=${NM:-nm} readelf=${READELF:-readelf}
bad=0
fail() { echo "FAIL: $*"; bad=1; }

exports=$("$nm" -D --defined-only -C "$lib" | cut -d' ' -f3-)
echo "libdwell.so: $(wc -l <<<"$exports") defined dynamic symbols"

# A sample of what the hosts call, and the types they catch or call through.
for sym in 'dwell::Runtime::Runtime(' 'dwell::Model::load(' 'dwell::Session::decode(' \
  'dwell::Tokenizer::encode(' 'dwell::GgufFile::open(' 'dwell::generate_text(' 'dwell::version()' \
  'typeinfo for dwell::Error' 'typeinfo for dwell::ContextFullError' \
  'typeinfo for dwell::ModelSource'; do
  grep -qF -- "$sym" <<<"$exports" || fail "libdwell does not export $sym (hosts use it)"
done
# Internals no host uses, and the pimpls' insides.
for cls in RuntimeThermal ThermalGovernor ThermalSensors PidController Scheduler GraphBuilder \
  StepWorker IsolatedStep MappedFile bpe::BpeTokenizer Runtime::Impl WeightStreamer::Impl; do
  n=$(grep -c "^dwell::$cls::" <<<"$exports")
  [[ $n -eq 0 ]] || fail "libdwell exports $n symbols of dwell::$cls, an internal"
done

# One core per program: a program that loads libdwell (or the C API over
# it) defines no core code of its own.
# (grep reads to the end: with pipefail, an early grep -q exit fails nm.)
core_copy() { "$nm" -C --defined-only "$1" 2>/dev/null | grep -E ' [Tt] dwell::PluginLoader::PluginLoader\(' >/dev/null; }
needs_libdwell() { "$readelf" -d "$1" 2>/dev/null | grep -E 'NEEDED.*\[libdwell(_capi)?\.so' >/dev/null; }
programs=0
for f in "$build"/bin/* "$build"/lib/*.so "$build"/tests/sdk/dwell-test-*; do
  [[ -f $f && $f != "$lib" ]] || continue
  head -c 4 "$f" | grep -q 'ELF' || continue
  programs=$((programs + 1))
  if needs_libdwell "$f" && core_copy "$f"; then
    fail "$(basename "$f") links libdwell and holds a copy of the core as well"
  fi
done
# The two kinds are both there: the CLI on libdwell, the core's tests on the static core.
if [[ -f $build/bin/dwell ]]; then
  needs_libdwell "$build/bin/dwell" && ! core_copy "$build/bin/dwell" ||
    fail "the dwell program does not run on the shared libdwell"
fi
if [[ -f $build/bin/dwell_core_tests ]]; then
  ! needs_libdwell "$build/bin/dwell_core_tests" && core_copy "$build/bin/dwell_core_tests" ||
    fail "dwell_core_tests does not run on the static core alone"
fi
[[ $bad -eq 0 ]] || exit 1
echo "PASS: libdwell exports its interface only; $programs programs hold one core each"
