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
