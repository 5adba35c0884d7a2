package io.github.raftlock;

/**
 * Every error this client raises about the cluster: a refusal from a node (with the
 * server's machine-readable {@link #reason()}), or a verdict of the client's own (a lost
 * session, an unreachable cluster, a busy lock). Unchecked, as Curator's and Redisson's
 * are not: a lock call fails for reasons a caller rarely handles one by one. Catch the
 * subclass for the case you handle ({@link SessionLostException},
 * {@link WaitTimedOutException}, {@link UnavailableException}, ...); never parse
 * {@link #getMessage()}, which is for people.
 *
 * <pre>{@code
 * try (LockGuard g = session.lock("jobs/report").acquire(Duration.ofSeconds(5))) {
 *     run(g.token());
 * } catch (WaitTimedOutException e) {
 *     log.info("someone else is running it");
 * } catch (RaftlockException e) {
 *     log.warn("{} ({})", e.getMessage(), e.reason());
 * }
 * }</pre>
 */
public class RaftlockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** The reason as the server sent it, "" when none did. */
    private final String wireReason;
    /** The gRPC code name of the answer. */
    private final String code;
    /** The leader's address a follower named, "" when none. */
    private final String leader;
    /** The HTTP status of the answer, 0 when none was read. */
    private final int httpStatus;
    // The request surely never left this host: a call that is not idempotent may be
    // retried elsewhere.
    private final transient boolean notSent;

    RaftlockException(ErrorInfo info) {
        super(info.message, info.cause);
        this.wireReason = info.reason == null ? "" : info.reason;
        this.code = info.code == null ? "UNKNOWN" : info.code;
        this.leader = info.leader == null ? "" : info.leader;
        this.httpStatus = info.httpStatus;
        this.notSent = info.notSent;
    }

    /**
     * The server's reason for the refusal.
     *
     * @return the reason, or {@link Reason#UNKNOWN} when no server gave one this client
     *     knows (a verdict of the client's own, or a reason newer than this client)
     */
    public Reason reason() {
        return Reason.fromWire(wireReason);
    }

    /**
     * The reason exactly as the server sent it, for reasons newer than {@link Reason}.
     *
     * @return the wire reason, {@code ""} when no server said one
     */
    public String wireReason() {
        return wireReason;
    }

    /**
     * The gRPC code name of the answer (FAILED_PRECONDITION, UNAVAILABLE, ...), or the one
     * the server would have used for a verdict of the client's own.
     *
     * @return the code name
     */
    public String code() {
        return code;
    }

    /**
     * The leader's client address a follower named in its refusal.
     *
     * @return {@code host:port}, or {@code ""} when none was named
     */
    public String leader() {
        return leader;
    }

    /**
     * The HTTP status of the answer.
     *
     * @return the status, or 0 when no answer was read
     */
    public int httpStatus() {
        return httpStatus;
    }

    /**
     * Whether trying the same thing again later may succeed: nothing was decided, no node
     * could serve the call (the client already retried until the call's time ran out).
     *
     * @return true for an {@link UnavailableException}
     */
    public boolean retryable() {
        return this instanceof UnavailableException;
    }

    boolean notSent() {
        return notSent;
    }

    @Override
    public String toString() {
        String r = wireReason.isEmpty() ? "" : " (" + wireReason + ")";
        return getClass().getSimpleName() + ": " + getMessage() + r;
    }
}
