#!/usr/bin/env bash
# What CI checks of the Java client, offline against Debian's Maven
# repository (scripts/apt-deps.sh): its tests on real 3-node clusters of
# their own, then the README's quick start as pasted, against a
# `raftlockd dev` cluster.
#
#   cargo build --bins && clients/java/scripts/check.sh
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
raftlockd="$root/target/debug/raftlockd"
export RAFTLOCKD="$raftlockd"
cd "$root/clients/java"

echo "== java: mvn -o test"
began=$(date +%s)
mvn -B -o -q test
tests=$(grep -ho 'tests="[0-9]*"' target/surefire-reports/TEST-*.xml | tr -dc '0-9\n' | awk '{n += $1} END {print n}')
echo "mvn -o test: $tests tests passed in $(( $(date +%s) - began )) s"

echo "== java: the README's quick start, as pasted"
# shellcheck source=/dev/null
source "$root/tests/dev_cluster.sh"
# The Main.java the README shows is the one its commands run.
diff <(block README.md java 1) examples/Main.java
start_dev_cluster
# The commands after `raftlockd dev`, from the clone's root, but for the
# package installation CI has done and the endpoints line, which
# start_dev_cluster has exported.
block README.md sh 2 | grep -v -e '^scripts/apt-deps.sh' -e '^export RAFTLOCK_ENDPOINTS=' >"$work/quickstart.sh"
grep -q '^java ' "$work/quickstart.sh" || { echo "no java command in the README's quick start"; exit 1; }
out="$(cd "$root" && timeout 300 bash -euo pipefail "$work/quickstart.sh" 2>&1)"
echo "$out"
grep -q "fencing token [1-9]" <<<"$out"
echo "the Java quick start runs as pasted"
