# Sourced by the scripts that run a user's example against a local
# `raftlockd dev` cluster (tests/quickstarts.sh, the Python and TypeScript
# packaging checks). Defines:
#
#   work                a temporary directory, removed on exit
#   start_dev_cluster   starts `$raftlockd dev` in the background and sets
#                       and exports RAFTLOCK_ENDPOINTS from what it prints
#   block FILE LANG N   prints the N-th fenced LANG block of markdown FILE
#                       (the example as a reader would paste it)
#
# and stops that cluster (by PID) on exit. The caller sets `raftlockd`.
work="$(mktemp -d)"
dev_pid=""
stop_dev_cluster() {
  if [ -n "$dev_pid" ]; then
    kill -INT "$dev_pid" 2>/dev/null || true
    wait "$dev_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap stop_dev_cluster EXIT

start_dev_cluster() {
  "$raftlockd" dev >"$work/dev.log" 2>&1 &
  dev_pid=$!
  for _ in $(seq 150); do
    grep -q '^RAFTLOCK_ENDPOINTS=' "$work/dev.log" && break
    sleep 0.2
  done
  RAFTLOCK_ENDPOINTS="$(sed -n 's/^RAFTLOCK_ENDPOINTS=//p' "$work/dev.log")"
  [ -n "$RAFTLOCK_ENDPOINTS" ] || { cat "$work/dev.log"; exit 1; }
  export RAFTLOCK_ENDPOINTS
}

# The n-th fenced block of a language in a markdown file.
block() { # file lang n
  awk -v lang="$2" -v want="$3" '
    $0 == "```" lang { n++; if (n == want) { inside = 1; next } }
    inside && /^```$/ { exit }
    inside' "$1"
}
