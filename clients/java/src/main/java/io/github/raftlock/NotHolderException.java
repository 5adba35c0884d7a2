package io.github.raftlock;

/**
 * Reason {@link Reason#NOT_HOLDER}: The session does not hold the lock.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (NotHolderException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class NotHolderException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    NotHolderException(ErrorInfo info) {
        super(info);
    }
}
