#!/usr/bin/env bash
# Recomputes reference_ids.txt: the ids llama.cpp's llama-tokenize gives for
# every line of texts.txt, on the vocabulary files the BPE and SPM reference
# tests write.
#   tests/data/bpe/regenerate.sh BUILD_DIR LLAMA_TOKENIZE [STORIES260K_GGUF]
# BUILD_DIR holds bin/dwell_core_tests; LLAMA_TOKENIZE is llama.cpp's
# llama-tokenize binary. With STORIES260K_GGUF, the SPM reference lines are
# recomputed too.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$1
llama_tokenize=$2
stories=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The tests write the vocabulary files (and their fingerprints) before they
# compare anything; with a stale reference they then fail, as expected here.
DWELL_BPE_EXPORT_DIR=$tmp "$build/bin/dwell_core_tests" \
  --gtest_filter='BpeReference.IdsEqualLlamaCpp:SpmReference.IdsEqualLlamaCpp' >/dev/null 2>&1 || true
for f in fingerprint.txt spm_fingerprint.txt; do
  [ -s "$tmp/$f" ] || { echo "regenerate.sh: the tests wrote no $f (no vocabulary files)" >&2; exit 1; }
done

# ids MODEL MODE TEXT_LINE: "1 2 3" for the unescaped text.
ids() {
  local flags=(--ids --log-disable --no-escape --stdin)
  [ "$2" = plain ] && flags+=(--no-parse-special)
  printf '%b' "$3" | "$llama_tokenize" -m "$1" "${flags[@]}" | tr -d '[],' | xargs
}

out=$tmp/reference_ids.txt
{
  echo "# Computed by tests/data/bpe/regenerate.sh with llama.cpp's llama-tokenize (see README.md)."
  echo "# llama.cpp: $("$llama_tokenize" --version 2>&1 | grep -m1 -i 'version' || echo unknown)"
  echo "# <pre> <special|plain> <line of texts.txt, from 0>: <ids>"
  cat "$tmp/fingerprint.txt" "$tmp/spm_fingerprint.txt"
  # vocab_spm-gemma3.gguf is the Gemma-3-like SPM vocabulary.
  for pre in qwen2 gpt-2 llama-bpe lfm2 smollm gpt-4o spm-gemma3; do
    for mode in special plain; do
      i=0
      while IFS= read -r line || [ -n "$line" ]; do
        echo "$pre $mode $i: $(ids "$tmp/vocab_$pre.gguf" "$mode" "$line")"
        i=$((i + 1))
      done <"$here/texts.txt"
    done
  done
  if [ -n "$stories" ]; then
    # SPM with special-token parsing: the texts that hold <s>, </s> or <unk>.
    i=0
    while IFS= read -r line || [ -n "$line" ]; do
      case $line in
        *"<s>"* | *"</s>"* | *"<unk>"*)
          for mode in special plain; do
            echo "stories260K $mode $i: $(ids "$stories" "$mode" "$line")"
          done
          ;;
      esac
      i=$((i + 1))
    done <"$here/texts.txt"
  fi
} >"$out"
mv "$out" "$here/reference_ids.txt"
echo "wrote $here/reference_ids.txt"
