package io.github.raftlock;

/**
 * Reason {@link Reason#PERMISSION_DENIED}: The caller's identity may not do this.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (PermissionDeniedException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class PermissionDeniedException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    PermissionDeniedException(ErrorInfo info) {
        super(info);
    }
}
