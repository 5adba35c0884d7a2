package io.github.raftlock;

/**
 * The states a {@link Session} reports to its {@link SessionStateListener}s, as Curator's
 * {@code ConnectionState}.
 *
 * <pre>{@code
 * session.addStateListener((s, state) -> {
 *     if (state == SessionState.SUSPENDED) pauseWrites();
 *     if (state == SessionState.RECONNECTED) resumeWrites();
 * });
 * }</pre>
 */
public enum SessionState {
    /** The session was created: the first acknowledged contact. */
    CONNECTED,
    /**
     * A keep-alive went unacknowledged: the session may still be alive on the cluster, but
     * this client cannot tell. Locks still count as held until the session's local deadline
     * ({@link Session#validUntilNanos()}).
     */
    SUSPENDED,
    /** A keep-alive was acknowledged again after {@link #SUSPENDED}, within the deadline. */
    RECONNECTED,
    /**
     * The session is lost for good: its local deadline passed, the server says it is gone,
     * or its credentials stopped working. Not reported for {@link Session#close()}.
     */
    LOST
}
