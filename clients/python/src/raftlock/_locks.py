"""Held locks and the requests that take them: a single lock (exclusive,
shared or permits of a semaphore) as a :class:`Guard` with its fencing
token and hold cap, several locks granted together as a :class:`LockSet`,
the awaitable requests that wait for them in turns of at most one server
wait, and the scope that cancels a block's task when its lock is lost.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Generator, Optional, Sequence, TypeVar

import grpc

from . import errors
from ._types import MAX_WAIT, Grant, _stub, safety_margin
from .errors import HoldExpired, LockLost, LockTimeout, RaftlockError, SessionGone
from .v1 import raftlock_pb2 as pb
from .v1 import raftlock_pb2_grpc as rpc

if TYPE_CHECKING:
    from ._session import Session

T = TypeVar("T")


async def _in_turns(
    attempt: Callable[[float], Awaitable[Optional[T]]], timeout: Optional[float]
) -> Optional[T]:
    """Runs ``attempt(end)`` until it gets something or ``timeout`` seconds
    pass (``None``: as long as it takes). The server bounds one wait, so a
    longer one is waited in turns of at most ``MAX_WAIT``."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        now = time.monotonic()
        this_end = now + MAX_WAIT if end is None else min(end, now + MAX_WAIT)
        got = await attempt(this_end)
        if got is not None or (end is not None and time.monotonic() >= end - 0.001):
            return got


class LockRequest:
    """What :meth:`Session.lock` returns: await it, or use it as an async
    context manager."""

    def __init__(
        self,
        session: Session,
        name: str,
        timeout: Optional[float],
        shared: bool,
        permits: int,
        metadata: bytes,
        count: int = 0,
        max_hold: Optional[float] = None,
        lock_delay: float = 0.0,
        cancel_on_lost: bool = False,
    ) -> None:
        self.session = session
        self.name = name
        self.cancel_on_lost = cancel_on_lost
        self._scope: Optional[_LostScope] = None
        self.timeout = timeout
        # A semaphore's permits are shared, and so are several at once.
        self.shared = shared or permits > 0 or count > 0
        self.permits = permits
        self.metadata = metadata
        self.count = count
        self.max_hold = max_hold
        self.lock_delay = lock_delay
        self._guard: Optional[Guard] = None

    def __await__(self) -> Generator[Any, None, "Guard"]:
        return self._acquire_or_raise().__await__()

    async def __aenter__(self) -> "Guard":
        self._guard = await self._acquire_or_raise()
        task = asyncio.current_task()
        if self.cancel_on_lost and task is not None:
            self._scope = _LostScope(self._guard, task)
        return self._guard

    async def __aexit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: object
    ) -> None:
        scope, self._scope = self._scope, None
        lost = scope.close() if scope is not None else None
        if lost is not None and exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            # The cancellation was this scope's: the caller sees why.
            task = asyncio.current_task()
            uncancel = getattr(task, "uncancel", None)  # Python 3.11+
            if uncancel is not None:
                uncancel()
            if self._guard is not None:
                await self._guard.release()
            raise LockLost(
                f"lock {self.name!r} was lost while its block ran: {lost}", lost.reason, lost.code
            ) from lost
        if self._guard is not None:
            await self._guard.release()

    async def _acquire_or_raise(self) -> "Guard":
        g = await self._acquire(wait=True)
        if g is None:
            raise LockTimeout(f"timed out waiting for lock {self.name!r}")
        return g

    async def _acquire(self, wait: bool) -> Optional["Guard"]:
        if not wait:
            return await self._attempt(None)
        return await _in_turns(self._attempt, self.timeout)

    async def _attempt(self, end: Optional[float]) -> Optional["Guard"]:
        """One acquisition (numbered once, retried as one): a try-lock when
        ``end`` is ``None``, else a wait until ``end``."""
        s = self.session
        s.check()
        await s._cancels_settled([self.name])
        seq = s._ticket()
        request_id = uuid.uuid4().bytes
        max_hold_ms = 0 if self.max_hold is None else int(round(self.max_hold * 1000))
        lock_delay_ms = int(round(self.lock_delay * 1000))
        # The leader counts a hold cap from when it grants, which is after
        # this request was first sent: the guard counts from here.
        sent = time.monotonic()
        try:

            async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.AcquireResponse:
                # Each retry waits only what is left, not the whole wait again.
                left = None if end is None else max(0.0, end - time.monotonic())
                req = pb.AcquireRequest(
                    session_id=s.id,
                    name=self.name,
                    request_id=request_id,
                    mode=pb.LOCK_MODE_SHARED if self.shared else pb.LOCK_MODE_EXCLUSIVE,
                    permits=self.permits,
                    wait_timeout_ms=None if left is None else int(left * 1000),
                    metadata=self.metadata,
                    seq=seq,
                    acked_below=s._acked_below(seq),
                    in_flight=s._in_flight(),
                    count=self.count,
                    max_hold_ms=max_hold_ms,
                    lock_delay_ms=lock_delay_ms,
                )
                timeout = s.client.attempt_timeout + (left or 0.0)
                pipe = s.client._pipeline(ch)
                if pipe is not None:
                    resp = await pipe.call(pb.PipelineRequest(acquire=req), timeout)
                    return resp.acquire
                r: pb.AcquireResponse = await _stub(rpc.LockStub, ch).Acquire(
                    req, timeout=timeout, metadata=md
                )
                return r

            extra = 0.0 if end is None else max(0.0, end - time.monotonic())
            r = await s.client._call(call, extra_timeout=extra)
        except LockTimeout:
            return None
        except asyncio.CancelledError:
            if end is not None:
                s._cancel_wait_soon([self.name], request_id)
            raise
        except SessionGone:
            s._end(SessionGone(f"session {s.id} is gone"))
            raise
        finally:
            s._done(seq)
        if not r.acquired:
            return None
        return Guard(s, Grant._from(r.grant), sent)


