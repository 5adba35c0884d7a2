"""The synchronous API: the same client as :mod:`raftlock.aio`, run on an
event loop in a background thread, for code that is not asyncio.

Example (against ``raftlockd dev``)::

    import raftlock.sync as raftlock

    with raftlock.Client("127.0.0.1:7000,127.0.0.1:7001") as client:
        with client.session(ttl=10) as session:
            with session.lock("payments/settle", timeout=5) as guard:
                settle(fencing_token=guard.token)
"""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import Future
from typing import Any, Callable, Coroutine, Iterator, Mapping, Optional, Sequence, TypeVar, Union

from . import aio
from .aio import Admission, Description, Grant, LimitInfo, LockSummary, Tls, Waiter
from .errors import LockTimeout, RaftlockError

T = TypeVar("T")

__all__ = [
    "Client",
    "Session",
    "Guard",
    "Leadership",
    "Grant",
    "Description",
    "LockSummary",
    "Tls",
    "Waiter",
    "RateLimit",
    "TokenLease",
    "Admission",
    "LimitInfo",
]


class _Loop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="raftlock", daemon=True)
        self.thread.start()
        self.closed = False

    def run(self, coro: Coroutine[Any, Any, T], timeout: Optional[float] = None) -> T:
        if self.closed:
            coro.close()
            raise RuntimeError("this raftlock client is closed")
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError(
                "a blocking raftlock call from the client's own thread (an on_lost callback?) "
                "would wait on itself"
            )
        fut: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except BaseException:
            # A timeout or Ctrl-C: the call must not go on in the background.
            fut.cancel()
            raise

    def stop(self) -> None:
        if self.closed:
            return
        self.closed = True

        async def drain() -> None:
            # Tasks still pending (a stream's last status, a cancelled
            # renewal) end here rather than being destroyed with the loop.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            asyncio.run_coroutine_threadsafe(drain(), self.loop).result(2)
        except Exception:  # stopping goes on whatever a task did
            pass
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        if not self.thread.is_alive():
            self.loop.close()


