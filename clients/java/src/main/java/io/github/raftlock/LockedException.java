package io.github.raftlock;

/**
 * A try-acquisition found the lock busy (etcd's {@code concurrency.ErrLocked}).
 * {@link DistributedLock#tryLock()} answers false instead.
 *
 * <pre>{@code
 * try (LockGuard g = lock.tryAcquire()) {
 *     work(g.token());
 * } catch (LockedException e) {
 *     // someone else holds it now
 * }
 * }</pre>
 */
public class LockedException extends RaftlockException {
    private static final long serialVersionUID = 1L;

    LockedException(ErrorInfo info) {
        super(info);
    }
}
