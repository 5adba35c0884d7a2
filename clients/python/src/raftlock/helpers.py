"""Helpers for the commonest uses: a function that runs on one instance
only (cron singletons, duplicate-job prevention).

Example::

    @raftlock.run_once(session, "cron/nightly-report")
    async def nightly_report(token: int) -> None:
        ...   # runs only if no other instance holds the lock right now

    ran = await nightly_report()   # False if another instance was running it
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Awaitable, Callable, Optional, TypeVar

from .aio import Session
from .errors import SessionLost

R = TypeVar("R")


def run_once(
    session: Session, name: str, *, metadata: bytes = b""
) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[Optional[R]]]]:
    """Decorates an async function taking the fencing token as its first
    argument: a call takes the lock ``name`` if it is free (never waits),
    runs the function, and releases; if the lock is held elsewhere it
    returns ``None`` without running. If the lock is lost while the function
    runs, the function is cancelled and :class:`SessionLost` is raised."""

    def wrap(fn: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[Optional[R]]]:
        @functools.wraps(fn)
        async def call(*args: Any, **kwargs: Any) -> Optional[R]:
            guard = await session.try_lock(name, metadata=metadata)
            if guard is None:
                return None
            try:
                work = asyncio.ensure_future(fn(guard.token, *args, **kwargs))
                lost = asyncio.ensure_future(guard.lost())
                done, _ = await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
                if work in done:
                    lost.cancel()
                    return work.result()
                work.cancel()
                raise SessionLost(f"lost {name!r} while running {fn.__name__}: {lost.result()}")
            finally:
                await guard.release()

        return call

    return wrap
