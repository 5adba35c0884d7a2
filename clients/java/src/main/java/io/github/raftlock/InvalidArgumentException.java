package io.github.raftlock;

/**
 * Reason {@link Reason#INVALID_ARGUMENT}: Another field is missing, malformed or out of
 * range.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (InvalidArgumentException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class InvalidArgumentException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    InvalidArgumentException(ErrorInfo info) {
        super(info);
    }
}
