package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A lease on the cluster that owns locks, waits and leaderships. The client keeps it
 * alive every TTL/3 in the background and counts it valid only until the send time of its
 * last acknowledged keep-alive + TTL − {@link #safetyMargin(Duration)}: the leader counts
 * the TTL from when it received that keep-alive, which is later, so before this deadline it
 * cannot have expired the session. Past it, or when the server says the session is gone,
 * the session is lost for good and {@link #lost()} completes. Everything it holds is
 * released when it ends.
 *
 * <pre>{@code
 * try (Session session = client.newSession(Duration.ofSeconds(10))) {
 *     session.addStateListener((s, state) -> log.info("{}", state));
 *     DistributedLock lock = session.lock("orders/42");
 *     lock.lock();
 *     try {
 *         process(lock.token());
 *     } finally {
 *         lock.unlock();
 *     }
 * }
 * }</pre>
 */
public final class Session implements AutoCloseable {
    private final RaftlockClient client;
    private final long id;
    private final Duration ttl;

    private final ReentrantLock mu = new ReentrantLock();
    private long untilNanos;
    private RaftlockException ended;
    private final CompletableFuture<RaftlockException> lost = new CompletableFuture<>();
    private ScheduledFuture<?> deadlineTimer;
    private long seq;
    private final TreeSet<Long> waiting = new TreeSet<>();
    private boolean closing;
    private boolean suspended;
    // Abandoned waits whose cancellation is still on its way, by lock name.
    private final Map<String, List<CompletableFuture<Void>>> cancelling = new HashMap<>();
    private final List<SessionStateListener> listeners = new CopyOnWriteArrayList<>();
    // Listeners are called in order, one change at a time: each call is chained on the last.
    private CompletableFuture<Void> events = CompletableFuture.completedFuture(null);
    // Set with ended, under mu: no state change is reported after, but LOST.
    private boolean eventsOver;
    // The reason, once the end's watchers are being called: how watchEnd learns it is late.
    private volatile RaftlockException finished;
    private long backoffNanos = TimeUnit.MILLISECONDS.toNanos(50);

    private Session(RaftlockClient client, long id, Duration ttl, long sentNanos) {
        this.client = client;
        this.id = id;
        this.ttl = ttl;
        this.untilNanos = sentNanos + ttl.toNanos() - safetyMargin(ttl).toNanos();
    }

    /**
     * The part of a TTL this client does not count on: a tenth, at least 100 ms. It covers
     * the leader's and the client's clocks running at slightly different rates, and
     * scheduling delays.
     *
     * @param ttl a TTL or hold cap
     * @return the margin
     */
    public static Duration safetyMargin(Duration ttl) {
        Duration m = ttl.dividedBy(10);
        return m.compareTo(Duration.ofMillis(100)) < 0 ? Duration.ofMillis(100) : m;
    }

    static Session create(RaftlockClient client, Duration ttl, String clientName, SessionStateListener listener)
            throws InterruptedException {
        if (ttl.toMillis() < 1) {
            throw Errors.reason(Reason.TTL_OUT_OF_RANGE, "INVALID_ARGUMENT", "the TTL must be at least 1 ms, got " + ttl);
        }
        byte[] key = Wire.newRequestId();
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (java.io.IOException e) {
            host = "";
        }
        String h = host.length() > 256 ? host.substring(0, 256) : host;
        // The first attempt's send time: the leader counts the lease from when it applied
        // the creation, which is no earlier.
        long sent = System.nanoTime();
        JsonNode r = client.transport().call("/v1/session/create", Transport.CallOpts.plain(), a -> Wire.obj()
                .put("ttlMs", Wire.ms(ttl)).put("clientName", clientName).put("creationKey", Wire.b64(key))
                .put("host", h).put("pid", ProcessHandle.current().pid()));
        long ttlMs = Wire.u64(r, "ttlMs");
        Session s = new Session(client, Wire.u64(r, "sessionId"), ttlMs > 0 ? Duration.ofMillis(ttlMs) : ttl, sent);
        if (listener != null) {
            s.listeners.add(listener);
        }
        s.mu.lock();
        try {
            s.arm();
            s.emit(SessionState.CONNECTED);
        } finally {
            s.mu.unlock();
        }
        s.scheduleRenewal(sent + s.ttl.toNanos() / 3);
        return s;
    }

    /**
     * The session id (from the log entry that created it; never reused).
     *
     * @return the id
     */
    public long id() {
        return id;
    }

    /**
     * The TTL the server granted.
     *
     * @return the TTL
     */
    public Duration ttl() {
        return ttl;
    }

    /**
     * The client the session was created by.
     *
     * @return the client
     */
    public RaftlockClient client() {
        return client;
    }

    /**
     * Registers a listener for the state changes from now on ({@link SessionState}); pass
     * one to {@link RaftlockClient#newSession(Duration, SessionStateListener)} to learn of
     * {@link SessionState#CONNECTED} too.
     *
     * @param l the listener
     */
    public void addStateListener(SessionStateListener l) {
        listeners.add(l);
    }

    /**
     * Removes a listener registered before.
     *
     * @param l the listener
     */
    public void removeStateListener(SessionStateListener l) {
        listeners.remove(l);
    }

    /**
     * Queues state for the listeners. Called with mu held, in the same section that
     * decided the change, so that changes are queued in the order they happened and none
     * after the session ended (LOST is queued by the end itself, last).
     */
    private void emit(SessionState state) {
        if (eventsOver) {
            return;
        }
        enqueue(state, null);
    }

    /** Queues state for the listeners, after first if not null; mu held. */
    private void enqueue(SessionState state, Runnable first) {
        // The listeners registered when the change happened, as Curator's: one added
        // later does not learn of the past.
        List<SessionStateListener> now = List.copyOf(listeners);
        try {
            events = events.thenRunAsync(() -> {
                if (first != null) {
                    first.run();
                }
                for (SessionStateListener l : now) {
                    try {
                        l.stateChanged(this, state);
                    } catch (RuntimeException e) {
                        // A listener's failure must not keep the others from learning.
                    }
                }
            }, client.workers());
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // The client closed: nobody is left to tell.
        }
    }

    /**
     * Completes (with why) when the session is lost or ended: its local deadline passed,
     * the server says it is gone, or it was closed. Never completes exceptionally. It is
     * completed on the client's worker threads (on the closing thread for {@link #close()}),
     * after the work that relied on the session was interrupted, so a slow callback delays
     * neither that nor other sessions' timers.
     *
     * @return the future
     */
    public CompletableFuture<RaftlockException> lost() {
        return lost;
    }

    /**
     * Whether the session still counts as alive here.
     *
     * @return true while within its local deadline and not ended
     */
    public boolean isValid() {
        return error() == null;
    }

    /**
     * Throws why the session no longer counts as valid, if it does not.
     *
     * @throws SessionLostException once the session is lost or closed
     */
    public void check() {
        RaftlockException e = error();
        if (e != null) {
            throw e;
        }
    }

    RaftlockException error() {
        mu.lock();
        try {
            checkDeadline();
            return ended;
        } finally {
            mu.unlock();
        }
    }

    /**
     * The local validity deadline on the {@link System#nanoTime()} clock: until then the
     * leader cannot have expired the session. It moves forward with every acknowledged
     * keep-alive; once passed, the session is lost.
     *
     * @return the deadline in nanoTime units
     */
    public long validUntilNanos() {
        mu.lock();
        try {
            return untilNanos;
        } finally {
            mu.unlock();
        }
    }

    /**
     * Ends the session on the server: its locks are released and its waits cancelled at
     * once. Closing twice, or a session the server already ended, does nothing; a cluster
     * that cannot be reached within about 5 s is left to expire the session. An interrupt
     * does not cut the close short; the thread's interrupt flag is kept.
     */
    @Override
    public void close() {
        mu.lock();
        boolean already = closing;
        closing = true;
        mu.unlock();
        if (already) {
            return;
        }
        // Completed on this thread: once close returns, lost() is done.
        end(Errors.local(Errors.KIND_SESSION_LOST, "NOT_FOUND", "session " + id + " closed"), false, true);
        client.forget(this);
        // Bounded as the Go client's Close: a cluster out of reach expires the session
        // anyway, and a close must not hold its caller for a whole request timeout.
        Transport.CallOpts o = Transport.CallOpts.plain();
        o.budget = Duration.ofSeconds(5);
        try {
            client.transport().callUninterruptibly("/v1/session/close", o, a -> Wire.obj().put("sessionId", Wire.str(id)));
        } catch (RaftlockException e) {
            // Already gone, unreachable or the client closed: the leader expires it.
        }
    }

    /** end ends the lease for reason (the first reason wins). */
    void end(RaftlockException reason, boolean report) {
        end(reason, report, false);
    }

    /**
     * end, completing lost() on this thread when inline, else on the workers: this
     * thread may be the timer's, which other sessions' deadlines wait on.
     */
    private void end(RaftlockException reason, boolean report, boolean inline) {
        mu.lock();
        try {
            if (ended != null) {
                return;
            }
            ended = reason;
            eventsOver = true;
            if (deadlineTimer != null) {
                deadlineTimer.cancel(false);
            }
        } finally {
            mu.unlock();
        }
        finishEnd(reason, report, inline);
    }

    /**
     * The internal watchers first (they interrupt the work that relied on the session, and
     * must not wait for the user's callbacks), then LOST, then the public future.
     */
    private void finishEnd(RaftlockException reason, boolean report, boolean inline) {
        finished = reason;
        // Each watcher is claimed by removing it, here or in watchEnd, so that one added
        // while the session ends is called exactly once.
        for (java.util.function.Consumer<RaftlockException> w : endWatchers) {
            if (endWatchers.remove(w)) {
                w.accept(reason);
            }
        }
        if (report) {
            mu.lock();
            try {
                // A listener told LOST finds lost() done (publish below may come first).
                enqueue(SessionState.LOST, () -> lost.complete(reason));
            } finally {
                mu.unlock();
            }
        }
        publish(lost, reason, inline);
    }

    /**
     * Completes a public loss future, whose callbacks are the user's: on the workers
     * unless inline (or the client closed).
     */
    void publish(CompletableFuture<RaftlockException> f, RaftlockException why, boolean inline) {
        if (!inline) {
            try {
                f.completeAsync(() -> why, client.workers());
                return;
            } catch (java.util.concurrent.RejectedExecutionException e) {
                // The client closed: completed here.
            }
        }
        f.complete(why);
    }

    // What watches the session's end: how a hold learns of the loss without a dependent
    // left on lost() for every hold ever taken.
    private final java.util.Set<java.util.function.Consumer<RaftlockException>> endWatchers =
            java.util.concurrent.ConcurrentHashMap.newKeySet();

    /**
     * Has f called once the session ends (at once, on this thread, if it has); run the
     * returned action to stop watching.
     */
    Runnable watchEnd(java.util.function.Consumer<RaftlockException> f) {
        endWatchers.add(f);
        RaftlockException why = finished;
        if (why != null && endWatchers.remove(f)) {
            f.accept(why);
        }
        return () -> endWatchers.remove(f);
    }

    /** checkDeadline ends the lease if its deadline passed; mu held. */
    private void checkDeadline() {
        if (ended == null && System.nanoTime() - untilNanos >= 0) {
            RaftlockException e = Errors.local(Errors.KIND_SESSION_LOST, "FAILED_PRECONDITION",
                    "session " + id + " lost: no keep-alive acknowledged within its TTL minus the safety margin");
            ended = e;
            eventsOver = true;
            if (deadlineTimer != null) {
                deadlineTimer.cancel(false);
            }
            try {
                // Completed off this thread: mu is held, and what waits on lost() may call
                // back into the session. A task of its own, so inline there.
                client.workers().execute(() -> finishEnd(e, true, true));
            } catch (java.util.concurrent.RejectedExecutionException x) {
                lost.complete(e);
            }
        }
    }

    /** arm sets a timer at the deadline, so that lost() completes on time; mu held. */
    private void arm() {
        if (deadlineTimer != null) {
            deadlineTimer.cancel(false);
        }
        long delay = untilNanos - System.nanoTime();
        try {
            deadlineTimer = client.timer().schedule(this::onDeadline, Math.max(0, delay), TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            deadlineTimer = null;
        }
    }

    private void onDeadline() {
        RaftlockException e = null;
        mu.lock();
        try {
            if (ended != null) {
                return;
            }
            if (System.nanoTime() - untilNanos < 0) {
                arm();
                return;
            }
            e = Errors.local(Errors.KIND_SESSION_LOST, "FAILED_PRECONDITION",
                    "session " + id + " lost: no keep-alive acknowledged within its TTL minus the safety margin");
        } finally {
            mu.unlock();
        }
        end(e, true);
    }

    /**
     * acknowledged records a keep-alive sent at sent, unless the lease already counts as
     * lost: a late acknowledgement revives nothing, since the leader may have expired the
     * session and granted its locks meanwhile.
     */
    private void acknowledged(long sent) {
        mu.lock();
        try {
            checkDeadline();
            if (ended != null) {
                return;
            }
            long next = sent + ttl.toNanos() - safetyMargin(ttl).toNanos();
            if (next - untilNanos > 0) {
                untilNanos = next;
                arm();
            }
            if (suspended) {
                emit(SessionState.RECONNECTED);
            }
            suspended = false;
        } finally {
            mu.unlock();
        }
    }

    void markGone(RaftlockException cause) {
        ErrorInfo i = new ErrorInfo(Reason.SESSION_NOT_FOUND.wire(), "NOT_FOUND", "session " + id + " is gone (expired or closed)");
        i.cause = cause;
        end(Errors.of(i), true);
    }

    /** noteErr ends the session if e says the server forgot it. */
    void noteErr(RaftlockException e) {
        if (e instanceof SessionNotFoundException) {
            markGone(e);
        }
    }

    private void scheduleRenewal(long atNanos) {
        try {
            client.timer().schedule(() -> {
                try {
                    client.workers().execute(this::renew);
                } catch (java.util.concurrent.RejectedExecutionException e) {
                    // The client closed.
                }
            }, Math.max(0, atNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // The client closed: its sessions are closed too.
        }
    }

    /**
     * Sends one renewal. A renewal unanswered for min(TTL/3, 2 s) means a frozen, cut-off
     * or deposed node: another is tried rather than waiting out the TTL on it.
     */
    private void renew() {
        mu.lock();
        boolean over = ended != null;
        mu.unlock();
        if (over) {
            return;
        }
        Transport t = client.transport();
        long interval = ttl.toNanos() / 3;
        long patience = Math.min(interval, TimeUnit.SECONDS.toNanos(2));
        long maxBackoff = Math.min(interval / 4, TimeUnit.MILLISECONDS.toNanos(250));
        String addr = t.target();
        long sent = System.nanoTime();
        try {
            t.post(addr, "/v1/session/keepalive", Wire.obj().put("sessionId", Wire.str(id)), Duration.ofNanos(patience));
            t.remember(addr);
            acknowledged(sent);
            backoffNanos = TimeUnit.MILLISECONDS.toNanos(50);
            scheduleRenewal(sent + interval);
        } catch (InterruptedException e) {
            // The client's workers shutting down, or a stray interrupt of a pooled thread:
            // only the former ends the renewals.
            if (!t.isClosed()) {
                scheduleRenewal(System.nanoTime());
            }
        } catch (RaftlockException e) {
            if (t.isClosed()) {
                return;
            }
            if (e instanceof SessionNotFoundException) {
                markGone(e);
                return;
            }
            if (e instanceof UnauthenticatedException || e instanceof PermissionDeniedException) {
                ErrorInfo i = new ErrorInfo("", e.code(), "session " + id + " cannot be renewed: " + e.getMessage());
                i.kind = Errors.KIND_SESSION_LOST;
                i.cause = e;
                end(Errors.of(i), true);
                return;
            }
            mu.lock();
            try {
                if (!suspended && ended == null) {
                    emit(SessionState.SUSPENDED);
                }
                suspended = true;
            } finally {
                mu.unlock();
            }
            boolean hinted = t.learn(addr, e);
            long b = backoffNanos;
            backoffNanos = Math.min(backoffNanos * 2, maxBackoff);
            scheduleRenewal(System.nanoTime() + (hinted ? 0 : Transport.jitter(b)));
        } catch (RuntimeException e) {
            // Unexpected (a malformed leader hint, say): the renewals must go on, or the
            // session is lost for nothing at its deadline. Retried from the endpoints.
            if (!t.isClosed()) {
                t.forget(addr);
                long b = backoffNanos;
                backoffNanos = Math.min(backoffNanos * 2, maxBackoff);
                scheduleRenewal(System.nanoTime() + Transport.jitter(b));
            }
        }
    }

    /** A numbered logical request of the session (Raft dissertation §6.3). */
    final class Ticket implements AutoCloseable {
        final long seq;

        Ticket(long seq) {
            this.seq = seq;
        }

        /**
         * Adds the exactly-once fields: seq, ackedBelow (the lowest number still waiting
         * for its answer) and inFlight (those numbers, the lowest 1,024), so that a long
         * wait does not hold back the acknowledgement of the calls made beside it.
         */
        ObjectNode fields(ObjectNode body) {
            List<Long> nums;
            mu.lock();
            try {
                nums = new ArrayList<>(waiting);
            } finally {
                mu.unlock();
            }
            long low = seq;
            if (!nums.isEmpty() && nums.get(0) < low) {
                low = nums.get(0);
            }
            ArrayNode in = body.putArray("inFlight");
            for (int i = 0; i < nums.size() && i < 1024; i++) {
                in.add(Wire.str(nums.get(i)));
            }
            body.put("seq", Wire.str(seq));
            body.put("ackedBelow", Wire.str(low));
            return body;
        }

        /** The answer is in, or the caller gave up and will not retry. */
        @Override
        public void close() {
            mu.lock();
            try {
                waiting.remove(seq);
            } finally {
                mu.unlock();
            }
        }
    }

    Ticket ticket() {
        mu.lock();
        try {
            seq++;
            waiting.add(seq);
            return new Ticket(seq);
        } finally {
            mu.unlock();
        }
    }

    /**
     * Gives up, in the background, an acquisition whose outcome its caller never learnt: a
     * wait is left, and a grant that raced the cancellation is released by the server. A
     * cancellation that finds nothing may have overtaken its acquire on the way to the
     * leader, so one more is sent a little later.
     */
    void cancelWaitSoon(Collection<String> names, byte[] requestId) {
        if (!isValid() || names.isEmpty()) {
            return;
        }
        String name = names.iterator().next();
        CompletableFuture<Void> done = new CompletableFuture<>();
        mu.lock();
        try {
            for (String n : names) {
                cancelling.computeIfAbsent(n, k -> new ArrayList<>()).add(done);
            }
        } finally {
            mu.unlock();
        }
        Runnable work = () -> {
            try {
                for (int i = 0; i < 2; i++) {
                    if (i > 0) {
                        pause(500);
                        if (!isValid()) {
                            return;
                        }
                    }
                    JsonNode r = client.transport().callUninterruptibly("/v1/lock/cancel-wait", Transport.CallOpts.plain(),
                            a -> Wire.obj().put("sessionId", Wire.str(id)).put("name", name).put("requestId", Wire.b64(requestId)));
                    if (Wire.bool(r, "cancelled") || Wire.bool(r, "released")) {
                        return;
                    }
                }
            } catch (RaftlockException e) {
                // Left to the server: it ends a wait at its deadline, and a session that
                // cannot be reached expires.
            } finally {
                mu.lock();
                try {
                    for (String n : names) {
                        List<CompletableFuture<Void>> l = cancelling.get(n);
                        if (l != null) {
                            l.remove(done);
                            if (l.isEmpty()) {
                                cancelling.remove(n);
                            }
                        }
                    }
                } finally {
                    mu.unlock();
                }
                done.complete(null);
            }
        };
        try {
            client.workers().execute(work);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            done.complete(null);
        }
    }

    /**
     * Retries in the background a release or resignation whose outcome its caller could
     * not learn (the cluster did not answer in time): if none was applied, what it gave up
     * would stay held for the session's whole life. A few tries, a second apart; NOT_HOLDER
     * means an earlier one was applied.
     */
    void giveUpSoon(String path, java.util.function.Supplier<ObjectNode> body) {
        Runnable work = () -> {
            for (int i = 0; i < 3; i++) {
                pause(1000);
                if (!isValid() || client.transport().isClosed()) {
                    return;
                }
                try {
                    client.transport().callUninterruptibly(path, Transport.CallOpts.plain(), a -> body.get());
                    return;
                } catch (NotHolderException | ClientClosedException e) {
                    return;
                } catch (SessionNotFoundException e) {
                    markGone(e);
                    return;
                } catch (RaftlockException e) {
                    // Still out of reach: try again, then leave it to the session's expiry.
                }
            }
        };
        try {
            client.workers().execute(work);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            // The client closed, closing the session: that released everything.
        }
    }

    /**
     * Sleeps on a background task. An interrupt (the client's workers shutting down, which
     * closes the transport first, or a stray one) only shortens it: the callers check the
     * session and the transport next, and a pooled thread must not carry it on.
     */
    private static void pause(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            // Only shortens the pause.
        }
    }

    /**
     * Lets the cancellations of name's abandoned waits finish first: a grant that raced
     * its cancellation is the session's until the cancellation releases it, and an
     * acquisition sent meanwhile would be refused ALREADY_HELD.
     */
    void cancelsSettled(String name) throws InterruptedException {
        List<CompletableFuture<Void>> pending;
        mu.lock();
        try {
            pending = new ArrayList<>(cancelling.getOrDefault(name, List.of()));
        } finally {
            mu.unlock();
        }
        for (CompletableFuture<Void> f : pending) {
            try {
                f.get();
            } catch (java.util.concurrent.ExecutionException e) {
                // It completes normally; nothing to learn.
            }
        }
    }

    /**
     * cancelsSettled for each of names. Without interruptible an interrupt does not end the
     * wait: it is remembered and returned, for the caller to set the flag again once done.
     */
    boolean cancelsSettled(Collection<String> names, boolean interruptible) throws InterruptedException {
        boolean interrupted = false;
        for (String n : names) {
            while (true) {
                try {
                    cancelsSettled(n);
                    break;
                } catch (InterruptedException e) {
                    if (interruptible) {
                        throw e;
                    }
                    interrupted = true;
                }
            }
        }
        return interrupted;
    }

    /**
     * An exclusive lock on name for this session; nothing is sent until it is acquired.
     *
     * @param name the lock's name (UTF-8, 1 to 512 bytes)
     * @return the lock
     */
    public DistributedLock lock(String name) {
        return new DistributedLock(this, name, LockOptions.exclusive());
    }

    /**
     * A lock on name with options (shared mode, lock-delay, hold cap, metadata).
     *
     * @param name the lock's name
     * @param options how it is taken
     * @return the lock
     */
    public DistributedLock lock(String name, LockOptions options) {
        return new DistributedLock(this, name, options);
    }

    /**
     * A read-write lock on name: any number of readers (shared holds) or one writer
     * (exclusive hold).
     *
     * @param name the lock's name
     * @return the read-write lock
     */
    public DistributedReadWriteLock readWriteLock(String name) {
        return new DistributedReadWriteLock(this, name);
    }

    /**
     * A counting semaphore of permits places on name. Every user of one semaphore must
     * state the same number.
     *
     * @param name the semaphore's name
     * @param permits its places
     * @return the semaphore
     */
    public DistributedSemaphore semaphore(String name, int permits) {
        return new DistributedSemaphore(this, name, permits);
    }

    /**
     * Election name, for campaigning as this session.
     *
     * @param name the election's name
     * @return the election
     */
    public Election election(String name) {
        return new Election(this, name);
    }

    /**
     * Acquires every lock of names exclusively and together (one log entry grants them
     * all, or none), waiting up to wait in every one of their FIFO queues at once, so two
     * callers of overlapping sets never deadlock, whatever order they name them in. An
     * interrupt gives the wait up on the server at once.
     *
     * @param names 2 to 64 lock names, in any order
     * @param wait how long to wait
     * @return the held set
     * @throws WaitTimedOutException when wait ran out
     * @throws InvalidArgumentException when wait is null or negative
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public LockSet acquireAll(Collection<String> names, Duration wait) throws InterruptedException {
        // Null would make it a try (tryAcquireAll's path), not a wait.
        if (wait == null) {
            throw Errors.invalidArgument("the wait must not be null");
        }
        return LockSet.acquire(this, names, wait, true);
    }

    /**
     * Acquires every lock of names together only if all are free now.
     *
     * @param names 2 to 64 lock names
     * @return the held set
     * @throws LockedException when one of them is busy (none is then held)
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public LockSet tryAcquireAll(Collection<String> names) throws InterruptedException {
        return LockSet.acquire(this, names, null, true);
    }

    /**
     * Releases the hold of lock name that this session has under token, whichever handle
     * acquired it.
     *
     * @param name the lock's name
     * @param token the hold's fencing token
     * @throws StaleTokenException when the session holds the lock under another token
     * @throws NotHolderException when it does not hold it
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public void release(String name, long token) throws InterruptedException {
        check();
        try {
            client.transport().call("/v1/lock/release", Transport.CallOpts.plain(),
                    a -> Wire.obj().put("sessionId", Wire.str(id)).put("name", name).put("token", Wire.str(token)));
        } catch (RaftlockException e) {
            noteErr(e);
            throw e;
        }
    }

    /**
     * Runs job only if no other instance holds lock name now, as ShedLock's
     * {@code @SchedulerLock}: a scheduled job's instances on several machines run it once.
     * The job runs on the calling thread with the fencing token and is interrupted if the
     * lock is lost meanwhile (then {@link SessionLostException} is thrown). The lock is kept
     * at least holdAtLeast from the start of the call even when the job finishes sooner, so
     * an instance whose schedule fires a little later finds the run taken, not free again;
     * set it to most of the job's period. A job that throws releases at once, so another
     * instance may try again.
     *
     * <pre>{@code
     * RunOnce.Result<Integer> r = session.runOnce("cron/hourly-sync", Duration.ofMinutes(50),
     *         token -> syncEverything(token));
     * if (!r.ran()) log.info("another instance ran it");
     * }</pre>
     *
     * @param <T> the job's result
     * @param name the lock's name
     * @param holdAtLeast how long the lock is kept from the start of the call
     * @param job the job, given the fencing token
     * @return whether it ran, and its result
     * @throws Exception what the job threw
     */
    public <T> RunOnce.Result<T> runOnce(String name, Duration holdAtLeast, RunOnce.Job<T> job) throws Exception {
        return RunOnce.run(this, name, holdAtLeast, job);
    }

    @Override
    public String toString() {
        return "Session[" + id + ", ttl " + ttl + "]";
    }

    static List<String> sortedUnique(Collection<String> names) {
        String[] a = names.toArray(new String[0]);
        Arrays.sort(a);
        List<String> out = new ArrayList<>();
        for (String n : a) {
            if (out.isEmpty() || !out.get(out.size() - 1).equals(n)) {
                out.add(n);
            }
        }
        return out;
    }
}
