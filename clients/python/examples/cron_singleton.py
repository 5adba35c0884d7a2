"""A nightly job that runs on one instance of the service only, however
many are scheduled at the same minute.

Replaces (Redis):
    if r.set("lock:nightly", me, nx=True, px=600_000):
        try: run_report()
        finally: r.eval(COMPARE_AND_DELETE, 1, "lock:nightly", me)
which lets two instances run if the report outlives the 10 minutes, and says
nothing to the first when it does.
"""

import asyncio
import os

import raftlock


async def main() -> None:
    async with raftlock.Client(os.environ["RAFTLOCK_ENDPOINTS"]) as client:
        async with await client.session(ttl=15) as session:

            # Held for 2 s from the start even if the report is quicker, so
            # an instance whose scheduler fires late skips this run; a real
            # nightly job would hold for most of its period (hours).
            @raftlock.run_once(session, "cron/nightly-report", hold_at_least=2)
            async def nightly_report(token: int) -> str:
                # Runs here only if no other instance holds the lock; if this
                # session is lost meanwhile the task is cancelled, not left
                # running beside the next holder.
                await asyncio.sleep(0.1)
                return f"report written under token {token}"

            outcome = await nightly_report()
            print(outcome.value if outcome.ran else "another instance is running it: skipped")


if __name__ == "__main__":
    asyncio.run(main())
