#!/usr/bin/env bash
# Two server builds side by side, in one invocation on one machine: for each
# build a fresh `raftlockd dev` 3-node cluster (fsync on), the same client
# binary and bench workloads (median of RUNS runs each), run in the order
# base, new, new, base, base, new... so drift of a noisy machine hits both,
# and so does whatever favours the first or the second cluster of a round
# (run against itself with a fixed order, the second build came out 0.87x
# at 64 clients, slower in each of 4 rounds). Prints each figure as the
# median over its clusters and as a ratio to the base build.
#
#   client/bench/compare.sh BASE_RAFTLOCKD NEW_RAFTLOCKD [DURATION] [RUNS] [ROUNDS]
#
# e.g. `cp target/release/raftlockd /tmp/raftlockd.base`, change and rebuild,
# then `client/bench/compare.sh /tmp/raftlockd.base target/release/raftlockd`.
# WORKLOADS overrides the list ("uncontended:1 uncontended:64 contended:16");
# a third field sets the connections the clients share ("uncontended:64:1").
# BASE_BENCH_ARGS / NEW_BENCH_ARGS add bench flags to one side only, so a
# client-side change is compared on the same server build, e.g.
#   BASE_BENCH_ARGS=--unary client/bench/compare.sh target/release/raftlockd target/release/raftlockd
# It also prints each build's process CPU time per op (acquire + release) on
# the leader and the followers, read from /proc around each bench (so it
# includes the gaps between runs), which works for builds that do not report
# it themselves; at one client an op is two log entries.
set -euo pipefail
cd "$(dirname "$0")/../.."
BASE="$1"
NEW="$2"
DURATION="${3:-10s}"
RUNS="${4:-3}"
ROUNDS="${5:-2}"
WORKLOADS="${WORKLOADS:-uncontended:1 uncontended:64 contended:16}"
CLIENT=target/release/raftlock
[ -x "$CLIENT" ] || { echo "build first: cargo build --release --bins"; exit 1; }
OUT="$(mktemp -d)"
DEV_PID=""
cleanup() { [ -n "$DEV_PID" ] && kill "$DEV_PID" 2>/dev/null && wait "$DEV_PID" 2>/dev/null; rm -rf "$OUT"; }
trap cleanup EXIT
# "pid:ticks" of user + system time for each node of the dev cluster.
node_cpu() {
  for p in $(pgrep -P "$DEV_PID"); do
    echo -n "$p:$(awk '{print $14 + $15}' "/proc/$p/stat") "
  done
}

for round in $(seq "$ROUNDS"); do
  order="base new"
  [ $((round % 2)) = 0 ] && order="new base"
  for label in $order; do
    if [ "$label" = base ]; then bin="$BASE"; else bin="$NEW"; fi
    "$bin" dev >"$OUT/dev.txt" 2>&1 &
    DEV_PID=$!
    for _ in $(seq 100); do grep -q '^RAFTLOCK_ENDPOINTS=' "$OUT/dev.txt" && break; sleep 0.2; done
    export RAFTLOCK_ENDPOINTS="$(sed -n 's/^RAFTLOCK_ENDPOINTS=//p' "$OUT/dev.txt")"
    if [ "$label" = base ]; then extra="${BASE_BENCH_ARGS:-}"; else extra="${NEW_BENCH_ARGS:-}"; fi
    for w in $WORKLOADS; do
      IFS=: read -r workload clients conns <<<"$w"
      cpu_before="$(node_cpu)"
      # shellcheck disable=SC2086 # extra holds several flags
      "$CLIENT" bench --workload "$workload" --clients "$clients" ${conns:+--connections "$conns"} \
        --duration "$DURATION" --runs "$RUNS" $extra >"$OUT/bench.txt"
      echo "round $round $label $w: $(grep -E '^median' "$OUT/bench.txt")"
      tail -1 "$OUT/bench.txt" | sed "s/^/$label $w /" >>"$OUT/results.txt"
      echo "$label $w $(tail -1 "$OUT/bench.txt" | python3 -c 'import json,sys; print(sum(r["ops"] for r in json.load(sys.stdin)["runs"]))') $cpu_before / $(node_cpu)" >>"$OUT/cpu.txt"
    done
    kill "$DEV_PID"; wait "$DEV_PID" 2>/dev/null || true; DEV_PID=""
  done
done

python3 - "$OUT/results.txt" "$OUT/cpu.txt" "$(getconf CLK_TCK)" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    label, w, doc = line.split(" ", 2)
    rows.setdefault((w, label), []).append(json.loads(doc)["median"])
print()
print(f"{'workload':<20} {'build':<5} {'clusters':>8} {'ops/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'ops/s vs base':>14} {'p50 vs base':>12} {'p99 vs base':>12}")
for w in dict.fromkeys(k[0] for k in rows):
    med = {l: {f: statistics.median(r[f] for r in rows[(w, l)]) for f in ("ops_per_sec", "p50_ms", "p99_ms")}
           for l in ("base", "new")}
    for l in ("base", "new"):
        m, b = med[l], med["base"]
        print(f"{w.replace(':', ' x', 1).replace(':', ' conns '):<20} {l:<5} {len(rows[(w, l)]):>8} {m['ops_per_sec']:>8.0f} {m['p50_ms']:>8.2f} {m['p99_ms']:>8.2f}"
              f" {m['ops_per_sec']/b['ops_per_sec']:>13.2f}x {m['p50_ms']/b['p50_ms']:>11.2f}x {m['p99_ms']/b['p99_ms']:>11.2f}x")

# CPU per op: the busiest node is the leader.
tick_us = 1e6 / int(sys.argv[3])
cpu = {}
for line in open(sys.argv[2]):
    label, w, ops, rest = line.split(" ", 3)
    before, after = (dict(t.split(":") for t in half.split()) for half in rest.split("/"))
    used = sorted((int(after[p]) - int(before[p])) * tick_us / max(int(ops), 1)
                  for p in before if p in after)
    if used:
        cpu.setdefault((w, label), []).append((used[-1], statistics.mean(used[:-1]) if len(used) > 1 else 0.0))
print()
print(f"{'workload':<20} {'build':<5} {'leader CPU/op':>14} {'followers':>10} {'leader vs base':>15} {'followers vs base':>18}")
for w in dict.fromkeys(k[0] for k in cpu):
    if (w, "base") not in cpu or (w, "new") not in cpu:
        continue
    med = {l: [statistics.median(x[i] for x in cpu[(w, l)]) for i in (0, 1)] for l in ("base", "new")}
    for l in ("base", "new"):
        m, b = med[l], med["base"]
        print(f"{w.replace(':', ' x', 1).replace(':', ' conns '):<20} {l:<5} {m[0]:>11.0f} us {m[1]:>7.0f} us"
              f" {m[0]/b[0] if b[0] else 0:>14.2f}x {m[1]/b[1] if b[1] else 0:>17.2f}x")
PY
