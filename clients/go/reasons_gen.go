// Code generated from proto/proto/raftlock/v1/reasons.proto by tests/src/contract.rs (REWRITE_CONTRACT=1 cargo test -p raftlock-tests --test api contract). DO NOT EDIT.

package raftlock

// Reasons the server sends in the "reason" field of a refusal, in wire
// form. Match errors with errors.Is and the Err* sentinels rather than
// comparing these strings.
const (
	// ReasonNotLeader: This node does not lead; the leader's address, when
	// known, is in the `raftlock-leader` metadata key. (gRPC code
	// UNAVAILABLE.)
	ReasonNotLeader = "NOT_LEADER"

	// ReasonNoQuorum: No quorum answered in time. (gRPC code UNAVAILABLE.)
	ReasonNoQuorum = "NO_QUORUM"

	// ReasonStopping: The node is stopping. (gRPC code UNAVAILABLE.)
	ReasonStopping = "STOPPING"

	// ReasonInvalidName: A lock or election name is empty, too long or not
	// acceptable. (gRPC code INVALID_ARGUMENT.)
	ReasonInvalidName = "INVALID_NAME"

	// ReasonTTLOutOfRange: A session TTL outside the allowed range. (gRPC
	// code INVALID_ARGUMENT.)
	ReasonTTLOutOfRange = "TTL_OUT_OF_RANGE"

	// ReasonInvalidArgument: Another field is missing, malformed or out of
	// range. (gRPC code INVALID_ARGUMENT.)
	ReasonInvalidArgument = "INVALID_ARGUMENT"

	// ReasonSessionNotFound: The session does not exist (never created,
	// closed, or expired). (gRPC code NOT_FOUND.)
	ReasonSessionNotFound = "SESSION_NOT_FOUND"

	// ReasonWaitNotFound: No such wait to cancel. (gRPC code NOT_FOUND.)
	ReasonWaitNotFound = "WAIT_NOT_FOUND"

	// ReasonNotHolder: The session does not hold the lock. (gRPC code
	// FAILED_PRECONDITION.)
	ReasonNotHolder = "NOT_HOLDER"

	// ReasonStaleToken: The session holds the lock under another token.
	// (gRPC code FAILED_PRECONDITION.)
	ReasonStaleToken = "STALE_TOKEN"

	// ReasonPermitsMismatch: A stated permit count differs from the lock's.
	// (gRPC code FAILED_PRECONDITION.)
	ReasonPermitsMismatch = "PERMITS_MISMATCH"

	// ReasonRequestReleased: A retry of an acquisition that was granted and
	// has been released since. (gRPC code FAILED_PRECONDITION.)
	ReasonRequestReleased = "REQUEST_RELEASED"

	// ReasonRequestFinished: A retry of an acquisition that ended otherwise.
	// (gRPC code FAILED_PRECONDITION.)
	ReasonRequestFinished = "REQUEST_FINISHED"

	// ReasonRequestAcknowledged: A request number the client said it had its
	// answer for. (gRPC code FAILED_PRECONDITION.)
	ReasonRequestAcknowledged = "REQUEST_ACKNOWLEDGED"

	// ReasonAlreadyHeld: The session already holds the lock through another
	// acquisition. (gRPC code ALREADY_EXISTS.)
	ReasonAlreadyHeld = "ALREADY_HELD"

	// ReasonAlreadyWaiting: The session already waits for the lock through
	// another acquisition. (gRPC code ALREADY_EXISTS.)
	ReasonAlreadyWaiting = "ALREADY_WAITING"

	// ReasonWaitCancelled: The wait for a lock was cancelled when its time
	// ran out. (gRPC code DEADLINE_EXCEEDED.)
	ReasonWaitCancelled = "WAIT_CANCELLED"

	// ReasonWaitTimedOut: The wait for a lock, or for an answer, timed out.
	// (gRPC code DEADLINE_EXCEEDED.)
	ReasonWaitTimedOut = "WAIT_TIMED_OUT"

	// ReasonTooManyWaiters: The lock has as many waiters as allowed. (gRPC
	// code RESOURCE_EXHAUSTED.)
	ReasonTooManyWaiters = "TOO_MANY_WAITERS"

	// ReasonTooManyLocks: The cluster or the session has as many locks as
	// allowed. (gRPC code RESOURCE_EXHAUSTED.)
	ReasonTooManyLocks = "TOO_MANY_LOCKS"

	// ReasonTooManyUnacknowledged: The session has as many unacknowledged
	// requests as allowed. (gRPC code RESOURCE_EXHAUSTED.)
	ReasonTooManyUnacknowledged = "TOO_MANY_UNACKNOWLEDGED"

	// ReasonLimitExceeded: Another limit (sessions per identity, requests
	// per connection, ...). (gRPC code RESOURCE_EXHAUSTED.)
	ReasonLimitExceeded = "LIMIT_EXCEEDED"

	// ReasonUnauthenticated: No credentials, or unknown ones. (gRPC code
	// UNAUTHENTICATED.)
	ReasonUnauthenticated = "UNAUTHENTICATED"

	// ReasonPermissionDenied: The caller's identity may not do this. (gRPC
	// code PERMISSION_DENIED.)
	ReasonPermissionDenied = "PERMISSION_DENIED"

	// ReasonMembershipChangeRefused: A membership change the cluster refused
	// (another one in progress, an unknown node). (gRPC code
	// FAILED_PRECONDITION.)
	ReasonMembershipChangeRefused = "MEMBERSHIP_CHANGE_REFUSED"

	// ReasonLearnerNotCaughtUp: A new learner did not catch up with the log
	// in time. (gRPC code DEADLINE_EXCEEDED.)
	ReasonLearnerNotCaughtUp = "LEARNER_NOT_CAUGHT_UP"

	// ReasonWatchCompacted: A watch asked to resume after an index this node
	// no longer remembers events for (or its history was reset by a
	// snapshot): read the state afresh and watch from now. (gRPC code
	// OUT_OF_RANGE.)
	ReasonWatchCompacted = "WATCH_COMPACTED"

	// ReasonInternal: A fault of the server's own. (gRPC code INTERNAL.)
	ReasonInternal = "INTERNAL"

	// ReasonLimitNotFound: No rate limit of this name, and the take did not
	// say how to create it. (gRPC code NOT_FOUND.)
	ReasonLimitNotFound = "LIMIT_NOT_FOUND"

	// ReasonLimitConflict: A rate limit of this name exists with other
	// parameters, or with a burst smaller than a take asks for. (gRPC code
	// FAILED_PRECONDITION.)
	ReasonLimitConflict = "LIMIT_CONFLICT"

	// ReasonNoSpace: The leader's data dir is below its free-space reserve:
	// calls that grow the state (new sessions, acquires, campaigns, takes)
	// are refused until space returns; releases, closes and keep-alives go
	// on. HTTP 507 says what happened better than 429, which asks to retry
	// soon. (gRPC code RESOURCE_EXHAUSTED.)
	ReasonNoSpace = "NO_SPACE"
)

