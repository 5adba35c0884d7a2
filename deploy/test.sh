#!/usr/bin/env bash
# End-to-end test of the image and the compose cluster, from the host:
# acquire/release, the leader's container killed, a container cut off the
# network and back, and a rolling restart of all three under load with no
# lost session. Everything it creates is removed on exit, failed or not.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! docker info >/dev/null 2>&1; then
  echo "deploy/test.sh: skipped: no Docker engine answers here"
  exit 0
fi
if command -v docker-compose >/dev/null; then
  compose=(docker-compose)
elif docker compose version >/dev/null 2>&1; then
  compose=(docker compose)
else
  echo "deploy/test.sh: skipped: neither docker-compose nor 'docker compose' is installed"
  exit 0
fi

deploy/build-image.sh
raftlock="target/${RAFTLOCK_IMAGE_PROFILE:-release}/raftlock"
project="raftlocktest$$"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
for i in 1 2 3; do
  export "RAFTLOCK_PORT_$i=$(free_port)" "RAFTLOCK_METRICS_PORT_$i=$(free_port)"
done
export RAFTLOCK_ENDPOINTS="127.0.0.1:$RAFTLOCK_PORT_1,127.0.0.1:$RAFTLOCK_PORT_2,127.0.0.1:$RAFTLOCK_PORT_3"
dc() { "${compose[@]}" -p "$project" -f deploy/compose.yaml "$@"; }
container() { dc ps -q "raftlock-$1"; }

cleanup() {
  status=$?
  if [ $status -ne 0 ]; then
    echo "--- failed; node logs:"
    dc logs --no-color --tail 30 || true
  fi
  dc down -v --remove-orphans >/dev/null 2>&1 || true
  left="$(docker ps -aq --filter "name=$project"; docker volume ls -q --filter "name=$project"; docker network ls -q --filter "name=$project")"
  if [ -n "$left" ]; then
    echo "deploy/test.sh: left behind: $left"
    status=1
  fi
  exit $status
}
trap cleanup EXIT

step() { echo "== deploy: $*"; }
wait_healthy() {
  for _ in $(seq 1 120); do
    if "$raftlock" status >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  "$raftlock" status || true
  echo "cluster not healthy within 60 s"
  return 1
}
leader() { "$raftlock" status --output json | python3 -c 'import json,sys; print(json.load(sys.stdin)["cluster"]["leader_id"])'; }

step "compose up (project $project)"
dc up -d
wait_healthy
"$raftlock" status

step "acquire and release from the host"
"$raftlock" lock --ttl 5s deploy/first -- sh -c 'echo "holding with token $RAFTLOCK_TOKEN"'

step "kill the leader's container"
old="$(leader)"
docker kill "$(container "$old")" >/dev/null
"$raftlock" lock --ttl 5s --timeout 30s deploy/after-kill -- sh -c 'echo "granted after the kill: token $RAFTLOCK_TOKEN"'
docker start "$(container "$old")" >/dev/null
wait_healthy

step "disconnect a container from the network and back"
cut="$(container 2)"
docker network disconnect "${project}_raftlock" "$cut"
"$raftlock" lock --ttl 5s --timeout 30s deploy/partitioned -- true
docker network connect --alias raftlock-2 "${project}_raftlock" "$cut"
wait_healthy

step "rolling restart under load"
"$raftlock" bench --clients 2 --duration 45s --runs 1 --ttl 10s > "/tmp/$project-bench.txt" 2>&1 &
bench=$!
sleep 3
for i in 1 2 3; do
  l="$(leader)"
  [ "$i" = "$l" ] && continue
  docker restart -t 20 "$(container "$i")" >/dev/null
  wait_healthy
done
l="$(leader)"
docker restart -t 20 "$(container "$l")" >/dev/null
wait_healthy
if ! wait "$bench"; then
  cat "/tmp/$project-bench.txt"
  echo "the load saw errors or lost sessions during the rolling restart"
  exit 1
fi
sed -n 3p "/tmp/$project-bench.txt"
rm -f "/tmp/$project-bench.txt"
echo "== deploy: all passed"
