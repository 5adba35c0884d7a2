"""The asyncio client: sessions kept alive in the background, locks with
fencing tokens, elections. The synchronous API (:mod:`raftlock.sync`) runs
this same code on a loop of its own.

Example (against ``raftlockd dev``)::

    import asyncio, raftlock

    async def main() -> None:
        async with raftlock.Client("127.0.0.1:7000,127.0.0.1:7001") as client:
            async with await client.session(ttl=10) as session:
                async with session.lock("payments/settle", timeout=5) as guard:
                    print("token", guard.token)   # pass it to every write

    asyncio.run(main())
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import threading
import time
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Generator, Awaitable, Callable, Mapping, Optional, Sequence, TypeVar, Union

import grpc

from . import errors
from .errors import (
    HoldExpired,
    LockLost,
    LockTimeout,
    RaftlockError,
    SessionGone,
    SessionLost,
    Unavailable,
)
from .v1 import raftlock_pb2 as pb
from .v1 import raftlock_pb2_grpc as rpc

#: Trailing metadata key naming the leader's client address when a follower
#: refuses a call.
LEADER_METADATA_KEY = "raftlock-leader"
#: The longest one wait asks of the server (its default bound); longer
#: waits are waited in turns.
MAX_WAIT = 3600.0

T = TypeVar("T")


def _stub(cls: Any, channel: grpc.aio.Channel) -> Any:
    """A generated stub (the generated code carries no type annotations)."""
    return cls(channel)


def safety_margin(ttl: float) -> float:
    """The part of a TTL this client does not count on (DESIGN.md rule 4):
    a tenth, at least 0.1 s, as the Rust client.

    >>> safety_margin(10.0)
    1.0
    """
    return max(ttl / 10.0, 0.1)


@dataclass(frozen=True)
class Tls:
    """TLS settings: the CA that signed the nodes' certificates (PEM bytes;
    ``None``: the system's roots), and optionally this client's certificate
    and key for mTLS.

    >>> tls = Tls(ca=open("ca.pem", "rb").read())  # doctest: +SKIP
    """

    ca: Optional[bytes] = None
    cert: Optional[bytes] = None
    key: Optional[bytes] = None


@dataclass(frozen=True)
class Grant:
    """A holder of a lock: its fencing token, session, metadata, and the
    terms it was granted under: ``count`` permits of a semaphore (1 for an
    exclusive hold), the hold cap ``max_hold_ms`` (0: none; the server's,
    which may be a default it filled in for the name's prefix) and the
    ``lock_delay_ms`` that follows it if it ends without a release."""

    name: str
    token: int
    session_id: int
    granted_at_ms: int
    metadata: bytes
    shared: bool
    count: int = 1
    max_hold_ms: int = 0
    lock_delay_ms: int = 0

    @staticmethod
    def _from(g: pb.Grant) -> "Grant":
        return Grant(
            name=g.name,
            token=g.token,
            session_id=g.session_id,
            granted_at_ms=g.granted_at_ms,
            metadata=bytes(g.metadata),
            shared=g.mode == pb.LOCK_MODE_SHARED,
            # 0 from a node older than counted permits: one.
            count=max(g.count, 1),
            max_hold_ms=g.max_hold_ms,
            lock_delay_ms=g.lock_delay_ms,
        )


@dataclass(frozen=True)
class Waiter:
    """A queued acquisition: its session, mode and the permits it asks for;
    when it was queued (Unix ms, the leader's clock) and for how long."""

    session_id: int
    shared: bool
    count: int
    enqueued_at_ms: int
    timeout_ms: int


@dataclass(frozen=True)
class Description:
    """Holders and waiters of a lock (a linearizable read). ``permits`` is
    the semaphore's size (0: not a semaphore), ``resized`` whether
    :meth:`Client.resize` set it; ``lock_delay_ms`` is non-zero while the
    lock is in lock-delay (its length: nobody is granted the lock until it
    ends)."""

    name: str
    permits: int
    holders: list[Grant]
    waiting_sessions: list[int]
    waiters: list[Waiter] = field(default_factory=list)
    lock_delay_ms: int = 0
    resized: bool = False


@dataclass(frozen=True)
class LockSummary:
    """One lock of a listing (:meth:`Client.list_locks`): a name somebody holds
    or waits for, or a semaphore whose size :meth:`Client.resize` set
    (``resized``), which is listed even when nobody holds it. ``permits`` is
    the semaphore's size (0: not fixed)."""

    name: str
    holders: list[Grant]
    waiter_count: int
    permits: int = 0
    resized: bool = False
    lock_delay_ms: int = 0


def _endpoints(endpoints: Union[str, Sequence[str]], tls: Optional["Tls"]) -> list[str]:
    """``host:port`` of each endpoint, written as the CLI takes them: with or
    without ``http://`` or ``https://`` (whose TLS must then agree with
    ``tls``), comma-separated or listed."""
    if isinstance(endpoints, str):
        endpoints = endpoints.split(",")
    out = []
    for e in endpoints:
        e = e.strip().rstrip("/")
        if not e:
            continue
        scheme, sep, rest = e.partition("://")
        if sep:
            if scheme not in ("http", "https"):
                raise errors.InvalidArgument(f"endpoint {e!r}: only http:// and https:// are understood")
            if (scheme == "https") != (tls is not None):
                raise errors.InvalidArgument(
                    f"endpoint {e!r}: https:// needs tls=Tls(...), and tls=Tls(...) needs https:// or no scheme"
                )
            e = rest
        out.append(e)
    if not out:
        raise errors.InvalidArgument("no endpoints given")
    return out


#: The environment variables :meth:`Client.from_env` reads: the raftlock
#: CLI's (and the Go client's ``FromEnv``).
ENV_ENDPOINTS = "RAFTLOCK_ENDPOINTS"
ENV_CACERT = "RAFTLOCK_CACERT"
ENV_CERT = "RAFTLOCK_CERT"
ENV_KEY = "RAFTLOCK_KEY"
ENV_AUTH_TOKEN = "RAFTLOCK_AUTH_TOKEN"
ENV_CLIENT_NAME = "RAFTLOCK_CLIENT_NAME"


def _settings_from_env(environ: Mapping[str, str]) -> tuple[str, Optional[Tls], Optional[str], Optional[str]]:
    """Endpoints, TLS, token and client name as the CLI reads them."""
    endpoints = environ.get(ENV_ENDPOINTS, "").strip() or "127.0.0.1:7000"

    def read(var: str) -> Optional[bytes]:
        path = environ.get(var, "").strip()
        if not path:
            return None
        try:
            with open(path, "rb") as f:
                return f.read()
        except OSError as e:
            raise errors.InvalidArgument(f"{var}={path}: {e.strerror or e}") from None

    ca, cert, key = read(ENV_CACERT), read(ENV_CERT), read(ENV_KEY)
    if (cert is None) != (key is None):
        raise errors.InvalidArgument(f"{ENV_CERT} and {ENV_KEY} go together: set both or neither")
    tls = None
    if ca is not None or cert is not None or "https://" in endpoints:
        tls = Tls(ca=ca, cert=cert, key=key)
        # The CLI's http:// is not a choice against TLS once a CA is given.
        endpoints = endpoints.replace("http://", "https://")
    return (
        endpoints,
        tls,
        environ.get(ENV_AUTH_TOKEN) or None,
        environ.get(ENV_CLIENT_NAME) or None,
    )


def _retryable(e: grpc.RpcError) -> bool:
    code = e.code()
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNKNOWN, grpc.StatusCode.CANCELLED):
        return True
    # A DEADLINE_EXCEEDED without a reason is this client's own attempt
    # timeout, and an INTERNAL without one gRPC's own transport failure (a
    # stream broken by a dying node): neither is a verdict of the server's,
    # whose refusals always carry a reason.
    return (
        code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.INTERNAL)
        and errors.reason_of(e) is None
    )


