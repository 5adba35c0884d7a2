"""The client: a handle to a cluster that finds the leader, retries
unavailability with backoff until its deadline and keeps its sessions
alive, with how it reads its endpoints and settings (as the CLI does, or
from the environment) and which failures it retries. The calls that need
no session are its own (describe, list, resize, release a grant,
force-release, an election's leader and its changes); the sessions it
opens, the rate limits it names and the streams it shares live in modules
of their own.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import time
import uuid
import weakref
from typing import AsyncIterator, Awaitable, Callable, Mapping, Optional, Sequence, TypeVar, Union

import grpc

from . import errors
from ._pipeline import _KeepAlives, _Pipeline
from ._ratelimit import RateLimit, TokenLease
from ._session import Session
from ._types import LEADER_METADATA_KEY, Description, Grant, LockSummary, Tls, Waiter, _stub
from .errors import RaftlockError, Unavailable
from .v1 import raftlock_pb2 as pb
from .v1 import raftlock_pb2_grpc as rpc

T = TypeVar("T")


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
