// Generated from proto/proto/raftlock/v1/reasons.proto by tests/src/contract.rs
// (REWRITE_CONTRACT=1 cargo test -p raftlock-tests --test api contract); do not edit.

package io.github.raftlock;

/**
 * Every reason the server gives for a refusal, as every error of this client
 * carries it ({@link RaftlockException#reason()}): match on these, never on
 * messages. A reason this client does not know (a newer server's) is
 * {@link #UNKNOWN}.
 *
 * <pre>{@code
 * try {
 *     lock.unlock();
 * } catch (RaftlockException e) {
 *     if (e.reason() == Reason.NOT_HOLDER) {
 *         // the lease had already ended
 *     }
 * }
 * }</pre>
 */
public enum Reason {
    /**
     * This node does not lead; the leader's address, when known, is in the
     * {@code raftlock-leader} metadata key. (gRPC code UNAVAILABLE.)
     */
    NOT_LEADER("NOT_LEADER", "UNAVAILABLE"),

    /**
     * No quorum answered in time. (gRPC code UNAVAILABLE.)
     */
    NO_QUORUM("NO_QUORUM", "UNAVAILABLE"),

    /**
     * The node is stopping. (gRPC code UNAVAILABLE.)
     */
    STOPPING("STOPPING", "UNAVAILABLE"),

    /**
     * A lock or election name is empty, too long or not acceptable. (gRPC code
     * INVALID_ARGUMENT.)
     */
    INVALID_NAME("INVALID_NAME", "INVALID_ARGUMENT"),

    /**
     * A session TTL outside the allowed range. (gRPC code INVALID_ARGUMENT.)
     */
    TTL_OUT_OF_RANGE("TTL_OUT_OF_RANGE", "INVALID_ARGUMENT"),

    /**
     * Another field is missing, malformed or out of range. (gRPC code
     * INVALID_ARGUMENT.)
     */
    INVALID_ARGUMENT("INVALID_ARGUMENT", "INVALID_ARGUMENT"),

    /**
     * The session does not exist (never created, closed, or expired). (gRPC
     * code NOT_FOUND.)
     */
    SESSION_NOT_FOUND("SESSION_NOT_FOUND", "NOT_FOUND"),

    /**
     * No such wait to cancel. (gRPC code NOT_FOUND.)
     */
    WAIT_NOT_FOUND("WAIT_NOT_FOUND", "NOT_FOUND"),

    /**
     * The session does not hold the lock. (gRPC code FAILED_PRECONDITION.)
     */
    NOT_HOLDER("NOT_HOLDER", "FAILED_PRECONDITION"),

    /**
     * The session holds the lock under another token. (gRPC code
     * FAILED_PRECONDITION.)
     */
    STALE_TOKEN("STALE_TOKEN", "FAILED_PRECONDITION"),

    /**
     * A stated permit count differs from the lock's. (gRPC code
     * FAILED_PRECONDITION.)
     */
    PERMITS_MISMATCH("PERMITS_MISMATCH", "FAILED_PRECONDITION"),

    /**
     * A retry of an acquisition that was granted and has been released since.
     * (gRPC code FAILED_PRECONDITION.)
     */
    REQUEST_RELEASED("REQUEST_RELEASED", "FAILED_PRECONDITION"),

    /**
     * A retry of an acquisition that ended otherwise. (gRPC code
     * FAILED_PRECONDITION.)
     */
    REQUEST_FINISHED("REQUEST_FINISHED", "FAILED_PRECONDITION"),

    /**
     * A request number the client said it had its answer for. (gRPC code
     * FAILED_PRECONDITION.)
     */
    REQUEST_ACKNOWLEDGED("REQUEST_ACKNOWLEDGED", "FAILED_PRECONDITION"),

    /**
     * The session already holds the lock through another acquisition. (gRPC
     * code ALREADY_EXISTS.)
     */
    ALREADY_HELD("ALREADY_HELD", "ALREADY_EXISTS"),

    /**
     * The session already waits for the lock through another acquisition.
     * (gRPC code ALREADY_EXISTS.)
     */
    ALREADY_WAITING("ALREADY_WAITING", "ALREADY_EXISTS"),

    /**
     * The wait for a lock was cancelled when its time ran out. (gRPC code
     * DEADLINE_EXCEEDED.)
     */
    WAIT_CANCELLED("WAIT_CANCELLED", "DEADLINE_EXCEEDED"),

    /**
     * The wait for a lock, or for an answer, timed out. (gRPC code
     * DEADLINE_EXCEEDED.)
     */
    WAIT_TIMED_OUT("WAIT_TIMED_OUT", "DEADLINE_EXCEEDED"),

