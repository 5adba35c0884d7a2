package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.Lock;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A named lock of the cluster for one session, as a {@link Lock}: waiting happens in the
 * lock's FIFO queue on the server (no polling), every hold carries a fencing token, and a
 * wait given up (an interrupt, a cancelled future, a timeout) leaves the server's queue at
 * once, so the lock goes to the next waiter.
 *
 * <p>A handle holds at most one hold at a time. Threads of one JVM sharing a handle queue
 * for it locally, in arrival order, and then on the server; the hold belongs to the handle,
 * not to a thread (any thread may {@link #unlock()}, as with a one-permit
 * {@link Semaphore}), and it is not reentrant: locking again from the thread that holds it
 * throws {@link AlreadyHeldException} rather than deadlocking.
 *
 * <pre>{@code
 * DistributedLock lock = session.lock("orders/42");
 * if (lock.tryLock(5, TimeUnit.SECONDS)) {
 *     try {
 *         db.update(order, lock.token());
 *     } finally {
 *         lock.unlock();
 *     }
 * }
 * }</pre>
 */
public final class DistributedLock implements Lock {
    /**
     * The longest single wait the server allows by default (its {@code --max-wait-ms});
     * longer waits are waited in turns.
     */
    static volatile Duration maxWaitTurn = Duration.ofHours(1);

    private final Session s;
    private final String name;
    private final LockOptions options;
    // Threads of this JVM queue here, fairly, for the handle's one hold.
    private final Semaphore gate = new Semaphore(1, true);
    private final ReentrantLock mu = new ReentrantLock();
    private LockGuard guard;
    private Thread holder;

    DistributedLock(Session s, String name, LockOptions options) {
        this.s = s;
        this.name = name;
        this.options = options;
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
     * The session the lock acquires for.
     *
     * @return the session
     */
    public Session session() {
        return s;
    }

    /**
     * Acquires the lock, waiting in its queue for as long as the session lives. As
     * {@link Lock#lock()} specifies, an interrupt does not end the wait: the acquisition
     * carries on in the same exchange, keeping its place in the queue, and the thread's
     * interrupt flag is set again once it returns.
     *
     * @throws SessionLostException when the session is lost meanwhile
     * @throws RaftlockException for another refusal
     */
    @Override
    public void lock() {
        enterGateUninterruptibly();
        Acquired a;
        try {
            a = acquireUninterruptibly();
        } catch (RuntimeException e) {
            leaveGate();
            throw e;
        }
        take(a);
    }

    /** acquireInTurns without interruption: the interrupts it saw are re-asserted inside. */
    private Acquired acquireUninterruptibly() {
        try {
            return acquireInTurns(s, name, options, null, false);
        } catch (InterruptedException e) {
            // An uninterruptible acquisition catches every interrupt and sets the flag
            // again; this is the compiler's path only.
            Thread.currentThread().interrupt();
            throw new IllegalStateException("an uninterruptible acquisition was interrupted", e);
        }
    }

    /**
     * Acquires the lock, waiting until it is granted or the thread is interrupted; an
     * interrupt gives the wait up on the server at once (the lock goes to the next waiter;
     * a grant that raced the interrupt is released).
     *
     * @throws InterruptedException when interrupted before the grant
     */
    @Override
    public void lockInterruptibly() throws InterruptedException {
        acquire();
    }

    /**
     * Takes the lock only if it is free now: nobody holds it in the way, nobody queues for
     * it, no lock-delay.
     *
     * @return true if it was taken
     */
    @Override
    public boolean tryLock() {
        try {
            tryAcquire();
            return true;
        } catch (LockedException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /**
     * Takes the lock, waiting up to time in its queue on the server.
     *
     * @param time how long to wait
     * @param unit its unit
     * @return true if it was taken, false when the time ran out
     * @throws InterruptedException when interrupted before the grant (the wait is given up
     *     on the server at once)
     */
    @Override
    public boolean tryLock(long time, TimeUnit unit) throws InterruptedException {
        try {
            acquire(Duration.ofNanos(unit.toNanos(time)));
            return true;
        } catch (WaitTimedOutException e) {
            return false;
        }
    }

    /**
     * Redisson's {@code tryLock(waitTime, leaseTime, unit)}: waits up to waitTime, and caps
     * the hold at leaseTime (the server's hold cap: the leader releases the lock then, even
     * though the session lives; {@link LockGuard#lost()} completes a safety margin before).
     *
     * @param waitTime how long to wait
     * @param leaseTime the hold cap (1 s to 7 days)
     * @param unit the unit of both
     * @return true if it was taken
     * @throws InterruptedException when interrupted before the grant
     */
    public boolean tryLock(long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException {
        try {
            acquire(Duration.ofNanos(unit.toNanos(waitTime)), Duration.ofNanos(unit.toNanos(leaseTime)));
            return true;
        } catch (WaitTimedOutException e) {
            return false;
        }
    }

    /**
     * Releases the hold; the next waiters are granted in the same log entry.
     *
     * @throws NotHolderException when this handle holds nothing, or the lock was taken away
     *     (force-released)
     */
    @Override
    public void unlock() {
        LockGuard g;
        mu.lock();
        try {
            g = guard;
        } finally {
            mu.unlock();
        }
        if (g == null) {
            throw Errors.notHolder(name);
        }
        g.close();
    }

    /**
     * Not supported. A {@link Condition} releases the lock while it waits and takes it back
     * before returning, to be signalled by another holder in the same JVM; across machines
     * that would hand out the lock between two parts of one critical section under two
     * different fencing tokens, which the resource sees as two holders. Use a lock per
     * state change, or an election, instead.
     *
     * @return never
     * @throws UnsupportedOperationException always
     */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("a distributed lock has no conditions: waiting on one would release the lock "
                + "and take it back under another fencing token");
    }

    /**
     * Acquires the lock, waiting until it is granted, and returns the hold; an interrupt
     * gives the wait up on the server at once.
     *
     * <pre>{@code
     * try (LockGuard g = lock.acquire()) {
     *     write(g.token());
     * }
     * }</pre>
     *
     * @return the hold; close it to release
     * @throws InterruptedException when interrupted before the grant
     */
    public LockGuard acquire() throws InterruptedException {
        return acquireWith(options, null, true);
    }

    /**
     * Acquires the lock, waiting up to wait.
     *
     * @param wait how long to wait in the queue
     * @return the hold
     * @throws WaitTimedOutException when wait ran out
     * @throws InvalidArgumentException when wait is null or negative
     * @throws InterruptedException when interrupted before the grant
     */
    public LockGuard acquire(Duration wait) throws InterruptedException {
        return acquireWith(options, checkWait(wait), true);
    }

    /**
     * Acquires the lock, waiting up to wait, with the hold capped at leaseTime.
     *
     * @param wait how long to wait in the queue
     * @param leaseTime the hold cap
     * @return the hold
     * @throws WaitTimedOutException when wait ran out
     * @throws InvalidArgumentException when wait is null or negative
     * @throws InterruptedException when interrupted before the grant
     */
    public LockGuard acquire(Duration wait, Duration leaseTime) throws InterruptedException {
        return acquireWith(options.withMaxHold(leaseTime), checkWait(wait), true);
    }

    /**
     * Takes the lock only if it is free now.
     *
     * @return the hold
     * @throws LockedException when it is busy
     * @throws InterruptedException when interrupted while the request was out (a grant it
     *     may have got is released in the background)
     */
    public LockGuard tryAcquire() throws InterruptedException {
        return tryAcquireWith(options);
    }

    LockGuard tryAcquireWith(LockOptions o) throws InterruptedException {
        if (!enterGateNow()) {
            throw Errors.local(Errors.KIND_LOCKED, "FAILED_PRECONDITION", "lock \"" + name + "\" is busy (held through this handle)");
        }
        try {
            return take(acquireOnce(s, name, o, null, true));
        } catch (RuntimeException | InterruptedException e) {
            leaveGate();
            throw e;
        }
    }

    /**
     * Acquires the lock on a worker thread, waiting up to wait. Cancelling the future
     * ({@code cancel(true)} or {@code cancel(false)} alike) gives the wait up on the
     * server at once; a grant that raced the cancellation is released.
     *
     * @param wait how long to wait in the queue
     * @return the future hold; it completes exceptionally with the acquisition's
     *     {@link RaftlockException}
     * @throws InvalidArgumentException when wait is null or negative
     */
    public CompletableFuture<LockGuard> acquireAsync(Duration wait) {
        checkWait(wait);
        AsyncAcquire f = new AsyncAcquire();
        s.client().workers().execute(() -> {
            if (!f.start(Thread.currentThread())) {
                return;
            }
            try {
                LockGuard g = acquire(wait);
                if (!f.settle() || !f.complete(g)) {
                    // Cancelled before the grant could be handed over: hand the lock on.
                    // Settled, so no cancel interrupts this thread any more; a stray
                    // interrupt would not cut the release short either.
                    g.close();
                }
            } catch (InterruptedException | RuntimeException e) {
                // Cancelled meanwhile (this is likely its interrupt): the cancel completes
                // the future itself.
                if (f.settle()) {
                    f.completeExceptionally(e);
                }
            } finally {
                f.settle();
                // The pool's next task must not inherit a cancel's interrupt.
                Thread.interrupted();
            }
        });
        return f;
    }

    /**
     * A future whose cancellation interrupts the worker that waits for the lock. Who
     * decides the outcome is settled under one lock, before the cancel interrupts: a cancel
     * either interrupts the worker while it still waits, or finds the outcome settled and
     * interrupts nothing, so its interrupt can never land in the release of a grant that
     * raced it.
     */
    private static final class AsyncAcquire extends CompletableFuture<LockGuard> {
        private final ReentrantLock l = new ReentrantLock();
        private Thread worker;
        private boolean cancelling;
        private boolean settled;

        boolean start(Thread t) {
            l.lock();
            try {
                if (cancelling || isDone()) {
                    return false;
                }
                worker = t;
                return true;
            } finally {
                l.unlock();
            }
        }

        /**
         * Ends the worker's part: no interrupt comes after. False when a cancel came first
         * (the worker then completes nothing: the cancel does).
         */
        boolean settle() {
            l.lock();
            try {
                settled = true;
                worker = null;
                return !cancelling;
            } finally {
                l.unlock();
            }
        }

        @Override
        public boolean cancel(boolean mayInterruptIfRunning) {
            l.lock();
            try {
                if (!settled) {
                    cancelling = true;
                    if (worker != null) {
                        worker.interrupt();
                    }
                }
            } finally {
                l.unlock();
            }
            // Outside the lock: it runs the future's dependents.
            return super.cancel(mayInterruptIfRunning);
        }
    }

    /**
     * The fencing token of the current hold.
     *
     * @return the token, or 0 when this handle holds nothing
     */
    public long token() {
        mu.lock();
        try {
            return guard == null ? 0 : guard.token();
        } finally {
            mu.unlock();
        }
    }

    /**
     * The current hold.
     *
     * @return the hold, or empty when this handle holds nothing
     */
    public Optional<LockGuard> guard() {
        mu.lock();
        try {
            return Optional.ofNullable(guard);
        } finally {
            mu.unlock();
        }
    }

    /**
     * Whether this handle holds the lock and can still claim it (a local check).
     *
     * @return true while held and valid
     */
    public boolean isHeld() {
        Optional<LockGuard> g = guard();
        return g.isPresent() && g.get().isValid();
    }

    private static Duration checkWait(Duration wait) {
        // Null is refused rather than read as "no limit": acquire() is that.
        if (wait == null) {
            throw Errors.invalidArgument("the wait must not be null (acquire() waits without a limit)");
        }
        if (wait.isNegative()) {
            throw Errors.invalidArgument("the wait must not be negative");
        }
        return wait;
    }

    LockGuard acquireWith(LockOptions o, Duration wait, boolean interruptible) throws InterruptedException {
        long started = System.nanoTime();
        if (wait == null) {
            enterGate();
        } else if (!enterGate(wait)) {
            throw Errors.reason(Reason.WAIT_TIMED_OUT, "DEADLINE_EXCEEDED",
                    "timed out waiting for lock \"" + name + "\" (held through this handle)");
        }
        try {
            Duration left = wait == null ? null : wait.minusNanos(System.nanoTime() - started);
            if (left != null && left.isNegative()) {
                left = Duration.ZERO;
            }
            return take(acquireInTurns(s, name, o, left, interruptible));
        } catch (RuntimeException | InterruptedException e) {
            leaveGate();
            throw e;
        }
    }

    private LockGuard take(Acquired a) {
        LockGuard g = new LockGuard(s, a.grant, a.sentNanos, this::released);
        mu.lock();
        try {
            guard = g;
            holder = Thread.currentThread();
        } finally {
            mu.unlock();
        }
        return g;
    }

    private void released() {
        mu.lock();
        try {
            guard = null;
            holder = null;
        } finally {
            mu.unlock();
        }
        gate.release();
    }

    private void checkReentry() {
        mu.lock();
        try {
            if (guard != null && holder == Thread.currentThread()) {
                throw Errors.reason(Reason.ALREADY_HELD, "FAILED_PRECONDITION",
                        "this thread already holds lock \"" + name + "\" through this handle (it is not reentrant)");
            }
        } finally {
            mu.unlock();
        }
    }

    private void enterGate() throws InterruptedException {
        checkReentry();
        gate.acquire();
    }

    private void enterGateUninterruptibly() {
        checkReentry();
        gate.acquireUninterruptibly();
    }

    private boolean enterGate(Duration wait) throws InterruptedException {
        checkReentry();
        return gate.tryAcquire(wait.toNanos(), TimeUnit.NANOSECONDS);
    }

    private boolean enterGateNow() {
        checkReentry();
        return gate.tryAcquire();
    }

    private void leaveGate() {
        gate.release();
    }

    /** A grant and the send time its validity counts from. */
    record Acquired(Grant grant, long sentNanos) {}

    /**
     * Waits in turns of at most {@link #maxWaitTurn}: the server bounds each wait by its
     * {@code --max-wait-ms}, so a longer one (or one bounded by nothing) is waited as
     * several. wait null waits for as long as the session lives.
     */
    static Acquired acquireInTurns(Session s, String name, LockOptions o, Duration wait, boolean interruptible)
            throws InterruptedException {
        long end = wait == null ? 0 : System.nanoTime() + wait.toNanos();
        while (true) {
            Duration max = maxWaitTurn;
            Duration turn = max;
            if (wait != null) {
                long left = end - System.nanoTime();
                if (left < turn.toNanos()) {
                    turn = Duration.ofNanos(Math.max(0, left));
                }
            }
            try {
                return acquireOnce(s, name, o, turn, interruptible);
            } catch (WaitTimedOutException e) {
                // Only a full turn ends short of what was asked; a shorter one was the last.
                boolean more = wait == null || end - System.nanoTime() > TimeUnit.MILLISECONDS.toNanos(1);
                if (turn.equals(max) && more && s.isValid()) {
                    continue;
                }
                throw e;
            }
        }
    }

    /**
     * One acquisition: numbered once and retried as one, with one request id, so a retry
     * finds the grant or queue place the first attempt got. wait null is a try-lock.
     */
    static Acquired acquireOnce(Session s, String name, LockOptions o, Duration wait, boolean interruptible)
            throws InterruptedException {
        o.check();
        s.check();
        boolean interrupted = s.cancelsSettled(List.of(name), interruptible);
        byte[] requestId = Wire.newRequestId();
        long started = System.nanoTime();
        Transport.CallOpts co = wait == null ? Transport.CallOpts.plain() : Transport.CallOpts.waiting(wait);
        // Lock.lock() does not give up, nor its place in the queue: the waiting exchange is
        // kept open through interrupts, since the server takes its closing for the caller
        // leaving, and a reconnect could come too late or requeue at the back.
        co.uninterruptible = !interruptible;
        JsonNode r;
        try (Session.Ticket t = s.ticket()) {
            while (true) {
                try {
                    r = s.client().transport().call("/v1/lock/acquire", co, a -> {
                        ObjectNode body = Wire.obj().put("sessionId", Wire.str(s.id())).put("name", name)
                                .put("requestId", Wire.b64(requestId)).put("mode", o.mode.wire());
                        t.fields(body);
                        if (o.permits > 0) {
                            body.put("permits", o.permits);
                        }
                        if (o.count > 0) {
                            body.put("count", o.count);
                        }
                        if (!o.maxHold.isZero()) {
                            body.put("maxHoldMs", Wire.ms(o.maxHold));
                        }
                        if (!o.lockDelay.isZero()) {
                            body.put("lockDelayMs", Wire.ms(o.lockDelay));
                        }
                        if (o.metadata.length > 0) {
                            body.put("metadata", Wire.b64(o.metadata));
                        }
                        if (wait != null) {
                            // Each retry waits only what is left, not the whole wait again.
                            body.put("waitTimeoutMs", Wire.ms(wait.minusNanos(System.nanoTime() - started)));
                        }
                        return body;
                    });
                    break;
                } catch (InterruptedException e) {
                    if (interruptible) {
                        s.cancelWaitSoon(List.of(name), requestId);
                        throw e;
                    }
                    // Not thrown by an uninterruptible call; were it, the same request
                    // (same id and number) again finds the place or grant the first got.
                    interrupted = true;
                } catch (RaftlockException e) {
                    s.noteErr(e);
                    if (undecided(e)) {
                        s.cancelWaitSoon(List.of(name), requestId);
                    }
                    throw e;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        boolean acquired = Wire.bool(r, "acquired");
        Grant g = Wire.grant(r, "grant");
        if (acquired && g == null) {
            s.cancelWaitSoon(List.of(name), requestId);
            throw Errors.of(new ErrorInfo("", "INTERNAL", "acquire of \"" + name + "\" answered granted without a grant"));
        }
        if (!acquired) {
            if (wait == null) {
                throw Errors.local(Errors.KIND_LOCKED, "FAILED_PRECONDITION", "lock \"" + name + "\" is busy");
            }
            throw Errors.reason(Reason.WAIT_TIMED_OUT, "DEADLINE_EXCEEDED", "timed out waiting for lock \"" + name + "\"");
        }
        // The grant arrived after the session's local deadline (a pause, a slow link): the
        // server may already have expired the session and granted the lock to another, so
        // it is not this caller's to use.
        s.check();
        return new Acquired(g, started);
    }

    /**
     * Whether an acquire or campaign that failed with e may have taken effect on the server
     * all the same: the cluster was unreachable after an attempt went out, or the answer
     * could not be read. Only a refusal with a verdict settles that it did not.
     */
    static boolean undecided(RaftlockException e) {
        if (e instanceof ClientClosedException) {
            // Closing the client closes its sessions, releasing what they hold.
            return false;
        }
        return e.wireReason().isEmpty() || e instanceof InternalException || e instanceof UnavailableException;
    }

    @Override
    public String toString() {
        return "DistributedLock[" + name + ", " + options.mode + "]";
    }
}
