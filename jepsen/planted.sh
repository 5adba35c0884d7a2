#!/usr/bin/env bash
# Shows that raftlock-jepsen catches real bugs in the real server: builds
# raftlockd with the test-only `planted-bugs` feature (into its own target
# dir, so no normal build ever has it), plants one bug per run through
# RAFTLOCK_PLANT, and requires every run to be judged invalid.
#
#   jepsen/planted.sh [--time 20s]
#
# Exit status 0 when every planted bug was reported invalid.
set -euo pipefail
cd "$(dirname "$0")/.."
time=20s
if [[ "${1:-}" == "--time" ]]; then time="$2"; fi

cargo build --quiet -p raftlock-jepsen
cargo build --quiet -p raftlock-node --features planted-bugs --target-dir target/planted
jepsen=target/debug/raftlock-jepsen
planted=target/planted/debug/raftlockd
out=target/jepsen-planted
rm -rf "$out"

# bug              workload  nemesis  (the run that must expose it)
runs=(
  "double-grant    mutex     none"
  "token-reuse     fenced    kill"
)
failed=0
for r in "${runs[@]}"; do
  read -r bug workload nemesis <<<"$r"
  set +e
  RAFTLOCK_PLANT="$bug" "$jepsen" --raftlockd "$planted" --out "$out/$bug" \
    run --workload "$workload" --nemesis "$nemesis" --time "$time" >"$out.$bug.log" 2>&1
  status=$?
  set -e
  verdict=$(grep -h '^verdict:' "$out/$bug"/*/summary.txt 2>/dev/null | head -1 || true)
  if [[ $status -eq 1 ]]; then
    echo "caught     $bug ($workload under $nemesis): ${verdict#verdict: }"
  else
    echo "NOT CAUGHT $bug ($workload under $nemesis): exit $status, ${verdict:-no verdict}"
    cat "$out.$bug.log"
    failed=1
  fi
done
exit $failed
