"""The values the asyncio client hands out and the small rules every part of
it shares: TLS settings, a lock's grants, waiters, descriptions and
listings, the client's safety margin on a TTL, the bound of one wait, the
leader-hint metadata key, and the set that keeps background tasks alive.
None of it makes a call; the modules that do import it, never the reverse.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Optional

import grpc

from .v1 import raftlock_pb2 as pb


#: Trailing metadata key naming the leader's client address when a follower
#: refuses a call.
LEADER_METADATA_KEY = "raftlock-leader"
#: The longest one wait asks of the server (its default bound); longer
#: waits are waited in turns.
MAX_WAIT = 3600.0


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


#: Background give-backs of dropped token leases (and cancels of abandoned
#: waits): asyncio keeps only weak references to tasks, so they are held
#: here until they finish.
_GIVING_BACK: set["asyncio.Task[None]"] = set()
