package io.github.raftlock;

/**
 * Learns of a session's state changes, as Curator's {@code ConnectionStateListener}.
 * Called on a worker thread of the client, one change at a time per session, in order.
 *
 * <pre>{@code
 * session.addStateListener((s, state) -> log.info("session {} is {}", s.id(), state));
 * }</pre>
 */
@FunctionalInterface
public interface SessionStateListener {
    /**
     * Called when the session enters a state.
     *
     * @param session the session
     * @param state its new state
     */
    void stateChanged(Session session, SessionState state);
}
