"""Typed errors, mapped from the server's machine-readable reason.

Every refusal raftlock sends carries a ``google.rpc.ErrorInfo`` whose
``reason`` names what went wrong (``NOT_HOLDER``, ``STALE_TOKEN``, ...). This
module turns it into an exception class; the message is for people and is
never parsed.

>>> from raftlock.errors import StaleToken, RaftlockError
>>> issubclass(StaleToken, RaftlockError)
True
"""

from __future__ import annotations

from typing import Any, Optional

import grpc
from google.rpc import error_details_pb2, status_pb2

from raftlock._reasons import CODES as _CODES

#: The ``domain`` of raftlock's ``ErrorInfo``.
DOMAIN = "raftlock.v1"
_DETAILS_KEY = "grpc-status-details-bin"


class RaftlockError(Exception):
    """Base class of every error this package raises.

    ``reason`` is the server's machine-readable reason (``None`` for errors
    raised by the client itself); ``code`` the gRPC status code, if any.
    """

    def __init__(
        self,
        message: str,
        reason: Optional[str] = None,
        code: Optional[grpc.StatusCode] = None,
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.code = code


class Unavailable(RaftlockError):
    """No node could serve the call before its deadline (no leader, no
    quorum, unreachable nodes). Retrying later may succeed."""


class SessionLost(RaftlockError):
    """The session no longer counts as valid: a keep-alive was not
    acknowledged within TTL minus the safety margin, or the server said the
    session is gone. Stop acting on its locks."""


class SessionGone(SessionLost):
    """The server says the session does not exist (expired or closed)."""


class HoldExpired(SessionLost):
    """The lock's hold cap ran out (by the local clock, a safety margin
    before the leader releases it): the lock can no longer be claimed,
    though its session may live on. A :class:`SessionLost`, so that code
    stopping on a lost session stops on this too."""


class LockLost(SessionLost):
    """Raised out of ``async with session.lock(name, cancel_on_lost=True)``
    when the block was cancelled because the lock was lost (its session
    lost, or its hold cap run out) while the block ran. Its ``__cause__`` is
    why the lock was lost. A :class:`SessionLost`, so that code stopping on
    a lost session stops on this too."""


class LockTimeout(RaftlockError):
    """A wait for a lock (or an election) timed out without a grant."""


class InvalidArgument(RaftlockError):
    """The request was refused as malformed."""


class InvalidName(InvalidArgument):
    """A lock or election name the server does not accept."""


class TtlOutOfRange(InvalidArgument):
    """A session TTL outside the cluster's range."""


class NotHolder(RaftlockError):
    """The session does not hold the lock (released, or expired)."""


class StaleToken(RaftlockError):
    """The session holds the lock under a different token: this grant is
    stale."""


class PermitsMismatch(RaftlockError):
    """The permit count differs from the semaphore's."""


class AlreadyHeld(RaftlockError):
    """The session already holds the lock through another acquisition."""


class AlreadyWaiting(RaftlockError):
    """The session already waits for the lock through another acquisition."""


class WaitNotFound(RaftlockError):
    """No such wait to cancel."""


class RequestSettled(RaftlockError):
    """A retry of a request whose outcome was settled otherwise (released,
    finished, or acknowledged by this client)."""


class LimitExceeded(RaftlockError):
    """A limit of the cluster's was reached (sessions per identity, as many
    rate limits as the cluster keeps, ...)."""


class NoSpace(LimitExceeded):
    """The cluster's leader is short of disk space: new sessions, acquires
    and takes are refused until an operator frees some; releases and
    keep-alives go on."""


class TooManyLocks(LimitExceeded):
    """The session (or cluster) holds as many locks as allowed."""


class TooManyWaiters(LimitExceeded):
    """The lock has as many waiters as allowed."""


class LimitNotFound(RaftlockError):
    """No rate limit of this name, and the call did not say how to create
    it (give ``rate=`` to :meth:`raftlock.Client.rate_limit`)."""


class LimitConflict(RaftlockError):
    """A rate limit of this name exists with other parameters (rate, period
    or burst) than the ones given, or a take asks for more tokens than the
    existing limit's burst (it could never be admitted)."""


class Unauthenticated(RaftlockError):
    """The cluster does not know who this client is."""


class PermissionDenied(RaftlockError):
    """This client's identity may not do this."""


class MembershipChangeRefused(RaftlockError):
    """The cluster refused a membership change."""


class WatchCompacted(RaftlockError):
    """A watch could not resume where it left off: the node no longer remembers
    lock events that far back. Read the state afresh and watch from now."""


class ServerError(RaftlockError):
    """Any other answer from the server (or one without a reason)."""


_BY_REASON: dict[str, type[RaftlockError]] = {
    "NOT_LEADER": Unavailable,
    "NO_QUORUM": Unavailable,
    "STOPPING": Unavailable,
    "INVALID_NAME": InvalidName,
    "TTL_OUT_OF_RANGE": TtlOutOfRange,
    "INVALID_ARGUMENT": InvalidArgument,
    "SESSION_NOT_FOUND": SessionGone,
    "WAIT_NOT_FOUND": WaitNotFound,
    "NOT_HOLDER": NotHolder,
    "STALE_TOKEN": StaleToken,
    "PERMITS_MISMATCH": PermitsMismatch,
    "REQUEST_RELEASED": RequestSettled,
    "REQUEST_FINISHED": RequestSettled,
    "REQUEST_ACKNOWLEDGED": RequestSettled,
    "ALREADY_HELD": AlreadyHeld,
    "ALREADY_WAITING": AlreadyWaiting,
    "WAIT_CANCELLED": LockTimeout,
    "WAIT_TIMED_OUT": LockTimeout,
    "TOO_MANY_WAITERS": TooManyWaiters,
    "TOO_MANY_LOCKS": TooManyLocks,
    "TOO_MANY_UNACKNOWLEDGED": LimitExceeded,
    "LIMIT_EXCEEDED": LimitExceeded,
    "NO_SPACE": NoSpace,
    "UNAUTHENTICATED": Unauthenticated,
    "PERMISSION_DENIED": PermissionDenied,
    "MEMBERSHIP_CHANGE_REFUSED": MembershipChangeRefused,
    "LEARNER_NOT_CAUGHT_UP": MembershipChangeRefused,
    "WATCH_COMPACTED": WatchCompacted,
    "LIMIT_NOT_FOUND": LimitNotFound,
    "LIMIT_CONFLICT": LimitConflict,
    "INTERNAL": ServerError,
}

#: Every reason the server sends (generated from the server's
#: ``reasons.proto``), for tests and for code that switches on
#: ``RaftlockError.reason``.
REASONS = frozenset(_CODES)

# The classes of codes that name a kind of failure, for reasons without a
# class of their own (one a newer server added, say).
_BY_CODE: dict[str, type[RaftlockError]] = {
    "UNAVAILABLE": Unavailable,
    "INVALID_ARGUMENT": InvalidArgument,
    "RESOURCE_EXHAUSTED": LimitExceeded,
    "UNAUTHENTICATED": Unauthenticated,
    "PERMISSION_DENIED": PermissionDenied,
}


def class_of(reason: str) -> type[RaftlockError]:
    """The exception class of a refusal with ``reason``: its own, else its
    code's, else :class:`ServerError`.

    >>> class_of("STALE_TOKEN").__name__
    'StaleToken'
    """
    own = _BY_REASON.get(reason)
    if own is not None:
        return own
    return _BY_CODE.get(_CODES.get(reason, ""), ServerError)


def _trailing(e: grpc.RpcError) -> list[tuple[str, Any]]:
    get = getattr(e, "trailing_metadata", None)
    trailing: Any = get() if get is not None else None
    return [(str(k), v) for k, v in (trailing or ())]


def reason_of(e: grpc.RpcError) -> Optional[str]:
    """The raftlock reason of a failed call, or ``None``."""
    carried = getattr(e, "raftlock_reason", None)
    if carried:
        return str(carried)
    for key, value in _trailing(e):
        if key != _DETAILS_KEY or not isinstance(value, bytes):
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info) and info.domain == DOMAIN:
                return str(info.reason)
    return None


def metadata_value(e: grpc.RpcError, key: str) -> Optional[str]:
    """A trailing metadata value of a failed call, as text."""
    for k, v in _trailing(e):
        if k == key:
            return v.decode() if isinstance(v, bytes) else str(v)
    return None


def from_rpc_error(e: grpc.RpcError) -> RaftlockError:
    """The typed error for a failed call: by its reason, or, for a status
    without one (a proxy, the transport), by its code alone."""
    code: Optional[grpc.StatusCode] = e.code() if hasattr(e, "code") else None
    message = e.details() if hasattr(e, "details") else str(e)
    message = message or str(code)
    reason = reason_of(e)
    if reason is not None:
        cls = class_of(reason)
        return cls(message, reason, code)
    if code in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    ):
        return Unavailable(message, None, code)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return Unauthenticated(message, None, code)
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied(message, None, code)
    return ServerError(message, None, code)
