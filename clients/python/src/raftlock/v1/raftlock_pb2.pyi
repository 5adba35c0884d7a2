from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
LOCK_EVENT_KIND_EXPIRED: LockEventKind
LOCK_EVENT_KIND_FORCE_RELEASED: LockEventKind
LOCK_EVENT_KIND_GRANTED: LockEventKind
LOCK_EVENT_KIND_HANDOFF: LockEventKind
LOCK_EVENT_KIND_HOLD_EXPIRED: LockEventKind
LOCK_EVENT_KIND_LOCK_DELAY_ENDED: LockEventKind
LOCK_EVENT_KIND_LOCK_DELAY_STARTED: LockEventKind
LOCK_EVENT_KIND_RELEASED: LockEventKind
LOCK_EVENT_KIND_UNSPECIFIED: LockEventKind
LOCK_MODE_EXCLUSIVE: LockMode
LOCK_MODE_SHARED: LockMode
LOCK_MODE_UNSPECIFIED: LockMode
ROLE_CANDIDATE: Role
ROLE_FOLLOWER: Role
ROLE_LEADER: Role
ROLE_LEARNER: Role
ROLE_SHUTDOWN: Role
ROLE_UNSPECIFIED: Role

class AcquireAllRequest(_message.Message):
    __slots__ = ["acked_below", "in_flight", "metadata", "names", "request_id", "seq", "session_id", "wait_timeout_ms"]
    ACKED_BELOW_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    acked_below: int
    in_flight: _containers.RepeatedScalarFieldContainer[int]
    metadata: bytes
    names: _containers.RepeatedScalarFieldContainer[str]
    request_id: bytes
    seq: int
    session_id: int
    wait_timeout_ms: int
    def __init__(self, session_id: _Optional[int] = ..., names: _Optional[_Iterable[str]] = ..., request_id: _Optional[bytes] = ..., wait_timeout_ms: _Optional[int] = ..., metadata: _Optional[bytes] = ..., seq: _Optional[int] = ..., acked_below: _Optional[int] = ..., in_flight: _Optional[_Iterable[int]] = ...) -> None: ...

class AcquireAllResponse(_message.Message):
    __slots__ = ["acquired", "grants", "holders"]
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    GRANTS_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    acquired: bool
    grants: _containers.RepeatedCompositeFieldContainer[Grant]
    holders: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, acquired: bool = ..., grants: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., holders: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class AcquireRequest(_message.Message):
    __slots__ = ["acked_below", "count", "in_flight", "lock_delay_ms", "max_hold_ms", "metadata", "mode", "name", "permits", "request_id", "seq", "session_id", "wait_timeout_ms"]
    ACKED_BELOW_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_HOLD_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    acked_below: int
    count: int
    in_flight: _containers.RepeatedScalarFieldContainer[int]
    lock_delay_ms: int
    max_hold_ms: int
    metadata: bytes
    mode: LockMode
    name: str
    permits: int
    request_id: bytes
    seq: int
    session_id: int
    wait_timeout_ms: int
    def __init__(self, session_id: _Optional[int] = ..., name: _Optional[str] = ..., request_id: _Optional[bytes] = ..., mode: _Optional[_Union[LockMode, str]] = ..., permits: _Optional[int] = ..., wait_timeout_ms: _Optional[int] = ..., metadata: _Optional[bytes] = ..., seq: _Optional[int] = ..., acked_below: _Optional[int] = ..., count: _Optional[int] = ..., max_hold_ms: _Optional[int] = ..., lock_delay_ms: _Optional[int] = ..., in_flight: _Optional[_Iterable[int]] = ...) -> None: ...

class AcquireResponse(_message.Message):
    __slots__ = ["acquired", "grant", "holders"]
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    acquired: bool
    grant: Grant
    holders: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, grant: _Optional[_Union[Grant, _Mapping]] = ..., acquired: bool = ..., holders: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class AddLearnerRequest(_message.Message):
    __slots__ = ["client_addr", "node_id", "peer_addr", "wait_caught_up"]
    CLIENT_ADDR_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDR_FIELD_NUMBER: _ClassVar[int]
    WAIT_CAUGHT_UP_FIELD_NUMBER: _ClassVar[int]
    client_addr: str
    node_id: int
    peer_addr: str
    wait_caught_up: bool
    def __init__(self, node_id: _Optional[int] = ..., peer_addr: _Optional[str] = ..., client_addr: _Optional[str] = ..., wait_caught_up: bool = ...) -> None: ...