class LockSetRequest:
    """What :meth:`Session.lock_all` returns: await it, or use it as an
    async context manager."""

    def __init__(
        self,
        session: Session,
        names: Sequence[str],
        timeout: Optional[float],
        metadata: bytes,
        cancel_on_lost: bool,
    ) -> None:
        self.session = session
        self.names = sorted(set(names))
        self.timeout = timeout
        self.metadata = metadata
        self.cancel_on_lost = cancel_on_lost
        self._set: Optional[LockSet] = None
        self._scope: Optional[_LostScope] = None

    def __await__(self) -> Generator[Any, None, "LockSet"]:
        return self._acquire_or_raise().__await__()

    async def __aenter__(self) -> "LockSet":
        self._set = await self._acquire_or_raise()
        task = asyncio.current_task()
        if self.cancel_on_lost and task is not None:
            self._scope = _LostScope(self._set.guards[0], task)
        return self._set

    async def __aexit__(
        self, exc_type: Optional[type[BaseException]], exc: Optional[BaseException], tb: object
    ) -> None:
        scope, self._scope = self._scope, None
        lost = scope.close() if scope is not None else None
        if self._set is not None:
            await self._set.release()
        if lost is not None and exc_type is not None and issubclass(exc_type, asyncio.CancelledError):
            task = asyncio.current_task()
            uncancel = getattr(task, "uncancel", None)  # Python 3.11+
            if uncancel is not None:
                uncancel()
            raise LockLost(
                f"locks {self.names!r} were lost while their block ran: {lost}", lost.reason, lost.code
            ) from lost

    async def _acquire_or_raise(self) -> "LockSet":
        got = await self._acquire(wait=True)
        if got is None:
            raise LockTimeout(f"timed out waiting for locks {self.names!r}")
        return got

    async def _acquire(self, wait: bool) -> Optional["LockSet"]:
        if not wait:
            return await self._attempt(None)
        return await _in_turns(self._attempt, self.timeout)

    async def _attempt(self, end: Optional[float]) -> Optional["LockSet"]:
        s = self.session
        s.check()
        await s._cancels_settled(self.names)
        request_id = uuid.uuid4().bytes
        # Numbered as an acquire is: a very late duplicate of this set is
        # refused, not granted again.
        seq = s._ticket()
        try:

            async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.AcquireAllResponse:
                left = None if end is None else max(0.0, end - time.monotonic())
                req = pb.AcquireAllRequest(
                    session_id=s.id,
                    names=self.names,
                    request_id=request_id,
                    wait_timeout_ms=None if left is None else int(left * 1000),
                    metadata=self.metadata,
                    seq=seq,
                    acked_below=s._acked_below(seq),
                    in_flight=s._in_flight(),
                )
                r: pb.AcquireAllResponse = await _stub(rpc.LockStub, ch).AcquireAll(
                    req, timeout=s.client.attempt_timeout + (left or 0.0), metadata=md
                )
                return r

            extra = 0.0 if end is None else max(0.0, end - time.monotonic())
            r = await s.client._call(call, extra_timeout=extra)
        except LockTimeout:
            return None
        except asyncio.CancelledError:
            # A cancel naming one lock of the set cancels (or releases) it all.
            if end is not None and self.names:
                s._cancel_wait_soon(self.names, request_id)
            raise
        except SessionGone:
            s._end(SessionGone(f"session {s.id} is gone"))
            raise
        finally:
            s._done(seq)
        if not r.acquired:
            return None
        return LockSet([Guard(s, Grant._from(g)) for g in r.grants])


