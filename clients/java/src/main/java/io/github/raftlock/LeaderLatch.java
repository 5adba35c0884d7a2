package io.github.raftlock;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Curator's {@code LeaderLatch} over an {@link Election}: {@link #start()} joins the line
 * in the background, {@link #await()} blocks until this latch leads, {@link #close()}
 * leaves the line or steps down, handing leadership to the next in line at once.
 * Leadership ends for good when the session is lost; start a new latch on a new session
 * to run again.
 *
 * <pre>{@code
 * try (LeaderLatch latch = new LeaderLatch(session, "svc/scheduler", "host-7")) {
 *     latch.start();
 *     latch.await();
 *     while (latch.hasLeadership()) runScheduledWork(latch.token());
 * }
 * }</pre>
 */
public final class LeaderLatch implements AutoCloseable {
    private enum State { LATENT, STARTED, CLOSED }

    private final Session session;
    private final Election election;
    private final String id;
    private final List<LeaderLatchListener> listeners = new CopyOnWriteArrayList<>();
    private final ReentrantLock mu = new ReentrantLock();
    private final Condition changed = mu.newCondition();
    private State state = State.LATENT;
    private boolean leader;
    private Thread campaigner;
    private Runnable unwatch;
    // Why the campaign ended without leadership (a refusal, a lost session).
    private RaftlockException failure;

    /**
     * A latch on election name for session, publishing id as its value once elected.
     *
     * @param session the candidate's session
     * @param name the election's name
     * @param id the value observers see while this latch leads
     */
    public LeaderLatch(Session session, String name, String id) {
        this.session = session;
        this.election = session.election(name);
        this.id = id;
    }

    /**
     * Registers a listener for gaining and losing leadership.
     *
     * @param l the listener
     */
    public void addListener(LeaderLatchListener l) {
        listeners.add(l);
    }

    /**
     * Joins the election's line in the background.
     *
     * @throws IllegalStateException when started before
     */
    public void start() {
        mu.lock();
        try {
            if (state != State.LATENT) {
                throw new IllegalStateException("a latch starts once");
            }
            state = State.STARTED;
        } finally {
            mu.unlock();
        }
        session.client().workers().execute(this::campaign);
    }

    private void campaign() {
        mu.lock();
        try {
            if (state != State.STARTED) {
                return;
            }
            campaigner = Thread.currentThread();
        } finally {
            mu.unlock();
        }
        boolean elected = false;
        try {
            election.campaign(id);
            elected = true;
        } catch (InterruptedException e) {
            // Closed: the latch never leads.
        } catch (RaftlockException e) {
            mu.lock();
            failure = e;
            mu.unlock();
        } finally {
            mu.lock();
            try {
                campaigner = null;
                if (elected && state == State.STARTED) {
                    leader = true;
                    // Called on whatever thread ends the session, the timer's maybe: the
                    // user's listeners must not hold it up.
                    unwatch = session.watchEnd(why -> {
                        try {
                            session.client().workers().execute(this::lose);
                        } catch (java.util.concurrent.RejectedExecutionException x) {
                            lose();
                        }
                    });
                }
                changed.signalAll();
            } finally {
                mu.unlock();
            }
            // The pool's next task must not inherit close()'s interrupt.
            Thread.interrupted();
        }
        if (elected) {
            if (hasLeadership()) {
                listeners.forEach(LeaderLatchListener::isLeader);
            } else {
                // Closed while the grant was on its way: hand it on.
                try {
                    election.resign();
                } catch (InterruptedException | RaftlockException e) {
                    // The session's end releases it.
                }
            }
        }
    }

    private void lose() {
        boolean was;
        mu.lock();
        try {
            was = leader;
            leader = false;
            changed.signalAll();
        } finally {
            mu.unlock();
        }
        if (was) {
            listeners.forEach(LeaderLatchListener::notLeader);
        }
    }

    /**
     * Whether this latch leads now (and its session is within its local deadline).
     *
     * @return true while leading
     */
    public boolean hasLeadership() {
        mu.lock();
        try {
            return leader && state == State.STARTED && election.isLeader();
        } finally {
            mu.unlock();
        }
    }

    /**
     * The term-of-office token while leading.
     *
     * @return the token, or 0
     */
    public long token() {
        return election.token();
    }

    /**
     * Blocks until this latch leads.
     *
     * @throws InterruptedException when interrupted first
     * @throws IllegalStateException when the latch is closed first
     * @throws RaftlockException when the campaign failed (its session lost, a refusal)
     */
    public void await() throws InterruptedException {
        mu.lock();
        try {
            while (!leader) {
                if (failure != null) {
                    throw failure;
                }
                if (state == State.CLOSED) {
                    throw new IllegalStateException("the latch was closed");
                }
                session.check();
                // Bounded, so that a session lost without a campaign to end still wakes it.
                changed.await(100, TimeUnit.MILLISECONDS);
            }
        } finally {
            mu.unlock();
        }
    }

    /**
     * Blocks until this latch leads or the time runs out.
     *
     * @param timeout how long to wait
     * @return true if it leads
     * @throws InterruptedException when interrupted first
     */
    public boolean await(Duration timeout) throws InterruptedException {
        long end = System.nanoTime() + timeout.toNanos();
        mu.lock();
        try {
            while (!leader) {
                long left = end - System.nanoTime();
                if (left <= 0 || state == State.CLOSED || failure != null || !session.isValid()) {
                    return false;
                }
                changed.awaitNanos(Math.min(left, TimeUnit.MILLISECONDS.toNanos(100)));
            }
            return true;
        } finally {
            mu.unlock();
        }
    }

    /**
     * Leaves the line (the wait is given up on the server at once) or steps down (the next
     * in line is elected in the same log entry).
     */
    @Override
    public void close() {
        boolean was;
        mu.lock();
        try {
            if (state == State.CLOSED) {
                return;
            }
            state = State.CLOSED;
            was = leader;
            leader = false;
            if (campaigner != null) {
                campaigner.interrupt();
            }
            if (unwatch != null) {
                unwatch.run();
            }
            changed.signalAll();
        } finally {
            mu.unlock();
        }
        if (was) {
            try {
                election.resign();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } catch (RaftlockException e) {
                // The session's end releases it.
            }
            listeners.forEach(LeaderLatchListener::notLeader);
        }
    }
}
