"""Elections and observe through a failover; every typed error a client
can cause, each from the server's reason."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Optional

import pytest

import raftlock
import raftlock.sync
from raftlock import errors
from conftest import Cluster


async def test_election_and_observe_through_a_failover(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        a = await client.session(ttl=10)
        b = await client.session(ttl=10)
        seen: list[Optional[bytes]] = []
        changed = asyncio.Event()

        async def watch() -> None:
            async for g in client.observe("elect/svc"):
                seen.append(g.metadata if g else None)
                changed.set()

        watcher = asyncio.create_task(watch())
        la = await a.campaign("elect/svc", b"node-a", timeout=5)
        waiting = asyncio.create_task(b.campaign("elect/svc", b"node-b", timeout=30))
        await la.proclaim(b"node-a-v2")
        leader = await client.leader("elect/svc")
        assert leader is not None and leader.metadata == b"node-a-v2"
        # The observer's stream opens while the campaign runs: wait for it to
        # see the proclaimed value, or the kill below can come first and the
        # reopened stream start from the next leader.
        for _ in range(100):
            if seen and seen[-1] == b"node-a-v2":
                break
            changed.clear()
            await asyncio.wait_for(changed.wait(), 10)
        raft_leader = cluster.leader()
        assert raft_leader is not None
        cluster.kill(raft_leader)
        cluster.wait_for_leader(other_than=raft_leader)
        await la.resign()
        lb = await asyncio.wait_for(waiting, 30)
        assert lb.token > la.token
        for _ in range(100):
            if seen and seen[-1] == b"node-b":
                break
            changed.clear()
            await asyncio.wait_for(changed.wait(), 10)
        watcher.cancel()
        assert seen[-1] == b"node-b"
        assert b"node-a" in seen or b"node-a-v2" in seen


async def test_every_typed_error_a_client_can_cause(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        with pytest.raises(errors.TtlOutOfRange) as ttl:
            await client.session(ttl=0.2)
        assert ttl.value.reason == "TTL_OUT_OF_RANGE"
        s = await client.session(ttl=10)
        with pytest.raises(errors.InvalidName):
            await s.lock("", timeout=1)
        g = await s.lock("typed/a", timeout=5)
        stale = raftlock.Guard(s, dataclasses.replace(g.grant, token=g.token + 1))
        with pytest.raises(errors.StaleToken):
            await stale.release()
        with pytest.raises(errors.AlreadyHeld):
            await s.lock("typed/a", timeout=1)
        other = await client.session(ttl=10)
        started = asyncio.get_running_loop().time()
        with pytest.raises(errors.LockTimeout):
            await other.lock("typed/a", timeout=0.3)
        assert asyncio.get_running_loop().time() - started < 3, "a wait must end near its timeout"
        assert await other.try_lock("typed/a") is None
        await other.lock("typed/sem", permits=3, timeout=1)
        with pytest.raises(errors.PermitsMismatch):
            await s.lock("typed/sem", permits=2, timeout=1)
        await g.release()
        # A session the server no longer knows.
        gone = raftlock.Session(client, 987654321, 10.0, asyncio.get_running_loop().time())
        with pytest.raises(errors.SessionGone):
            await gone.lock("typed/b", timeout=1)
        assert not gone.valid
        with pytest.raises(errors.SessionLost):
            gone.check()


async def test_a_dead_cluster_is_unavailable_within_the_deadline(cluster: Cluster) -> None:
    endpoints = cluster.endpoints
    cluster.close()
    async with raftlock.Client(endpoints, deadline=1.0, attempt_timeout=0.3) as client:
        with pytest.raises(errors.Unavailable):
            await client.session(ttl=5)


def test_the_sync_api(cluster: Cluster) -> None:
    with raftlock.sync.Client(cluster.endpoints) as client:
        with client.session(ttl=5) as s:
            with s.lock("sync/a", timeout=5) as g:
                assert g.valid and client.validate("sync/a", g.token)
            assert s.try_lock("sync/a") is not None
            lead = s.campaign("sync/e", b"me", timeout=5)
            leader = client.leader("sync/e")
            assert leader is not None and leader.token == lead.token


async def test_queue_limits_and_a_lost_release() -> None:
    from conftest import Cluster

    cluster = Cluster(extra=["--max-waiters-per-lock", "1"])
    try:
        async with raftlock.Client(cluster.endpoints) as client:
            a = await client.session(ttl=10)
            b = await client.session(ttl=10)
            c = await client.session(ttl=10)
            held = await a.lock("queue/a", timeout=5)
            waiting = asyncio.create_task(b.lock("queue/a", timeout=20)._acquire_or_raise())
            for _ in range(100):
                if (await client.describe("queue/a")).waiting_sessions:
                    break
                await asyncio.sleep(0.02)
            with pytest.raises(errors.TooManyWaiters):
                await c.lock("queue/a", timeout=5)
            await held.release()
            got = await asyncio.wait_for(waiting, 20)
            # A guard whose lock is gone: releasing it says so.
            with pytest.raises(errors.NotHolder):
                await raftlock.Guard(a, held.grant).release()
            await got.release()
            second = await a.lock("queue/b", timeout=5)
            first_wait = asyncio.create_task(b.lock("queue/b", timeout=20)._acquire_or_raise())
            await asyncio.sleep(0.3)
            with pytest.raises(errors.AlreadyWaiting):
                await b.lock("queue/b", timeout=5)
            await second.release()
            await (await asyncio.wait_for(first_wait, 20)).release()
    finally:
        cluster.close()


async def test_refusals_outside_the_api_still_map_to_their_classes(cluster: Cluster) -> None:
    """Statuses the client API never provokes by itself (a retry of a
    settled acquisition, a refused membership change) still arrive typed,
    for code that uses the generated stubs directly."""
    import grpc

    from raftlock.v1 import raftlock_pb2 as pb
    from raftlock.v1 import raftlock_pb2_grpc as rpc

    leader = cluster.client_addrs[cluster.wait_for_leader() - 1]
    async with grpc.aio.insecure_channel(leader) as ch:
        sessions, locks = rpc.SessionStub(ch), rpc.LockStub(ch)
        sid = (await sessions.Create(pb.CreateSessionRequest(ttl_ms=10_000))).session_id
        first = pb.AcquireRequest(session_id=sid, name="raw/x", request_id=b"\x01" * 16, seq=1, acked_below=1)
        granted = await locks.Acquire(first)
        await locks.Release(pb.ReleaseRequest(session_id=sid, name="raw/x", token=granted.grant.token))
        with pytest.raises(grpc.RpcError) as settled:
            await locks.Acquire(first)
        e = errors.from_rpc_error(settled.value)
        assert isinstance(e, errors.RequestSettled) and e.reason == "REQUEST_RELEASED", e
        with pytest.raises(grpc.RpcError) as refused:
            await rpc.ClusterStub(ch).ChangeMembership(
                pb.ChangeMembershipRequest(voters=[1, 2, 3, 99], retain_as_learners=True)
            )
        e = errors.from_rpc_error(refused.value)
        assert isinstance(e, errors.MembershipChangeRefused), e
