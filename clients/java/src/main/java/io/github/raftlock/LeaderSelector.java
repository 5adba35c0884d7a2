package io.github.raftlock;

import java.util.concurrent.locks.ReentrantLock;

/**
 * Curator's {@code LeaderSelector} over an {@link Election}: once started it campaigns in
 * the background and, when elected, runs the listener's
 * {@link LeaderSelectorListener#takeLeadership(Election)} on its own thread; leadership is
 * given up when that returns. With {@link #autoRequeue()} it then campaigns again. The
 * thread is interrupted if leadership is lost meanwhile, so work stops before another
 * instance can be elected.
 *
 * <pre>{@code
 * LeaderSelector selector = new LeaderSelector(session, "svc/compactor", "host-7", election -> {
 *     while (!Thread.currentThread().isInterrupted()) compactOnce(election.token());
 * });
 * selector.autoRequeue();
 * selector.start();
 * }</pre>
 */
public final class LeaderSelector implements AutoCloseable {
    private final Session session;
    private final String name;
    private final String value;
    private final LeaderSelectorListener listener;
    private final ReentrantLock mu = new ReentrantLock();
    private boolean requeue;
    private boolean started;
    private boolean closed;
    private Thread worker;
    private volatile boolean leading;

    /**
     * A selector on election name for session, publishing value while it leads.
     *
     * @param session the candidate's session
     * @param name the election's name
     * @param value what observers see while this instance leads
     * @param listener the work to run while leading
     */
    public LeaderSelector(Session session, String name, String value, LeaderSelectorListener listener) {
        this.session = session;
        this.name = name;
        this.value = value;
        this.listener = listener;
    }

    /** Campaigns again each time takeLeadership returns, until closed. */
    public void autoRequeue() {
        mu.lock();
        requeue = true;
        mu.unlock();
    }

    /**
     * Starts campaigning in the background.
     *
     * @throws IllegalStateException when started before
     */
    public void start() {
        mu.lock();
        try {
            if (started) {
                throw new IllegalStateException("a selector starts once");
            }
            started = true;
        } finally {
            mu.unlock();
        }
        session.client().workers().execute(this::run);
    }

    /**
     * Whether this instance runs takeLeadership now and its session is within its local
     * deadline (past it, another instance may already have been elected).
     *
     * @return true while leading
     */
    public boolean hasLeadership() {
        return leading && session.isValid();
    }

    private void run() {
        mu.lock();
        try {
            if (closed) {
                return;
            }
            worker = Thread.currentThread();
        } finally {
            mu.unlock();
        }
        try {
            do {
                Election e = session.election(name);
                try {
                    e.campaign(value);
                } catch (InterruptedException x) {
                    return;
                } catch (RaftlockException x) {
                    // The session is lost or the campaign refused: no leadership to take.
                    return;
                }
                Thread me = Thread.currentThread();
                Runnable unwatch = session.watchEnd(why -> me.interrupt());
                leading = true;
                try {
                    listener.takeLeadership(e);
                } catch (InterruptedException x) {
                    // Leadership lost or the selector closed: the work stopped, as asked.
                } catch (Exception x) {
                    // The work failed: leadership is given up as if it had returned.
                } finally {
                    leading = false;
                    unwatch.run();
                    Thread.interrupted();
                    try {
                        e.resign();
                    } catch (InterruptedException | RaftlockException x) {
                        // The session's end releases it.
                    }
                }
            } while (again());
        } finally {
            mu.lock();
            try {
                worker = null;
            } finally {
                mu.unlock();
            }
            // The pool's next task must not inherit close()'s interrupt.
            Thread.interrupted();
        }
    }

    private boolean again() {
        mu.lock();
        try {
            return requeue && !closed && session.isValid();
        } finally {
            mu.unlock();
        }
    }

    /**
     * Stops: leaves the line at once, or interrupts takeLeadership (leadership is given up
     * when it returns).
     */
    @Override
    public void close() {
        mu.lock();
        try {
            closed = true;
            if (worker != null) {
                worker.interrupt();
            }
        } finally {
            mu.unlock();
        }
    }
}
