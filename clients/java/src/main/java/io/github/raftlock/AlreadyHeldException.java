package io.github.raftlock;

/**
 * Reason {@link Reason#ALREADY_HELD}: The session already holds the lock through another
 * acquisition.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (AlreadyHeldException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class AlreadyHeldException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    AlreadyHeldException(ErrorInfo info) {
        super(info);
    }
}
