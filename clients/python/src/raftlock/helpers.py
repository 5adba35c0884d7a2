"""Helpers for the commonest uses: a function that runs on one instance
only (cron singletons, duplicate-job prevention).

Example::

    @raftlock.run_once(session, "cron/nightly-report")
    async def nightly_report(token: int) -> None:
        ...   # runs only if no other instance holds the lock right now

    outcome = await nightly_report()   # outcome.ran is False if another instance had it
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Generic, Optional, TypeVar

from .aio import Session
from .errors import SessionLost

R = TypeVar("R")


@dataclass(frozen=True)
class Outcome(Generic[R]):
    """What a :func:`run_once` call did: ``ran`` is false when another
    holder had the lock (``value`` is then ``None``)."""

    ran: bool
    value: Optional[R] = None


def run_once(
    session: Session, name: str, *, metadata: bytes = b"", hold_at_least: float = 0.0
) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[Outcome[R]]]]:
    """Decorates an async function taking the fencing token as its first
    argument: a call takes the lock ``name`` if it is free (never waits),
    runs the function, and releases. If the lock is held elsewhere it
    returns ``Outcome(ran=False)`` without running. If the lock is lost
    while the function runs, the function is cancelled (and awaited) before
    :class:`SessionLost` is raised, so it never runs on beside the next
    holder.

    ``hold_at_least`` (seconds) keeps the lock that long from the start of
    the call even when the function finishes sooner: instances of a cron
    job fire at the same minute but not the same instant, and one that
    fires late must find the run taken, not free again (a function that
    raises releases at once, so a late instance may try again). Set it to
    most of the job's period::

        @raftlock.run_once(session, "cron/hourly-sync", hold_at_least=50 * 60)
        async def hourly_sync(token: int) -> None: ...
    """
    if hold_at_least < 0:
        raise ValueError(f"hold_at_least must be >= 0 seconds, not {hold_at_least}")

    def wrap(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[Outcome[R]]]:
        @functools.wraps(fn)
        async def call(*args: Any, **kwargs: Any) -> Outcome[R]:
            loop = asyncio.get_running_loop()
            hold_until = loop.time() + hold_at_least
            guard = await session.try_lock(name, metadata=metadata)
            if guard is None:
                return Outcome(ran=False)
            work = asyncio.ensure_future(fn(guard.token, *args, **kwargs))
            lost = asyncio.ensure_future(guard.lost())
            try:
                done, _ = await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
                if work not in done:
                    raise SessionLost(
                        f"lost {name!r} while running {fn.__name__}: {lost.result()}"
                    )
                outcome = Outcome(ran=True, value=work.result())
                # The job is done: losing the lock while it is kept for
                # the rest of the run's window harms nothing, so a loss
                # now only ends the wait.
                rest = hold_until - loop.time()
                if rest > 0 and not lost.done():
                    await asyncio.wait({lost}, timeout=rest)
                return outcome
            finally:
                # Whatever ended the wait (the job, the loss, or this call's
                # own cancellation), the job stops before the lock goes.
                for t in (work, lost):
                    t.cancel()
                await asyncio.gather(work, lost, return_exceptions=True)
                await guard.release()

        return call

    return wrap
