package io.github.raftlock;

/**
 * Reason {@link Reason#INTERNAL}: A fault of the server's own.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (InternalException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class InternalException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    InternalException(ErrorInfo info) {
        super(info);
    }
}
