package io.github.raftlock;

import java.util.concurrent.locks.ReentrantLock;

/**
 * A block of rate-limit tokens reserved with {@link RateLimit#reserve}, spent locally (no
 * call per token) until it runs out or its validity, less the safety margin, ends.
 * {@link #finish()} gives back what was not spent.
 *
 * <pre>{@code
 * TokenLease lease = limit.reserve(50, Duration.ofSeconds(5));
 * if (lease != null) {
 *     while (lease.trySpend()) sendOne();
 *     lease.finish();
 * }
 * }</pre>
 */
public final class TokenLease {
    private final RateLimit limit;
    private final long id;
    private final long reserved;
    private final long untilNanos;
    private final ReentrantLock mu = new ReentrantLock();
    private long spent;
    private boolean finished;

    TokenLease(RateLimit limit, long id, long reserved, long untilNanos) {
        this.limit = limit;
        this.id = id;
        this.reserved = reserved;
        this.untilNanos = untilNanos;
    }

    /**
     * The lease's id on the cluster.
     *
     * @return the id
     */
    public long id() {
        return id;
    }

    /**
     * The tokens the block holds.
     *
     * @return the count
     */
    public long reserved() {
        return reserved;
    }

    /**
     * The tokens not spent yet.
     *
     * @return the count
     */
    public long left() {
        mu.lock();
        try {
            return reserved - spent;
        } finally {
            mu.unlock();
        }
    }

    /**
     * Spends one token if the block has one left and is still valid (no call).
     *
     * @return true if one was spent
     */
    public boolean trySpend() {
        mu.lock();
        try {
            if (finished || System.nanoTime() - untilNanos >= 0 || spent >= reserved) {
                return false;
            }
            spent++;
            return true;
        } finally {
            mu.unlock();
        }
    }

    /**
     * Stops spending and gives back what is left.
     *
     * @return how many tokens the cluster credited back (0 when nothing was left, the lease
     *     was too old, or on a second call)
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public long finish() throws InterruptedException {
        long unused;
        mu.lock();
        try {
            if (finished) {
                return 0;
            }
            finished = true;
            unused = reserved - spent;
        } finally {
            mu.unlock();
        }
        return unused == 0 ? 0 : limit.giveBack(id, unused);
    }
}