// Sentinels, one per server reason, for errors.Is.
var (
	// ErrNotLeader: This node does not lead; the leader's address, when
	// known, is in the `raftlock-leader` metadata key.
	ErrNotLeader error = reason(ReasonNotLeader)

	// ErrNoQuorum: No quorum answered in time.
	ErrNoQuorum error = reason(ReasonNoQuorum)

	// ErrStopping: The node is stopping.
	ErrStopping error = reason(ReasonStopping)

	// ErrInvalidName: A lock or election name is empty, too long or not
	// acceptable.
	ErrInvalidName error = reason(ReasonInvalidName)

	// ErrTTLOutOfRange: A session TTL outside the allowed range.
	ErrTTLOutOfRange error = reason(ReasonTTLOutOfRange)

	// ErrInvalidArgument: Another field is missing, malformed or out of
	// range.
	ErrInvalidArgument error = reason(ReasonInvalidArgument)

	// ErrSessionNotFound: The session does not exist (never created, closed,
	// or expired).
	ErrSessionNotFound error = reason(ReasonSessionNotFound)

	// ErrWaitNotFound: No such wait to cancel.
	ErrWaitNotFound error = reason(ReasonWaitNotFound)

	// ErrNotHolder: The session does not hold the lock.
	ErrNotHolder error = reason(ReasonNotHolder)

	// ErrStaleToken: The session holds the lock under another token.
	ErrStaleToken error = reason(ReasonStaleToken)

	// ErrPermitsMismatch: A stated permit count differs from the lock's.
	ErrPermitsMismatch error = reason(ReasonPermitsMismatch)

	// ErrRequestReleased: A retry of an acquisition that was granted and has
	// been released since.
	ErrRequestReleased error = reason(ReasonRequestReleased)

	// ErrRequestFinished: A retry of an acquisition that ended otherwise.
	ErrRequestFinished error = reason(ReasonRequestFinished)

	// ErrRequestAcknowledged: A request number the client said it had its
	// answer for.
	ErrRequestAcknowledged error = reason(ReasonRequestAcknowledged)

	// ErrAlreadyHeld: The session already holds the lock through another
	// acquisition.
	ErrAlreadyHeld error = reason(ReasonAlreadyHeld)

	// ErrAlreadyWaiting: The session already waits for the lock through
	// another acquisition.
	ErrAlreadyWaiting error = reason(ReasonAlreadyWaiting)

	// ErrWaitCancelled: The wait for a lock was cancelled when its time ran
	// out.
	ErrWaitCancelled error = reason(ReasonWaitCancelled)

	// ErrWaitTimedOut: The wait for a lock, or for an answer, timed out.
	ErrWaitTimedOut error = reason(ReasonWaitTimedOut)

	// ErrTooManyWaiters: The lock has as many waiters as allowed.
	ErrTooManyWaiters error = reason(ReasonTooManyWaiters)

	// ErrTooManyLocks: The cluster or the session has as many locks as
	// allowed.
	ErrTooManyLocks error = reason(ReasonTooManyLocks)

	// ErrTooManyUnacknowledged: The session has as many unacknowledged
	// requests as allowed.
	ErrTooManyUnacknowledged error = reason(ReasonTooManyUnacknowledged)

	// ErrLimitExceeded: Another limit (sessions per identity, requests per
	// connection, ...).
	ErrLimitExceeded error = reason(ReasonLimitExceeded)

	// ErrUnauthenticated: No credentials, or unknown ones.
	ErrUnauthenticated error = reason(ReasonUnauthenticated)

	// ErrPermissionDenied: The caller's identity may not do this.
	ErrPermissionDenied error = reason(ReasonPermissionDenied)

	// ErrMembershipChangeRefused: A membership change the cluster refused
	// (another one in progress, an unknown node).
	ErrMembershipChangeRefused error = reason(ReasonMembershipChangeRefused)

	// ErrLearnerNotCaughtUp: A new learner did not catch up with the log in
	// time.
	ErrLearnerNotCaughtUp error = reason(ReasonLearnerNotCaughtUp)

	// ErrWatchCompacted: A watch asked to resume after an index this node no
	// longer remembers events for (or its history was reset by a snapshot):
	// read the state afresh and watch from now.
	ErrWatchCompacted error = reason(ReasonWatchCompacted)

	// ErrInternal: A fault of the server's own.
	ErrInternal error = reason(ReasonInternal)

	// ErrLimitNotFound: No rate limit of this name, and the take did not say
	// how to create it.
	ErrLimitNotFound error = reason(ReasonLimitNotFound)

	// ErrLimitConflict: A rate limit of this name exists with other
	// parameters, or with a burst smaller than a take asks for.
	ErrLimitConflict error = reason(ReasonLimitConflict)

	// ErrNoSpace: The leader's data dir is below its free-space reserve:
	// calls that grow the state (new sessions, acquires, campaigns, takes)
	// are refused until space returns; releases, closes and keep-alives go
	// on. HTTP 507 says what happened better than 429, which asks to retry
	// soon.
	ErrNoSpace error = reason(ReasonNoSpace)
)
