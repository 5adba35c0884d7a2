// Code generated from proto/proto/raftlock/v1/reasons.proto by tests/src/contract.rs (REWRITE_CONTRACT=1 cargo test -p raftlock-tests --test api contract). DO NOT EDIT.

package raftlock

// reasonSentinels pairs every generated sentinel with the wire reason it
// must match.
var reasonSentinels = []struct {
	err    error
	reason string
}{
	{ErrNotLeader, "NOT_LEADER"},
	{ErrNoQuorum, "NO_QUORUM"},
	{ErrStopping, "STOPPING"},
	{ErrInvalidName, "INVALID_NAME"},
	{ErrTTLOutOfRange, "TTL_OUT_OF_RANGE"},
	{ErrInvalidArgument, "INVALID_ARGUMENT"},
	{ErrSessionNotFound, "SESSION_NOT_FOUND"},
	{ErrWaitNotFound, "WAIT_NOT_FOUND"},
	{ErrNotHolder, "NOT_HOLDER"},
	{ErrStaleToken, "STALE_TOKEN"},
	{ErrPermitsMismatch, "PERMITS_MISMATCH"},
	{ErrRequestReleased, "REQUEST_RELEASED"},
	{ErrRequestFinished, "REQUEST_FINISHED"},
	{ErrRequestAcknowledged, "REQUEST_ACKNOWLEDGED"},
	{ErrAlreadyHeld, "ALREADY_HELD"},
	{ErrAlreadyWaiting, "ALREADY_WAITING"},
	{ErrWaitCancelled, "WAIT_CANCELLED"},
	{ErrWaitTimedOut, "WAIT_TIMED_OUT"},
	{ErrTooManyWaiters, "TOO_MANY_WAITERS"},
	{ErrTooManyLocks, "TOO_MANY_LOCKS"},
	{ErrTooManyUnacknowledged, "TOO_MANY_UNACKNOWLEDGED"},
	{ErrLimitExceeded, "LIMIT_EXCEEDED"},
	{ErrUnauthenticated, "UNAUTHENTICATED"},
	{ErrPermissionDenied, "PERMISSION_DENIED"},
	{ErrMembershipChangeRefused, "MEMBERSHIP_CHANGE_REFUSED"},
	{ErrLearnerNotCaughtUp, "LEARNER_NOT_CAUGHT_UP"},
	{ErrWatchCompacted, "WATCH_COMPACTED"},
	{ErrInternal, "INTERNAL"},
	{ErrLimitNotFound, "LIMIT_NOT_FOUND"},
	{ErrLimitConflict, "LIMIT_CONFLICT"},
	{ErrNoSpace, "NO_SPACE"},
}
