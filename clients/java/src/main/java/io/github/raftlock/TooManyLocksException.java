package io.github.raftlock;

/**
 * Reason {@link Reason#TOO_MANY_LOCKS}: The cluster or the session has as many locks as
 * allowed.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (TooManyLocksException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class TooManyLocksException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    TooManyLocksException(ErrorInfo info) {
        super(info);
    }
}
