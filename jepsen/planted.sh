#!/usr/bin/env bash
# Shows that raftlock-jepsen catches real bugs in the real server: builds
# raftlockd with the test-only `planted-bugs` feature, plants one bug per
# run through RAFTLOCK_PLANT, and requires every run to be judged invalid.
# The feature build shares the target dir and selects the whole workspace
# as the normal build does, so that dependencies keep the same features and
# only the two crates it changes are compiled again; its binary is copied
# out at once and the normal ones put back (cargo keeps both builds), so
# target/debug/raftlockd never has the feature.
#
#   jepsen/planted.sh [--time 20s]
#
# Exit status 0 when every planted bug was reported invalid.
set -euo pipefail
cd "$(dirname "$0")/.."
time=20s
if [[ "${1:-}" == "--time" ]]; then time="$2"; fi

mkdir -p target/planted
cargo build --quiet --workspace --bins --features raftlock-node/planted-bugs
cp target/debug/raftlockd target/planted/raftlockd
cargo build --quiet --workspace --bins
if cmp -s target/debug/raftlockd target/planted/raftlockd; then
  echo "target/debug/raftlockd is still the planted build"; exit 1
fi
jepsen=target/debug/raftlock-jepsen
planted=target/planted/raftlockd
out=target/jepsen-planted
rm -rf "$out"

# bug                 workload  nemesis  seeds  (the runs that must expose it)
#
# A bug that needs a particular sequence of faults to show (a leader that
# regains leadership while sessions it knew from its earlier term are
# still alive) gets a few seeds: it counts as caught when one of its runs
# is judged invalid, as a Jepsen test searches; a correct server passes
# every seed (the long suite runs the same nemeses).
runs=(
  "double-grant        mutex     none     1"
  "token-reuse         fenced    kill     1"
  "late-keepalive      fenced    none     1 2 3 4 5 6"
  "unconfirmed-expiry  mutex     transfer 1 2 3"
  # Holds of two permits counted as one: a semaphore over its size.
  "one-permit-each     semaphore none     1 2"
  # A rate limit that lets twice its burst through.
  "rate-double-burst   ratelimit none     1 2 3"
  # One lock of a waiting set granted before the rest of the set.
  "set-grants-early    multilock none     1 2"
  # A damaged log read as a torn tail: the disk nemesis damages a durable
  # batch of a majority's logs in its first round under odd seeds; the
  # damaged nodes start on shortened logs and elect a leader that lost
  # acknowledged grants.
  "damage-as-torn      mutex     disk     1 3"
  # A try-lock refused by a held lock names nobody as its holder (the
  # answer a retried BUSY gave when it was rebuilt from the state of the
  # retry).
  "busy-names-nobody  mutex     none     1 2"
  # Validate and Describe answered from a cache of the last second: a
  # released token still validates, a released holder is still described.
  "stale-reads        mutex     none     1 2 3"
  # The same cache on a semaphore: its holders described, its tokens
  # validated, as of a second ago.
  "stale-reads        semaphore none     1 2 3"
  # A member that lost its data dir votes at once: the disk nemesis's
  # first round under seeds 2 and 6 loses a member while another is down
  # and stale (down until grants it never saw were acknowledged), and
  # starts the two alone; they elect the stale one and issue tokens
  # already issued.
  "lost-state-votes    fenced    disk     2 6"
  # Not the server's: a client that acts on its lock without asking the
  # library whether the lease still holds, paused past its TTL by the
  # client nemesis. Whether a 20 s run pauses the client while it holds a
  # lock, past its TTL, depends on timing as well as the seed (seeds 1 and 2
  # both missed once in CI), so it has four tries.
  "client:ignore-lease mutex     client   1 2 3 4"
  # The same through the Go client: its client processes are the Go
  # client's worker (raftlock-jepsen --client-worker).
  "go:ignore-lease     mutex     client   1 2 3 4"
  # And through the Java client (clients/java/scripts/jepsen-worker).
  "java:ignore-lease   mutex     client   1 2 3 4"
)
# The Go worker, when Go is here (CI installs it).
go_worker=""
if command -v go >/dev/null; then
  (cd clients/go && go build -o bin/raftlock-jepsen-worker ./cmd/raftlock-jepsen-worker)
  go_worker=clients/go/bin/raftlock-jepsen-worker
elif [[ -n "${RAFTLOCK_REQUIRE_GO_CLIENT:-}" ]]; then
  echo "RAFTLOCK_REQUIRE_GO_CLIENT is set but go cannot be run"; exit 1
fi
# The Java worker, when Maven is here (CI installs it).
java_worker=""
if command -v mvn >/dev/null; then
  (cd clients/java && mvn -o -q test-compile)
  java_worker=clients/java/scripts/jepsen-worker
