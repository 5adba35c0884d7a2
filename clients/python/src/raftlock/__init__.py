"""raftlock: distributed locks with fencing tokens, a server-side FIFO
queue and a lost-lock signal, from a Raft-replicated cluster.

``raftlock.Client`` is the asyncio client (:mod:`raftlock.aio`);
:mod:`raftlock.sync` has the same API for code that is not asyncio.
Errors are in :mod:`raftlock.errors`.
"""

from . import errors, helpers, sync
from .aio import (
    Client,
    Description,
    Grant,
    Guard,
    Leadership,
    LockRequest,
    Session,
    Tls,
    Waiter,
    safety_margin,
)
from .errors import (
    AlreadyHeld,
    HoldExpired,
    InvalidArgument,
    LimitExceeded,
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
    "Session",
    "Tls",
    "Waiter",
    "safety_margin",
    "errors",
    "helpers",
    "sync",
    "run_once",
    "Outcome",
    "AlreadyHeld",
    "HoldExpired",
    "InvalidArgument",
    "LimitExceeded",
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
