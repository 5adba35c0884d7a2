"""Several workers pull the same job ids (a redelivered queue message, a
retried webhook); each job is processed once: a worker that finds a job's
lock taken moves on, and the one holding it checks, under the lock, whether
the job was already done (the lock stops two at once; the record stops a
second run later).

Replaces (PostgreSQL):
    SELECT pg_try_advisory_lock(hashtext('job:' || $1));
    ... process ...
    SELECT pg_advisory_unlock(hashtext('job:' || $1));
which is tied to one database connection (a pooler or a dropped connection
silently frees it), and hashes ids into a 32-bit space where two jobs can
collide.
"""

import asyncio
import os

import raftlock


async def worker(
    client: raftlock.Client, name: str, jobs: list[str], completed: dict[str, int]
) -> list[str]:
    done = []
    async with await client.session(ttl=10, name=name) as session:
        for job in jobs:
            guard = await session.try_lock(f"jobs/{job}", metadata=name.encode())
            if guard is None:
                continue  # another worker has it
            try:
                if job in completed:
                    continue  # done earlier by someone else
                await asyncio.sleep(0.05)  # process the job
                completed[job] = guard.token  # in a real system: a row, fenced by the token
                done.append(job)
            finally:
                await guard.release()
    return done


async def main() -> None:
    async with raftlock.Client(os.environ["RAFTLOCK_ENDPOINTS"]) as client:
        jobs = [f"order-{i}" for i in range(5)]
        completed: dict[str, int] = {}
        results = await asyncio.gather(
            *(worker(client, f"worker-{w}", jobs, completed) for w in range(3))
        )
        for w, done in enumerate(results):
            print(f"worker-{w} processed {done}")


if __name__ == "__main__":
    asyncio.run(main())
