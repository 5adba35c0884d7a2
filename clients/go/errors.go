package raftlock

import (
	"context"
	"fmt"
)

// The server's reasons (Reason* constants) and a sentinel per reason
// (Err*) are generated from proto/proto/raftlock/v1/reasons.proto into
// reasons_gen.go.

// Verdicts this client makes itself; they travel in Error.kind, never in
// Reason, which only ever holds what a server said.
const (
	kindSessionLost  = "session lost"
	kindHoldExpired  = "hold expired"
	kindClientClosed = "client closed"
	kindLocked       = "locked"
	kindUnavailable  = "unavailable"
	kindNoLeader     = "no leader"
	kindNotLeading   = "not leading"
)

// Error is every error this package returns about the cluster: a refusal
// from a node (Reason set), or a verdict of the client's own (a lost
// session, an unreachable cluster; Reason empty). Branch on it with
// errors.Is and the Err* sentinels; Message is for people.
type Error struct {
	// Reason is the server's machine-readable reason (ReasonStaleToken,
	// ...), or "" when no server said it. Arguments the client refuses
	// itself carry ReasonInvalidArgument, and a 401 or 403 without a body
	// the reason of its status.
	Reason string
	// Code is the gRPC code name of the answer (FAILED_PRECONDITION,
	// UNAVAILABLE, ...), or the one the server would have used.
	Code string
	// Message says what was wrong, for people.
	Message string
	// Leader is the leader's client address a follower named, if any.
	Leader string
	// HTTPStatus is the status of the answer, 0 when none was read.
	HTTPStatus int
	// Err is the underlying error (a socket error, the last refusal before
	// giving up), if any.
	Err error

	kind string
}

