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
from typing import Any

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
