"""The tooz driver on a real cluster: tooz's own coordination suite, run
unchanged, and what that suite does not try (threads, liveness by
heartbeat, eventlet, the client calls the driver is built on)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import raftlock
import raftlock.sync
from conftest import Cluster

# tooz and eventlet are test dependencies: missing, these tests fail.
import eventlet  # noqa: F401
import tooz  # noqa: F401
from tooz import coordination

# The tests of tooz's suite this driver skips, and why (each skip is the
# suite's own: a NotImplemented raised by the driver, or a driver check).
EXPECTED_SKIPS = {
    # A member's capabilities are its grant's metadata, set when it joins.
    "test_update_capabilities": "raftlock sets a member's capabilities when it joins",
    "test_update_capabilities_with_group_id_nonexistent": "raftlock sets a member's capabilities",
    # The suite runs this one for three named drivers only.
    "test_watch_join_group_disappear": "only works with coordinators",
}


def url(cluster: Cluster, **options: object) -> str:
    query = "&".join(f"{k}={v}" for k, v in {"deadline": 5, **options}.items())
    return f"raftlock://{','.join(cluster.endpoints)}?{query}"


def member() -> bytes:
    return uuid.uuid4().hex.encode()


def test_toozs_own_coordination_suite_passes(cluster: Cluster, tmp_path: Path) -> None:
    report = tmp_path / "tooz.xml"
    env = dict(os.environ, TOOZ_TEST_URL=url(cluster))
    run = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
            f"--junitxml={report}", "--pyargs", "tooz.tests.test_coordination",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert report.exists(), run.stdout + run.stderr
    cases = ET.parse(report).getroot().iter("testcase")
    passed, skipped, failed = [], {}, []
    for case in cases:
        name = case.get("name", "")
        skip = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(name)
        elif skip is not None:
            skipped[name] = skip.get("message", "")
        else:
            passed.append(name)
    print(f"tooz suite: {len(passed) + len(skipped) + len(failed)} run, {len(passed)} passed, "
          f"{len(skipped)} skipped, {len(failed)} failed")
    assert not failed, run.stdout[-6000:]
    for name, why in skipped.items():
        assert name in EXPECTED_SKIPS, f"{name} skipped unexpectedly: {why}"
        assert EXPECTED_SKIPS[name] in why, f"{name} skipped for another reason: {why}"
    assert len(passed) >= 75, run.stdout[-3000:]


def test_a_lock_excludes_threads_of_one_coordinator_and_of_many(cluster: Cluster) -> None:
    shared = coordination.get_coordinator(url(cluster), member())
    shared.start()
    others = [coordination.get_coordinator(url(cluster), member()) for _ in range(3)]
    for c in others:
        c.start()
    inside = 0
    most = 0
    entries = 0
    count = threading.Lock()
    errors: list[BaseException] = []

    def work(coord: coordination.CoordinationDriver) -> None:
        nonlocal inside, most, entries
        try:
            for _ in range(5):
                with coord.get_lock(b"threads"):
                    with count:
                        inside += 1
                        most = max(most, inside)
                        entries += 1
                    time.sleep(0.01)
                    with count:
                        inside -= 1
        except BaseException as e:  # reported below, not lost in a thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(shared,)) for _ in range(4)]
    threads += [threading.Thread(target=work, args=(c,)) for c in others]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert entries == 5 * len(threads)
    assert most == 1, f"{most} holders at once"
    for c in [shared, *others]:
        c.stop()


def test_without_heartbeats_a_member_and_its_locks_end_after_the_timeout(cluster: Cluster) -> None:
    watcher = coordination.get_coordinator(url(cluster), member())
    watcher.start()
    idle = coordination.get_coordinator(url(cluster, timeout=2), member())
    idle.start()
    beating = coordination.get_coordinator(url(cluster, timeout=2), member())
    beating.start(start_heart=True)
    group = member()
    watcher.create_group(group).get()
    for c in (idle, beating):
        c.join_group(group, {"role": "worker"}).get()
    assert idle.get_lock(b"idle-lock").acquire(blocking=False)
    assert beating.get_lock(b"beating-lock").acquire(blocking=False)
    time.sleep(4)
    # Two TTLs later the idle coordinator's session has ended on the
    # cluster; the one whose heart beats is still a member and a holder.
    members = watcher.get_members(group).get()
    assert members == {beating._member_id}
    assert watcher.get_lock(b"idle-lock").acquire(blocking=False)
    assert not watcher.get_lock(b"beating-lock").acquire(blocking=False)
    # The idle one learns at its next heartbeat, with a new session.
    idle.heartbeat()
    assert group not in idle._joined_groups
    assert idle.get_lock(b"another").acquire(blocking=False)
    for c in (watcher, idle, beating):
        c.stop()


def test_a_member_that_leaves_from_a_second_coordinator_boots_out_the_first(cluster: Cluster) -> None:
    me = member()
    first = coordination.get_coordinator(url(cluster), me)
    first.start()
    group = member()
    first.create_group(group).get()
    first.join_group(group).get()
    second = coordination.get_coordinator(url(cluster), me)
    second.start()
    second.leave_group(group).get()
    assert first.get_members(group).get() == set()
    with pytest.raises(coordination.MemberNotJoined):
        second.leave_group(group).get()
    first.stop()
    second.stop()


def test_the_driver_refuses_to_start_under_eventlet(cluster: Cluster) -> None:
    program = textwrap.dedent(
        f"""
        import eventlet
        eventlet.monkey_patch()
        import tooz
        from tooz import coordination
        c = coordination.get_coordinator({url(cluster)!r}, b"m")
        try:
            c.start()
        except tooz.ToozError as e:
            print("refused:", e)
        else:
            print("started")
        """
    )
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run(
            [sys.executable, "-c", program], cwd=d, capture_output=True, text=True, timeout=60
        )
    assert "refused:" in out.stdout and "eventlet" in out.stdout, out.stdout + out.stderr


def test_list_shows_sized_semaphores_and_release_ends_a_grant_of_another_session(
    cluster: Cluster,
) -> None:
    with raftlock.sync.Client(cluster.endpoints) as client:
        client.resize("ls/sized", 4)
        a = client.session(ttl=10)
        b = client.session(ttl=2, keep_alive=False)
        g = a.lock("ls/held", timeout=5)
        listed = {l.name: l for l in client.list_locks("ls/")}
        assert set(listed) == {"ls/held", "ls/sized"}
        assert listed["ls/sized"].resized and listed["ls/sized"].permits == 4
        assert not listed["ls/sized"].holders
        assert [h.token for h in listed["ls/held"].holders] == [g.token]
        assert [l.name for l in client.list_locks("ls/", limit=1)] == ["ls/held"]
        # Another session of the same identity may end that grant.
        held = client.describe("ls/held").holders[0]
        client.release(held)
        assert client.describe("ls/held").holders == []
        with pytest.raises(raftlock.NotHolder):
            client.release(held)
        # A session kept alive by hand lives while it is renewed, and ends
        # a TTL after the last renewal although its client runs on.
        time.sleep(1.0)
        assert b.keep_alive() > 1.5
        gb = b.lock("ls/b", timeout=5)
        assert client.list_locks("ls/b")[0].holders[0].token == gb.token
        client.resize("ls/sized", 0)
        assert [l.name for l in client.list_locks("ls/")] == ["ls/b"]
        time.sleep(3.0)
        assert not b.valid
        assert client.list_locks("ls/") == []
        with pytest.raises((raftlock.SessionLost, raftlock.SessionGone)):
            b.keep_alive()