class Client:
    """A handle to a raftlock cluster (see :class:`raftlock.aio.Client`)."""

    def __init__(
        self,
        endpoints: Union[str, Sequence[str]],
        *,
        tls: Optional[Tls] = None,
        token: Optional[str] = None,
        deadline: float = 15.0,
        client_name: Optional[str] = None,
    ) -> None:
        self._loop = _Loop()

        async def make() -> aio.Client:
            return aio.Client(endpoints, tls=tls, token=token, deadline=deadline, client_name=client_name)

        self._inner = self._loop.run(make())

    @classmethod
    def from_env(cls, environ: Optional[Mapping[str, str]] = None, *, deadline: float = 15.0) -> "Client":
        """A client set up as the ``raftlock`` CLI would be, from the same
        environment variables (see :meth:`raftlock.aio.Client.from_env`).

        >>> with raftlock.sync.Client.from_env() as client:  # doctest: +SKIP
        ...     session = client.session(ttl=10)
        """
        endpoints, tls, token, client_name = aio._settings_from_env(os.environ if environ is None else environ)
        return cls(endpoints, tls=tls, token=token, deadline=deadline, client_name=client_name)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes its sessions on the server (their locks are released at
        once), stops keep-alives, closes connections and the loop thread (a
        second call does nothing)."""
        if self._loop.closed:
            return
        self._loop.run(self._inner.close())
        self._loop.stop()

    def session(self, ttl: float = 10.0, name: Optional[str] = None, *, keep_alive: bool = True) -> "Session":
        """Creates a session kept alive in the background, or, with
        ``keep_alive=False``, by the caller's :meth:`Session.keep_alive`
        (see :meth:`raftlock.aio.Client.session`)."""
        return Session(self, self._loop.run(self._inner.session(ttl, name, keep_alive=keep_alive)))

    def validate(self, name: str, token: int) -> bool:
        """Whether ``token`` belongs to a current holder of ``name``."""
        return self._loop.run(self._inner.validate(name, token))

    def describe(self, name: str) -> Description:
        """Holders and waiters of ``name``."""
        return self._loop.run(self._inner.describe(name))

    def resize(self, name: str, permits: int) -> list[Grant]:
        """Sets the size of semaphore ``name`` (0 forgets it); returns the
        waiters a larger size let in (see :meth:`raftlock.aio.Client.resize`)."""
        return self._loop.run(self._inner.resize(name, permits))

    def list_locks(self, prefix: str = "", *, limit: int = 0) -> list[LockSummary]:
        """Locks under ``prefix`` in name order, the sized semaphores
        nobody holds included (see :meth:`raftlock.aio.Client.list_locks`).

        >>> [l.name for l in client.list_locks("jobs/")]  # doctest: +SKIP
        ['jobs/nightly']
        """
        return self._loop.run(self._inner.list_locks(prefix, limit=limit))

    def release(self, grant: Grant) -> None:
        """Releases a grant that any session of this identity holds (see
        :meth:`raftlock.aio.Client.release`).

        >>> client.release(client.describe("jobs/nightly").holders[0])  # doctest: +SKIP
        """
        self._loop.run(self._inner.release(grant))

    def force_release(self, name: str) -> list[Grant]:
        """Frees ``name`` whoever holds it (the ``admin`` right); returns
        the grants taken away.

        >>> taken = client.force_release("jobs/nightly")  # doctest: +SKIP
        """
        return self._loop.run(self._inner.force_release(name))

    def rate_limit(
        self,
        name: str,
        *,
        rate: Optional[int] = None,
        per: float = 1.0,
        burst: Optional[int] = None,
    ) -> "RateLimit":
        """The rate limit ``name``: ``rate`` tokens per ``per`` seconds, at
        most ``burst`` at once, created on first use; without a rate it
        must exist (see :meth:`raftlock.aio.Client.rate_limit`)."""
        return RateLimit(self, self._inner.rate_limit(name, rate=rate, per=per, burst=burst))

    def leader(self, election: str) -> Optional[Grant]:
        """The current leader of ``election``."""
        return self._loop.run(self._inner.leader(election))

    def observe(self, election: str) -> Iterator[Optional[Grant]]:
        """Yields the leader of ``election`` now and at every change."""
        it = self._inner.observe(election)

        async def step() -> Optional[Grant]:
            return await it.__anext__()

        while True:
            yield self._loop.run(step())


class Session:
    """A session (see :class:`raftlock.aio.Session`)."""

    def __init__(self, client: Client, inner: aio.Session) -> None:
        self._client = client
        self._inner = inner
        self.id = inner.id
        self.ttl = inner.ttl

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def valid(self) -> bool:
        """Whether this client may still count on the session."""
        return self._inner.valid

    def lost(self, timeout: Optional[float] = None) -> RaftlockError:
        """Blocks until the session is lost (or ``timeout``); returns why."""
        return self._client._loop.run(self._inner.lost(), timeout)

    def on_lost(self, callback: Callable[[RaftlockError], None]) -> None:
        """Calls ``callback(reason)`` on a thread of its own when the session
        is lost, so the callback may use this client."""

        def start(reason: RaftlockError) -> None:
            threading.Thread(target=callback, args=(reason,), name="raftlock-on-lost", daemon=True).start()

        async def register() -> None:
            self._inner.on_lost(start)

        self._client._loop.run(register())

    def keep_alive(self) -> float:
        """Renews the session now; returns the seconds the leader gives it
        (see :meth:`raftlock.aio.Session.keep_alive`).

        >>> session.keep_alive()  # doctest: +SKIP
        29.98
        """
        return self._client._loop.run(self._inner.keep_alive())

    def close(self) -> None:
        """Ends the session, releasing its locks."""
        self._client._loop.run(self._inner.close())

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
    ) -> "Guard":
        """Waits for the lock (FIFO, up to ``timeout`` seconds, else
        :class:`LockTimeout`); use the guard in a ``with`` block. The
        options are :meth:`raftlock.aio.Session.lock`'s (``count`` permits
        at once, a ``max_hold`` cap and a ``lock_delay``, in seconds)."""
        req = self._inner.lock(
            name,
            timeout=timeout,
            shared=shared,
            permits=permits,
            metadata=metadata,
            count=count,
            max_hold=max_hold,
            lock_delay=lock_delay,
        )
        g = self._client._loop.run(req._acquire_or_raise())
        return Guard(self, g)

    def try_lock(
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
        """Takes the lock if free now, else ``None``."""
        g = self._client._loop.run(
            self._inner.try_lock(
                name,
                shared=shared,
                permits=permits,
                metadata=metadata,
                count=count,
                max_hold=max_hold,
                lock_delay=lock_delay,
            )
        )
        return Guard(self, g) if g is not None else None

    def lock_all(
        self, names: Sequence[str], *, timeout: Optional[float] = 3600.0, metadata: bytes = b""
    ) -> list["Guard"]:
        """Waits for every lock of ``names``, granted together in one log
        entry (see :meth:`raftlock.aio.Session.lock_all`); a guard per lock,
        in name order, each released on its own.

        Example::

            for g in session.lock_all(["accounts/17", "accounts/42"], timeout=5):
                print(g.name, g.token)
        """
        req = self._inner.lock_all(names, timeout=timeout, metadata=metadata)
        got = self._client._loop.run(req._acquire_or_raise())
        return [Guard(self, g) for g in got.guards]

    def campaign(self, election: str, value: bytes = b"", timeout: Optional[float] = 3600.0) -> "Leadership":
        """Waits to lead ``election``."""
        return Leadership(self, self._client._loop.run(self._inner.campaign(election, value, timeout)))


class Guard:
    """A held lock (see :class:`raftlock.aio.Guard`)."""

    def __init__(self, session: Session, inner: aio.Guard) -> None:
        self._session = session
        self._inner = inner

    def __enter__(self) -> "Guard":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @property
    def token(self) -> int:
        """The fencing token."""
        return self._inner.token

    @property
    def name(self) -> str:
        """The lock's name."""
        return self._inner.name

    @property
    def grant(self) -> Grant:
        """The grant as the cluster recorded it."""
        return self._inner.grant

    @property
    def valid(self) -> bool:
        """Whether the lock is still this holder's to act on (the session
        valid and the hold cap, if any, not run out)."""
        return self._inner.valid

    @property
    def valid_until(self) -> float:
        """Until when the lock can be counted on (``time.monotonic()``
        scale): the session's deadline or the hold cap's, the sooner."""
        return self._inner.valid_until

    def check(self) -> None:
        """Raises unless the lock is still held."""
        self._inner.check()

    def lost(self, timeout: Optional[float] = None) -> RaftlockError:
        """Blocks until the lock can no longer be counted on (the session is
        lost or the hold cap ran out), or ``timeout``; returns why."""
        return self._session._client._loop.run(self._inner.lost(), timeout)

    def downgrade(self) -> None:
        """Makes this exclusive hold shared, keeping its token; the readers
        queued at the front are granted beside it (see
        :meth:`raftlock.aio.Guard.downgrade`)::

            with session.lock("config/routes").acquire() as guard:
                write_routes(guard.token)
                guard.downgrade()
        """
        self._session._client._loop.run(self._inner.downgrade())

    def release(self) -> None:
        """Releases the lock."""
        self._session._client._loop.run(self._inner.release())


