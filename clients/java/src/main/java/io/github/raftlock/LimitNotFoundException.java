package io.github.raftlock;

/**
 * Reason {@link Reason#LIMIT_NOT_FOUND}: No rate limit of this name, and the take did
 * not say how to create it.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (LimitNotFoundException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class LimitNotFoundException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    LimitNotFoundException(ErrorInfo info) {
        super(info);
    }
}
