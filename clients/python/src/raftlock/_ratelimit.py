"""Rate limits: a token bucket kept by the cluster under a name, the
answer to a take, a limit's description, and blocks of tokens reserved to
spend locally (token leases), given back when finished or dropped.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

import grpc

from . import errors
from ._types import _GIVING_BACK, _stub, safety_margin
from .v1 import raftlock_pb2 as pb
from .v1 import raftlock_pb2_grpc as rpc

if TYPE_CHECKING:
    from ._client import Client


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