class Client:
    """A handle to a raftlock cluster. It finds the leader itself (following
    the ``raftlock-leader`` hint of a follower), retries unavailability with
    jittered backoff until ``deadline`` seconds, and keeps all its
    sessions alive over one stream.

    ``endpoints`` is a list of ``host:port`` (or ``http://host:port``, as
    the CLI's ``RAFTLOCK_ENDPOINTS`` may hold them) or a comma-separated
    string;
    ``token`` a bearer token for clusters with authentication; ``tls`` the
    CA (and client certificate) for clusters with TLS; ``interceptors``
    gRPC client interceptors (tracing, metrics) applied to every call.
    Acquires and releases of all sessions go over one ``Pipeline`` stream
    per node (as the Rust client does), which costs each call far less than
    a unary call of its own; ``pipeline=False`` (or any interceptor) keeps
    them unary.
    """

    def __init__(
        self,
        endpoints: Union[str, Sequence[str]],
        *,
        tls: Optional[Tls] = None,
        token: Optional[str] = None,
        deadline: float = 15.0,
        attempt_timeout: float = 6.0,
        client_name: Optional[str] = None,
        interceptors: Optional[Sequence[grpc.aio.ClientInterceptor]] = None,
        pipeline: bool = True,
    ) -> None:
        self._endpoints = _endpoints(endpoints, tls)
        self._tls = tls
        self._token = token
        self._interceptors = list(interceptors or [])
        # Interceptors see unary calls only: with any, acquires and releases
        # stay unary so that they see those too.
        self._use_pipeline = pipeline and not self._interceptors
        self._pipelines: dict[int, _Pipeline] = {}
        self._unary_only: set[int] = set()
        self.deadline = deadline
        self.attempt_timeout = attempt_timeout
        self.client_name = client_name or f"python:{socket.gethostname()}:{os.getpid()}"
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._leader: Optional[str] = None
        self._next = 0
        self._keepalive = _KeepAlives(self)
        # Every live session, kept alive here or by its caller: close()
        # ends them all.
        self._sessions: dict[int, Session] = {}
        self._closed = False
        self._token_leases: weakref.WeakSet[TokenLease] = weakref.WeakSet()

    @classmethod
    def from_env(
        cls,
        environ: Optional[Mapping[str, str]] = None,
        *,
        deadline: float = 15.0,
        attempt_timeout: float = 6.0,
        interceptors: Optional[Sequence[grpc.aio.ClientInterceptor]] = None,
        pipeline: bool = True,
    ) -> "Client":
        """A client set up as the ``raftlock`` CLI would be, from
        ``os.environ`` (or ``environ``): ``RAFTLOCK_ENDPOINTS`` (default
        ``127.0.0.1:7000``; ``host:port`` or ``http(s)://host:port``,
        comma-separated), ``RAFTLOCK_CACERT`` (a PEM file; turns TLS on, as
        an ``https://`` endpoint does with the system's roots),
        ``RAFTLOCK_CERT`` and ``RAFTLOCK_KEY`` (this client's certificate
        and key), ``RAFTLOCK_AUTH_TOKEN`` and ``RAFTLOCK_CLIENT_NAME``. A
        file that cannot be read raises :class:`raftlock.InvalidArgument`
        naming the variable.

        >>> async with raftlock.Client.from_env() as client:  # doctest: +SKIP
        ...     session = await client.session(ttl=10)
        """
        endpoints, tls, token, client_name = _settings_from_env(os.environ if environ is None else environ)
        return cls(
            endpoints,
            tls=tls,
            token=token,
            deadline=deadline,
            attempt_timeout=attempt_timeout,
            client_name=client_name,
            interceptors=interceptors,
            pipeline=pipeline,
        )

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Ends the client: its sessions are closed on the server (their
        locks released and waits cancelled at once, as a service shutting
        down wants; a session the server cannot be told of in time is left
        to expire), token leases not finished give back their unspent
        tokens, then keep-alives stop and connections close. Best effort,
        at most ``min(deadline, 5)`` seconds for the calls."""
        leases = [lease for lease in list(self._token_leases) if not lease._finished]
        sessions = list(self._sessions.values())
        if (leases or sessions) and not self._closed:
            ending = asyncio.gather(
                *(lease.finish() for lease in leases),
                *(s.close() for s in sessions),
                return_exceptions=True,
            )
            try:
                await asyncio.wait_for(ending, min(self.deadline, 5.0))
            except asyncio.TimeoutError:
                pass
        self._closed = True
        await self._keepalive.stop()
        for pipe in list(self._pipelines.values()):
            await pipe.close()
        self._pipelines.clear()
        for ch in self._channels.values():
            await ch.close(None)
        self._channels.clear()

    # -- transport ---------------------------------------------------------

    def _channel(self, addr: str) -> grpc.aio.Channel:
        ch = self._channels.get(addr)
        if ch is None:
            options = [("grpc.keepalive_time_ms", 1000), ("grpc.keepalive_timeout_ms", 2000)]
            if self._tls is not None:
                creds = grpc.ssl_channel_credentials(
                    root_certificates=self._tls.ca,
                    private_key=self._tls.key,
                    certificate_chain=self._tls.cert,
                )
                ch = grpc.aio.secure_channel(
                    addr, creds, options=options, interceptors=self._interceptors or None
                )
            else:
                ch = grpc.aio.insecure_channel(
                    addr, options=options, interceptors=self._interceptors or None
                )
            self._channels[addr] = ch
        return ch

    def _pipeline(self, ch: grpc.aio.Channel) -> Optional["_Pipeline"]:
        """The Pipeline stream to the node behind ``ch`` (opened on first
        use), or ``None`` for unary calls."""
        key = id(ch)
        if not self._use_pipeline or key in self._unary_only:
            return None
        pipe = self._pipelines.get(key)
        if pipe is None or pipe.broken:
            pipe = _Pipeline(self, ch, key)
            self._pipelines[key] = pipe
        return pipe

    def _metadata(self) -> Optional[list[tuple[str, str]]]:
        return [("authorization", f"Bearer {self._token}")] if self._token else None

    def _target(self) -> str:
        if self._leader is not None:
            return self._leader
        addr = self._endpoints[self._next % len(self._endpoints)]
        self._next += 1
        return addr

    def _learn(self, addr: str, e: grpc.RpcError) -> None:
        hint = errors.metadata_value(e, LEADER_METADATA_KEY)
        if hint:
            hint = hint.removeprefix("http://").removeprefix("https://")
        if hint and hint != addr:
            self._leader = hint
        elif self._leader == addr:
            self._leader = None

    async def _call(
        self,
        invoke: Callable[[grpc.aio.Channel, float, Optional[list[tuple[str, str]]]], Awaitable[T]],
        extra_timeout: float = 0.0,
    ) -> T:
        """Runs one logical call on the leader, retrying elsewhere until
        the deadline; a refusal is raised as its typed error."""
        stop = time.monotonic() + self.deadline + extra_timeout
        backoff = 0.025
        last: Optional[RaftlockError] = None
        while True:
            addr = self._target()
            try:
                result = await invoke(
                    self._channel(addr), self.attempt_timeout + extra_timeout, self._metadata()
                )
                self._leader = addr
                return result
            except grpc.RpcError as e:
                if not _retryable(e):
                    raise errors.from_rpc_error(e) from None
                before = self._leader
                self._learn(addr, e)
                last = errors.from_rpc_error(e)
                if self._leader not in (None, before, addr) and time.monotonic() < stop:
                    # A follower named the leader: go there at once.
                    continue
            if time.monotonic() + backoff > stop:
                raise Unavailable(f"cluster unavailable: {last}") from None
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, 0.8)

    # -- API ---------------------------------------------------------------

    async def session(
        self, ttl: float = 10.0, name: Optional[str] = None, *, keep_alive: bool = True
    ) -> "Session":
        """Creates a session with ``ttl`` seconds to live without keep-alives
        (1 s to 10 min) and keeps it alive every TTL/3 in the background.
        A retried creation reuses its key, so a lost answer leaves no
        orphan session.

        ``keep_alive=False`` leaves the renewals to the caller
        (:meth:`Session.keep_alive`), for a service whose liveness is its
        own loop's, not its process's: the session, and what it holds, ends
        a TTL after the last renewal, even though the process still runs (a
        tooz coordinator's ``heartbeat()`` works this way)::

            session = await client.session(ttl=30, keep_alive=False)
            while serving:
                await session.keep_alive()
                await serve_for(10)
        """
        key = uuid.uuid4().bytes
        req = pb.CreateSessionRequest(
            ttl_ms=int(ttl * 1000),
            client_name=name or self.client_name,
            creation_key=key,
            # Shown to operators with the session's locks (describe, /ui).
            host=socket.gethostname().encode()[:256].decode(errors="ignore"),
            pid=os.getpid(),
        )
        sent = time.monotonic()

        async def create(ch: grpc.aio.Channel, t: float, md: object) -> pb.CreateSessionResponse:
            r: pb.CreateSessionResponse = await _stub(rpc.SessionStub, ch).Create(req, timeout=t, metadata=md)
            return r

        resp = await self._call(create)
        granted = resp.ttl_ms / 1000.0 if resp.ttl_ms else ttl
        s = Session(self, resp.session_id, granted, sent)
        self._sessions[s.id] = s
        if keep_alive:
            self._keepalive.add(s, sent)
        return s

    async def validate(self, name: str, token: int) -> bool:
        """Whether ``token`` belongs to a current holder of ``name`` (a
        linearizable read; Chubby's CheckSequencer)."""

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.ValidateResponse:
            r: pb.ValidateResponse = await _stub(rpc.LockStub, ch).Validate(
                pb.ValidateRequest(name=name, token=token), timeout=t, metadata=md
            )
            return r

        return (await self._call(call)).valid

    async def describe(self, name: str) -> Description:
        """Holders (with tokens) and waiters of ``name``."""

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.DescribeResponse:
            r: pb.DescribeResponse = await _stub(rpc.LockStub, ch).Describe(
                pb.DescribeRequest(name=name), timeout=t, metadata=md
            )
            return r

        d = await self._call(call)
        return Description(
            name=d.name,
            permits=d.permits,
            holders=[Grant._from(g) for g in d.holders],
            waiting_sessions=[w.session_id for w in d.waiters],
            waiters=[
                Waiter(
                    session_id=w.session_id,
                    shared=w.mode == pb.LOCK_MODE_SHARED,
                    count=max(w.count, 1),
                    enqueued_at_ms=w.enqueued_at_ms,
                    timeout_ms=w.timeout_ms,
                )
                for w in d.waiters
            ],
            lock_delay_ms=d.lock_delay_ms,
            resized=d.resized,
        )

    async def resize(self, name: str, permits: int) -> list[Grant]:
        """Sets the size of semaphore ``name`` to ``permits``, held or not:
        from then on it has that many permits whatever size acquisitions
        state, until resized again (0 forgets the size). Growing grants
        waiters at once (they are returned, in FIFO order); shrinking takes
        nothing from holders, it grants nobody until they fit. A size below
        what a queued acquisition asks for is refused
        (:class:`~raftlock.errors.PermitsMismatch`). Needs the ``lock``
        right on the name. A retry after a lost answer sets the same size
        again (its answer may then name fewer waiters)."""

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.ResizeResponse:
            r: pb.ResizeResponse = await _stub(rpc.LockStub, ch).Resize(
                pb.ResizeRequest(name=name, permits=permits), timeout=t, metadata=md
            )
            return r

        return [Grant._from(g) for g in (await self._call(call)).granted]

    async def list_locks(self, prefix: str = "", *, limit: int = 0) -> list[LockSummary]:
        """Locks whose names start with ``prefix``, in name order: those held
        or waited for, and the semaphores whose size :meth:`resize` set, held
        or not. Reads every page (each a linearizable read) up to ``limit``
        locks (0: all)::

            for lock in await client.list_locks("jobs/"):
                print(lock.name, [g.session_id for g in lock.holders])
        """
        found: list[LockSummary] = []
        page_token = ""
        while True:
            want = 1000 if limit <= 0 else min(1000, limit - len(found))
            req = pb.ListRequest(prefix=prefix, page_token=page_token, limit=want)

            async def call(
                ch: grpc.aio.Channel, t: float, md: object, req: pb.ListRequest = req
            ) -> pb.ListResponse:
                r: pb.ListResponse = await _stub(rpc.LockStub, ch).List(req, timeout=t, metadata=md)
                return r

            page = await self._call(call)
            found.extend(
                LockSummary(
                    name=lock.name,
                    holders=[Grant._from(g) for g in lock.holders],
                    waiter_count=lock.waiters,
                    permits=lock.permits,
                    resized=lock.resized,
                    lock_delay_ms=lock.lock_delay_ms,
                )
                for lock in page.locks
            )
            page_token = page.next_page_token
            if not page_token or (limit > 0 and len(found) >= limit):
                return found

    async def release(self, grant: Grant) -> None:
        """Releases ``grant`` (as :meth:`describe` or :meth:`list_locks` shows
        it), whichever session of this client's identity holds it: how a
        process that replaces a crashed one ends what its predecessor held
        without waiting for its session's TTL. Raises
        :class:`~raftlock.errors.NotHolder` if that grant is not held any
        more; the server refuses another identity's session::

            for g in (await client.describe("jobs/nightly")).holders:
                if g.metadata == my_instance_id:
                    await client.release(g)
        """
        req = pb.ReleaseRequest(session_id=grant.session_id, name=grant.name, token=grant.token)

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.ReleaseResponse:
            r: pb.ReleaseResponse = await _stub(rpc.LockStub, ch).Release(req, timeout=t, metadata=md)
            return r

        await self._call(call)

    async def force_release(self, name: str) -> list[Grant]:
        """Frees ``name`` whoever holds it (needs the ``admin`` right on
        the name) and returns the grants taken away; the next waiters are
        granted at once, with larger tokens::

            taken = await client.force_release("jobs/nightly")
        """

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.ForceReleaseResponse:
            r: pb.ForceReleaseResponse = await _stub(rpc.LockStub, ch).ForceRelease(
                pb.ForceReleaseRequest(name=name), timeout=t, metadata=md
            )
            return r

        return [Grant._from(g) for g in (await self._call(call)).released]

    def rate_limit(
        self,
        name: str,
        *,
        rate: Optional[int] = None,
        per: float = 1.0,
        burst: Optional[int] = None,
    ) -> "RateLimit":
        """The rate limit ``name``: ``rate`` tokens per ``per`` seconds (a
        period of 1 ms to a day), at most ``burst`` at once (default 1).
        With a rate, takes create the limit with these parameters on first
        use (an existing limit with others is refused with
        :class:`~raftlock.errors.LimitConflict`); without one it must exist
        already (:class:`~raftlock.errors.LimitNotFound`). No call is made
        until the limit is used."""
        if (rate is not None and rate < 0) or (burst is not None and burst < 0) or not per > 0:
            raise errors.InvalidArgument(f"bad limit parameters: rate {rate}, per {per} s, burst {burst}")
        spec: Optional[pb.LimitSpec] = None
        if rate is not None:
            spec = pb.LimitSpec(
                rate=rate, per_ms=max(1, int(round(per * 1000))), burst=1 if burst is None else burst
            )
        elif burst is not None:
            raise errors.InvalidArgument("give a rate with the burst")
        return RateLimit(self, name, spec)

    async def leader(self, election: str) -> Optional[Grant]:
        """The current leader of ``election`` (a linearizable read), or
        ``None``."""

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.LeaderResponse:
            r: pb.LeaderResponse = await _stub(rpc.ElectionStub, ch).Leader(
                pb.LeaderRequest(name=election), timeout=t, metadata=md
            )
            return r

        r = await self._call(call)
        return Grant._from(r.leader) if r.HasField("leader") else None

    async def observe(self, election: str) -> AsyncIterator[Optional[Grant]]:
        """Yields the leader of ``election`` now and at every change, through
        failovers (the stream is reopened on the new leader; a change may be
        seen twice, never missed for long)."""
        last: object = object()
        backoff = 0.05
        while True:
            addr = self._target()
            try:
                stream = _stub(rpc.ElectionStub, self._channel(addr)).Observe(
                    pb.LeaderRequest(name=election), metadata=self._metadata()
                )
                async for r in stream:
                    backoff = 0.05
                    g = Grant._from(r.leader) if r.HasField("leader") else None
                    # A proclaim keeps the token and changes the value.
                    if g != last:
                        last = g
                        yield g
            except grpc.RpcError as e:
                if not _retryable(e):
                    raise errors.from_rpc_error(e) from None
                self._learn(addr, e)
            else:
                self._leader = None
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, 0.8)


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


class Leadership:
    """Leadership of an election: ``token`` fences the leader's actions;
    ``proclaim`` publishes a new value; ``resign`` steps down."""

    def __init__(self, session: Session, election: str, token: int) -> None:
        self.session = session
        self.election = election
        self.token = token
        self._resigned = False

    async def __aenter__(self) -> "Leadership":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.resign()

    @property
    def valid(self) -> bool:
        """Whether this is still the leader's to act on."""
        return not self._resigned and self.session.valid

    async def proclaim(self, value: bytes) -> None:
        """Publishes ``value`` as the leader's."""
        s = self.session

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> object:
            return await _stub(rpc.ElectionStub, ch).Proclaim(
                pb.ProclaimRequest(name=self.election, session_id=s.id, token=self.token, value=value),
                timeout=t,
                metadata=md,
            )

        await s.client._call(call)

    async def resign(self) -> None:
        """Steps down; the next candidate is elected in the same step."""
        if self._resigned:
            return
        self._resigned = True
        if not self.session.valid:
            return
        s = self.session
        attempts = 0

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> object:
            nonlocal attempts
            attempts += 1
            return await _stub(rpc.ElectionStub, ch).Resign(
                pb.ResignRequest(name=self.election, session_id=s.id, token=self.token),
                timeout=t,
                metadata=md,
            )

        try:
            await s.client._call(call)
        except errors.NotHolder:
            # Only a retry may find the leadership already given up.
            if attempts < 2:
                raise


# -- rate limits -------------------------------------------------------------

#: Background give-backs of dropped token leases: asyncio keeps only weak
#: references to tasks, so they are held here until they finish.
_GIVING_BACK: set["asyncio.Task[None]"] = set()


@dataclass(frozen=True)
class Admission:
    """The answer to a take: whether the ``n`` tokens were admitted, how
    many could be taken at once after it (``remaining``), and, when not
    admitted, after how many seconds they would be (``retry_after``,
    rounded up to the millisecond)."""

    admitted: bool
    n: int
    remaining: int
    retry_after: float

    @staticmethod
    def _from(r: pb.TakeResponse) -> "Admission":
        return Admission(
            admitted=r.admitted, n=r.n, remaining=r.remaining, retry_after=r.retry_after_ms / 1000.0
        )


@dataclass(frozen=True)
class LimitInfo:
    """A rate limit now (a linearizable read): ``rate`` tokens per
    ``per_ms``, at most ``burst`` at once; the tokens that could be taken at
    once now (``available``, whole tokens); the tokens admitted since it was
    defined (token leases count when taken, less what they gave back), the
    takes refused, and the token leases outstanding."""

    name: str
    rate: int
    per_ms: int
    burst: int
    available: int
    admitted: int
    refused: int
    leases: int


class RateLimit:
    """A rate limit by name (a token bucket kept by the cluster, exact
    through leader changes), and the parameters to create it with on first
    use; from :meth:`Client.rate_limit`.

    Example::

        emails = client.rate_limit("outbound-email", rate=100, per=1.0, burst=20)
        if (await emails.try_take()).admitted:
            send_one()

    Takes are not numbered: a take retried after a lost answer may be
    counted twice, which only ever admits less, never more than the limit.
    """

    def __init__(self, client: Client, name: str, spec: Optional[pb.LimitSpec]) -> None:
        self.client = client
        self.name = name
        self._spec = spec

    @property
    def spec(self) -> Optional[tuple[int, int, int]]:
        """``(rate, per_ms, burst)`` to create the limit with, or ``None``
        when it must exist already."""
        s = self._spec
        return None if s is None else (s.rate, s.per_ms, s.burst)

    async def _take(self, n: int, wait: Optional[float], lease_ms: int) -> pb.TakeResponse:
        if n < 1:
            raise errors.InvalidArgument(f"take at least one token, not {n}")
        if wait is not None and wait < 0:
            raise errors.InvalidArgument(f"wait must be at least 0 seconds, not {wait}")
        end = None if wait is None else time.monotonic() + wait

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.TakeResponse:
            # Each retry waits only what is left, not the whole wait again.
            left = None if end is None else max(0.0, end - time.monotonic())
            req = pb.TakeRequest(
                name=self.name,
                n=n,
                limit=self._spec,
                wait_timeout_ms=None if left is None else int(left * 1000),
                lease_ms=lease_ms,
            )
            r: pb.TakeResponse = await _stub(rpc.RateLimitStub, ch).Take(
                req, timeout=self.client.attempt_timeout + (left or 0.0), metadata=md
            )
            return r

        return await self.client._call(call, extra_timeout=wait or 0.0)

    async def try_take(self, n: int = 1) -> Admission:
        """Takes ``n`` tokens now, or says after how long they would fit
        (``retry_after``); creates the limit with this object's parameters
        if it does not exist."""
        return Admission._from(await self._take(n, None, 0))

    async def take(self, n: int = 1, *, wait: float) -> Admission:
        """Takes ``n`` tokens, waiting on the server up to ``wait`` seconds
        for them (in FIFO order with the other waiting takes of this limit;
        at most the cluster's longest wait, an hour by default). Not
        admitted when they would not fit within ``wait``."""
        return Admission._from(await self._take(n, wait, 0))

    async def reserve(self, n: int, *, validity: float) -> Optional["TokenLease"]:
        """Reserves a block of ``n`` tokens (at most the burst) to spend
        locally within ``validity`` seconds (at most 10): one Raft write for
        the whole block. The cluster counts the block as spent at once; what
        is left when the lease ends is given back (:meth:`TokenLease.finish`,
        the end of ``async with``, or, best effort, when the lease is
        dropped). ``None`` when the block would not fit now.

        The lease may be spent until the request's first send time +
        ``validity`` − :func:`safety_margin` (the rule of session TTLs):
        the cluster counts it from when it admitted the block, which is
        later."""
        lease_ms = max(1, int(round(validity * 1000)))
        sent = time.monotonic()
        r = await self._take(n, None, lease_ms)
        if not r.admitted:
            return None
        v = lease_ms / 1000.0
        return TokenLease(self, r.lease_id, r.n, sent + v - safety_margin(v))

    async def define(self) -> bool:
        """Creates the limit with this object's parameters, or checks that
        an existing one has them (:class:`~raftlock.errors.LimitConflict`
        otherwise); true if this call created it."""
        if self._spec is None:
            raise errors.InvalidArgument("give a rate (and burst) to define a limit")
        req = pb.DefineLimitRequest(name=self.name, limit=self._spec)

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.DefineLimitResponse:
            r: pb.DefineLimitResponse = await _stub(rpc.RateLimitStub, ch).Define(req, timeout=t, metadata=md)
            return r

        return (await self.client._call(call)).created

    async def describe(self) -> LimitInfo:
        """The limit's parameters, tokens available now and totals (a
        linearizable read); :class:`~raftlock.errors.LimitNotFound` if it
        does not exist."""

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.DescribeLimitResponse:
            r: pb.DescribeLimitResponse = await _stub(rpc.RateLimitStub, ch).Describe(
                pb.DescribeLimitRequest(name=self.name), timeout=t, metadata=md
            )
            return r

        r = await self.client._call(call)
        return LimitInfo(
            name=r.name,
            rate=r.limit.rate,
            per_ms=r.limit.per_ms,
            burst=r.limit.burst,
            available=r.available,
            admitted=r.admitted,
            refused=r.refused,
            leases=r.leases,
        )

    async def delete(self) -> bool:
        """Forgets the limit (needs the ``admin`` right on the name); true
        if it existed."""

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.DeleteLimitResponse:
            r: pb.DeleteLimitResponse = await _stub(rpc.RateLimitStub, ch).Delete(
                pb.DeleteLimitRequest(name=self.name), timeout=t, metadata=md
            )
            return r

        return (await self.client._call(call)).existed

    async def _give_back(self, lease_id: int, unused: int) -> int:
        if unused == 0:
            return 0
        req = pb.ReturnTokensRequest(name=self.name, lease_id=lease_id, unused=unused)

        async def call(ch: grpc.aio.Channel, t: float, md: object) -> pb.ReturnTokensResponse:
            r: pb.ReturnTokensResponse = await _stub(rpc.RateLimitStub, ch).Return(req, timeout=t, metadata=md)
            return r

        return (await self.client._call(call)).credited


async def _cancel_quietly(session: Session, name: str, request_id: bytes) -> None:
    try:
        await session.cancel_wait(name, request_id)
    except Exception as e:  # the server ends the wait at its deadline anyway
        import logging

        logging.getLogger("raftlock").warning(
            "cancelling the abandoned wait for %r failed: %s", name, e
        )


async def _give_back_quietly(limit: RateLimit, lease_id: int, unused: int) -> None:
    try:
        await limit._give_back(lease_id, unused)
    except Exception as e:  # best effort: unreturned tokens only admit less
        import logging

        logging.getLogger("raftlock").warning(
            "returning %d unspent tokens of limit %r failed: %s", unused, limit.name, e
        )


class TokenLease:
    """A block of tokens reserved with :meth:`RateLimit.reserve`, spent
    locally with :meth:`try_spend` until it runs out or its validity ends.
    ``async with`` finishes it on exit (giving back what was not spent);
    so does dropping it, in the background and best effort.

    Example::

        block = await limit.reserve(50, validity=1.0)
        if block is not None:
            async with block:
                while block.try_spend():
                    await call_the_api()
    """

    def __init__(self, limit: RateLimit, lease_id: int, reserved: int, until: float) -> None:
        self.limit = limit
        self.id = lease_id
        self.reserved = reserved
        self._until = until
        self._spent = 0
        self._finished = False
        # try_spend may be called from several threads (the sync API).
        self._lock = threading.Lock()
        self._loop = asyncio.get_running_loop()
        limit.client._token_leases.add(self)

    async def __aenter__(self) -> "TokenLease":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.finish()

    def try_spend(self) -> bool:
        """Spends one token if the block has one left and is still valid."""
        with self._lock:
            if not self.valid or self._spent >= self.reserved:
                return False
            self._spent += 1
            return True

    @property
    def left(self) -> int:
        """Tokens not spent yet."""
        return self.reserved - self._spent

    @property
    def valid(self) -> bool:
        """Whether tokens of the block may still be spent: not finished,
        and its validity, less the safety margin, has not ended."""
        return not self._finished and time.monotonic() < self._until

    @property
    def valid_until(self) -> float:
        """When the block stops being spendable (``time.monotonic()``
        scale)."""
        return self._until

    async def finish(self) -> int:
        """Stops spending and gives back what is left; returns how many
        tokens the cluster credited back (0 when nothing was left, or a
        second call)."""
        with self._lock:
            if self._finished:
                return 0
            self._finished = True
        self.limit.client._token_leases.discard(self)
        return await self.limit._give_back(self.id, self.left)

    def __del__(self) -> None:
        try:
            if self._finished or self.left == 0 or self.limit.client._closed:
                return
            self._finished = True
            loop, limit, lease_id, unused = self._loop, self.limit, self.id, self.left

            def start() -> None:
                task = loop.create_task(_give_back_quietly(limit, lease_id, unused))
                _GIVING_BACK.add(task)
                task.add_done_callback(_GIVING_BACK.discard)

            if not loop.is_closed():
                loop.call_soon_threadsafe(start)
        except Exception:  # never raise from a finalizer (interpreter exit, closed loop)
            pass


class _PipelineFailure(grpc.RpcError):
    """A call on a Pipeline stream that ended as its unary call would have:
    the same code, message, reason and leader hint."""

    def __init__(
        self, code: grpc.StatusCode, message: str, reason: str = "", leader: str = ""
    ) -> None:
        super().__init__(message)
        self._code = code
        self._message = message
        self.raftlock_reason = reason
        self._leader = leader

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._message

    def trailing_metadata(self) -> Any:
        return ((LEADER_METADATA_KEY, self._leader),) if self._leader else ()


_CODES = {c.value[0]: c for c in grpc.StatusCode}


def _expire(fut: "asyncio.Future[pb.PipelineResponse]") -> None:
    if not fut.done():
        # As a unary call's own deadline: no verdict, so the call is retried.
        fut.set_exception(_PipelineFailure(grpc.StatusCode.DEADLINE_EXCEEDED, "pipeline call timed out"))


class _Pipeline:
    """One bidirectional ``Lock.Pipeline`` stream to a node, shared by all
    of a client's acquires and releases there: each call is a message with
    an id, answered in completion order. A node without the method gets
    unary calls from then on."""

    def __init__(self, client: Client, ch: grpc.aio.Channel, key: int) -> None:
        self.client = client
        self.key = key
        self.broken = False
        self.next_id = 0
        self.pending: dict[int, asyncio.Future[pb.PipelineResponse]] = {}
        self.write_lock = asyncio.Lock()
        self.stream: Any = _stub(rpc.LockStub, ch).Pipeline(metadata=client._metadata())
        self.reader = asyncio.get_running_loop().create_task(self._read())

    async def _read(self) -> None:
        failure: BaseException
        try:
            while True:
                resp = await self.stream.read()
                if resp is grpc.aio.EOF:  # type: ignore[attr-defined]
                    failure = _PipelineFailure(grpc.StatusCode.UNAVAILABLE, "pipeline stream ended")
                    break
                fut = self.pending.pop(resp.id, None)
                if fut is not None and not fut.done():
                    fut.set_result(resp)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                self.client._unary_only.add(self.key)
            failure = e
        except asyncio.CancelledError:
            failure = _PipelineFailure(grpc.StatusCode.CANCELLED, "pipeline closed")
        self.broken = True
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(failure)
        self.pending.clear()

    async def call(self, req: pb.PipelineRequest, timeout: float) -> pb.PipelineResponse:
        if self.broken:
            raise _PipelineFailure(grpc.StatusCode.UNAVAILABLE, "pipeline stream broken")
        self.next_id += 1
        req.id = self.next_id
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[pb.PipelineResponse] = loop.create_future()
        self.pending[req.id] = fut
        # A timer, not wait_for: it costs no task per call.
        timer = loop.call_later(timeout, _expire, fut)
        try:
            async with self.write_lock:
                await self.stream.write(req)
            resp = await fut
        except grpc.RpcError:
            raise
        except Exception as e:  # a write on a stream that just broke
            raise _PipelineFailure(grpc.StatusCode.UNAVAILABLE, f"pipeline stream broken: {e}") from None
        finally:
            timer.cancel()
            self.pending.pop(req.id, None)
        if resp.HasField("error"):
            err = resp.error
            raise _PipelineFailure(
                _CODES.get(err.code, grpc.StatusCode.UNKNOWN), err.message, err.reason, err.leader
            )
        return resp

    async def close(self) -> None:
        self.broken = True
        self.reader.cancel()
        try:
            await self.reader
        except (asyncio.CancelledError, Exception):
            pass
        self.stream.cancel()


class _KeepAlives:
    """One keep-alive stream for all of a client's sessions, as etcd's
    clients share one LeaseKeepAlive stream. Each session is renewed every
    TTL/3 from the send time of its last acknowledged renewal."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.sessions: dict[int, Session] = {}
        self.first_due: dict[int, float] = {}
        self.task: Optional[asyncio.Task[None]] = None

    def add(self, s: Session, sent: float) -> None:
        self.sessions[s.id] = s
        self.first_due[s.id] = sent + s.ttl / 3
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    def remove(self, session_id: int) -> None:
        self.sessions.pop(session_id, None)

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await self.task
            except (asyncio.CancelledError, Exception):
                pass

    async def _run(self) -> None:
        due: dict[int, float] = {}
        backoff = 0.05
        while self.sessions:
            addr = self.client._target()
            queue: asyncio.Queue[Optional[pb.KeepAliveRequest]] = asyncio.Queue()
            pending: dict[int, float] = {}

            async def requests() -> AsyncIterator[pb.KeepAliveRequest]:
                while True:
                    r = await queue.get()
                    if r is None:
                        return
                    yield r

            interval = min((s.ttl / 3 for s in self.sessions.values()), default=1.0)
            patience = min(interval, 2.0)
            call = _stub(rpc.SessionStub, self.client._channel(addr)).KeepAlive(
                requests(), metadata=self.client._metadata()
            )

            async def reader() -> None:
                async for resp in call:
                    sent = pending.pop(resp.session_id, None)
                    s = self.sessions.get(resp.session_id)
                    if sent is None or s is None:
                        continue
                    if resp.gone:
                        s._end(SessionGone(f"session {s.id} is gone (expired or closed)"))
                    else:
                        s._acknowledged(sent)
                        due[s.id] = sent + s.ttl / 3
                    self.client._leader = addr

            read = asyncio.get_running_loop().create_task(reader())
            try:
                while self.sessions and not read.done():
                    now = time.monotonic()
                    if any(now - sent > patience for sent in pending.values()):
                        # Frozen, partitioned or deposed: try elsewhere.
                        if self.client._leader == addr:
                            self.client._leader = None
                        break
                    for sid, s in list(self.sessions.items()):
                        if sid not in due:
                            due[sid] = self.first_due.pop(sid, now)
                        if not s.valid:
                            s._end(SessionLost(f"session {sid} lost: no keep-alive acknowledged in time"))
                            continue
                        if due[sid] <= now and sid not in pending:
                            pending[sid] = now
                            queue.put_nowait(pb.KeepAliveRequest(session_id=sid, shared=True))
                    await asyncio.sleep(0.05)
                if read.done() and read.exception() is not None:
                    exc = read.exception()
                    if isinstance(exc, grpc.RpcError):
                        err = errors.from_rpc_error(exc)
                        if isinstance(err, (errors.Unauthenticated, errors.PermissionDenied)):
                            # No renewal can succeed with these credentials.
                            for s in list(self.sessions.values()):
                                s._end(SessionLost(f"session {s.id} cannot be renewed: {err}", err.reason, err.code))
                            return
                        self.client._learn(addr, exc)
                elif read.done():
                    # The server ended the stream (stepping down).
                    if self.client._leader == addr:
                        self.client._leader = None
            finally:
                queue.put_nowait(None)
                read.cancel()
                call.cancel()
            # Whatever was in flight died with the stream: everything is due.
            now = time.monotonic()
            for sid in self.sessions:
                due[sid] = now
            await asyncio.sleep(backoff * (0.5 + random.random()))
            backoff = min(backoff * 2, max(0.05, min(interval / 4, 0.25)))
