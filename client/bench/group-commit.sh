#!/usr/bin/env bash
# Group commit against no grouping, in one invocation on one machine: for each
# setting a fresh `raftlockd dev` 3-node cluster (fsync on), the same bench
# workloads (median of --runs runs each), and the leader's own counters of
# commands per entry and fsyncs. Prints one summary table at the end with
# the ratio of each figure to the no-grouping baseline.
#
#   cargo build --release --bins && client/bench/group-commit.sh [DURATION] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
DURATION="${1:-10s}"
RUNS="${2:-3}"
BIN=target/release
[ -x "$BIN/raftlockd" ] && [ -x "$BIN/raftlock" ] || { echo "build first: cargo build --release --bins"; exit 1; }
OUT="$(mktemp -d)"
DEV_PID=""
cleanup() { [ -n "$DEV_PID" ] && kill "$DEV_PID" 2>/dev/null && wait "$DEV_PID" 2>/dev/null; rm -rf "$OUT"; }
trap cleanup EXIT

metric_sum() { # FILE NAME -> the sum of a Prometheus series over its labels
  awk -v n="$1" '$1 ~ "^"n"({|$)" {s+=$2} END {printf "%.0f", s}' "$2"
}

for setting in 1 1024; do
  RAFTLOCK_MAX_BATCH_COMMANDS=$setting "$BIN/raftlockd" dev >"$OUT/dev-$setting.txt" 2>&1 &
  DEV_PID=$!
  for _ in $(seq 100); do grep -q '^RAFTLOCK_ENDPOINTS=' "$OUT/dev-$setting.txt" && break; sleep 0.2; done
  export RAFTLOCK_ENDPOINTS="$(sed -n 's/^RAFTLOCK_ENDPOINTS=//p' "$OUT/dev-$setting.txt")"
  METRICS=$(sed -n 's/^# metrics, \/health and \/ready: //p' "$OUT/dev-$setting.txt")
  for w in "uncontended 1" "uncontended 64" "contended 16"; do
    set -- $w
    "$BIN/raftlock" bench --workload "$1" --clients "$2" --duration "$DURATION" --runs "$RUNS" \
      | tee "$OUT/bench-$setting-$1-$2.txt" | grep -E '^median'
    tail -1 "$OUT/bench-$setting-$1-$2.txt" >"$OUT/json-$setting-$1-$2.txt"
  done
  # The leader has the largest proposal count; its figures explain the run.
  best=0
  for m in $METRICS; do
    curl -fsS "$m" >"$OUT/m.txt" || continue
    n=$(metric_sum raftlock_proposal_batch_commands_count "$OUT/m.txt")
    if [ "${n:-0}" -gt "$best" ]; then best=$n; cp "$OUT/m.txt" "$OUT/leader-$setting.txt"; fi
  done
  kill "$DEV_PID"; wait "$DEV_PID" 2>/dev/null || true; DEV_PID=""
done

python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def med(s, w, c):
    return json.load(open(f"{out}/json-{s}-{w}-{c}.txt"))["median"]
def metric(s, name):
    tot = 0.0
    for line in open(f"{out}/leader-{s}.txt"):
        if line.startswith(name + " ") or line.startswith(name + "{"):
            tot += float(line.rsplit(" ", 1)[1])
    return tot
print()
print(f"{'workload':<16} {'setting':<14} {'ops/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'ops/s vs off':>13} {'p50 vs off':>11}")
for w, c in [("uncontended", 1), ("uncontended", 64), ("contended", 16)]:
    base = med(1, w, c)
    for s in (1, 1024):
        m = med(s, w, c)
        print(f"{w+' '+str(c):<16} {('off (1)' if s == 1 else 'on (1024)'):<14} {m['ops_per_sec']:>8.0f} {m['p50_ms']:>8.2f} {m['p99_ms']:>8.2f}"
              f" {m['ops_per_sec']/base['ops_per_sec']:>12.2f}x {m['p50_ms']/base['p50_ms']:>10.2f}x")
print()
for s in (1, 1024):
    cmds = metric(s, "raftlock_proposal_batch_commands_sum")
    entries = metric(s, "raftlock_proposal_batch_commands_count")
    fsyncs = metric(s, "raftlock_fsync_seconds_count")
    print(f"leader, max {s:>4} commands/entry: {cmds:.0f} commands in {entries:.0f} entries "
          f"({cmds/max(entries,1):.2f} per entry), {fsyncs:.0f} fsyncs")
PY
