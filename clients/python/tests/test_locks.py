"""Locks on real clusters: exclusion across processes, FIFO order, token
order, leader kills while holding and while waiting, a paused holder whose
loss comes before anyone else's grant, exactly-once under retries."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import grpc
import pytest

import raftlock
from conftest import Cluster

HELPER = str(Path(__file__).parent / "helpers" / "holder.py")


def spawn(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, HELPER, *args])


async def test_mutual_exclusion_across_processes(cluster: Cluster) -> None:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "holds")
        procs = [spawn(",".join(cluster.endpoints), "px/mutex", "10", "mutex:15", out) for _ in range(4)]
        for p in procs:
            assert p.wait(120) == 0
        holds = sorted(
            (float(start), float(end), int(token))
            for kind, token, start, end in (line.split() for line in open(out))
            if kind == "hold"
        )
    assert len(holds) == 60
    for (s1, e1, t1), (s2, e2, t2) in zip(holds, holds[1:]):
        assert e1 <= s2, f"holds overlap: token {t1} until {e1}, token {t2} from {s2}"
        assert t2 > t1, "tokens must increase in grant order"


async def test_fifo_order_and_increasing_tokens(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        holder = await client.session(ttl=10)
        g = await holder.lock("fifo/a", timeout=5)
        order: list[tuple[int, int]] = []

        async def wait(i: int) -> None:
            s = await client.session(ttl=10)
            async with s.lock("fifo/a", timeout=20) as got:
                order.append((i, got.token))
                await asyncio.sleep(0.05)

        tasks = []
        for i in range(4):
            tasks.append(asyncio.create_task(wait(i)))
            # Queue one after the other, so the expected order is known.
            for _ in range(100):
                d = await client.describe("fifo/a")
                if len(d.waiting_sessions) == i + 1:
                    break
                await asyncio.sleep(0.02)
        await g.release()
        await asyncio.gather(*tasks)
    assert [i for i, _ in order] == [0, 1, 2, 3]
    tokens = [g.token] + [t for _, t in order]
    assert tokens == sorted(tokens) and len(set(tokens)) == len(tokens)


async def test_a_leader_kill_while_holding_keeps_the_lock(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        s = await client.session(ttl=10)
        g = await s.lock("kill/held", timeout=5)
        leader = cluster.leader()
        assert leader is not None
        cluster.kill(leader)
        cluster.wait_for_leader(other_than=leader)
        assert g.valid, "the session must survive a failover well inside its TTL"
        assert await client.validate("kill/held", g.token)
        other = await client.session(ttl=10)
        assert await other.try_lock("kill/held") is None
        await g.release()
        g2 = await other.lock("kill/held", timeout=5)
        assert g2.token > g.token


async def test_a_leader_kill_while_waiting_grants_after_release(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        a = await client.session(ttl=10)
        b = await client.session(ttl=10)
        ga = await a.lock("kill/wait", timeout=5)
        waiting = asyncio.create_task(b.lock("kill/wait", timeout=30)._acquire_or_raise())
        await asyncio.sleep(0.3)
        leader = cluster.leader()
        assert leader is not None
        cluster.kill(leader)
        cluster.wait_for_leader(other_than=leader)
        await ga.release()
        gb = await asyncio.wait_for(waiting, 30)
        assert gb.token > ga.token
        assert await client.validate("kill/wait", gb.token)


async def test_a_paused_holder_loses_its_lock_before_anyone_else_gets_it(cluster: Cluster) -> None:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "holder")
        p = spawn(",".join(cluster.endpoints), "pause/a", "2", "hold", out)
        try:
            for _ in range(300):
                if os.path.exists(out) and "tick" in open(out).read():
                    break
                time.sleep(0.05)
            p.send_signal(signal.SIGSTOP)
            paused_at = time.time()
            async with raftlock.Client(cluster.endpoints) as client:
                s = await client.session(ttl=10)
                g = await s.lock("pause/a", timeout=30)
                granted_at = time.time()
                p.send_signal(signal.SIGCONT)
                assert p.wait(30) == 0
                await g.release()
        finally:
            p.kill()
            for _ in range(100):
                if "on_lost" in open(out).read():
                    break
                time.sleep(0.05)
        lines = [line.split() for line in open(out)]
    ticks = [(float(t), v == "1", float(dl)) for kind, t, v, dl in (x for x in lines if x[0] == "tick")]
    valid_ticks = [t for t in ticks if t[1]]
    assert granted_at > paused_at + 1.0, "the lock went only after the paused holder's TTL"
    assert valid_ticks, "the holder saw its lock valid before the pause"
    last_deadline = valid_ticks[-1][2]
    assert last_deadline <= granted_at, (
        f"the holder's library counted on the lock until {last_deadline}, "
        f"after it was granted elsewhere at {granted_at}"
    )
    assert all(t < granted_at for t, _, _ in valid_ticks), "a valid tick after the other grant"
    assert ticks[-1][1] is False, "after the pause the library must say the lock is lost"
    fired = [x for x in lines if x[0] == "on_lost"]
    assert fired and fired[0][2] == "SessionLost", f"the on_lost callback must fire: {lines[-3:]}"


class DropFirstAnswer(grpc.aio.UnaryUnaryClientInterceptor):  # type: ignore[misc]
    """Lets the first Acquire reach the server, then loses its answer, as a
    broken connection would: the client must retry, and the retry must get
    the same grant, not a second one."""

    def __init__(self) -> None:
        self.dropped = 0

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        call = await continuation(details, request)
        method = details.method.decode() if isinstance(details.method, bytes) else details.method
        if method.endswith("/Acquire") and self.dropped == 0:
            await call
            self.dropped += 1
            raise grpc.aio.AioRpcError(
                grpc.StatusCode.UNAVAILABLE,
                grpc.aio.Metadata(),
                grpc.aio.Metadata(),
                details="answer lost (injected)",
            )
        return call


async def test_an_acquire_is_exactly_once_under_injected_retries(cluster: Cluster) -> None:
    drop = DropFirstAnswer()
    async with raftlock.Client(cluster.endpoints, interceptors=[drop]) as client:
        s = await client.session(ttl=10)
        g = await s.lock("once/a", timeout=5)
        assert drop.dropped == 1
        d = await client.describe("once/a")
        assert [h.token for h in d.holders] == [g.token], "the retry must not grant twice"
        assert not d.waiting_sessions
        await g.release()
        assert (await client.describe("once/a")).holders == []


async def test_the_cron_singleton_runs_on_one_instance_only(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        a = await client.session(ttl=10)
        b = await client.session(ttl=10)
        ran: list[int] = []

        async def job(token: int) -> int:
            ran.append(token)
            await asyncio.sleep(0.3)
            return token

        first = raftlock.run_once(a, "cron/report")(job)
        second = raftlock.run_once(b, "cron/report")(job)
        r1, r2 = await asyncio.gather(first(), second())
        assert sorted((r1.ran, r2.ran)) == [False, True]
        assert [r.value for r in (r1, r2) if r.ran] == ran
        assert len(ran) == 1


async def test_a_cron_run_held_for_its_window_is_skipped_by_a_late_instance(
    cluster: Cluster,
) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        early = await client.session(ttl=10)
        late = await client.session(ttl=10)

        async def job(token: int) -> int:
            return token

        started = asyncio.get_running_loop().time()
        first = await raftlock.run_once(early, "cron/window", hold_at_least=1.5)(job)()
        assert first.ran
        held_for = asyncio.get_running_loop().time() - started
        assert held_for >= 1.5, f"released after {held_for:.2f}s"
        # Without the window a late instance would run the job again now.
        d = await client.describe("cron/window")
        assert d.holders == [], "released once the window closed"

        # While the window is open, a late instance skips the run.
        holding = asyncio.ensure_future(
            raftlock.run_once(early, "cron/window2", hold_at_least=1.5)(job)()
        )
        await _described(client, "cron/window2", lambda d: bool(d.holders), "held")
        skipped = await raftlock.run_once(late, "cron/window2")(job)()
        assert not skipped.ran
        assert (await holding).ran
        again = await raftlock.run_once(late, "cron/window2")(job)()
        assert again.ran, "the next run, after the window, is taken"

        with pytest.raises(ValueError):
            raftlock.run_once(early, "cron/bad", hold_at_least=-1)


async def _described(
    client: raftlock.Client,
    name: str,
    ready: Callable[[raftlock.Description], bool],
    what: str,
) -> raftlock.Description:
    for _ in range(250):
        d = await client.describe(name)
        if ready(d):
            return d
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name!r} never {what}")


async def _queued(client: raftlock.Client, name: str, n: int) -> raftlock.Description:
    return await _described(client, name, lambda d: len(d.waiters) == n, f"had {n} waiter(s)")


async def test_a_semaphore_hold_takes_several_permits_and_a_resize_lets_waiters_in(
    cluster: Cluster,
) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        a = await client.session(ttl=10)
        b = await client.session(ttl=10)
        ga = await a.lock("sem/pool", permits=5, count=3, timeout=5)
        assert ga.grant.shared and ga.grant.count == 3
        waiting = asyncio.create_task(b.lock("sem/pool", permits=5, count=3, timeout=20)._acquire_or_raise())
        d = await _queued(client, "sem/pool", 1)
        assert (d.permits, d.resized) == (5, False)
        assert [(w.session_id, w.count, w.shared) for w in d.waiters] == [(b.id, 3, True)]
        await asyncio.sleep(0.3)
        assert not waiting.done(), "3 + 3 permits do not fit in 5"
        await ga.release()
        gb = await asyncio.wait_for(waiting, 10)
        assert gb.grant.count == 3 and gb.token > ga.token

        # b holds 3 of 5; a asks for 3 again and queues.
        waiting = asyncio.create_task(a.lock("sem/pool", permits=5, count=3, timeout=20)._acquire_or_raise())
        await _queued(client, "sem/pool", 1)
        with pytest.raises(raftlock.PermitsMismatch):
            await client.resize("sem/pool", 2)  # below what the waiter asks for
        granted = await client.resize("sem/pool", 6)
        assert [(g.session_id, g.count) for g in granted] == [(a.id, 3)]
        ga2 = await asyncio.wait_for(waiting, 5)
        assert ga2.token == granted[0].token
        d = await client.describe("sem/pool")
        assert (d.permits, d.resized) == (6, True)
        assert sorted(h.count for h in d.holders) == [3, 3] and not d.waiters
        await ga2.release()
        await gb.release()
        assert await client.resize("sem/pool", 0) == []


async def test_a_downgraded_writer_keeps_its_token_and_lets_the_queued_reader_in(
    cluster: Cluster,
) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        writer = await client.session(ttl=10)
        reader = await client.session(ttl=10)
        other = await client.session(ttl=10)
        guard = await writer.lock("rw/routes", timeout=5)
        token = guard.token
        reading = asyncio.create_task(reader.lock("rw/routes", shared=True, timeout=20)._acquire_or_raise())
        await _queued(client, "rw/routes", 1)
        await guard.downgrade()
        assert guard.token == token and guard.grant.shared
        read = await asyncio.wait_for(reading, 5)
        assert read.token > token
        assert await other.try_lock("rw/routes") is None, "a writer still cannot hold it"
        await guard.downgrade()  # a retry changes nothing
        assert len((await client.describe("rw/routes")).holders) == 2
        await read.release()
        await guard.release()


async def test_a_hold_cap_is_lost_here_before_the_leader_releases_it(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        s = await client.session(ttl=10)
        sent = time.monotonic()
        g = await s.lock("cap/a", max_hold=1.5, timeout=5)
        assert g.grant.max_hold_ms == 1500
        assert g.valid and g.hold_until is not None
        assert g.hold_until <= sent + 1.5 - raftlock.safety_margin(1.5) + 0.01
        assert g.valid_until == g.hold_until, "the cap ends the hold before the session's deadline"
        reason = await asyncio.wait_for(g.lost(), 5)
        lost_at = time.monotonic()
        assert isinstance(reason, raftlock.HoldExpired), reason
        assert not g.valid and s.valid, "the hold is lost, the session lives on"
        with pytest.raises(raftlock.HoldExpired):
            g.check()
        # The library gave up first: the leader still has it as held.
        assert [h.token for h in (await client.describe("cap/a")).holders] == [g.token], (
            f"the leader released the lock before the guard said it was lost ({lost_at - sent:.3f} s)"
        )
        await asyncio.sleep(max(0.0, sent + 2.0 - time.monotonic()))
        for _ in range(50):
            if not (await client.describe("cap/a")).holders:
                break
            await asyncio.sleep(0.02)
        assert (await client.describe("cap/a")).holders == [], "the leader must release the hold at its cap"
        assert not await client.validate("cap/a", g.token)
        await g.release()  # nothing to do: the leader released it
        g2 = await s.try_lock("cap/a")
        assert g2 is not None and g2.token > g.token and g2.hold_until is None
        await g2.release()


async def test_a_lock_delay_follows_a_hold_whose_session_expired(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        other = await client.session(ttl=10)
        s = await client.session(ttl=1)
        # A release is clean: no lock-delay.
        g = await s.lock("delay/a", lock_delay=3.0, timeout=5)
        assert g.grant.lock_delay_ms == 3000
        await g.release()
        quick = await other.try_lock("delay/a")
        assert quick is not None, "a released lock must not be delayed"
        await quick.release()

        # A dead holder: its client stops renewing, as a process that died
        # would, and its session is left to expire (Client.close would end
        # it cleanly, with no lock-delay).
        dying = raftlock.Client(cluster.endpoints)
        ds = await dying.session(ttl=1)
        g = await ds.lock("delay/a", lock_delay=3.0, timeout=5)
        await dying._keepalive.stop()
        for _ in range(250):
            d = await client.describe("delay/a")
            if not d.holders:
                break
            await asyncio.sleep(0.02)
        gone_at = time.monotonic()
        assert not d.holders, "the dead holder's session must expire"
        assert not g.valid
        assert d.lock_delay_ms == 3000, f"the lock must be in lock-delay: {d}"
        assert await other.try_lock("delay/a") is None, "a try-lock during the lock-delay must be refused"
        got = None
        while got is None and time.monotonic() < gone_at + 6:
            await asyncio.sleep(0.1)
            got = await other.try_lock("delay/a")
        assert got is not None, "the lock must be free once the lock-delay ends"
        waited = time.monotonic() - gone_at
        assert 2.5 <= waited, f"granted {waited:.2f} s after the holder's expiry, within the 3 s delay"
        assert got.token > g.token
        assert (await client.describe("delay/a")).lock_delay_ms == 0
        await got.release()
        await dying.close()


async def test_a_cancelled_wait_leaves_the_queue_and_the_next_live_waiter_is_granted(
    cluster: Cluster,
) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        a, b, c = [await client.session(ttl=30) for _ in range(3)]
        held = await a.lock("cancel/py", timeout=5)

        async def waiters() -> list[int]:
            return [w.session_id for w in (await client.describe("cancel/py")).waiters]

        async def until(want: list[int], within: float) -> float:
            start = time.monotonic()
            while await waiters() != want:
                assert time.monotonic() - start < within, f"waiters {await waiters()}, expected {want}"
                await asyncio.sleep(0.02)
            return time.monotonic() - start

        async def wait(s: raftlock.Session) -> raftlock.Guard:
            return await s.lock("cancel/py", timeout=60)

        # b's caller gives up: asyncio.wait_for cancels the waiting task.
        gave_up = asyncio.create_task(asyncio.wait_for(wait(b), 1.0))
        await until([b.id], 10)
        later = asyncio.create_task(wait(c))
        await until([b.id, c.id], 10)
        with pytest.raises(asyncio.TimeoutError):
            await gave_up
        gone = await until([c.id], 1.0)
        print(f"waiter gone {gone:.3f} s after the cancel")
        await held.release()
        got = await asyncio.wait_for(later, 10)
        d = await client.describe("cancel/py")
        assert [h.session_id for h in d.holders] == [c.id] and got.token == d.holders[0].token
        assert d.waiters == []


async def test_locking_again_right_after_a_cancel_that_raced_its_grant_is_not_refused(
    cluster: Cluster,
) -> None:
    # The grant lands on the server just as its waiting task is cancelled:
    # the lock is the session's until the cancel releases it, and the next
    # acquisition waits for that instead of being refused ALREADY_HELD.
    async with raftlock.Client(cluster.endpoints) as client:
        a, b = [await client.session(ttl=30) for _ in range(2)]
        name = "cancel/again"

        async def wait() -> raftlock.Guard:
            return await b.lock(name, timeout=60)

        for round_ in range(12):
            held = await a.lock(name, timeout=5)
            waiting = asyncio.create_task(wait())
            while not (await client.describe(name)).waiters:
                await asyncio.sleep(0.01)
            # b's task is cancelled while the release that grants it is on
            # its way: some rounds the grant lands first.
            release = asyncio.create_task(held.release())
            await asyncio.sleep(0.0005 * round_)
            waiting.cancel()
            await release
            try:
                # The answer came first: the caller has the guard after all.
                await (await waiting).release()
            except asyncio.CancelledError:
                pass
            again = await b.try_lock(name)
            assert again is not None, f"round {round_}: busy, held by nobody else"
            await again.release()


async def test_a_lost_lock_cancels_its_scope_before_anyone_else_can_hold_it(cluster: Cluster) -> None:
    # Every node paused: no keep-alive is acknowledged, so the session's
    # local deadline passes while this process runs on.
    ticks: list[float] = []
    ttl = 2.0
    async with raftlock.Client(cluster.endpoints) as client:
        session = await client.session(ttl=ttl)
        paused = False
        try:
            with pytest.raises(raftlock.LockLost) as lost:
                async with session.lock("scope/a", timeout=5, cancel_on_lost=True) as g:
                    for p in cluster.procs.values():
                        p.send_signal(signal.SIGSTOP)
                    paused = True
                    paused_at = time.monotonic()
                    while True:
                        ticks.append(time.monotonic())
                        await asyncio.sleep(0.01)
            stopped = time.monotonic()
            deadline = g.valid_until
        finally:
            if paused:
                for p in cluster.procs.values():
                    p.send_signal(signal.SIGCONT)
        assert isinstance(lost.value.__cause__, raftlock.SessionLost), lost.value
        assert not g.valid
    # The body ran until the guard's deadline and no further (a scheduling
    # delay aside), and that is before the leader could expire the session:
    # it saw the session's last renewal no later than the pause.
    assert ticks and ticks[-1] <= deadline + 0.05, (ticks[-1] - deadline)
    assert stopped - paused_at < ttl, f"stopped {stopped - paused_at:.3f} s after the pause"
    assert stopped >= deadline - 0.05, "cancelled before the lock was lost"


async def test_a_scope_whose_lock_outlives_it_ends_normally(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        async with await client.session(ttl=5) as session:
            async with session.lock("scope/b", timeout=5, cancel_on_lost=True) as g:
                await asyncio.sleep(0.1)
                token = g.token
            assert not await client.validate("scope/b", token)
            # Released inside the block: a later loss of the session is not
            # this block's business.
            async with session.lock("scope/b", timeout=5, cancel_on_lost=True) as g2:
                await g2.release()
                await asyncio.sleep(0.05)


async def test_a_lock_set_is_granted_whole_and_a_cancelled_set_leaves_every_queue(
    cluster: Cluster,
) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        a, b, c = [await client.session(ttl=30) for _ in range(3)]

        async def who(name: str) -> tuple[list[int], list[int]]:
            d = await client.describe(name)
            return [h.session_id for h in d.holders], [w.session_id for w in d.waiters]

        async def until(name: str, want: tuple[list[int], list[int]], within: float) -> None:
            start = time.monotonic()
            while await who(name) != want:
                assert time.monotonic() - start < within, f"{name}: {await who(name)}, expected {want}"
                await asyncio.sleep(0.02)

        both = await a.lock_all(["set/y", "set/x"], timeout=5)
        assert list(both.tokens) == ["set/x", "set/y"]
        assert len(set(both.tokens.values())) == 1, both.tokens
        # A try that shares a lock takes none of its locks.
        assert await b.try_lock_all(["set/y", "set/z"]) is None
        assert await who("set/z") == ([], [])

        # b waits for {y, z} and gives up: it leaves both queues.
        async def take(s: raftlock.Session, names: list[str]) -> raftlock.LockSet:
            return await s.lock_all(names, timeout=60)

        # (It gives up after 3 s, long enough to be seen queued on a loaded
        # machine; the set must leave both queues soon after.)
        gave_up = asyncio.create_task(asyncio.wait_for(take(b, ["set/z", "set/y"]), 3.0))
        await until("set/z", ([], [b.id]), 10)
        with pytest.raises(asyncio.TimeoutError):
            await gave_up
        await until("set/z", ([], []), 2.0)
        await until("set/y", ([a.id], []), 2.0)

        # c waits for {x, z}; when a releases, c holds both, with one token.
        later = asyncio.create_task(take(c, ["set/z", "set/x"]))
        await until("set/z", ([], [c.id]), 10)
        await both.release()
        async with await asyncio.wait_for(later, 10) as got:
            assert got.valid and list(got.tokens) == ["set/x", "set/z"]
            assert min(got.tokens.values()) > max(both.tokens.values())
        assert await who("set/x") == ([], [])
