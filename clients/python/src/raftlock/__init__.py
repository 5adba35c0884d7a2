"""raftlock: distributed locks with fencing tokens, a server-side FIFO
queue and a lost-lock signal, from a Raft-replicated cluster.

``raftlock.Client`` is the asyncio client (:mod:`raftlock.aio`);
:mod:`raftlock.sync` has the same API for code that is not asyncio.
Rate limits: ``client.rate_limit(name, rate=..., per=..., burst=...)``.
Errors are in :mod:`raftlock.errors`.
"""

from . import errors, helpers, sync
from .aio import (
    Admission,
    Client,
    Description,
    Grant,
    Guard,
    Leadership,
    LimitInfo,
    LockRequest,
    LockSet,
    LockSetRequest,
    LockSummary,
    RateLimit,
    Session,
    Tls,
    TokenLease,
    Waiter,
    safety_margin,
)
from .errors import (
    AlreadyHeld,
    HoldExpired,
    LockLost,
    InvalidArgument,
    LimitConflict,
    LimitExceeded,
    NoSpace,
    LimitNotFound,
    LockTimeout,
    NotHolder,
    PermissionDenied,
    PermitsMismatch,
    RaftlockError,
    SessionGone,
    SessionLost,
    StaleToken,
    Unauthenticated,
    Unavailable,
)
from .helpers import Outcome, run_once

__all__ = [
    "Client",
    "Description",
    "Grant",
    "Guard",
    "Leadership",
    "LockRequest",
    "LockSet",
    "LockSetRequest",
    "LockSummary",
    "Session",
    "Tls",
    "Waiter",
    "RateLimit",
    "TokenLease",
    "Admission",
    "LimitInfo",
    "safety_margin",
    "errors",
    "helpers",
    "sync",
    "run_once",
    "Outcome",
    "AlreadyHeld",
    "HoldExpired",
    "LockLost",
    "InvalidArgument",
    "LimitConflict",
    "LimitExceeded",
    "NoSpace",
    "LimitNotFound",
    "LockTimeout",
    "NotHolder",
    "PermissionDenied",
    "PermitsMismatch",
    "RaftlockError",
    "SessionGone",
    "SessionLost",
    "StaleToken",
    "Unauthenticated",
    "Unavailable",
]
