from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LockMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOCK_MODE_UNSPECIFIED: _ClassVar[LockMode]
    LOCK_MODE_EXCLUSIVE: _ClassVar[LockMode]
    LOCK_MODE_SHARED: _ClassVar[LockMode]

class LockEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOCK_EVENT_KIND_UNSPECIFIED: _ClassVar[LockEventKind]
    LOCK_EVENT_KIND_GRANTED: _ClassVar[LockEventKind]
    LOCK_EVENT_KIND_HANDOFF: _ClassVar[LockEventKind]
    LOCK_EVENT_KIND_RELEASED: _ClassVar[LockEventKind]
    LOCK_EVENT_KIND_EXPIRED: _ClassVar[LockEventKind]
    LOCK_EVENT_KIND_FORCE_RELEASED: _ClassVar[LockEventKind]
    LOCK_EVENT_KIND_HOLD_EXPIRED: _ClassVar[LockEventKind]
    LOCK_EVENT_KIND_LOCK_DELAY_STARTED: _ClassVar[LockEventKind]
    LOCK_EVENT_KIND_LOCK_DELAY_ENDED: _ClassVar[LockEventKind]

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_FOLLOWER: _ClassVar[Role]
    ROLE_CANDIDATE: _ClassVar[Role]
    ROLE_LEADER: _ClassVar[Role]
    ROLE_LEARNER: _ClassVar[Role]
    ROLE_SHUTDOWN: _ClassVar[Role]
LOCK_MODE_UNSPECIFIED: LockMode
LOCK_MODE_EXCLUSIVE: LockMode
LOCK_MODE_SHARED: LockMode
LOCK_EVENT_KIND_UNSPECIFIED: LockEventKind
LOCK_EVENT_KIND_GRANTED: LockEventKind
LOCK_EVENT_KIND_HANDOFF: LockEventKind
LOCK_EVENT_KIND_RELEASED: LockEventKind
LOCK_EVENT_KIND_EXPIRED: LockEventKind
LOCK_EVENT_KIND_FORCE_RELEASED: LockEventKind
LOCK_EVENT_KIND_HOLD_EXPIRED: LockEventKind
LOCK_EVENT_KIND_LOCK_DELAY_STARTED: LockEventKind
LOCK_EVENT_KIND_LOCK_DELAY_ENDED: LockEventKind
ROLE_UNSPECIFIED: Role
ROLE_FOLLOWER: Role
ROLE_CANDIDATE: Role
ROLE_LEADER: Role
ROLE_LEARNER: Role
ROLE_SHUTDOWN: Role

class Grant(_message.Message):
    __slots__ = ("token", "name", "mode", "session_id", "request_id", "granted_at_ms", "metadata", "count", "max_hold_ms", "lock_delay_ms")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    GRANTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_HOLD_MS_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    token: int
    name: str
    mode: LockMode
    session_id: int
    request_id: bytes
    granted_at_ms: int
    metadata: bytes
    count: int
    max_hold_ms: int
    lock_delay_ms: int
    def __init__(self, token: _Optional[int] = ..., name: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ..., session_id: _Optional[int] = ..., request_id: _Optional[bytes] = ..., granted_at_ms: _Optional[int] = ..., metadata: _Optional[bytes] = ..., count: _Optional[int] = ..., max_hold_ms: _Optional[int] = ..., lock_delay_ms: _Optional[int] = ...) -> None: ...

