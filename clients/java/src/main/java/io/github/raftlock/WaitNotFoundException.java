package io.github.raftlock;

/**
 * Reason {@link Reason#WAIT_NOT_FOUND}: No such wait to cancel.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (WaitNotFoundException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class WaitNotFoundException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    WaitNotFoundException(ErrorInfo info) {
        super(info);
    }
}