class Leadership:
    """Leadership of an election (see :class:`raftlock.aio.Leadership`)."""

    def __init__(self, session: Session, inner: aio.Leadership) -> None:
        self._session = session
        self._inner = inner
        self.token = inner.token

    @property
    def valid(self) -> bool:
        """Whether this is still the leader's to act on."""
        return self._inner.valid

    def proclaim(self, value: bytes) -> None:
        """Publishes ``value``."""
        self._session._client._loop.run(self._inner.proclaim(value))

    def resign(self) -> None:
        """Steps down."""
        self._session._client._loop.run(self._inner.resign())


class RateLimit:
    """A rate limit by name (see :class:`raftlock.aio.RateLimit`)."""

    def __init__(self, client: Client, inner: aio.RateLimit) -> None:
        self._client = client
        self._inner = inner
        self.name = inner.name

    def try_take(self, n: int = 1) -> Admission:
        """Takes ``n`` tokens now, or says after how long they would fit."""
        return self._client._loop.run(self._inner.try_take(n))

    def take(self, n: int = 1, *, wait: float) -> Admission:
        """Takes ``n`` tokens, waiting on the server up to ``wait`` seconds
        (FIFO among waiting takes); not admitted if they do not fit by then."""
        return self._client._loop.run(self._inner.take(n, wait=wait))

    def reserve(self, n: int, *, validity: float) -> Optional["TokenLease"]:
        """Reserves a block of ``n`` tokens to spend locally within
        ``validity`` seconds (at most 10); ``None`` when it would not fit
        now. Use the lease in a ``with`` block to give back what is left."""
        inner = self._client._loop.run(self._inner.reserve(n, validity=validity))
        return TokenLease(self._client, inner) if inner is not None else None

    def define(self) -> bool:
        """Creates the limit, or checks an existing one has these
        parameters (else :class:`~raftlock.errors.LimitConflict`); true if
        this call created it."""
        return self._client._loop.run(self._inner.define())

    def describe(self) -> LimitInfo:
        """The limit's parameters, tokens available now and totals."""
        return self._client._loop.run(self._inner.describe())

    def delete(self) -> bool:
        """Forgets the limit (``admin`` right); true if it existed."""
        return self._client._loop.run(self._inner.delete())


class TokenLease:
    """A block of reserved tokens (see :class:`raftlock.aio.TokenLease`):
    ``with`` finishes it on exit, giving back what was not spent."""

    def __init__(self, client: Client, inner: aio.TokenLease) -> None:
        self._client = client
        self._inner = inner
        self.id = inner.id
        self.reserved = inner.reserved

    def __enter__(self) -> "TokenLease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def try_spend(self) -> bool:
        """Spends one token if the block has one left and is still valid
        (no call to the cluster; safe from several threads)."""
        return self._inner.try_spend()

    @property
    def left(self) -> int:
        """Tokens not spent yet."""
        return self._inner.left

    @property
    def valid(self) -> bool:
        """Whether tokens of the block may still be spent."""
        return self._inner.valid

    @property
    def valid_until(self) -> float:
        """When the block stops being spendable (``time.monotonic()`` scale)."""
        return self._inner.valid_until

    def finish(self) -> int:
        """Stops spending and gives back what is left; returns the tokens
        the cluster credited back."""
        return self._client._loop.run(self._inner.finish())


__all__ += ["LockTimeout"]