class LockSet:
    """Locks held together: one :class:`Guard` per lock, in name order, all
    with the same fencing token (one log entry granted them). They share a
    session, so they are lost together; each is released on its own, or all
    by :meth:`release`."""

    def __init__(self, guards: list["Guard"]) -> None:
        self.guards = guards

    @property
    def tokens(self) -> dict[str, int]:
        """Each lock's fencing token, by name."""
        return {g.name: g.token for g in self.guards}

    @property
    def valid(self) -> bool:
        """Whether every lock of the set is still this holder's to act on."""
        return all(g.valid for g in self.guards)

    async def lost(self) -> RaftlockError:
        """Waits until the set can no longer be counted on; returns why."""
        return await self.guards[0].lost()

    async def release(self) -> None:
        """Releases every lock of the set (each its own release)."""
        for g in self.guards:
            await g.release()

    async def __aenter__(self) -> "LockSet":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()


class _LostScope:
    """Cancels ``task`` when ``guard`` is lost, until closed."""

    def __init__(self, guard: "Guard", task: "asyncio.Task[Any]") -> None:
        self.lost: Optional[RaftlockError] = None
        self._task = task
        self._watch = asyncio.ensure_future(self._run(guard))

    async def _run(self, guard: "Guard") -> None:
        reason = await guard.lost()
        if guard._released:
            return
        self.lost = reason
        self._task.cancel()

    def close(self) -> Optional[RaftlockError]:
        """Stops watching; why the lock was lost, if the task was cancelled
        for it."""
        self._watch.cancel()
        return self.lost


