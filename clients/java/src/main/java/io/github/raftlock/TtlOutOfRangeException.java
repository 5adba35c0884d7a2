package io.github.raftlock;

/**
 * Reason {@link Reason#TTL_OUT_OF_RANGE}: A session TTL outside the allowed range.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (TtlOutOfRangeException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class TtlOutOfRangeException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    TtlOutOfRangeException(ErrorInfo info) {
        super(info);
    }
}
