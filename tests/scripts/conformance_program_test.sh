#!/usr/bin/env bash
# ctest Conformance.ProgramChecksItsInputs: dwell-conformance on the cpu
# plugin with hand-written expectations. A malformed conformance.toml or a
# bad option exits 2 with one line naming the file:line or the flag; a
# listed decline the plugin takes and gets right exits 1 (UNEXPECTED PASS);
# a [tolerance] override replaces the case's bound; --option reaches the
# plugin.
#   conformance_program_test.sh BUILD_DIR
set -uo pipefail
bin=$1/bin/dwell-conformance
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAILED: $*"; exit 1; }

# usage NAME WANT_IN_MESSAGE ARGS...: exit 2, one line on stderr, naming WANT.
usage() {
  local name=$1 want=$2 rc
  shift 2
  "$bin" "$@" >"$work/out" 2>"$work/err"
  rc=$?
  [ "$rc" -eq 2 ] || fail "$name: exit $rc, want 2: $(cat "$work/err" "$work/out")"
  [ "$(wc -l <"$work/err")" -eq 1 ] || fail "$name: want one line: $(cat "$work/err")"
  grep -qF -- "$want" "$work/err" || fail "$name: no '$want' in: $(cat "$work/err")"
  [ -s "$work/out" ] && fail "$name: ran cases: $(cat "$work/out")"
  echo "ok: $name: $(cat "$work/err")"
}
toml() { printf "$2" >"$work/$1.toml"; }
mkdir -p "$work/libdwell-x.so"

usage "no --plugin" "--plugin is required"
usage "unknown flag" "--bogus" --plugin cpu --bogus
usage "plugin not found" "libdwell-nosuch.so is in no plugin folder" --plugin nosuch
usage "misnamed plugin file" "must be named libdwell-NAME.so" --plugin "$0"
usage "option without =" "--option threads: expected KEY=VALUE" --plugin cpu --option threads
usage "filter matching nothing" "--filter zzz*: matches no case" --plugin cpu --filter 'zzz*'
usage "missing expectations" "--expectations $work/none.toml: no such file" \
  --plugin cpu --expectations "$work/none.toml"
usage "expectations that are a folder" "--expectations $work: a folder, not a file" \
  --plugin cpu --expectations "$work"
usage "expectations that are a device" "--expectations /dev/zero: not a regular file" \
  --plugin cpu --expectations /dev/zero
usage "a plugin that is a folder" "--plugin $work/libdwell-x.so: a folder, not a file" \
  --plugin "$work/libdwell-x.so"
toml glob '[[decline]]\ncases = ["add_same", "ad_*"]\nreason = "x"\n'
usage "glob matching no case" "$work/glob.toml:2:22: [[decline]] cases: 'ad_*' matches no case" \
  --plugin cpu --expectations "$work/glob.toml"
toml reason '[[decline]]\ncases = ["add_same"]\n'
usage "decline without reason" "$work/reason.toml:1:1: [[decline]] without a reason" \
  --plugin cpu --expectations "$work/reason.toml"
toml key '\n[[decline]]\ncases = ["add_same"]\nreason = "x"\nwhy = "y"\n'
usage "unknown key" "$work/key.toml:5:7: unknown key 'why' in [[decline]]" \
  --plugin cpu --expectations "$work/key.toml"
toml op '[tolerance]\nmatmull = 1e-3\n'
usage "tolerance for no op" "$work/op.toml:2:11: [tolerance] 'matmull' is not an op" \
  --plugin cpu --expectations "$work/op.toml"
toml syntax '[[decline]\n'
usage "toml syntax" "$work/syntax.toml:1:" --plugin cpu --expectations "$work/syntax.toml"

# A decline listed for a case the cpu runs right: an unexpected pass.
toml pass '[[decline]]\ncases = ["add_*"]\nreason = "wrongly listed"\n'
"$bin" --plugin cpu --option threads=2 --expectations "$work/pass.toml" --filter 'add_*' \
  --filter swiglu >"$work/out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "unexpected pass: exit $rc: $(cat "$work/out")"
grep -q "^UNEXPECTED PASS  *add_same: taken and right, but conformance.toml (line 1) says it declines (wrongly listed)" \
  "$work/out" || fail "unexpected pass not reported: $(cat "$work/out")"
grep -qx "3 cases: 1 passed, 0 declined as expected, 0 failed, 2 unexpected passes, 0 unexpected declines" \
  "$work/out" || fail "unexpected pass counts: $(cat "$work/out")"
echo "ok: unexpected pass: $(tail -n 1 "$work/out")"

# A zero tolerance for swiglu replaces its 1e-5: float rounding fails it;
# add keeps its own.
toml tol '[tolerance]\nswiglu = 0\n[options]\nthreads = "2"\n'
"$bin" --plugin cpu --expectations "$work/tol.toml" --filter swiglu --filter add_same \
  >"$work/out" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "tolerance override: exit $rc: $(cat "$work/out")"
grep -q "^FAILED  *swiglu: [0-9]* of 384 values off; worst error .*, bound 0$" "$work/out" &&
  grep -q "^pass  *add_same" "$work/out" && grep -qx "options: threads=2" "$work/out" ||
  fail "tolerance override: $(cat "$work/out")"
echo "ok: tolerance override: $(grep swiglu "$work/out")"

# --option reaches the plugin: a value it rejects fails its initialisation.
"$bin" --plugin cpu --option threads=lots --filter add_same >"$work/out" 2>&1
rc=$?
[ "$rc" -eq 1 ] && grep -q "initialisation failed: .*threads" "$work/out" ||
  fail "--option threads=lots: exit $rc: $(cat "$work/out")"
echo "ok: --option: $(cat "$work/out")"

# --list: every case once.
"$bin" --list >"$work/list" || fail "--list failed"
[ "$(sort -u "$work/list" | wc -l)" -eq "$(wc -l <"$work/list")" ] || fail "duplicate case names"
grep -qx attention_fp8_e4m3_offset_keys_paged "$work/list" || fail "--list: $(cat "$work/list")"
echo "ok: --list: $(wc -l <"$work/list") cases"
