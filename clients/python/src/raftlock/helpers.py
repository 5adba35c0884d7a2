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
    session: Session, name: str, *, metadata: bytes = b""
) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[Outcome[R]]]]:
    """Decorates an async function taking the fencing token as its first
    argument: a call takes the lock ``name`` if it is free (never waits),
    runs the function, and releases. If the lock is held elsewhere it
    returns ``Outcome(ran=False)`` without running. If the lock is lost
    while the function runs, the function is cancelled (and awaited) before
    :class:`SessionLost` is raised, so it never runs on beside the next
    holder."""

    def wrap(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[Outcome[R]]]:
        @functools.wraps(fn)
        async def call(*args: Any, **kwargs: Any) -> Outcome[R]:
            guard = await session.try_lock(name, metadata=metadata)
            if guard is None:
                return Outcome(ran=False)
            work = asyncio.ensure_future(fn(guard.token, *args, **kwargs))
            lost = asyncio.ensure_future(guard.lost())
            try:
                done, _ = await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
                if work in done:
                    return Outcome(ran=True, value=work.result())
                raise SessionLost(f"lost {name!r} while running {fn.__name__}: {lost.result()}")
            finally:
                # Whatever ended the wait (the job, the loss, or this call's
                # own cancellation), the job stops before the lock goes.
                for t in (work, lost):
                    t.cancel()
                await asyncio.gather(work, lost, return_exceptions=True)
                await guard.release()

        return call

    return wrap
