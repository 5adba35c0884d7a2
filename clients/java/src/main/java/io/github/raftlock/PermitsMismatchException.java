package io.github.raftlock;

/**
 * Reason {@link Reason#PERMITS_MISMATCH}: A stated permit count differs from the lock's.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (PermitsMismatchException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class PermitsMismatchException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    PermitsMismatchException(ErrorInfo info) {
        super(info);
    }
}