// Error implements error.
func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Code
	}
	if e.Reason != "" {
		return fmt.Sprintf("raftlock: %s (%s)", msg, e.Reason)
	}
	return "raftlock: " + msg
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Is matches the Err* sentinels by reason (or, for the client's own
// verdicts, by kind); a WAIT_TIMED_OUT also matches
// context.DeadlineExceeded, since a wait bounded by a context deadline is
// usually ended by the server just before the context.
func (e *Error) Is(target error) bool {
	if s, ok := target.(*sentinel); ok {
		return s.match(e)
	}
	return target == context.DeadlineExceeded && e.Reason == ReasonWaitTimedOut
}

// Retryable tells whether trying the same thing again later may succeed
// (the client already retried until the call's deadline).
func (e *Error) Retryable() bool { return unavailable(e) }

// sentinel is what the Err* variables are: matched by (*Error).Is.
type sentinel struct {
	name  string
	match func(*Error) bool
}

// Error implements error.
func (s *sentinel) Error() string { return "raftlock: " + s.name }

func reason(r string) *sentinel {
	return &sentinel{name: r, match: func(e *Error) bool { return e.Reason == r }}
}

func anyReason(name string, rs ...string) *sentinel {
	return &sentinel{name: name, match: func(e *Error) bool {
		for _, r := range rs {
			if e.Reason == r {
				return true
			}
		}
		return false
	}}
}

func kind(k string) *sentinel {
	return &sentinel{name: k, match: func(e *Error) bool { return e.kind == k }}
}

// unavailable: nothing was decided; no node could serve the call.
func unavailable(e *Error) bool {
	switch e.Reason {
	case ReasonNotLeader, ReasonNoQuorum, ReasonStopping:
		return true
	case "":
		return e.kind == kindUnavailable
	}
	return false
}

// ErrLockTimeout: a wait for a lock, a leadership or tokens ran out
// (WAIT_TIMED_OUT); the same sentinel as ErrWaitTimedOut. Such an error
// also matches context.DeadlineExceeded.
var ErrLockTimeout = ErrWaitTimedOut

// Sentinels for the client's own verdicts and for groups of reasons.
var (
	// ErrSessionLost: the session no longer counts as valid here (no
	// keep-alive acknowledged within TTL minus the safety margin, the
	// credentials stopped working, it was closed) or the server says it is
	// gone (SESSION_NOT_FOUND). Stop acting on its locks; it never becomes
	// valid again. ErrHoldExpired errors match it too.
	ErrSessionLost error = &sentinel{name: kindSessionLost, match: func(e *Error) bool {
		return e.kind == kindSessionLost || e.kind == kindHoldExpired || e.Reason == ReasonSessionNotFound
	}}
	// ErrHoldExpired: a lock's hold cap ran out (by the local clock, a
	// safety margin before the leader releases it).
	ErrHoldExpired error = kind(kindHoldExpired)
	// ErrUnavailable: no node could serve the call before the context
	// ended (no leader, no quorum, unreachable, stopping); nothing was
	// decided.
	ErrUnavailable error = &sentinel{name: kindUnavailable, match: unavailable}
	// ErrClientClosed: the Client was closed.
	ErrClientClosed error = kind(kindClientClosed)
	// ErrLocked: TryLock found the lock busy (etcd's concurrency.ErrLocked).
	ErrLocked error = kind(kindLocked)
	// ErrNoLeader: the election has no leader now.
	ErrNoLeader error = kind(kindNoLeader)
	// ErrNotLeading: Proclaim or Resign on an Election that does not lead.
	ErrNotLeading error = kind(kindNotLeading)
	// ErrRequestSettled matches the three REQUEST_* reasons: a retried
	// request that was settled since and is never executed twice.
	ErrRequestSettled error = anyReason("request settled", ReasonRequestReleased, ReasonRequestFinished, ReasonRequestAcknowledged)
)

// errorBody is the JSON of a refusal.
type errorBody struct {
	Code    string `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
	Leader  string `json:"leader"`
}

// knownReasons is every reason this package has a sentinel for.
var knownReasons = map[string]bool{
	ReasonNotLeader: true, ReasonNoQuorum: true, ReasonStopping: true, ReasonInvalidName: true,
	ReasonTTLOutOfRange: true, ReasonInvalidArgument: true, ReasonSessionNotFound: true,
	ReasonWaitNotFound: true, ReasonNotHolder: true, ReasonStaleToken: true,
	ReasonPermitsMismatch: true, ReasonRequestReleased: true, ReasonRequestFinished: true,
	ReasonRequestAcknowledged: true, ReasonAlreadyHeld: true, ReasonAlreadyWaiting: true,
	ReasonWaitCancelled: true, ReasonWaitTimedOut: true, ReasonTooManyWaiters: true,
	ReasonTooManyLocks: true, ReasonTooManyUnacknowledged: true, ReasonLimitExceeded: true,
	ReasonNoSpace: true, ReasonUnauthenticated: true, ReasonPermissionDenied: true,
	ReasonMembershipChangeRefused: true, ReasonLearnerNotCaughtUp: true,
	ReasonWatchCompacted: true, ReasonInternal: true, ReasonLimitNotFound: true,
	ReasonLimitConflict: true,
}

// codeOfStatus is the gRPC code an HTTP status stands for, for answers
// without a JSON body (a proxy's 502, say).
func codeOfStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 409:
		return "ALREADY_EXISTS"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 499:
		return "CANCELLED"
	case 501:
		return "UNIMPLEMENTED"
	case 502, 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	return "UNKNOWN"
}

// errorFromBody types a refusal by its reason, else by its code alone
// (never by its message).
func errorFromBody(b errorBody, status int) *Error {
	code := b.Code
	if code == "" {
		code = codeOfStatus(status)
	}
	msg := b.Message
	if msg == "" {
		msg = code
		if status != 0 {
			msg = fmt.Sprintf("%s (HTTP %d)", code, status)
		}
	}
	e := &Error{Code: code, Message: msg, Leader: b.Leader, HTTPStatus: status}
	if b.Reason != "" {
		e.Reason = b.Reason
		return e
	}
	// No reason: a proxy, an unknown path. Only codes that carry no verdict
	// count as unavailability.
	switch code {
	case "UNAVAILABLE", "UNKNOWN", "CANCELLED", "ABORTED", "DEADLINE_EXCEEDED":
		e.kind = kindUnavailable
	case "UNAUTHENTICATED":
		e.Reason = ReasonUnauthenticated
	case "PERMISSION_DENIED":
		e.Reason = ReasonPermissionDenied
	}
	return e
}

// localError is a verdict of this client's own.
func localError(k, code, format string, args ...interface{}) *Error {
	return &Error{kind: k, Code: code, Message: fmt.Sprintf(format, args...)}
}

func invalidArgument(format string, args ...interface{}) *Error {
	return &Error{Reason: ReasonInvalidArgument, Code: "INVALID_ARGUMENT", Message: fmt.Sprintf(format, args...)}
}
