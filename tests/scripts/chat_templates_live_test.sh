#!/usr/bin/env bash
# Renders the chat templates with Jinja2 now and checks dwell's engine
# against those renderings. Usage: PYTHON3 DATA_DIR CORE_TEST_BINARY [EMULATOR...]
# (a cross build runs the test binary through its emulator, as ctest does).
set -euo pipefail
python=$1 data=$2 tests=$3
shift 3
if ! "$python" -c 'import jinja2' 2>/dev/null; then
  echo "chat templates: $python has no jinja2 module (install python3-jinja2: scripts/install-deps.sh)"
  exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$python" "$data/render_reference.py" "$out"
DWELL_CHAT_TEMPLATE_EXPECTED=$out "$@" "$tests" --gtest_filter='JinjaReference.*'
