package io.github.raftlock;

import java.util.concurrent.locks.ReadWriteLock;

/**
 * A read-write lock of the cluster, as {@link ReadWriteLock}: the read lock is a shared
 * hold (any number of readers together), the write lock an exclusive one; both queue in the
 * same FIFO queue, so a waiting writer is not starved by readers arriving after it. A writer
 * can become a reader without letting go with {@link LockGuard#downgrade()}.
 *
 * <p>The two locks belong to one session, which holds a lock at most once: hold one or the
 * other, not both. For readers and writers in one process, use a session each.
 *
 * <pre>{@code
 * DistributedReadWriteLock rw = session.readWriteLock("config/routes");
 * rw.readLock().lock();
 * try {
 *     return readRoutes();
 * } finally {
 *     rw.readLock().unlock();
 * }
 * }</pre>
 */
public final class DistributedReadWriteLock implements ReadWriteLock {
    private final DistributedLock read;
    private final DistributedLock write;

    DistributedReadWriteLock(Session s, String name) {
        this.read = new DistributedLock(s, name, LockOptions.shared());
        this.write = new DistributedLock(s, name, LockOptions.exclusive());
    }

    /**
     * The shared side.
     *
     * @return the read lock
     */
    @Override
    public DistributedLock readLock() {
        return read;
    }

    /**
     * The exclusive side.
     *
     * @return the write lock
     */
    @Override
    public DistributedLock writeLock() {
        return write;
    }
}