class Guard:
    """A held lock. ``token`` is its fencing token: pass it with every write
    to the resource the lock protects, which must refuse a token lower than
    the highest it has seen. ``valid`` turns false, and ``await lost()``
    returns, before anyone else can be granted the lock: when the session is
    lost, or when the grant's hold cap (``grant.max_hold_ms``) runs out.

    ``sent`` is when the acquisition was first sent (``time.monotonic()``
    scale): a hold cap is counted from it, less the safety margin of
    :func:`safety_margin`, since the leader counts it from its grant, which
    is later. Without it a cap is counted from now."""

    def __init__(self, session: Session, grant: Grant, sent: Optional[float] = None) -> None:
        self.session = session
        self.grant = grant
        self._released = False
        self._hold_until: Optional[float] = None
        if grant.max_hold_ms > 0:
            cap = grant.max_hold_ms / 1000.0
            start = time.monotonic() if sent is None else sent
            self._hold_until = start + cap - safety_margin(cap)

    async def __aenter__(self) -> "Guard":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    @property
    def token(self) -> int:
        """The fencing token."""
        return self.grant.token

    @property
    def name(self) -> str:
        """The lock's name."""
        return self.grant.name

    @property
    def valid(self) -> bool:
        """Whether the lock is still this holder's to act on: not released,
        the session valid, and the hold cap (if any) not run out."""
        return not self._released and self.session.valid and not self._hold_expired()

    @property
    def hold_until(self) -> Optional[float]:
        """When the hold cap makes the lock lost (``time.monotonic()``
        scale, a safety margin before the leader releases it), or ``None``
        without a cap."""
        return self._hold_until

    @property
    def valid_until(self) -> float:
        """Until when the lock can be counted on if no further keep-alive is
        acknowledged (``time.monotonic()`` scale): the session's deadline,
        or the hold cap's if that is sooner."""
        until = self.session.valid_until
        return until if self._hold_until is None else min(until, self._hold_until)

    def _hold_expired(self) -> bool:
        return self._hold_until is not None and time.monotonic() >= self._hold_until

    def _hold_error(self) -> HoldExpired:
        return HoldExpired(
            f"lock {self.name!r} lost: its hold cap of {self.grant.max_hold_ms} ms ran out"
        )

    def check(self) -> None:
        """Raises :class:`SessionLost` (:class:`~raftlock.errors.HoldExpired`
        when the hold cap ran out) unless the lock is still held."""
        if self._released:
            raise errors.NotHolder(f"lock {self.name!r} was released")
        self.session.check()
        if self._hold_expired():
            raise self._hold_error()

    async def lost(self) -> RaftlockError:
        """Waits until the lock can no longer be counted on (the session is
        lost, or the hold cap ran out); returns why. A release ends the hold
        but not this wait: after it, only the session's loss returns."""
        until = self._hold_until
        if until is None or not self.session.valid:
            return await self.session.lost()
        session_lost = asyncio.ensure_future(self.session.lost())
        try:
            # The timer may fire a little early: the deadline is what counts.
            while not self._hold_expired():
                await asyncio.wait({session_lost}, timeout=max(0.001, until - time.monotonic()))
                if session_lost.done():
                    return session_lost.result()
            if self._released:
                return await session_lost
        finally:
            session_lost.cancel()
        return self._hold_error()

    async def downgrade(self) -> None:
        """Makes this exclusive hold shared, as a read-write lock's writer
        becomes a reader without letting go: the token stays the same, and
        the readers queued at the front are granted beside it in the same
        step, so no other writer comes between. A hold already shared stays
        so; the hold's lock-delay is dropped (it protects exclusive holds
        only)::

            async with await session.lock("config/routes").acquire() as guard:
                await write_routes(guard.token)
                await guard.downgrade()
                await serve_from_routes()
        """
        s = self.session
        req = pb.DowngradeRequest(session_id=s.id, name=self.name, token=self.token)

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.DowngradeResponse:
            r: pb.DowngradeResponse = await _stub(rpc.LockStub, ch).Downgrade(
                req, timeout=t, metadata=md
            )
            return r

        resp = await s.client._call(call)
        self.grant = Grant._from(resp.hold)

    async def release(self) -> None:
        """Releases the lock; the next waiter is granted in the same step."""
        if self._released:
            return
        self._released = True
        if not self.session.valid:
            return
        s = self.session
        attempts = 0

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.ReleaseResponse:
            nonlocal attempts
            attempts += 1
            req = pb.ReleaseRequest(session_id=s.id, name=self.name, token=self.token)
            pipe = s.client._pipeline(ch)
            if pipe is not None:
                resp = await pipe.call(pb.PipelineRequest(release=req), t)
                return resp.release
            r: pb.ReleaseResponse = await _stub(rpc.LockStub, ch).Release(req, timeout=t, metadata=md)
            return r

        try:
            await s.client._call(call)
        except errors.NotHolder:
            # A retried release whose first attempt landed (its answer was
            # lost) finds the lock already free: that is success. On a first
            # attempt it means the lock was lost, which is no news once the
            # hold cap has run out: the leader released it.
            if attempts < 2 and not self._hold_expired():
                raise