elif [[ -n "${RAFTLOCK_REQUIRE_JAVA_CLIENT:-}" ]]; then
  echo "RAFTLOCK_REQUIRE_JAVA_CLIENT is set but mvn cannot be run"; exit 1
fi
# One planted bug: its seeds in turn until one is judged invalid. Prints
# what became of it; fails when no seed caught it.
run_bug() {
  local r="$1" net="$2" bug workload nemesis seeds tag caught seed status verdict
  read -r bug workload nemesis seeds <<<"$r"
  # One bug may be planted under several workloads.
  tag="$bug.$workload"
  caught=""
  for seed in $seeds; do
    set +e
    server_bug="$bug" client_bug="" worker=()
    if [[ "$bug" == client:* ]]; then server_bug="" client_bug="${bug#client:}"; fi
    if [[ "$bug" == go:* ]]; then
      server_bug="" client_bug="${bug#go:}" worker=(--client-worker "$go_worker")
      if [[ -z "$go_worker" ]]; then
        echo "skipped    $bug (no go here)"; set -e; return 0
      fi
    fi
    if [[ "$bug" == java:* ]]; then
      server_bug="" client_bug="${bug#java:}" worker=(--client-worker "$java_worker")
      if [[ -z "$java_worker" ]]; then
        echo "skipped    $bug (no mvn here)"; set -e; return 0
      fi
    fi
    plants=()
    if [[ -n "$server_bug" ]]; then plants+=("RAFTLOCK_PLANT=$server_bug"); fi
    if [[ -n "$client_bug" ]]; then plants+=("RAFTLOCK_JEPSEN_PLANT_CLIENT=$client_bug"); fi
    env "${plants[@]}" "$jepsen" --raftlockd "$planted" "${worker[@]}" --out "$out/$tag" \
      --loopback-net "$net" \
      run --workload "$workload" --nemesis "$nemesis" --seed "$seed" --time "$time" \
      >"$out.$tag.$seed.log" 2>&1
    status=$?
    set -e
    verdict=$(grep -h '^verdict:' "$out/$tag"/*-s"$seed"/summary.txt 2>/dev/null | head -1 || true)
    if [[ $status -eq 1 && "$verdict" == *INVALID* ]]; then
      caught="seed $seed: ${verdict#verdict: }"
      break
    fi
    echo "  $bug seed $seed: exit $status, ${verdict:-no verdict}"
  done
  if [[ -n "$caught" ]]; then
    echo "caught     $bug ($workload under $nemesis, $caught)"
    grep -h ' invalid ' "$out/$tag"/*/summary.txt | head -2 | sed 's/^/           /'
  else
    echo "NOT CAUGHT $bug ($workload under $nemesis, seeds $seeds)"
    tail -n 5 "$out.$tag".*.log
    return 1
  fi
}

# The bugs in two lanes at once, each on a loopback /24 of its own: the
# runs mostly wait (on timeouts, on fsync), so two at once leave the two
# cores less idle. Each lane's report is printed whole, in order.
failed=0
lane() {
  local n="$1" i lane_failed=0
  for i in "${!runs[@]}"; do
    if (( i % 2 == n )); then
      run_bug "${runs[$i]}" "127.0.$((40 + n))" || lane_failed=1
    fi
  done
  return $lane_failed
}
lane 0 >"$out.lane0.txt" 2>&1 &
lane0=$!
lane 1 >"$out.lane1.txt" 2>&1 &
lane1=$!
wait "$lane0" || failed=1
wait "$lane1" || failed=1
cat "$out.lane0.txt" "$out.lane1.txt"

# The storage fault matrix must catch a blank node that votes: its first
# case loses a follower's whole data dir while the other follower is down
# and stale, and starts the two alone.
set +e
RAFTLOCK_PLANT=lost-state-votes "$jepsen" --raftlockd "$planted" --out "$out/matrix" \
  matrix --sample 1 >"$out.matrix.log" 2>&1
status=$?
set -e
# Caught only as a token issued twice: a stuck cluster alone is not this bug.
if [[ $status -eq 1 ]] && grep -q '^VIOLATION' "$out.matrix.log" \
  && grep -q 'granted with token' "$out.matrix.log"; then
  echo "caught     lost-state-votes (storage fault matrix)"
  grep -o 'granted with token [0-9]* after token [0-9]* had been acknowledged' "$out.matrix.log" \
    | head -1 | sed 's/^/           /'
else
  echo "NOT CAUGHT lost-state-votes (storage fault matrix, exit $status)"
  tail -n 20 "$out.matrix.log"
  failed=1
fi
exit $failed
