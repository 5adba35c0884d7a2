#!/usr/bin/env bash
# Runs schemathesis, with every check, against the leader of a fresh
# `raftlockd dev` cluster, on every operation of docs/openapi.json (the
# streaming ones included, read as NDJSON by hooks.py). Fails on any failure
# or error schemathesis reports.
#
#   tests/schemathesis/run.sh [--short | --install]
#
# RAFTLOCKD names the server binary (default target/debug/raftlockd);
# SCHEMATHESIS_VENV a virtual environment to install schemathesis into
# (default target/schemathesis-venv). --short caps each operation at 20
# generated cases instead of schemathesis's default of 100; --install only
# makes the virtual environment. SCHEMATHESIS_SEED repeats a run's cases.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
raftlockd="${RAFTLOCKD:-$root/target/debug/raftlockd}"
venv="${SCHEMATHESIS_VENV:-$root/target/schemathesis-venv}"
examples=()
[ "${1:-}" = "--short" ] && examples=(--max-examples 20)

if [ ! -x "$venv/bin/schemathesis" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  "$venv/bin/pip" install -q "schemathesis>=4.32,<5"
fi
[ "${1:-}" = "--install" ] && exit 0
seed="${SCHEMATHESIS_SEED:-$RANDOM}"

. tests/dev_cluster.sh
start_dev_cluster
# A follower answers 503 NOT_LEADER, which schemathesis counts as a server
# error: test against the leader.
first="${RAFTLOCK_ENDPOINTS%%,*}"
leader="$(curl -sf "http://$first/v1/cluster/status" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("leaderAddr",""))')"
[ -n "$leader" ] || { echo "no leader in $RAFTLOCK_ENDPOINTS"; exit 1; }
echo "schemathesis against the leader at $leader, seed $seed (SCHEMATHESIS_SEED=$seed repeats it)"
# filter_too_much: the exact patterns of 64-bit ranges (a string or a
# number, per proto3 JSON) make hypothesis discard many drafts of some
# operations; that is a cost of generation, not a finding about the API.
SCHEMATHESIS_HOOKS=tests.schemathesis.hooks PYTHONPATH="$root" \
  "$venv/bin/schemathesis" --config-file tests/schemathesis/schemathesis.toml \
  run docs/openapi.json --url "http://$leader" \
  --checks all --continue-on-failure --request-timeout 10 --no-color \
  --suppress-health-check filter_too_much \
  --seed "$seed" "${examples[@]}"
