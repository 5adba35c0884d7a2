"""Rate limits on a real cluster: a burst admitted and the next take
refused with the wait after which it fits, a take that waits on the
server, conflicting and unknown limits as typed errors, and token leases
that give back what they did not spend (on finish, on the end of a
``with`` block, when dropped, when the client closes), async and sync."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

import raftlock
import raftlock.sync
from raftlock import errors
from conftest import Cluster


async def test_a_burst_is_admitted_the_next_take_refused_and_a_wait_admitted(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        limit = client.rate_limit("rl/burst", rate=5, per=1.0, burst=5)
        taken = [await limit.try_take() for _ in range(5)]
        assert all(a.admitted and a.n == 1 for a in taken), taken
        refused = await limit.try_take()
        assert not refused.admitted
        assert refused.retry_after > 0, refused
        assert refused.retry_after <= 0.2 + 0.05, "one token of 5/s refills within 200 ms"
        started = time.monotonic()
        waited = await limit.take(wait=2.0)
        assert waited.admitted and waited.n == 1, waited
        assert time.monotonic() - started < 2.0
        info = await limit.describe()
        assert (info.rate, info.per_ms, info.burst) == (5, 1000, 5)
        assert info.admitted == 6 and info.refused >= 1, info


async def test_conflicting_and_unknown_limits_are_typed_errors(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        assert await client.rate_limit("rl/defined", rate=10, per=1.0, burst=10).define()
        assert not await client.rate_limit("rl/defined", rate=10, per=1.0, burst=10).define()
        with pytest.raises(errors.LimitConflict) as conflict:
            await client.rate_limit("rl/defined", rate=20, per=1.0, burst=10).try_take()
        assert conflict.value.reason == "LIMIT_CONFLICT"
        with pytest.raises(raftlock.LimitConflict):
            await client.rate_limit("rl/defined", rate=10, per=60.0, burst=10).define()
        # Without parameters the limit must exist.
        assert (await client.rate_limit("rl/defined").try_take()).admitted
        with pytest.raises(errors.LimitNotFound) as unknown:
            await client.rate_limit("rl/unknown").try_take()
        assert unknown.value.reason == "LIMIT_NOT_FOUND"
        with pytest.raises(raftlock.LimitNotFound):
            await client.rate_limit("rl/unknown").describe()
        with pytest.raises(errors.InvalidArgument):
            await client.rate_limit("rl/unknown").define()
        assert await client.rate_limit("rl/defined").delete()
        assert not await client.rate_limit("rl/defined").delete()
        with pytest.raises(errors.LimitNotFound):
            await client.rate_limit("rl/defined").describe()


async def test_a_token_lease_gives_back_what_it_did_not_spend(cluster: Cluster) -> None:
    async with raftlock.Client(cluster.endpoints) as client:
        # 5 a minute: no token refills within the test, so counts are exact.
        limit = client.rate_limit("rl/lease", rate=5, per=60.0, burst=5)
        assert await limit.define()
        assert (await limit.describe()).available == 5
        block = await limit.reserve(4, validity=5.0)
        assert block is not None and block.reserved == 4 and block.left == 4 and block.valid
        assert (await limit.describe()).available == 1
        assert (await limit.describe()).leases == 1
        assert block.try_spend()
        assert block.left == 3
        assert await block.finish() == 3
        assert not block.valid and not block.try_spend()
        assert await block.finish() == 0, "a second finish gives nothing back"
        info = await limit.describe()
        assert info.available == 4 and info.leases == 0 and info.admitted == 1, info
        # More than is available now: refused.
        assert await limit.reserve(5, validity=5.0) is None

        # `async with` gives back what is left on exit.
        block = await limit.reserve(2, validity=5.0)
        assert block is not None
        async with block:
            assert block.try_spend()
        assert (await limit.describe()).available == 3

        # A lease spends nothing past its validity less the safety margin.
        short = await limit.reserve(1, validity=0.3)
        assert short is not None
        assert short.valid_until <= time.monotonic() + 0.3 - raftlock.safety_margin(0.3)
        await asyncio.sleep(max(0.0, short.valid_until - time.monotonic()) + 0.01)
        assert not short.valid and not short.try_spend() and short.left == 1
        assert await short.finish() == 1

        # A dropped lease gives back its tokens in the background.
        dropped = await limit.reserve(3, validity=5.0)
        assert dropped is not None and dropped.try_spend()
        del dropped
        gc.collect()
        for _ in range(100):
            if (await limit.describe()).available == 2:
                break
            await asyncio.sleep(0.05)
        info = await limit.describe()
        assert info.available == 2 and info.leases == 0, info

        # Closing the client gives back the leases it has not finished.
        other = raftlock.Client(cluster.endpoints)
        kept = await other.rate_limit("rl/lease").reserve(2, validity=5.0)
        assert kept is not None and (await limit.describe()).available == 0
        await other.close()
        assert not kept.valid
        info = await limit.describe()
        assert info.available == 2 and info.leases == 0, info


def test_rate_limits_through_the_sync_api(cluster: Cluster) -> None:
    with raftlock.sync.Client(cluster.endpoints) as client:
        limit = client.rate_limit("rl/sync", rate=5, per=60.0, burst=5)
        assert limit.try_take(2).admitted
        refused = limit.try_take(4)
        assert not refused.admitted and refused.retry_after > 0
        assert not limit.take(4, wait=0.2).admitted
        block = limit.reserve(3, validity=5.0)
        assert block is not None
        with block:
            assert block.try_spend() and block.left == 2
        assert limit.describe().available == 2
        with pytest.raises(errors.LimitNotFound):
            client.rate_limit("rl/none").try_take()
