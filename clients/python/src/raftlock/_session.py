"""The session: a lease on the cluster that owns locks, valid until the
send time of its last acknowledged keep-alive + TTL − margin, and lost for
good after that or when the server says it is gone. It numbers its calls
for exactly-once answers, starts lock requests, lock sets and campaigns,
and cancels the waits its callers abandon.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import TYPE_CHECKING, AsyncIterator, Callable, Optional, Sequence

import grpc

from . import errors
from ._elections import Leadership
from ._locks import LockRequest, LockSetRequest
from ._types import _GIVING_BACK, MAX_WAIT, _stub, safety_margin
from .errors import LockTimeout, RaftlockError, SessionGone, SessionLost, Unavailable
from .v1 import raftlock_pb2 as pb
from .v1 import raftlock_pb2_grpc as rpc

if TYPE_CHECKING:
    from ._client import Client
    from ._locks import Guard, LockSet


class Session:
    """A lease on the cluster that owns locks. It stays valid while
    keep-alives are acknowledged in time: until the send time of the last
    acknowledged one + TTL − margin. Past that, or when the server says it
    is gone, it is lost for good: ``valid`` turns false, ``await lost()``
    returns, and callbacks added with ``on_lost`` run.
    """

    def __init__(self, client: Client, session_id: int, ttl: float, created: float) -> None:
        self.client = client
        self.id = session_id
        self.ttl = ttl
        self._until = created + ttl - safety_margin(ttl)
        self._ended: Optional[RaftlockError] = None
        self._lost = asyncio.Event()
        self._callbacks: list[Callable[[RaftlockError], None]] = []
        self._watch: Optional[asyncio.Task[None]] = None
        self._seq = 0
        self._waiting: set[int] = set()
        # Abandoned waits whose cancel is still on its way, by lock name.
        self._cancelling: dict[str, set["asyncio.Task[None]"]] = {}
        self._watch = asyncio.get_running_loop().create_task(self._watch_deadline())

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def valid(self) -> bool:
        """Whether this client may still count on the session."""
        return self._ended is None and time.monotonic() < self._until

    @property
    def valid_until(self) -> float:
        """The local deadline (``time.monotonic()`` scale); it moves forward
        with every acknowledged keep-alive."""
        return self._until

    def check(self) -> None:
        """Raises :class:`SessionLost` unless the session is valid."""
        if not self.valid:
            raise self._ended or SessionLost(f"session {self.id} lost: no keep-alive acknowledged in time")

    async def lost(self) -> RaftlockError:
        """Waits until the session is lost or closed; returns why."""
        while True:
            if not self.valid:
                self._end(SessionLost(f"session {self.id} lost: no keep-alive acknowledged in time"))
                assert self._ended is not None
                return self._ended
            try:
                await asyncio.wait_for(self._lost.wait(), max(0.0, self._until - time.monotonic()))
            except asyncio.TimeoutError:
                pass

    def on_lost(self, callback: Callable[[RaftlockError], None]) -> None:
        """Calls ``callback(reason)`` once, when the session is lost (at
        once, on the event loop, if it already is)."""
        if self._ended is not None and self._watch is not None and self._watch.done():
            asyncio.get_running_loop().call_soon(self._run_callback, callback, self._ended)
            return
        self._callbacks.append(callback)

    @staticmethod
    def _run_callback(cb: Callable[[RaftlockError], None], reason: RaftlockError) -> None:
        try:
            cb(reason)
        except Exception:  # one failing callback must not silence the others
            import logging

            logging.getLogger("raftlock").exception("an on_lost callback failed")

    async def _watch_deadline(self) -> None:
        reason = await self.lost()
        for cb in self._callbacks:
            self._run_callback(cb, reason)

    def _acknowledged(self, sent: float) -> None:
        if self._ended is not None:
            return
        if time.monotonic() >= self._until:
            # Too late: a renewal answered after the deadline revives nothing.
            self._end(SessionLost(f"session {self.id} lost: no keep-alive acknowledged in time"))
            return
        self._until = max(self._until, sent + self.ttl - safety_margin(self.ttl))

    def _end(self, reason: RaftlockError) -> None:
        if self._ended is None:
            self._ended = reason
            self._lost.set()
            self.client._keepalive.remove(self.id)
            self.client._sessions.pop(self.id, None)

    async def keep_alive(self) -> float:
        """Renews the session once, now, and returns the time the leader
        gives it from here (seconds). Raises
        :class:`~raftlock.errors.SessionGone` if it expired or was closed,
        :class:`~raftlock.errors.SessionLost` if the renewal came too late.
        For sessions made with ``keep_alive=False``; on the others it only
        renews early::

            left = await session.keep_alive()
        """
        self.check()
        sent = time.monotonic()
        req = pb.KeepAliveRequest(session_id=self.id, shared=True)

        async def one() -> AsyncIterator[pb.KeepAliveRequest]:
            yield req
            # Half-closing could end the stream before its answer.
            await asyncio.Event().wait()

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.KeepAliveResponse:
            stream = _stub(rpc.SessionStub, ch).KeepAlive(one(), timeout=t, metadata=md)
            try:
                async for resp in stream:
                    r: pb.KeepAliveResponse = resp
                    return r
            finally:
                stream.cancel()
            raise Unavailable(f"session {self.id}: the keep-alive stream ended unanswered")

        resp = await self.client._call(call)
        if resp.gone:
            self._end(SessionGone(f"session {self.id} is gone (expired or closed)"))
        else:
            self._acknowledged(sent)
        self.check()
        return resp.ttl_ms / 1000.0

    async def close(self) -> None:
        """Ends the session on the server: its locks are released and its
        waits cancelled at once."""
        self._end(SessionGone(f"session {self.id} closed"))

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.CloseSessionResponse:
            r: pb.CloseSessionResponse = await _stub(rpc.SessionStub, ch).Close(
                pb.CloseSessionRequest(session_id=self.id), timeout=t, metadata=md
            )
            return r

        try:
            await self.client._call(call)
        except SessionGone:
            pass
        finally:
            if self._watch is not None:
                self._watch.cancel()

    # -- exactly-once numbering (Raft dissertation §6.3) --------------------

    def _ticket(self) -> int:
        self._seq += 1
        self._waiting.add(self._seq)
        return self._seq

    def _acked_below(self, seq: int) -> int:
        return min(min(self._waiting, default=seq), seq)

    def _in_flight(self) -> list[int]:
        """The numbers still waiting for their answers (the lowest 1,024),
        sent with each numbered call: every other number up to the highest
        is acknowledged, so a long wait does not keep the answers of the
        calls made beside it."""
        return sorted(self._waiting)[:1024]

    def _done(self, seq: int) -> None:
        self._waiting.discard(seq)

    # -- locks -------------------------------------------------------------

    def lock(
        self,
        name: str,
        *,
        timeout: Optional[float] = 3600.0,
        shared: bool = False,
        permits: int = 0,
        metadata: bytes = b"",
        count: int = 0,
        max_hold: Optional[float] = None,
        lock_delay: float = 0.0,
        cancel_on_lost: bool = False,
    ) -> "LockRequest":
        """A lock request: ``async with session.lock(name, timeout=5) as g``
        waits in the server's FIFO queue up to ``timeout`` seconds (raising
        :class:`LockTimeout`), or ``await session.lock(...)`` returns the
        guard. ``permits=N`` makes a counting semaphore of N permits (shared);
        ``count=K`` takes K of them at once (shared; granted only when K are
        free, in FIFO order); ``shared`` a read lock; ``metadata`` is shown to
        anyone who describes the lock.

        ``max_hold`` caps the hold, in seconds (1 s to 7 days): the leader
        releases the lock that long after granting it, even though the
        session lives, and the guard counts it lost a safety margin before
        then, counted from when the request was first sent (so time spent
        waiting in the queue counts too). Without it the server may apply
        its default for the name's prefix; the guard knows either way.
        ``lock_delay`` (seconds, at most 60; exclusive locks): if the hold
        ends without a release (the session expires, it is force-released,
        its cap runs out), nobody is granted the lock for that long.

        ``cancel_on_lost=True`` scopes the ``async with`` block to the lock:
        when the guard is lost while the block runs (by the same deadline as
        ``guard.valid``, before anyone else can be granted the lock), the
        block's task is cancelled and :class:`~raftlock.errors.LockLost`
        raised out of the block in place of the cancellation::

            async with session.lock("reports/daily", cancel_on_lost=True) as g:
                await write_report(fencing_token=g.token)
        """
        return LockRequest(
            self, name, timeout, shared, permits, metadata, count, max_hold, lock_delay,
            cancel_on_lost,
        )

    async def try_lock(
        self,
        name: str,
        *,
        shared: bool = False,
        permits: int = 0,
        metadata: bytes = b"",
        count: int = 0,
        max_hold: Optional[float] = None,
        lock_delay: float = 0.0,
    ) -> Optional["Guard"]:
        """Takes the lock if it is free now; ``None`` if it is held (or in
        lock-delay). The options are :meth:`lock`'s."""
        req = LockRequest(self, name, None, shared, permits, metadata, count, max_hold, lock_delay)
        return await req._acquire(wait=False)

    def lock_all(
        self,
        names: Sequence[str],
        *,
        timeout: Optional[float] = 3600.0,
        metadata: bytes = b"",
        cancel_on_lost: bool = False,
    ) -> "LockSetRequest":
        """Several locks, taken exclusively and together: the cluster grants
        every one of ``names`` (2 to 64, any order, repeats count once) in
        one log entry, or none. A set that must wait queues on all of its
        locks at once, so callers that need overlapping sets never deadlock,
        whatever order each names them in. Await it for a :class:`LockSet`,
        or use it as an async context manager (``cancel_on_lost`` as for
        :meth:`lock`); cancelling the waiting task cancels the wait on the
        cluster::

            async with session.lock_all(["accounts/17", "accounts/42"]) as both:
                await transfer(both.tokens)
        """
        return LockSetRequest(self, names, timeout, metadata, cancel_on_lost)

    async def try_lock_all(self, names: Sequence[str], *, metadata: bytes = b"") -> Optional["LockSet"]:
        """Takes every lock of ``names`` together if all are free now (and
        nobody queues for any); ``None`` otherwise.

        Example::

            both = await session.try_lock_all(["a", "b"])
            if both is not None:
                await both.release()
        """
        return await LockSetRequest(self, names, None, metadata, False)._acquire(wait=False)

    async def campaign(
        self, election: str, value: bytes = b"", timeout: Optional[float] = 3600.0
    ) -> "Leadership":
        """Waits to become the leader of ``election`` (FIFO among
        candidates), publishing ``value``; raises :class:`LockTimeout` after
        ``timeout`` seconds (``None``: as long as it takes)."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            now = time.monotonic()
            this_end = now + MAX_WAIT if end is None else min(end, now + MAX_WAIT)
            lead = await self._campaign_once(election, value, this_end)
            if lead is not None:
                return lead
            if end is not None and time.monotonic() >= end - 0.001:
                raise LockTimeout(f"not elected leader of {election!r} in time")

    def _cancel_wait_soon(self, names: Sequence[str], request_id: bytes) -> None:
        """Cancels an abandoned wait on the cluster, in the background: the
        task that awaited it was cancelled, so it cannot wait for this. A
        grant that won the race is released by the server. The cancel names
        the first lock (a set's wait is cancelled by any of its locks)."""
        if self._ended is not None or self.client._closed or not names:
            return
        task = asyncio.get_running_loop().create_task(_cancel_quietly(self, names[0], request_id))
        _GIVING_BACK.add(task)
        task.add_done_callback(_GIVING_BACK.discard)
        for n in names:
            self._cancelling.setdefault(n, set()).add(task)

        def settled(t: "asyncio.Task[None]") -> None:
            for n in names:
                pending = self._cancelling.get(n)
                if pending is not None:
                    pending.discard(t)
                    if not pending:
                        del self._cancelling[n]

        task.add_done_callback(settled)

    async def _cancels_settled(self, names: Sequence[str]) -> None:
        """Lets the cancels of these locks' abandoned waits finish first: a
        grant that raced its cancel is the session's until the cancel
        releases it, and an acquisition sent meanwhile would be refused
        ``ALREADY_HELD`` though the caller holds nothing it knows of."""
        pending = {t for n in names for t in self._cancelling.get(n, ())}
        if pending:
            await asyncio.wait(pending)

    async def cancel_wait(self, name: str, request_id: bytes) -> pb.CancelWaitResponse:
        """Gives up this session's wait for ``name`` made with
        ``request_id`` (the waiting call fails with ``WAIT_CANCELLED``); if
        the lock was granted to it meanwhile, releases it. Cancelling the
        task that awaits :meth:`lock` or :meth:`campaign` does this by
        itself; this is for a wait another process started. Idempotent.

        Example::

            r = await session.cancel_wait("jobs/nightly", request_id)
            print(r.cancelled, r.released)
        """
        req = pb.CancelWaitRequest(session_id=self.id, name=name, request_id=request_id)

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.CancelWaitResponse:
            r: pb.CancelWaitResponse = await _stub(rpc.LockStub, ch).CancelWait(
                req, timeout=t, metadata=md
            )
            return r

        return await self.client._call(call)

    async def _campaign_once(self, election: str, value: bytes, end: float) -> Optional["Leadership"]:
        self.check()
        await self._cancels_settled([election])
        seq = self._ticket()
        request_id = uuid.uuid4().bytes
        try:

            async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.CampaignResponse:
                left = max(0.0, end - time.monotonic())
                req = pb.CampaignRequest(
                    name=election,
                    session_id=self.id,
                    request_id=request_id,
                    value=value,
                    wait_timeout_ms=int(left * 1000),
                    seq=seq,
                    acked_below=self._acked_below(seq),
                    in_flight=self._in_flight(),
                )
                r: pb.CampaignResponse = await _stub(rpc.ElectionStub, ch).Campaign(
                    req, timeout=self.client.attempt_timeout + left, metadata=md
                )
                return r

            r = await self.client._call(call, extra_timeout=max(0.0, end - time.monotonic()))
        except LockTimeout:
            return None
        except asyncio.CancelledError:
            self._cancel_wait_soon([election], request_id)
            raise
        except errors.SessionGone:
            self._end(SessionGone(f"session {self.id} is gone"))
            raise
        finally:
            self._done(seq)
        if not r.HasField("leader"):
            return None
        return Leadership(self, election, r.leader.token)


async def _cancel_quietly(session: Session, name: str, request_id: bytes) -> None:
    try:
        await session.cancel_wait(name, request_id)
    except Exception as e:  # the server ends the wait at its deadline anyway
        import logging

        logging.getLogger("raftlock").warning(
            "cancelling the abandoned wait for %r failed: %s", name, e
        )
