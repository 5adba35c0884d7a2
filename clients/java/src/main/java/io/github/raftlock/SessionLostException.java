package io.github.raftlock;

/**
 * The session no longer counts as valid here: no keep-alive was acknowledged within its
 * TTL minus the safety margin, it was closed, its credentials stopped working, or the
 * server says it is gone ({@link SessionNotFoundException}). Stop acting on its locks; it
 * never becomes valid again. {@link HoldExpiredException} is a kind of it.
 *
 * <pre>{@code
 * try {
 *     guard.runWhileHeld(() -> copyFiles(guard.token()));
 * } catch (SessionLostException e) {
 *     // the lock can no longer be relied on; the copy was interrupted
 * }
 * }</pre>
 */
public class SessionLostException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    SessionLostException(ErrorInfo info) {
        super(info);
    }
}