class BackupChunk(_message.Message):
    __slots__ = ["data", "last_index"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    LAST_INDEX_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    last_index: int
    def __init__(self, data: _Optional[bytes] = ..., last_index: _Optional[int] = ...) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CampaignRequest(_message.Message):
    __slots__ = ["acked_below", "in_flight", "name", "request_id", "seq", "session_id", "value", "wait_timeout_ms"]
    ACKED_BELOW_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    acked_below: int
    in_flight: _containers.RepeatedScalarFieldContainer[int]
    name: str
    request_id: bytes
    seq: int
    session_id: int
    value: bytes
    wait_timeout_ms: int
    def __init__(self, name: _Optional[str] = ..., session_id: _Optional[int] = ..., request_id: _Optional[bytes] = ..., value: _Optional[bytes] = ..., wait_timeout_ms: _Optional[int] = ..., seq: _Optional[int] = ..., acked_below: _Optional[int] = ..., in_flight: _Optional[_Iterable[int]] = ...) -> None: ...

class CampaignResponse(_message.Message):
    __slots__ = ["leader"]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    leader: Grant
    def __init__(self, leader: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

class CancelWaitRequest(_message.Message):
    __slots__ = ["name", "request_id", "session_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    request_id: bytes
    session_id: int
    def __init__(self, session_id: _Optional[int] = ..., name: _Optional[str] = ..., request_id: _Optional[bytes] = ...) -> None: ...

class CancelWaitResponse(_message.Message):
    __slots__ = ["cancelled", "released", "token"]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    cancelled: bool
    released: bool
    token: int
    def __init__(self, cancelled: bool = ..., released: bool = ..., token: _Optional[int] = ...) -> None: ...

class ChangeMembershipRequest(_message.Message):
    __slots__ = ["remove_learners", "retain_as_learners", "voters"]
    REMOVE_LEARNERS_FIELD_NUMBER: _ClassVar[int]
    RETAIN_AS_LEARNERS_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    remove_learners: _containers.RepeatedScalarFieldContainer[int]
    retain_as_learners: bool
    voters: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, voters: _Optional[_Iterable[int]] = ..., retain_as_learners: bool = ..., remove_learners: _Optional[_Iterable[int]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    def __init__(self, session_id: _Optional[int] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ["released"]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    released: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, released: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["client_name", "creation_key", "host", "pid", "ttl_ms"]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATION_KEY_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    client_name: str
    creation_key: bytes
    host: str
    pid: int
    ttl_ms: int
    def __init__(self, ttl_ms: _Optional[int] = ..., client_name: _Optional[str] = ..., creation_key: _Optional[bytes] = ..., host: _Optional[str] = ..., pid: _Optional[int] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ["session_id", "ttl_ms"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    ttl_ms: int
    def __init__(self, session_id: _Optional[int] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class DefineLimitRequest(_message.Message):
    __slots__ = ["limit", "name"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    limit: LimitSpec
    name: str
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[_Union[LimitSpec, _Mapping]] = ...) -> None: ...

class DefineLimitResponse(_message.Message):
    __slots__ = ["created"]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    created: bool
    def __init__(self, created: bool = ...) -> None: ...

class DeleteLimitRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DeleteLimitResponse(_message.Message):
    __slots__ = ["existed"]
    EXISTED_FIELD_NUMBER: _ClassVar[int]
    existed: bool
    def __init__(self, existed: bool = ...) -> None: ...

class DescribeLimitRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DescribeLimitResponse(_message.Message):
    __slots__ = ["admitted", "applied_index", "available", "leases", "limit", "name", "refused"]
    ADMITTED_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    LEASES_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    admitted: int
    applied_index: int
    available: int
    leases: int
    limit: LimitSpec
    name: str
    refused: int
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[_Union[LimitSpec, _Mapping]] = ..., available: _Optional[int] = ..., admitted: _Optional[int] = ..., refused: _Optional[int] = ..., leases: _Optional[int] = ..., applied_index: _Optional[int] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ["applied_index", "holders", "lock_delay_ms", "name", "permits", "resized", "sessions", "waiters"]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    RESIZED_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    holders: _containers.RepeatedCompositeFieldContainer[Grant]
    lock_delay_ms: int
    name: str
    permits: int
    resized: bool
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    waiters: _containers.RepeatedCompositeFieldContainer[Waiter]
    def __init__(self, name: _Optional[str] = ..., permits: _Optional[int] = ..., holders: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., waiters: _Optional[_Iterable[_Union[Waiter, _Mapping]]] = ..., applied_index: _Optional[int] = ..., sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ..., lock_delay_ms: _Optional[int] = ..., resized: bool = ...) -> None: ...

class DowngradeRequest(_message.Message):
    __slots__ = ["name", "session_id", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    session_id: int
    token: int
    def __init__(self, session_id: _Optional[int] = ..., name: _Optional[str] = ..., token: _Optional[int] = ...) -> None: ...

class DowngradeResponse(_message.Message):
    __slots__ = ["granted", "hold"]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    granted: _containers.RepeatedCompositeFieldContainer[Grant]
    hold: Grant
    def __init__(self, hold: _Optional[_Union[Grant, _Mapping]] = ..., granted: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class ForceReleaseRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ForceReleaseResponse(_message.Message):
    __slots__ = ["granted", "released"]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    granted: _containers.RepeatedCompositeFieldContainer[Grant]
    released: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, released: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., granted: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class Grant(_message.Message):
    __slots__ = ["count", "granted_at_ms", "lock_delay_ms", "max_hold_ms", "metadata", "mode", "name", "request_id", "session_id", "token"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    GRANTED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_HOLD_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    count: int
    granted_at_ms: int
    lock_delay_ms: int
    max_hold_ms: int
    metadata: bytes
    mode: LockMode
    name: str
    request_id: bytes
    session_id: int
    token: int
    def __init__(self, token: _Optional[int] = ..., name: _Optional[str] = ..., mode: _Optional[_Union[LockMode, str]] = ..., session_id: _Optional[int] = ..., request_id: _Optional[bytes] = ..., granted_at_ms: _Optional[int] = ..., metadata: _Optional[bytes] = ..., count: _Optional[int] = ..., max_hold_ms: _Optional[int] = ..., lock_delay_ms: _Optional[int] = ...) -> None: ...

class HoldCapRule(_message.Message):
    __slots__ = ["default_ms", "max_ms", "prefix"]
    DEFAULT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_MS_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    default_ms: int
    max_ms: int
    prefix: str
    def __init__(self, prefix: _Optional[str] = ..., default_ms: _Optional[int] = ..., max_ms: _Optional[int] = ...) -> None: ...

class KeepAliveRequest(_message.Message):
    __slots__ = ["session_id", "shared"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    session_id: int
    shared: bool
    def __init__(self, session_id: _Optional[int] = ..., shared: bool = ...) -> None: ...

class KeepAliveResponse(_message.Message):
    __slots__ = ["gone", "session_id", "ttl_ms"]
    GONE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    gone: bool
    session_id: int
    ttl_ms: int
    def __init__(self, session_id: _Optional[int] = ..., ttl_ms: _Optional[int] = ..., gone: bool = ...) -> None: ...

class LeaderRequest(_message.Message):
    __slots__ = ["name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class LeaderResponse(_message.Message):
    __slots__ = ["leader"]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    leader: Grant
    def __init__(self, leader: _Optional[_Union[Grant, _Mapping]] = ...) -> None: ...

class LimitSpec(_message.Message):
    __slots__ = ["burst", "per_ms", "rate"]
    BURST_FIELD_NUMBER: _ClassVar[int]
    PER_MS_FIELD_NUMBER: _ClassVar[int]
    RATE_FIELD_NUMBER: _ClassVar[int]
    burst: int
    per_ms: int
    rate: int
    def __init__(self, rate: _Optional[int] = ..., per_ms: _Optional[int] = ..., burst: _Optional[int] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ["limit", "page_token", "prefix"]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    limit: int
    page_token: str
    prefix: str
    def __init__(self, prefix: _Optional[str] = ..., page_token: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ["locks", "next_page_token"]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    locks: _containers.RepeatedCompositeFieldContainer[LockSummary]
    next_page_token: str
    def __init__(self, locks: _Optional[_Iterable[_Union[LockSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["client_name_prefix", "limit", "page_token"]
    CLIENT_NAME_PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    client_name_prefix: str
    limit: int
    page_token: int
    def __init__(self, client_name_prefix: _Optional[str] = ..., page_token: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_page_token", "sessions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: int
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    def __init__(self, sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ..., next_page_token: _Optional[int] = ...) -> None: ...

class LockEvent(_message.Message):
    __slots__ = ["count", "kind", "lock_delay_ms", "metadata", "mode", "name", "session_id", "token"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    count: int
    kind: LockEventKind
    lock_delay_ms: int
    metadata: bytes
    mode: LockMode
    name: str
    session_id: int
    token: int
    def __init__(self, kind: _Optional[_Union[LockEventKind, str]] = ..., name: _Optional[str] = ..., session_id: _Optional[int] = ..., token: _Optional[int] = ..., mode: _Optional[_Union[LockMode, str]] = ..., metadata: _Optional[bytes] = ..., count: _Optional[int] = ..., lock_delay_ms: _Optional[int] = ...) -> None: ...

class LockSummary(_message.Message):
    __slots__ = ["holders", "lock_delay_ms", "name", "permits", "resized", "sessions", "waiters"]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    RESIZED_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    holders: _containers.RepeatedCompositeFieldContainer[Grant]
    lock_delay_ms: int
    name: str
    permits: int
    resized: bool
    sessions: _containers.RepeatedCompositeFieldContainer[SessionInfo]
    waiters: int
    def __init__(self, name: _Optional[str] = ..., holders: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ..., waiters: _Optional[int] = ..., sessions: _Optional[_Iterable[_Union[SessionInfo, _Mapping]]] = ..., lock_delay_ms: _Optional[int] = ..., permits: _Optional[int] = ..., resized: bool = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ["client_addr", "id", "peer_addr"]
    CLIENT_ADDR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PEER_ADDR_FIELD_NUMBER: _ClassVar[int]
    client_addr: str
    id: int
    peer_addr: str
    def __init__(self, id: _Optional[int] = ..., peer_addr: _Optional[str] = ..., client_addr: _Optional[str] = ...) -> None: ...

class MembershipResponse(_message.Message):
    __slots__ = ["learners", "log_index", "members"]
    LEARNERS_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    learners: _containers.RepeatedCompositeFieldContainer[Member]
    log_index: int
    members: _containers.RepeatedCompositeFieldContainer[Member]
    def __init__(self, log_index: _Optional[int] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., learners: _Optional[_Iterable[_Union[Member, _Mapping]]] = ...) -> None: ...

class PipelineError(_message.Message):
    __slots__ = ["code", "leader", "message", "reason"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: int
    leader: str
    message: str
    reason: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., leader: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PipelineRequest(_message.Message):
    __slots__ = ["acquire", "id", "release"]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    acquire: AcquireRequest
    id: int
    release: ReleaseRequest
    def __init__(self, id: _Optional[int] = ..., acquire: _Optional[_Union[AcquireRequest, _Mapping]] = ..., release: _Optional[_Union[ReleaseRequest, _Mapping]] = ...) -> None: ...

class PipelineResponse(_message.Message):
    __slots__ = ["acquire", "error", "id", "release"]
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    acquire: AcquireResponse
    error: PipelineError
    id: int
    release: ReleaseResponse
    def __init__(self, id: _Optional[int] = ..., acquire: _Optional[_Union[AcquireResponse, _Mapping]] = ..., release: _Optional[_Union[ReleaseResponse, _Mapping]] = ..., error: _Optional[_Union[PipelineError, _Mapping]] = ...) -> None: ...

class ProclaimRequest(_message.Message):
    __slots__ = ["name", "session_id", "token", "value"]
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
    __slots__ = []
    def __init__(self) -> None: ...

class RaftPayload(_message.Message):
    __slots__ = ["data"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ["name", "session_id", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    session_id: int
    token: int
    def __init__(self, session_id: _Optional[int] = ..., name: _Optional[str] = ..., token: _Optional[int] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ["granted"]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    granted: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, granted: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class ResignRequest(_message.Message):
    __slots__ = ["name", "session_id", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    session_id: int
    token: int
    def __init__(self, name: _Optional[str] = ..., session_id: _Optional[int] = ..., token: _Optional[int] = ...) -> None: ...

class ResignResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ResizeRequest(_message.Message):
    __slots__ = ["name", "permits"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERMITS_FIELD_NUMBER: _ClassVar[int]
    name: str
    permits: int
    def __init__(self, name: _Optional[str] = ..., permits: _Optional[int] = ...) -> None: ...

class ResizeResponse(_message.Message):
    __slots__ = ["granted"]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    granted: _containers.RepeatedCompositeFieldContainer[Grant]
    def __init__(self, granted: _Optional[_Iterable[_Union[Grant, _Mapping]]] = ...) -> None: ...

class ReturnTokensRequest(_message.Message):
    __slots__ = ["lease_id", "name", "unused"]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UNUSED_FIELD_NUMBER: _ClassVar[int]
    lease_id: int
    name: str
    unused: int
    def __init__(self, name: _Optional[str] = ..., lease_id: _Optional[int] = ..., unused: _Optional[int] = ...) -> None: ...

class ReturnTokensResponse(_message.Message):
    __slots__ = ["credited"]
    CREDITED_FIELD_NUMBER: _ClassVar[int]
    credited: int
    def __init__(self, credited: _Optional[int] = ...) -> None: ...

class ServerLimits(_message.Message):
    __slots__ = ["hold_caps", "max_hold_ms", "max_lock_delay_ms", "max_metadata_bytes", "max_name_bytes", "max_ttl_ms", "max_wait_ms", "min_ttl_ms"]
    HOLD_CAPS_FIELD_NUMBER: _ClassVar[int]
    MAX_HOLD_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_LOCK_DELAY_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_METADATA_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_NAME_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_TTL_MS_FIELD_NUMBER: _ClassVar[int]
    hold_caps: _containers.RepeatedCompositeFieldContainer[HoldCapRule]
    max_hold_ms: int
    max_lock_delay_ms: int
    max_metadata_bytes: int
    max_name_bytes: int
    max_ttl_ms: int
    max_wait_ms: int
    min_ttl_ms: int
    def __init__(self, max_wait_ms: _Optional[int] = ..., min_ttl_ms: _Optional[int] = ..., max_ttl_ms: _Optional[int] = ..., max_name_bytes: _Optional[int] = ..., max_metadata_bytes: _Optional[int] = ..., max_hold_ms: _Optional[int] = ..., max_lock_delay_ms: _Optional[int] = ..., hold_caps: _Optional[_Iterable[_Union[HoldCapRule, _Mapping]]] = ...) -> None: ...

class SessionInfo(_message.Message):
    __slots__ = ["client_name", "created_at_ms", "expires_in_ms", "held", "host", "identity", "pid", "session_id", "ttl_ms", "waiting"]
    CLIENT_NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_IN_MS_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    client_name: str
    created_at_ms: int
    expires_in_ms: int
    held: _containers.RepeatedScalarFieldContainer[str]
    host: str
    identity: str
    pid: int
    session_id: int
    ttl_ms: int
    waiting: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_id: _Optional[int] = ..., client_name: _Optional[str] = ..., identity: _Optional[str] = ..., host: _Optional[str] = ..., pid: _Optional[int] = ..., created_at_ms: _Optional[int] = ..., ttl_ms: _Optional[int] = ..., expires_in_ms: _Optional[int] = ..., held: _Optional[_Iterable[str]] = ..., waiting: _Optional[_Iterable[str]] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ["linearizable_counts"]
    LINEARIZABLE_COUNTS_FIELD_NUMBER: _ClassVar[int]
    linearizable_counts: bool
    def __init__(self, linearizable_counts: bool = ...) -> None: ...

class StatusResponse(_message.Message):
    __slots__ = ["applied_index", "commit_index", "leader_addr", "leader_id", "learners", "limits", "locks", "log_entries_flushed", "log_fsyncs", "members", "node_id", "process_cpu_micros", "proposed_commands", "proposed_entries", "role", "sessions", "term", "waiters"]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDR_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEARNERS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    LOG_ENTRIES_FLUSHED_FIELD_NUMBER: _ClassVar[int]
    LOG_FSYNCS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    PROCESS_CPU_MICROS_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    PROPOSED_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    applied_index: int
    commit_index: int
    leader_addr: str
    leader_id: int
    learners: _containers.RepeatedCompositeFieldContainer[Member]
    limits: ServerLimits
    locks: int
    log_entries_flushed: int
    log_fsyncs: int
    members: _containers.RepeatedCompositeFieldContainer[Member]
    node_id: int
    process_cpu_micros: int
    proposed_commands: int
    proposed_entries: int
    role: Role
    sessions: int
    term: int
    waiters: int
    def __init__(self, node_id: _Optional[int] = ..., role: _Optional[_Union[Role, str]] = ..., term: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_addr: _Optional[str] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., learners: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., sessions: _Optional[int] = ..., locks: _Optional[int] = ..., waiters: _Optional[int] = ..., log_fsyncs: _Optional[int] = ..., log_entries_flushed: _Optional[int] = ..., proposed_commands: _Optional[int] = ..., proposed_entries: _Optional[int] = ..., process_cpu_micros: _Optional[int] = ..., limits: _Optional[_Union[ServerLimits, _Mapping]] = ...) -> None: ...

class TakeRequest(_message.Message):
    __slots__ = ["lease_ms", "limit", "n", "name", "wait_timeout_ms"]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    WAIT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    lease_ms: int
    limit: LimitSpec
    n: int
    name: str
    wait_timeout_ms: int
    def __init__(self, name: _Optional[str] = ..., n: _Optional[int] = ..., limit: _Optional[_Union[LimitSpec, _Mapping]] = ..., wait_timeout_ms: _Optional[int] = ..., lease_ms: _Optional[int] = ...) -> None: ...

class TakeResponse(_message.Message):
    __slots__ = ["admitted", "lease_id", "n", "remaining", "retry_after_ms"]
    ADMITTED_FIELD_NUMBER: _ClassVar[int]
    LEASE_ID_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    admitted: bool
    lease_id: int
    n: int
    remaining: int
    retry_after_ms: int
    def __init__(self, admitted: bool = ..., n: _Optional[int] = ..., remaining: _Optional[int] = ..., retry_after_ms: _Optional[int] = ..., lease_id: _Optional[int] = ...) -> None: ...

class TransferLeaderRequest(_message.Message):
    __slots__ = ["to_node_id"]
    TO_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    to_node_id: int
    def __init__(self, to_node_id: _Optional[int] = ...) -> None: ...

class TransferLeaderResponse(_message.Message):
    __slots__ = ["leader_id"]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    def __init__(self, leader_id: _Optional[int] = ...) -> None: ...

class ValidateRequest(_message.Message):
    __slots__ = ["name", "token"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    token: int
    def __init__(self, name: _Optional[str] = ..., token: _Optional[int] = ...) -> None: ...

class ValidateResponse(_message.Message):
    __slots__ = ["current_token", "valid"]
    CURRENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    current_token: int
    valid: bool
    def __init__(self, valid: bool = ..., current_token: _Optional[int] = ...) -> None: ...

class Waiter(_message.Message):
    __slots__ = ["count", "enqueued_at_ms", "mode", "request_id", "session_id", "timeout_ms"]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    ENQUEUED_AT_MS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    count: int
    enqueued_at_ms: int
    mode: LockMode
    request_id: bytes
    session_id: int
    timeout_ms: int
    def __init__(self, session_id: _Optional[int] = ..., mode: _Optional[_Union[LockMode, str]] = ..., request_id: _Optional[bytes] = ..., enqueued_at_ms: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class WatchRequest(_message.Message):
    __slots__ = ["after_index", "prefix"]
    AFTER_INDEX_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    after_index: int
    prefix: str
    def __init__(self, prefix: _Optional[str] = ..., after_index: _Optional[int] = ...) -> None: ...

class WatchResponse(_message.Message):
    __slots__ = ["at_ms", "events", "index"]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    at_ms: int
    events: _containers.RepeatedCompositeFieldContainer[LockEvent]
    index: int
    def __init__(self, index: _Optional[int] = ..., at_ms: _Optional[int] = ..., events: _Optional[_Iterable[_Union[LockEvent, _Mapping]]] = ...) -> None: ...

class LockMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class LockEventKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
