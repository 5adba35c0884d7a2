package io.github.raftlock;

import java.time.Duration;

/**
 * How a lock is taken: exclusive or shared, with a lock-delay, a hold cap or metadata.
 * Immutable; each {@code with} method returns a copy.
 *
 * <pre>{@code
 * DistributedLock lock = session.lock("billing/run",
 *         LockOptions.exclusive().withLockDelay(Duration.ofSeconds(5)).withMetadata("host-7".getBytes()));
 * }</pre>
 */
public final class LockOptions {
    final LockMode mode;
    final int permits;
    final int count;
    final Duration maxHold;
    final Duration lockDelay;
    final byte[] metadata;

    private LockOptions(LockMode mode, int permits, int count, Duration maxHold, Duration lockDelay, byte[] metadata) {
        this.mode = mode;
        this.permits = permits;
        this.count = count;
        this.maxHold = maxHold;
        this.lockDelay = lockDelay;
        this.metadata = metadata;
    }

    /**
     * Exclusive mode, no cap, no delay, no metadata.
     *
     * @return the options
     */
    public static LockOptions exclusive() {
        return new LockOptions(LockMode.EXCLUSIVE, 0, 0, Duration.ZERO, Duration.ZERO, new byte[0]);
    }

    /**
     * Shared (read) mode: any number of shared holders, never beside an exclusive one.
     *
     * @return the options
     */
    public static LockOptions shared() {
        return exclusive().withMode(LockMode.SHARED);
    }

    LockOptions withMode(LockMode m) {
        return new LockOptions(m, permits, count, maxHold, lockDelay, metadata);
    }

    LockOptions withPermits(int p, int c) {
        return new LockOptions(LockMode.SHARED, p, c, maxHold, lockDelay, metadata);
    }

    /**
     * Caps each hold (1 s to 7 days): the leader releases the lock this long after granting
     * it even though the session lives. The hold counts as lost a safety margin before,
     * counted from when the acquire was first sent.
     *
     * @param d the cap ({@link Duration#ZERO}: none)
     * @return a copy with the cap
     */
    public LockOptions withMaxHold(Duration d) {
        return new LockOptions(mode, permits, count, d, lockDelay, metadata);
    }

    /**
     * Sets a lock-delay (exclusive locks, at most 60 s): if the hold ends without a release
     * (the session expires, it is force-released, its cap runs out), nobody is granted the
     * lock for this long, so that a holder that missed its loss has time to stop.
     *
     * @param d the delay
     * @return a copy with the delay
     */
    public LockOptions withLockDelay(Duration d) {
        return new LockOptions(mode, permits, count, maxHold, d, metadata);
    }

    /**
     * Stores bytes with the grant, shown by describe (at most 4 KiB).
     *
     * @param m the metadata
     * @return a copy with the metadata
     */
    public LockOptions withMetadata(byte[] m) {
        return new LockOptions(mode, permits, count, maxHold, lockDelay, m.clone());
    }

    void check() {
        if (maxHold.isNegative() || lockDelay.isNegative()) {
            throw Errors.invalidArgument("max hold and lock-delay must not be negative");
        }
    }
}
