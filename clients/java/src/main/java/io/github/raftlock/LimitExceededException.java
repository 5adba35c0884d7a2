package io.github.raftlock;

/**
 * Reason {@link Reason#LIMIT_EXCEEDED}: Another limit (sessions per identity, requests
 * per connection, ...).
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (LimitExceededException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class LimitExceededException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    LimitExceededException(ErrorInfo info) {
        super(info);
    }
}
