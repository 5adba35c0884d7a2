#!/usr/bin/env bash
# Admitted requests per second of a rate limit, raftlock (a fresh 3-node
# `raftlockd dev` cluster, fsync on; one take per token, and token leases of
# BLOCK tokens) next to a Redis GCRA Lua script on one redis-server (AOF
# with appendfsync always, the durable setting; no replica, so no
# failover), on the same machine in one invocation. The limit's rate is far
# above either, so the figures are the systems'. Prints each figure as the
# median of RUNS runs, and raftlock's as a ratio to Redis's.
#
#   client/bench/ratelimit.sh [DURATION] [RUNS]
#
# Needs `cargo build --release --bins` and Debian's redis-server (which
# has redis-benchmark). CLIENTS overrides "1 16 64"; BLOCK the lease size.
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION="${1:-8s}"
RUNS="${2:-3}"
CLIENTS="${CLIENTS:-1 16 64}"
BLOCK="${BLOCK:-100}"
CLIENT=target/release/raftlock
SERVER=target/release/raftlockd
[ -x "$CLIENT" ] && [ -x "$SERVER" ] || { echo "build first: cargo build --release --bins"; exit 1; }
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null \
  || { echo "needs redis-server and redis-benchmark (apt-get install redis-server)"; exit 1; }
OUT="$(mktemp -d)"
DEV_PID="" REDIS_PID=""
cleanup() {
  [ -n "$DEV_PID" ] && kill "$DEV_PID" 2>/dev/null && wait "$DEV_PID" 2>/dev/null
  [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null
  rm -rf "$OUT"
}
trap cleanup EXIT
secs=$(echo "$DURATION" | sed 's/s$//')
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# --- Redis: GCRA in Lua, time from the server (as redis-cell and most
# hand-written limiters do), one key.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
redis-server --port "$port" --bind 127.0.0.1 --dir "$OUT" --appendonly yes \
  --appendfsync always --save '' >"$OUT/redis.log" 2>&1 &
REDIS_PID=$!
for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
GCRA='local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = interval * tonumber(ARGV[2])
local tat = tonumber(redis.call("GET", KEYS[1]) or now)
if tat < now then tat = now end
local new = tat + tonumber(ARGV[3]) * interval
if new - now > tolerance then return {0, new - now - tolerance} end
redis.call("SET", KEYS[1], new, "PX", math.ceil(tolerance / 1000) + 1000)
return {1, 0}'
SHA=$(redis-cli -p "$port" SCRIPT LOAD "$GCRA")
declare -A redis_rate
for c in $CLIENTS; do
  vals=""
  for r in $(seq "$RUNS"); do
    # -n sized to last about DURATION at the rate measured before.
    n=$(( c * 2000 * secs ))
    out=$(redis-benchmark -p "$port" -c "$c" -n "$n" -q EVALSHA "$SHA" 1 bench:gcra 1 1000000000 1)
    vals+="$(echo "$out" | sed -n 's/.*: \([0-9.]*\) requests per second.*/\1/p' | tail -1)"$'\n'
  done
  redis_rate[$c]=$(printf '%s' "$vals" | median)
done
kill "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null || true; REDIS_PID=""

# --- raftlock
"$SERVER" dev >"$OUT/dev.txt" 2>&1 &
DEV_PID=$!
for _ in $(seq 100); do grep -q '^RAFTLOCK_ENDPOINTS=' "$OUT/dev.txt" && break; sleep 0.2; done
export RAFTLOCK_ENDPOINTS="$(sed -n 's/^RAFTLOCK_ENDPOINTS=//p' "$OUT/dev.txt")"
printf '%-8s %14s %14s %16s %10s %10s\n' clients "redis ops/s" "raftlock ops/s" "leased ops/s" "take x" "leased x"
for c in $CLIENTS; do
  take=$("$CLIENT" bench --workload ratelimit --clients "$c" --duration "$DURATION" --runs "$RUNS" \
    | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["median"]["ops_per_sec"])')
  leased=$("$CLIENT" bench --workload ratelimit --block "$BLOCK" --clients "$c" --duration "$DURATION" --runs "$RUNS" \
    | tail -1 | python3 -c 'import json,sys; print(json.load(sys.stdin)["median"]["ops_per_sec"])')
  r=${redis_rate[$c]}
  printf '%-8s %14.0f %14.0f %16.0f %10.2f %10.2f\n' "$c" "$r" "$take" "$leased" \
    "$(python3 -c "print($take / $r)")" "$(python3 -c "print($leased / $r)")"
done