class Waiter(_message.Message):
    __slots__ = ("session_id", "mode", "request_id", "enqueued_at_ms", "timeout_ms", "count")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ENQUEUED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    mode: LockMode
    request_id: bytes
    enqueued_at_ms: int
    timeout_ms: int
    count: int
    def __init__(self, session_id: _Optional[int] = ..., mode: _Optional[_Union[LockMode, str]] = ..., request_id: _Optional[bytes] = ..., enqueued_at_ms: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("ttl_ms", "client_name", "creation_key", "host", "pid")
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATION_KEY_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    ttl_ms: int
    client_name: str
    creation_key: bytes
    host: str
    pid: int
    def __init__(self, ttl_ms: _Optional[int] = ..., client_name: _Optional[str] = ..., creation_key: _Optional[bytes] = ..., host: _Optional[str] = ..., pid: _Optional[int] = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ("session_id", "client_name", "identity", "host", "pid", "created_at_ms", "ttl_ms", "expires_in_ms", "held", "waiting")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_MS_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    client_name: str
    identity: str
    host: str
    pid: int
    created_at_ms: int
    ttl_ms: int
    expires_in_ms: int
    held: _containers.RepeatedScalarFieldContainer[str]
    waiting: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_id: _Optional[int] = ..., client_name: _Optional[str] = ..., identity: _Optional[str] = ..., host: _Optional[str] = ..., pid: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., ttl_ms: _Optional[int] = ..., expires_in_ms: _Optional[int] = ..., held: _Optional[_Iterable[str]] = ..., waiting: _Optional[_Iterable[str]] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("client_name_prefix", "page_token", "limit")
    CLIENT_NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    client_name_prefix: str
    page_token: int
    limit: int
    def __init__(self, client_name_prefix: _Optional[str] = ..., page_token: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    next_page_token: int
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ..., next_page_token: _Optional[int] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ("session_id", "ttl_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    ttl_ms: int
    def __init__(self, session_id: _Optional[int] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class KeepAliveRequest(_message.Message):
    __slots__ = ("session_id", "shared")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    shared: bool
    def __init__(self, session_id: _Optional[int] = ..., shared: _Optional[bool] = ...) -> None: ...

class KeepAliveResponse(_message.Message):
    __slots__ = ("session_id", "ttl_ms", "gone")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    GONE_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    ttl_ms: int
    gone: bool
    def __init__(self, session_id: _Optional[int] = ..., ttl_ms: _Optional[int] = ..., gone: _Optional[bool] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_id",)
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    def __init__(self, session_id: _Optional[int] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ("released",)
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, released: _Optional[_Iterable[str]] = ...) -> None: ...

class CancelWaitRequest(_message.Message):
    __slots__ = ("session_id", "name", "request_id")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    name: str
    request_id: bytes
    def __init__(self, session_id: _Optional[int] = ..., name: _Optional[str] = ..., request_id: _Optional[bytes] = ...) -> None: ...

class CancelWaitResponse(_message.Message):
    __slots__ = ("cancelled", "released", "token")
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    released: bool
    token: int
    def __init__(self, cancelled: _Optional[bool] = ..., released: _Optional[bool] = ..., token: _Optional[int] = ...) -> None: ...

class ResizeRequest(_message.Message):
    __slots__ = ("name", "permits")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    name: str
    permits: int
    def __init__(self, name: _Optional[str] = ..., permits: _Optional[int] = ...) -> None: ...

class ResizeResponse(_message.Message):
    __slots__ = ("granted",)
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    granted: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, granted: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ("prefix", "after_index")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    AFTER_INDEX_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    after_index: int
    def __init__(self, prefix: _Optional[str] = ..., after_index: _Optional[int] = ...) -> None: ...

class LockEvent(_message.Message):
    __slots__ = ("kind", "name", "session_id", "token", "mode", "metadata", "count", "lock_delay_ms")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    kind: LockEventKind
    name: str
    session_id: int
    token: int
    mode: LockMode
    metadata: bytes
    count: int
    lock_delay_ms: int
    def __init__(self, kind: _Optional[_Union[LockEventKind, str]] = ..., name: _Optional[str] = ..., session_id: _Optional[int] = ..., token: _Optional[int] = ..., mode: _Optional[_Union[LockMode, str]] = ..., metadata: _Optional[bytes] = ..., count: _Optional[int] = ..., lock_delay_ms: _Optional[int] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ("index", "at_ms", "events")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    index: int
    at_ms: int
    events: _containers.RepeatedCompositeFieldContainer[LockEvent]
    def __init__(self, index: _Optional[int] = ..., at_ms: _Optional[int] = ..., events: _Optional[_Iterable[_Union[LockEvent, _Mapping]]] = ...) -> None: ...

class PipelineRequest(_message.Message):
    __slots__ = ("id", "acquire", "release")
    ID_FIELD_NUMBER: _ClassVar[int]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    id: int
    acquire: AcquireRequest
    release: ReleaseRequest
    def __init__(self, id: _Optional[int] = ..., acquire: _Optional[_Union[AcquireRequest, _Mapping]] = ..., release: _Optional[_Union[ReleaseRequest, _Mapping]] = ...) -> None: ...

class PipelineResponse(_message.Message):
    __slots__ = ("id", "acquire", "release", "error")
    ID_FIELD_NUMBER: _ClassVar[int]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    id: int
    acquire: AcquireResponse
    release: ReleaseResponse
    error: PipelineError
    def __init__(self, id: _Optional[int] = ..., acquire: _Optional[_Union[AcquireResponse, _Mapping]] = ..., release: _Optional[_Union[ReleaseResponse, _Mapping]] = ..., error: _Optional[_Union[PipelineError, _Mapping]] = ...) -> None: ...

class PipelineError(_message.Message):
    __slots__ = ("code", "message", "leader", "reason")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    leader: str
    reason: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., leader: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ForceReleaseRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ForceReleaseResponse(_message.Message):
    __slots__ = ("released", "granted")
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    released: _containers.RepeatedCompositeFieldContainer[Grant]
    granted: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, released: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., granted: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class AcquireRequest(_message.Message):
    __slots__ = ("session_id", "name", "request_id", "mode", "permits", "wait_timeout_ms", "metadata", "seq", "acked_below", "count", "max_hold_ms", "lock_delay_ms", "in_flight")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ACKED_BELOW_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_HOLD_MS_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    name: str
    request_id: bytes
    mode: LockMode
    permits: int
    wait_timeout_ms: int
    metadata: bytes
    seq: int
    acked_below: int
    count: int
    max_hold_ms: int
    lock_delay_ms: int
    in_flight: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, session_id: _Optional[int] = ..., name: _Optional[str] = ..., request_id: _Optional[bytes] = ..., mode: _Optional[_Union[LockMode, str]] = ..., permits: _Optional[int] = ..., wait_timeout_ms: _Optional[int] = ..., metadata: _Optional[bytes] = ..., seq: _Optional[int] = ..., acked_below: _Optional[int] = ..., count: _Optional[int] = ..., max_hold_ms: _Optional[int] = ..., lock_delay_ms: _Optional[int] = ..., in_flight: _Optional[_Iterable[int]] = ...) -> None: ...

class AcquireResponse(_message.Message):
    __slots__ = ("grant", "acquired", "holders")
    GRANT_FIELD_NUMBER: _ClassVar[int]
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    grant: Grant
    acquired: bool
    holders: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ..., acquired: _Optional[bool] = ..., holders: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("session_id", "name", "token")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    name: str
    token: int
    def __init__(self, session_id: _Optional[int] = ..., name: _Optional[str] = ..., token: _Optional[int] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ("granted",)
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    granted: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, granted: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("name", "permits", "holders", "waiters", "applied_index", "sessions", "lock_delay_ms", "resized")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    RESIZED_FIELD_NUMBER: _ClassVar[int]
    name: str
    permits: int
    holders: _containers.RepeatedCompositeFieldContainer[Grant]
    waiters: _containers.RepeatedCompositeFieldContainer[Waiter]
    applied_index: int
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    lock_delay_ms: int
    resized: bool
    def __init__(self, name: _Optional[str] = ..., permits: _Optional[int] = ..., holders: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., waiters: _Optional[_Iterable[_Union[Waiter, _Mapping]]] = ..., applied_index: _Optional[int] = ..., sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ..., lock_delay_ms: _Optional[int] = ..., resized: _Optional[bool] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("prefix", "page_token", "limit")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    page_token: str
    limit: int
    def __init__(self, prefix: _Optional[str] = ..., page_token: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class LockSummary(_message.Message):
    __slots__ = ("name", "holders", "waiters", "sessions", "lock_delay_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    holders: _containers.RepeatedCompositeFieldContainer[Grant]
    waiters: int
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    lock_delay_ms: int
    def __init__(self, name: _Optional[str] = ..., holders: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., waiters: _Optional[int] = ..., sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ..., lock_delay_ms: _Optional[int] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("locks", "next_page_token")
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    locks: _containers.RepeatedCompositeFieldContainer[LockSummary]
    next_page_token: str
    def __init__(self, locks: _Optional[_Iterable[_Union[LockSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ValidateRequest(_message.Message):
    __slots__ = ("name", "token")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    token: int
    def __init__(self, name: _Optional[str] = ..., token: _Optional[int] = ...) -> None: ...

class ValidateResponse(_message.Message):
    __slots__ = ("valid", "current_token")
    VALID_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    valid: bool
    current_token: int
    def __init__(self, valid: _Optional[bool] = ..., current_token: _Optional[int] = ...) -> None: ...

class LimitSpec(_message.Message):
    __slots__ = ("rate", "per_ms", "burst")
    RATE_FIELD_NUMBER: _ClassVar[int]
    PER_MS_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    rate: int
    per_ms: int
    burst: int
    def __init__(self, rate: _Optional[int] = ..., per_ms: _Optional[int] = ..., burst: _Optional[int] = ...) -> None: ...

class TakeRequest(_message.Message):
    __slots__ = ("name", "n", "limit", "wait_timeout_ms", "lease_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    n: int
    limit: LimitSpec
    wait_timeout_ms: int
    lease_ms: int
    def __init__(self, name: _Optional[str] = ..., n: _Optional[int] = ..., limit: _Optional[_Union[LimitSpec, _Mapping]] = ..., wait_timeout_ms: _Optional[int] = ..., lease_ms: _Optional[int] = ...) -> None: ...

class TakeResponse(_message.Message):
    __slots__ = ("admitted", "n", "remaining", "retry_after_ms", "lease_id")
    ADMITTED_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    admitted: bool
    n: int
    remaining: int
    retry_after_ms: int
    lease_id: int
    def __init__(self, admitted: _Optional[bool] = ..., n: _Optional[int] = ..., remaining: _Optional[int] = ..., retry_after_ms: _Optional[int] = ..., lease_id: _Optional[int] = ...) -> None: ...

class ReturnTokensRequest(_message.Message):
    __slots__ = ("name", "lease_id", "unused")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    UNUSED_FIELD_NUMBER: _ClassVar[int]
    name: str
    lease_id: int
    unused: int
    def __init__(self, name: _Optional[str] = ..., lease_id: _Optional[int] = ..., unused: _Optional[int] = ...) -> None: ...

class ReturnTokensResponse(_message.Message):
    __slots__ = ("credited",)
    CREDITED_FIELD_NUMBER: _ClassVar[int]
    credited: int
    def __init__(self, credited: _Optional[int] = ...) -> None: ...

class DefineLimitRequest(_message.Message):
    __slots__ = ("name", "limit")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    name: str
    limit: LimitSpec
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[_Union[LimitSpec, _Mapping]] = ...) -> None: ...

class DefineLimitResponse(_message.Message):
    __slots__ = ("created",)
    CREATED_FIELD_NUMBER: _ClassVar[int]
    created: bool
    def __init__(self, created: _Optional[bool] = ...) -> None: ...

class DescribeLimitRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DescribeLimitResponse(_message.Message):
    __slots__ = ("name", "limit", "available", "admitted", "refused", "leases", "applied_index")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    ADMITTED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    name: str
    limit: LimitSpec
    available: int
    admitted: int
    refused: int
    leases: int
    applied_index: int
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[_Union[LimitSpec, _Mapping]] = ..., available: _Optional[int] = ..., admitted: _Optional[int] = ..., refused: _Optional[int] = ..., leases: _Optional[int] = ..., applied_index: _Optional[int] = ...) -> None: ...

class DeleteLimitRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteLimitResponse(_message.Message):
    __slots__ = ("existed",)
    EXISTED_FIELD_NUMBER: _ClassVar[int]
    existed: bool
    def __init__(self, existed: _Optional[bool] = ...) -> None: ...

class CampaignRequest(_message.Message):
    __slots__ = ("name", "session_id", "request_id", "value", "wait_timeout_ms", "seq", "acked_below", "in_flight")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ACKED_BELOW_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    name: str
    session_id: int
    request_id: bytes
    value: bytes
    wait_timeout_ms: int
    seq: int
    acked_below: int
    in_flight: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., session_id: _Optional[int] = ..., request_id: _Optional[bytes] = ..., value: _Optional[bytes] = ..., wait_timeout_ms: _Optional[int] = ..., seq: _Optional[int] = ..., acked_below: _Optional[int] = ..., in_flight: _Optional[_Iterable[int]] = ...) -> None: ...

class CampaignResponse(_message.Message):
    __slots__ = ("leader",)
    LEADER_FIELD_NUMBER: _ClassVar[int]
    leader: Grant
    def __init__(self, leader: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

class ProclaimRequest(_message.Message):
    __slots__ = ("name", "session_id", "token", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    session_id: int
    token: int
    value: bytes
    def __init__(self, name: _Optional[str] = ..., session_id: _Optional[int] = ..., token: _Optional[int] = ..., value: _Optional[bytes] = ...) -> None: ...

class ProclaimResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ResignRequest(_message.Message):
    __slots__ = ("name", "session_id", "token")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    session_id: int
    token: int
    def __init__(self, name: _Optional[str] = ..., session_id: _Optional[int] = ..., token: _Optional[int] = ...) -> None: ...

class ResignResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class LeaderRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class LeaderResponse(_message.Message):
    __slots__ = ("leader",)
    LEADER_FIELD_NUMBER: _ClassVar[int]
    leader: Grant
    def __init__(self, leader: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BackupChunk(_message.Message):
    __slots__ = ("data", "last_index")
    DATA_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    last_index: int
    def __init__(self, data: _Optional[bytes] = ..., last_index: _Optional[int] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("linearizable_counts",)
    LINEARIZABLE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    linearizable_counts: bool
    def __init__(self, linearizable_counts: _Optional[bool] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ("id", "peer_addr", "client_addr")
    ID_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDR_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ADDR_FIELD_NUMBER: _ClassVar[int]
    id: int
    peer_addr: str
    client_addr: str
    def __init__(self, id: _Optional[int] = ..., peer_addr: _Optional[str] = ..., client_addr: _Optional[str] = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ("node_id", "role", "term", "leader_id", "leader_addr", "commit_index", "applied_index", "members", "learners", "sessions", "locks", "waiters", "log_fsyncs", "log_entries_flushed", "proposed_commands", "proposed_entries", "process_cpu_micros", "limits")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDR_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LEARNERS_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    LOG_FSYNCS_FIELD_NUMBER: _ClassVar[int]
    LOG_ENTRIES_FLUSHED_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    PROCESS_CPU_MICROS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    role: Role
    term: int
    leader_id: int
    leader_addr: str
    commit_index: int
    applied_index: int
    members: _containers.RepeatedCompositeFieldContainer[Member]
    learners: _containers.RepeatedCompositeFieldContainer[Member]
    sessions: int
    locks: int
    waiters: int
    log_fsyncs: int
    log_entries_flushed: int
    proposed_commands: int
    proposed_entries: int
    process_cpu_micros: int
    limits: ServerLimits
    def __init__(self, node_id: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., term: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_addr: _Optional[str] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., learners: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., sessions: _Optional[int] = ..., locks: _Optional[int] = ..., waiters: _Optional[int] = ..., log_fsyncs: _Optional[int] = ..., log_entries_flushed: _Optional[int] = ..., proposed_commands: _Optional[int] = ..., proposed_entries: _Optional[int] = ..., process_cpu_micros: _Optional[int] = ..., limits: _Optional[_Union[ServerLimits, _Mapping]] = ...) -> None: ...

class ServerLimits(_message.Message):
    __slots__ = ("max_wait_ms", "min_ttl_ms", "max_ttl_ms", "max_name_bytes", "max_metadata_bytes", "max_hold_ms", "max_lock_delay_ms", "hold_caps")
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_NAME_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_METADATA_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_HOLD_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    HOLD_CAPS_FIELD_NUMBER: _ClassVar[int]
    max_wait_ms: int
    min_ttl_ms: int
    max_ttl_ms: int
    max_name_bytes: int
    max_metadata_bytes: int
    max_hold_ms: int
    max_lock_delay_ms: int
    hold_caps: _containers.RepeatedCompositeFieldContainer[HoldCapRule]
    def __init__(self, max_wait_ms: _Optional[int] = ..., min_ttl_ms: _Optional[int] = ..., max_ttl_ms: _Optional[int] = ..., max_name_bytes: _Optional[int] = ..., max_metadata_bytes: _Optional[int] = ..., max_hold_ms: _Optional[int] = ..., max_lock_delay_ms: _Optional[int] = ..., hold_caps: _Optional[_Iterable[_Union[HoldCapRule, _Mapping]]] = ...) -> None: ...

class HoldCapRule(_message.Message):
    __slots__ = ("prefix", "default_ms", "max_ms")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_MS_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    default_ms: int
    max_ms: int
    def __init__(self, prefix: _Optional[str] = ..., default_ms: _Optional[int] = ..., max_ms: _Optional[int] = ...) -> None: ...

class AddLearnerRequest(_message.Message):
    __slots__ = ("node_id", "peer_addr", "client_addr", "wait_caught_up")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDR_FIELD_NUMBER: _ClassVar[int]
    CLIENT_ADDR_FIELD_NUMBER: _ClassVar[int]
    WAIT_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    peer_addr: str
    client_addr: str
    wait_caught_up: bool
    def __init__(self, node_id: _Optional[int] = ..., peer_addr: _Optional[str] = ..., client_addr: _Optional[str] = ..., wait_caught_up: _Optional[bool] = ...) -> None: ...

class ChangeMembershipRequest(_message.Message):
    __slots__ = ("voters", "retain_as_learners", "remove_learners")
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    RETAIN_AS_LEARNERS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_LEARNERS_FIELD_NUMBER: _ClassVar[int]
    voters: _containers.RepeatedScalarFieldContainer[int]
    retain_as_learners: bool
    remove_learners: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, voters: _Optional[_Iterable[int]] = ..., retain_as_learners: _Optional[bool] = ..., remove_learners: _Optional[_Iterable[int]] = ...) -> None: ...

class MembershipResponse(_message.Message):
    __slots__ = ("log_index", "members", "learners")
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    LEARNERS_FIELD_NUMBER: _ClassVar[int]
    log_index: int
    members: _containers.RepeatedCompositeFieldContainer[Member]
    learners: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, log_index: _Optional[int] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., learners: _Optional[_Iterable[_Union[Member, _Mapping]]] = ...) -> None: ...

class TransferLeaderRequest(_message.Message):
    __slots__ = ("to_node_id",)
    TO_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    to_node_id: int
    def __init__(self, to_node_id: _Optional[int] = ...) -> None: ...

class TransferLeaderResponse(_message.Message):
    __slots__ = ("leader_id",)
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    def __init__(self, leader_id: _Optional[int] = ...) -> None: ...

class RaftPayload(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...