    /**
     * The lock has as many waiters as allowed. (gRPC code RESOURCE_EXHAUSTED.)
     */
    TOO_MANY_WAITERS("TOO_MANY_WAITERS", "RESOURCE_EXHAUSTED"),

    /**
     * The cluster or the session has as many locks as allowed. (gRPC code
     * RESOURCE_EXHAUSTED.)
     */
    TOO_MANY_LOCKS("TOO_MANY_LOCKS", "RESOURCE_EXHAUSTED"),

    /**
     * The session has as many unacknowledged requests as allowed. (gRPC code
     * RESOURCE_EXHAUSTED.)
     */
    TOO_MANY_UNACKNOWLEDGED("TOO_MANY_UNACKNOWLEDGED", "RESOURCE_EXHAUSTED"),

    /**
     * Another limit (sessions per identity, requests per connection, ...).
     * (gRPC code RESOURCE_EXHAUSTED.)
     */
    LIMIT_EXCEEDED("LIMIT_EXCEEDED", "RESOURCE_EXHAUSTED"),

    /**
     * No credentials, or unknown ones. (gRPC code UNAUTHENTICATED.)
     */
    UNAUTHENTICATED("UNAUTHENTICATED", "UNAUTHENTICATED"),

    /**
     * The caller's identity may not do this. (gRPC code PERMISSION_DENIED.)
     */
    PERMISSION_DENIED("PERMISSION_DENIED", "PERMISSION_DENIED"),

    /**
     * A membership change the cluster refused (another one in progress, an
     * unknown node). (gRPC code FAILED_PRECONDITION.)
     */
    MEMBERSHIP_CHANGE_REFUSED("MEMBERSHIP_CHANGE_REFUSED", "FAILED_PRECONDITION"),

    /**
     * A new learner did not catch up with the log in time. (gRPC code
     * DEADLINE_EXCEEDED.)
     */
    LEARNER_NOT_CAUGHT_UP("LEARNER_NOT_CAUGHT_UP", "DEADLINE_EXCEEDED"),

    /**
     * A watch asked to resume after an index this node no longer remembers
     * events for (or its history was reset by a snapshot): read the state
     * afresh and watch from now. (gRPC code OUT_OF_RANGE.)
     */
    WATCH_COMPACTED("WATCH_COMPACTED", "OUT_OF_RANGE"),

    /**
     * A fault of the server's own. (gRPC code INTERNAL.)
     */
    INTERNAL("INTERNAL", "INTERNAL"),

    /**
     * No rate limit of this name, and the take did not say how to create it.
     * (gRPC code NOT_FOUND.)
     */
    LIMIT_NOT_FOUND("LIMIT_NOT_FOUND", "NOT_FOUND"),

    /**
     * A rate limit of this name exists with other parameters, or with a burst
     * smaller than a take asks for. (gRPC code FAILED_PRECONDITION.)
     */
    LIMIT_CONFLICT("LIMIT_CONFLICT", "FAILED_PRECONDITION"),

    /**
     * The leader's data dir is below its free-space reserve: calls that grow
     * the state (new sessions, acquires, campaigns, takes) are refused until
     * space returns; releases, closes and keep-alives go on. HTTP 507 says
     * what happened better than 429, which asks to retry soon. (gRPC code
     * RESOURCE_EXHAUSTED.)
     */
    NO_SPACE("NO_SPACE", "RESOURCE_EXHAUSTED"),

    /** A reason this client does not know: a newer server's. */
    UNKNOWN("", "UNKNOWN");

    private final String wire;
    private final String grpcCode;

    Reason(String wire, String grpcCode) {
        this.wire = wire;
        this.grpcCode = grpcCode;
    }

    /**
     * The reason as the server spells it ({@code "STALE_TOKEN"}); empty for
     * {@link #UNKNOWN}.
     *
     * @return the wire form
     */
    public String wire() {
        return wire;
    }

    /**
     * The gRPC status code this reason travels with, by name
     * ({@code "FAILED_PRECONDITION"}).
     *
     * @return the code's name
     */
    public String grpcCode() {
        return grpcCode;
    }

    /**
     * The reason for a wire string: {@code Reason.fromWire("NOT_HOLDER")} is
     * {@link #NOT_HOLDER}; anything this client does not know is
     * {@link #UNKNOWN}.
     *
     * @param wire the reason as the server sent it, or null
     * @return the reason
     */
    public static Reason fromWire(String wire) {
        if (wire == null || wire.isEmpty()) {
            return UNKNOWN;
        }
        for (Reason r : values()) {
            if (r.wire.equals(wire)) {
                return r;
            }
        }
        return UNKNOWN;
    }
}
