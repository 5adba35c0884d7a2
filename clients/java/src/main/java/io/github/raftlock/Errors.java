package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * Types errors: a server's reason to its exception class (one to one, as the Go client's
 * sentinels), a verdict of the client's own to its class. Hand-written beside the
 * generated {@link Reason}: a new reason is a constant there, a class and a line here.
 */
final class Errors {
    static final String KIND_SESSION_LOST = "session lost";
    static final String KIND_HOLD_EXPIRED = "hold expired";
    static final String KIND_CLIENT_CLOSED = "client closed";
    static final String KIND_LOCKED = "locked";
    static final String KIND_UNAVAILABLE = "unavailable";
    static final String KIND_NO_LEADER = "no leader";
    static final String KIND_NOT_LEADING = "not leading";

    private Errors() {}

    /** The exception for info: by the server's reason, else by the client's verdict. */
    static RaftlockException of(ErrorInfo info) {
        switch (Reason.fromWire(info.reason)) {
            case NOT_LEADER: return new NotLeaderException(info);
            case NO_QUORUM: return new NoQuorumException(info);
            case STOPPING: return new StoppingException(info);
            case INVALID_NAME: return new InvalidNameException(info);
            case TTL_OUT_OF_RANGE: return new TtlOutOfRangeException(info);
            case INVALID_ARGUMENT: return new InvalidArgumentException(info);
            case SESSION_NOT_FOUND: return new SessionNotFoundException(info);
            case WAIT_NOT_FOUND: return new WaitNotFoundException(info);
            case NOT_HOLDER: return new NotHolderException(info);
            case STALE_TOKEN: return new StaleTokenException(info);
            case PERMITS_MISMATCH: return new PermitsMismatchException(info);
            case REQUEST_RELEASED: return new RequestReleasedException(info);
            case REQUEST_FINISHED: return new RequestFinishedException(info);
            case REQUEST_ACKNOWLEDGED: return new RequestAcknowledgedException(info);
            case ALREADY_HELD: return new AlreadyHeldException(info);
            case ALREADY_WAITING: return new AlreadyWaitingException(info);
            case WAIT_CANCELLED: return new WaitCancelledException(info);
            case WAIT_TIMED_OUT: return new WaitTimedOutException(info);
            case TOO_MANY_WAITERS: return new TooManyWaitersException(info);
            case TOO_MANY_LOCKS: return new TooManyLocksException(info);
            case TOO_MANY_UNACKNOWLEDGED: return new TooManyUnacknowledgedException(info);
            case LIMIT_EXCEEDED: return new LimitExceededException(info);
            case UNAUTHENTICATED: return new UnauthenticatedException(info);
            case PERMISSION_DENIED: return new PermissionDeniedException(info);
            case MEMBERSHIP_CHANGE_REFUSED: return new MembershipChangeRefusedException(info);
            case LEARNER_NOT_CAUGHT_UP: return new LearnerNotCaughtUpException(info);
            case WATCH_COMPACTED: return new WatchCompactedException(info);
            case INTERNAL: return new InternalException(info);
            case LIMIT_NOT_FOUND: return new LimitNotFoundException(info);
            case LIMIT_CONFLICT: return new LimitConflictException(info);
            case NO_SPACE: return new NoSpaceException(info);
            case UNKNOWN:
            default:
                break;
        }
        switch (info.kind) {
            case KIND_SESSION_LOST: return new SessionLostException(info);
            case KIND_HOLD_EXPIRED: return new HoldExpiredException(info);
            case KIND_CLIENT_CLOSED: return new ClientClosedException(info);
            case KIND_LOCKED: return new LockedException(info);
            case KIND_UNAVAILABLE: return new UnavailableException(info);
            case KIND_NO_LEADER: return new NoLeaderException(info);
            case KIND_NOT_LEADING: return new NotLeadingException(info);
            default: return new RaftlockException(info);
        }
    }

    /** A verdict of this client's own. */
    static RaftlockException local(String kind, String code, String message) {
        ErrorInfo i = new ErrorInfo("", code, message);
        i.kind = kind;
        return of(i);
    }

    /** A refusal this client makes itself for a server's reason (a bad argument, say). */
    static RaftlockException reason(Reason r, String code, String message) {
        return of(new ErrorInfo(r.wire(), code, message));
    }

    static RaftlockException invalidArgument(String message) {
        return reason(Reason.INVALID_ARGUMENT, "INVALID_ARGUMENT", message);
    }

    static RaftlockException closed() {
        return local(KIND_CLIENT_CLOSED, "CANCELLED", "the client is closed");
    }

    static RaftlockException notHolder(String name) {
        return reason(Reason.NOT_HOLDER, "FAILED_PRECONDITION", "lock \"" + name + "\" is not held by this handle");
    }

    /** The gRPC code an HTTP status stands for, for answers without a JSON body. */
    static String codeOfStatus(int status) {
        switch (status) {
            case 400: return "INVALID_ARGUMENT";
            case 401: return "UNAUTHENTICATED";
            case 403: return "PERMISSION_DENIED";
            case 404: return "NOT_FOUND";
            case 409: return "ALREADY_EXISTS";
            case 429: return "RESOURCE_EXHAUSTED";
            case 499: return "CANCELLED";
            case 501: return "UNIMPLEMENTED";
            case 502:
            case 503: return "UNAVAILABLE";
            case 504: return "DEADLINE_EXCEEDED";
            default: return "UNKNOWN";
        }
    }

    /**
     * Types a refusal by its reason, else by its code alone (a proxy's page, an unknown
     * path), never by its message.
     */
    static RaftlockException fromBody(JsonNode body, int status, String leaderHeader) {
        String code = text(body, "code");
        String reason = text(body, "reason");
        String message = text(body, "message");
        String leader = text(body, "leader");
        if (leader.isEmpty() && leaderHeader != null) {
            leader = leaderHeader;
        }
        if (code.isEmpty()) {
            code = codeOfStatus(status);
        }
        if (message.isEmpty()) {
            message = status != 0 ? code + " (HTTP " + status + ")" : code;
        }
        ErrorInfo i = new ErrorInfo(reason, code, message);
        i.leader = leader;
        i.httpStatus = status;
        if (reason.isEmpty()) {
            switch (code) {
                case "UNAVAILABLE":
                case "UNKNOWN":
                case "CANCELLED":
                case "ABORTED":
                case "DEADLINE_EXCEEDED":
                    i.kind = KIND_UNAVAILABLE;
                    break;
                case "UNAUTHENTICATED":
                    i.reason = Reason.UNAUTHENTICATED.wire();
                    break;
                case "PERMISSION_DENIED":
                    i.reason = Reason.PERMISSION_DENIED.wire();
                    break;
                default:
                    break;
            }
        }
        return of(i);
    }

    private static String text(JsonNode n, String field) {
        if (n == null) {
            return "";
        }
        JsonNode v = n.get(field);
        return v == null || v.isNull() ? "" : v.asText();
    }

    /** An attempt that failed below HTTP: no answer was read. */
    static RaftlockException attempt(String addr, Throwable cause, boolean notSent) {
        ErrorInfo i = new ErrorInfo("", "UNAVAILABLE", "node " + addr + ": " + cause);
        i.kind = KIND_UNAVAILABLE;
        i.notSent = notSent;
        i.cause = cause;
        return of(i);
    }
}
