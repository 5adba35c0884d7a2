package io.github.raftlock;

import java.time.Duration;

/**
 * A counting semaphore of the cluster: a lock with a number of places, taken a few at a
 * time. An acquisition of k permits is granted, in FIFO order, only when k are free; every
 * hold carries a fencing token and is released by closing its {@link LockGuard}. Every user
 * of one semaphore must state the same number of permits ({@link PermitsMismatchException}
 * otherwise).
 *
 * <p>A session holds a semaphore at most once, whatever the count; this handle queues the
 * threads of one JVM for that hold. Processes (or sessions) each take their own.
 *
 * <pre>{@code
 * DistributedSemaphore pool = session.semaphore("gpu/pool", 8);
 * try (LockGuard g = pool.acquire(2, Duration.ofMinutes(1))) {
 *     train(g.token());
 * }
 * }</pre>
 */
public final class DistributedSemaphore {
    private final String name;
    private final int permits;
    private final DistributedLock lock;

    DistributedSemaphore(Session s, String name, int permits) {
        if (permits < 1) {
            throw Errors.invalidArgument("a semaphore needs at least one permit, got " + permits);
        }
        this.name = name;
        this.permits = permits;
        this.lock = new DistributedLock(s, name, LockOptions.shared().withPermits(permits, 0));
    }

    /**
     * The semaphore's name.
     *
     * @return the name
     */
    public String name() {
        return name;
    }

    /**
     * Its number of places.
     *
     * @return the permits
     */
    public int permits() {
        return permits;
    }

    private LockOptions take(int count) {
        if (count < 1 || count > permits) {
            throw Errors.invalidArgument("take 1 to " + permits + " permits, not " + count);
        }
        return LockOptions.shared().withPermits(permits, count);
    }

    /**
     * Takes count permits, waiting in the queue until they are free; an interrupt gives the
     * wait up on the server at once.
     *
     * @param count permits to take at once
     * @return the hold
     * @throws InterruptedException when interrupted before the grant
     */
    public LockGuard acquire(int count) throws InterruptedException {
        return lock.acquireWith(take(count), null, true);
    }

    /**
     * Takes count permits, waiting up to wait.
     *
     * @param count permits to take at once
     * @param wait how long to wait
     * @return the hold
     * @throws WaitTimedOutException when wait ran out
     * @throws InterruptedException when interrupted before the grant
     */
    public LockGuard acquire(int count, Duration wait) throws InterruptedException {
        return lock.acquireWith(take(count), wait, true);
    }

    /**
     * Takes count permits only if they are free now and nobody queues before.
     *
     * @param count permits to take at once
     * @return the hold
     * @throws LockedException when they are not
     * @throws InterruptedException when interrupted while the request was out
     */
    public LockGuard tryAcquire(int count) throws InterruptedException {
        return lock.tryAcquireWith(take(count));
    }
}
