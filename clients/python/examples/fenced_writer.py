"""A writer whose lock may be lost mid-write (a GC pause, a partition)
cannot corrupt the data: the store keeps the highest fencing token it has
seen and refuses writes with a lower one.

Replaces (Redis or PostgreSQL locks): nothing they offer stops a paused
ex-holder's late write; their lock values are not ordered, so the store
cannot tell an old holder from a new one.
"""

import asyncio
import os

import raftlock


class FencedStore:
    """A resource that checks tokens: in a real system, a column compared in
    the UPDATE's WHERE clause, or a check in the storage service."""

    def __init__(self) -> None:
        self.highest = 0
        self.value = ""

    def write(self, token: int, value: str) -> None:
        if token < self.highest:
            raise PermissionError(f"stale token {token} < {self.highest}: write refused")
        self.highest, self.value = token, value


async def main() -> None:
    store = FencedStore()
    async with raftlock.Client(os.environ["RAFTLOCK_ENDPOINTS"]) as client:
        old = await client.session(ttl=2)
        g_old = await old.lock("store/a", timeout=5)
        store.write(g_old.token, "from the first holder")
        # The first holder stalls past its TTL; the lock moves on.
        await old.close()
        new = await client.session(ttl=10)
        async with new.lock("store/a", timeout=10) as g_new:
            store.write(g_new.token, "from the second holder")
            try:
                store.write(g_old.token, "late write of the stalled holder")
            except PermissionError as e:
                print(f"refused: {e}")
        print(f"store holds {store.value!r} (token {store.highest})")


if __name__ == "__main__":
    asyncio.run(main())
