package io.github.raftlock;

/**
 * Reason {@link Reason#WAIT_TIMED_OUT}: The wait for a lock, or for an answer, timed
 * out.
 *
 * <pre>{@code
 * try (LockGuard g = lock.acquire(Duration.ofSeconds(2))) {
 *     work(g.token());
 * } catch (WaitTimedOutException e) {
 *     // busy for longer than we cared to wait
 * }
 * }</pre>
 */
public class WaitTimedOutException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    WaitTimedOutException(ErrorInfo info) {
        super(info);
    }
}
