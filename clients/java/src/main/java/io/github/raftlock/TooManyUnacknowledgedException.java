package io.github.raftlock;

/**
 * Reason {@link Reason#TOO_MANY_UNACKNOWLEDGED}: The session has as many unacknowledged
 * requests as allowed.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (TooManyUnacknowledgedException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class TooManyUnacknowledgedException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    TooManyUnacknowledgedException(ErrorInfo info) {
        super(info);
    }
}
