package io.github.raftlock;

/**
 * Reason {@link Reason#WAIT_CANCELLED}: The wait for a lock was cancelled when its time
 * ran out.
 *
 * <pre>{@code
 * try {
 *     lock.lock();
 * } catch (WaitCancelledException e) {
 *     log.warn("{}", e.getMessage());
 * }
 * }</pre>
 */
public class WaitCancelledException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    WaitCancelledException(ErrorInfo info) {
        super(info);
    }
}
