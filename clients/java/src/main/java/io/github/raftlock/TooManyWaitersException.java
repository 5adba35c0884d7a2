package io.github.raftlock;

/**
 * Reason {@link Reason#TOO_MANY_WAITERS}: The lock has as many waiters as allowed.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (TooManyWaitersException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class TooManyWaitersException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    TooManyWaitersException(ErrorInfo info) {
        super(info);
    }
}
