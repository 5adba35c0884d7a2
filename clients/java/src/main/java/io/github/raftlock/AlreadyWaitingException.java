package io.github.raftlock;

/**
 * Reason {@link Reason#ALREADY_WAITING}: The session already waits for the lock through
 * another acquisition.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (AlreadyWaitingException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class AlreadyWaitingException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    AlreadyWaitingException(ErrorInfo info) {
        super(info);
    }
}
