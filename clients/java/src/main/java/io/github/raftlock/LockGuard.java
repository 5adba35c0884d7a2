package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * One hold of a lock: its fencing token, a future that completes when the hold can no
 * longer be relied on, and {@link #close()} to release it. Pass {@link #token()} with every
 * write to the resource the lock protects, and have the resource refuse a token lower than
 * the highest it has seen: a holder paused past its lease still believes it holds the lock,
 * and the token is what stops its late writes.
 *
 * <pre>{@code
 * try (LockGuard g = session.lock("accounts/17").acquire(Duration.ofSeconds(5))) {
 *     g.runWhileHeld(() -> store.debit("17", 100, g.token()));
 * }
 * }</pre>
 */
public final class LockGuard implements AutoCloseable {
    private final Session s;
    private final String name;
    private final long capUntilNanos;
    private final CompletableFuture<RaftlockException> lost = new CompletableFuture<>();
    private final Runnable onClose;

    private final ReentrantLock mu = new ReentrantLock();
    private Grant grant;
    private boolean released;
    private ScheduledFuture<?> capTimer;
    private Runnable unwatch;
    // Set once, when the hold is lost; what must learn of it first (runWhileHeld's
    // interrupts) watches here rather than on the public future, whose callbacks are the
    // user's and may be slow.
    private RaftlockException lostWhy;
    private final List<Consumer<RaftlockException>> lossWatchers = new ArrayList<>();

    /**
     * Records a grant and watches for its loss: the session's, or the hold cap's, counted
     * from sentNanos (the leader counts from its grant, which is later) less the same
     * margin as a TTL.
     */
    LockGuard(Session s, Grant g, long sentNanos, Runnable onClose) {
        this.s = s;
        this.name = g.name();
        this.grant = g;
        this.onClose = onClose;
        long cap = 0;
        if (!g.maxHold().isZero()) {
            cap = sentNanos + g.maxHold().toNanos() - Session.safetyMargin(g.maxHold()).toNanos();
            if (cap == 0) {
                cap = 1;
            }
        }
        this.capUntilNanos = cap;
        mu.lock();
        try {
            if (cap != 0) {
                try {
                    capTimer = s.client().timer().schedule(() -> onLost(capExpired()),
                            Math.max(0, cap - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (java.util.concurrent.RejectedExecutionException e) {
                    capTimer = null;
                }
            }
            unwatch = s.watchEnd(this::onLost);
        } finally {
            mu.unlock();
        }
    }

    /**
     * Records the loss: the internal watchers first, on this thread (it may be the
     * timer's, so they only interrupt), then the public future on the workers.
     */
    private void onLost(RaftlockException why) {
        List<Consumer<RaftlockException>> ws;
        mu.lock();
        try {
            if (lostWhy != null) {
                return;
            }
            lostWhy = why;
            ws = new ArrayList<>(lossWatchers);
            lossWatchers.clear();
        } finally {
            mu.unlock();
        }
        ws.forEach(w -> w.accept(why));
        s.publish(lost, why, false);
    }

    /** Has w called once the hold is lost (at once if it was); the action stops watching. */
    private Runnable watchLoss(Consumer<RaftlockException> w) {
        RaftlockException why;
        mu.lock();
        try {
            why = lostWhy;
            if (why == null) {
                lossWatchers.add(w);
            }
        } finally {
            mu.unlock();
        }
        if (why != null) {
            w.accept(why);
        }
        return () -> {
            mu.lock();
            try {
                lossWatchers.remove(w);
            } finally {
                mu.unlock();
            }
        };
    }

    private RaftlockException capExpired() {
        return Errors.local(Errors.KIND_HOLD_EXPIRED, "FAILED_PRECONDITION",
                "lock \"" + name + "\" lost: its hold cap of " + grant().maxHold() + " ran out");
    }

    /**
     * The fencing token of this hold.
     *
     * @return the token, strictly increasing per lock in grant order
     */
    public long token() {
        return grant().token();
    }

    /**
     * The hold as the cluster recorded it (its mode changes with {@link #downgrade()}).
     *
     * @return the grant
     */
    public Grant grant() {
        mu.lock();
        try {
            return grant;
        } finally {
            mu.unlock();
        }
    }

    /**
     * The lock's name.
     *
     * @return the name
     */
    public String name() {
        return name;
    }

    /**
     * The session that holds it.
     *
     * @return the session
     */
    public Session session() {
        return s;
    }

    /**
     * Completes (with why) when the hold can no longer be claimed: its session was lost or
     * ended, or its hold cap ran out. A hold released by {@link #close()} was not lost: the
     * future then never completes. It is completed on the client's worker threads, after
     * {@link #runWhileHeld(Callable)} bodies were interrupted.
     *
     * @return the future; it never completes exceptionally
     */
    public CompletableFuture<RaftlockException> lost() {
        return lost;
    }

    /**
     * Why the hold cannot be claimed now, or null while it can.
     *
     * @return the reason, or null
     */
    RaftlockException error() {
        mu.lock();
        boolean r = released;
        mu.unlock();
        if (r) {
            return Errors.notHolder(name);
        }
        RaftlockException e = s.error();
        if (e != null) {
            return e;
        }
        if (capUntilNanos != 0 && System.nanoTime() - capUntilNanos >= 0) {
            return capExpired();
        }
        return null;
    }

    /**
     * Whether this client can still claim the lock: not released, the session within its
     * local deadline, and the hold cap (if any) not run out by the same rule. A local
     * check, without a call.
     *
     * @return true while the hold can be relied on
     */
    public boolean isValid() {
        return error() == null;
    }

    /**
     * Until when the hold can be claimed if no further keep-alive is acknowledged, on the
     * {@link System#nanoTime()} clock: the session's deadline, or the hold cap's if sooner.
     *
     * @return the deadline in nanoTime units
     */
    public long validUntilNanos() {
        long u = s.validUntilNanos();
        if (capUntilNanos != 0 && capUntilNanos - u < 0) {
            return capUntilNanos;
        }
        return u;
    }

    /**
     * Asks the cluster whether this token still belongs to a current holder (a
     * linearizable read: Chubby's CheckSequencer).
     *
     * @return true when it does
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public boolean validate() throws InterruptedException {
        return s.client().validate(name, token()).valid();
    }

    /**
     * Makes this exclusive hold shared, as a read-write lock's writer becomes a reader
     * without letting go: the token stays the same, and the readers queued at the front are
     * granted beside it in the same log entry, so no other writer comes between.
     *
     * @throws NotHolderException when the hold was released
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public void downgrade() throws InterruptedException {
        RaftlockException e = error();
        if (e != null) {
            throw e;
        }
        long token = token();
        JsonNode r;
        try {
            r = s.client().transport().call("/v1/lock/downgrade", Transport.CallOpts.plain(),
                    a -> Wire.obj().put("sessionId", Wire.str(s.id())).put("name", name).put("token", Wire.str(token)));
        } catch (RaftlockException x) {
            s.noteErr(x);
            throw x;
        }
        Grant hold = Wire.grant(r, "hold");
        if (hold != null) {
            mu.lock();
            try {
                if (grant.token() == token) {
                    grant = hold;
                }
            } finally {
                mu.unlock();
            }
        }
    }

    /**
     * Runs body on the calling thread while the hold lasts: if the hold is lost meanwhile
     * (keep-alives stop being acknowledged, so the session's local deadline, a safety
     * margin before the leader can expire it, passes; or the hold cap runs out), the thread
     * is interrupted at once, so that interruptible work stops before the lock can be
     * granted to anyone else. The loss is then thrown, whatever body did.
     *
     * <pre>{@code
     * long rows = guard.runWhileHeld(() -> copyTable(guard.token()));
     * }</pre>
     *
     * @param <T> body's result
     * @param body the work
     * @return what body returned
     * @throws SessionLostException (or {@link HoldExpiredException}) when the hold was lost
     *     before or while body ran
     * @throws Exception what body threw otherwise
     */
    public <T> T runWhileHeld(Callable<T> body) throws Exception {
        RaftlockException before = error();
        if (before != null) {
            throw before;
        }
        Thread me = Thread.currentThread();
        ReentrantLock l = new ReentrantLock();
        boolean[] running = {true};
        RaftlockException[] fired = {null};
        Runnable watch = watchLoss(why -> {
            l.lock();
            try {
                if (running[0]) {
                    fired[0] = why;
                    me.interrupt();
                }
            } finally {
                l.unlock();
            }
        });
        T out;
        try {
            out = body.call();
        } catch (Exception e) {
            RaftlockException why = stop(l, running, fired, watch);
            if (why != null) {
                why.addSuppressed(e);
                throw why;
            }
            throw e;
        }
        RaftlockException why = stop(l, running, fired, watch);
        if (why != null) {
            throw why;
        }
        return out;
    }

    /** Ends a runWhileHeld watch; the loss that interrupted the body, if one did. */
    private static RaftlockException stop(ReentrantLock l, boolean[] running, RaftlockException[] fired, Runnable watch) {
        l.lock();
        try {
            running[0] = false;
        } finally {
            l.unlock();
        }
        watch.run();
        if (fired[0] != null) {
            // The interrupt was this scope's own, not the caller's: consume it.
            Thread.interrupted();
        }
        return fired[0];
    }

    /**
     * Releases the lock; the next waiters are granted in the same log entry. Closing
     * twice, or after the session ended (which released the lock), does nothing. An
     * interrupt does not cut the release short: it is sent all the same, and the thread's
     * interrupt flag is kept.
     *
     * @throws NotHolderException when the lock was taken away meanwhile (force-released)
     * @throws UnavailableException when the cluster did not answer in time; the release is
     *     then retried a few more times in the background
     */
    @Override
    public void close() {
        Grant g;
        mu.lock();
        try {
            if (released) {
                return;
            }
            released = true;
            g = grant;
            if (capTimer != null) {
                capTimer.cancel(false);
            }
            if (unwatch != null) {
                unwatch.run();
            }
        } finally {
            mu.unlock();
        }
        try {
            release(g);
        } finally {
            onClose.run();
        }
    }

    private void release(Grant g) {
        // A lost session is not renewed any more: the leader expires it within the safety
        // margin, and its locks with it.
        if (s.error() != null) {
            return;
        }
        boolean[] retried = {false};
        try {
            s.client().transport().callUninterruptibly("/v1/lock/release", Transport.CallOpts.plain(), a -> {
                retried[0] |= a > 0;
                return body(g);
            });
        } catch (NotHolderException e) {
            // A retry that finds the lock free: an earlier attempt released it and only its
            // answer was lost. Once the hold cap ran out, the leader released it.
            boolean capped = capUntilNanos != 0 && System.nanoTime() - capUntilNanos >= 0;
            if (!retried[0] && !capped) {
                throw e;
            }
        } catch (SessionNotFoundException e) {
            s.markGone(e);
        } catch (UnavailableException e) {
            // The release may not have been applied: left alone, the lock would stay held
            // as long as the session lives.
            s.giveUpSoon("/v1/lock/release", () -> body(g));
            throw e;
        }
    }

    private com.fasterxml.jackson.databind.node.ObjectNode body(Grant g) {
        return Wire.obj().put("sessionId", Wire.str(s.id())).put("name", name).put("token", Wire.str(g.token()));
    }

    @Override
    public String toString() {
        return "LockGuard[" + name + ", token " + token() + "]";
    }
}
