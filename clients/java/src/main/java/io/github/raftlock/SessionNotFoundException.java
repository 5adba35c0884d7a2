package io.github.raftlock;

/**
 * Reason {@link Reason#SESSION_NOT_FOUND}: The session does not exist (never created,
 * closed, or expired).
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (SessionNotFoundException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class SessionNotFoundException extends SessionLostException {
    private static final long serialVersionUID = 1L;

    SessionNotFoundException(ErrorInfo info) {
        super(info);
    }
}
