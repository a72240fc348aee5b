# Sourced by scripts that drive `dwell serve`: start_server BUILD MODEL
# [serve options...] starts it on a free port in the background, sets
# $server_pid and $server_port (read from its start-up line), and stops it
# when the calling script exits. Fails, showing the server's log, if it
# does not come up within ten seconds.
start_server() {
  local build=$1 model=$2
  shift 2
  server_log=$(mktemp)
  "$build/bin/dwell" serve -m "$model" --port 0 "$@" 2>"$server_log" &
  server_pid=$!
  trap 'kill $server_pid 2>/dev/null; wait $server_pid 2>/dev/null; rm -f "$server_log"' EXIT
  server_port=
  for _ in $(seq 100); do
    server_port=$(sed -n 's/^dwell serve: [^:]*:\([0-9]*\) .*/\1/p' "$server_log")
    [ -n "$server_port" ] && return 0
    sleep 0.1
  done
  echo "dwell serve did not start:" >&2
  cat "$server_log" >&2
  return 1
}
