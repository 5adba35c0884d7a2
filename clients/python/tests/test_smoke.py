"""The basics on a real cluster: a lock, its token, validate, release."""

from __future__ import annotations

import raftlock
from conftest import Cluster


async def test_lock_validate_release(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        async with await client.session(ttl=5) as session:
            async with session.lock("smoke/a", timeout=5) as g:
                assert g.valid
                assert await client.validate("smoke/a", g.token)
                first = g.token
            assert not await client.validate("smoke/a", first)
            g2 = await session.lock("smoke/a", timeout=5)
            assert g2.token > first
            await g2.release()


async def test_endpoints_are_taken_as_the_cli_takes_them(cluster: Cluster) -> None:
    # RAFTLOCK_ENDPOINTS may hold http:// URLs (the CLI accepts both forms).
    urls = ",".join(f"http://{e}/" for e in cluster.endpoints)
    async with raftlock.Client(urls) as client:
        async with await client.session(ttl=5) as session:
            g = await session.lock("smoke/url-endpoints", timeout=5)
            await g.release()
    for bad in (f"https://{cluster.endpoints[0]}", f"grpc://{cluster.endpoints[0]}"):
        try:
            raftlock.Client(bad)
        except raftlock.InvalidArgument:
            continue
        raise AssertionError(f"{bad} was accepted")


async def test_closing_the_client_releases_its_sessions_locks(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as other:
        watcher = await other.session(ttl=30)
        client = raftlock.Client(cluster.endpoints)
        session = await client.session(ttl=30)
        await session.lock("smoke/closed-client", timeout=5)
        await client.close()
        # Granted at once to the next caller, not after the 30 s TTL.
        g = await watcher.lock("smoke/closed-client", timeout=3)
        await g.release()
        await watcher.close()
