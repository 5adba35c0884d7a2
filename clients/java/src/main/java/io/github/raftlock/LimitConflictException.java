package io.github.raftlock;

/**
 * Reason {@link Reason#LIMIT_CONFLICT}: A rate limit of this name exists with other
 * parameters, or with a burst smaller than a take asks for.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (LimitConflictException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class LimitConflictException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    LimitConflictException(ErrorInfo info) {
        super(info);
    }
}
