#!/usr/bin/env bash
# What a user of the package gets: builds the sdist and the wheel, checks
# them with twine, installs the wheel alone into a clean virtual environment
# and runs the README's first example there against a local `raftlockd dev`
# cluster; then installs its `tooz` extra and takes a lock and joins a group
# through tooz's `raftlock://` URL, the driver found by its entry point.
#
#   BUILDER=target/pyenv/bin/python clients/python/scripts/check_wheel.sh
#
# BUILDER is a Python with `build` and `twine` installed; RAFTLOCKD the
# server binary (default: the workspace's target/debug/raftlockd).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
root="$(cd "$here/../.." && pwd)"
builder="${BUILDER:-python3}"
raftlockd="${RAFTLOCKD:-$root/target/debug/raftlockd}"
# shellcheck source=/dev/null
source "$root/tests/dev_cluster.sh"

"$builder" -m build -o "$work/dist" "$here" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
"$builder" -m twine check --strict "$work"/dist/*
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q "$work"/dist/*.whl

# The README's first python block, as a user would paste it.
block "$here/README.md" python 1 >"$work/example.py"

start_dev_cluster
# Run from the temp dir, so only the installed wheel can be imported.
out="$(cd "$work" && timeout 60 "$work/venv/bin/python" example.py)"
echo "$out"
grep -q "settling under fencing token [1-9]" <<<"$out"
echo "the wheel installs into a clean virtual environment and runs the README example"

"$work/venv/bin/pip" install -q "$(ls "$work"/dist/*.whl)[tooz]"
cat >"$work/tooz_example.py" <<'PY'
from tooz import coordination

# No hosts in the URL: the endpoints come from RAFTLOCK_ENDPOINTS.
coord = coordination.get_coordinator("raftlock://?timeout=10", b"wheel-check")
coord.start(start_heart=True)
with coord.get_lock(b"wheel-check"):
    coord.create_group(b"wheel-check").get()
    coord.join_group(b"wheel-check", {"ok": True}).get()
    print("tooz members:", sorted(coord.get_members(b"wheel-check").get()))
coord.stop()
PY
out="$(cd "$work" && timeout 60 "$work/venv/bin/python" -W ignore tooz_example.py)"
echo "$out"
grep -q "tooz members: \[b'wheel-check'\]" <<<"$out"
echo "the wheel's tooz extra installs and its driver serves tooz's raftlock:// URL"
