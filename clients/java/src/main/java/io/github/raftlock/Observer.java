package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A running observation of an election's leader, from
 * {@link RaftlockClient#observe(String, Listener)}: the leader now and at every change,
 * through failovers of the cluster (the stream is reopened on the new leader node, and a
 * value already seen is not repeated). Close it to stop.
 *
 * <pre>{@code
 * try (Observer o = client.observe("svc/primary", (leader, error) -> {
 *     leader.ifPresent(g -> routeTo(g.value()));
 * })) {
 *     serveForever();
 * }
 * }</pre>
 */
public final class Observer implements AutoCloseable {
    /**
     * Learns of an election's leaders. Called on the observation's own thread, in order.
     *
     * <pre>{@code
     * Observer.Listener l = (leader, error) -> System.out.println(leader.map(Grant::value).orElse("none"));
     * }</pre>
     */
    @FunctionalInterface
    public interface Listener {
        /**
         * Called with each new leader (empty: none), or, as the last call, with the refusal
         * no retry can fix that ended the observation (no right to read the name, a bad
         * name).
         *
         * @param leader the leader now
         * @param error null, or what ended the observation
         */
        void leaderChanged(Optional<Grant> leader, RaftlockException error);
    }

    private final RaftlockClient client;
    private final String name;
    private final Listener listener;
    private final ReentrantLock mu = new ReentrantLock();
    private InputStream current;
    private Thread thread;
    private volatile boolean closed;

    private Observer(RaftlockClient client, String name, Listener listener) {
        this.client = client;
        this.name = name;
        this.listener = listener;
    }

    static Observer start(RaftlockClient client, String name, Listener listener) {
        Observer o = new Observer(client, name, listener);
        client.workers().execute(o::run);
        return o;
    }

    private void run() {
        mu.lock();
        thread = Thread.currentThread();
        mu.unlock();
        Transport t = client.transport();
        String last = "none";
        long backoff = TimeUnit.MILLISECONDS.toNanos(50);
        try {
            while (!closed && !t.isClosed()) {
                String addr = t.target();
                RaftlockException err = null;
                try (InputStream in = t.openStream(addr, "/v1/election/observe", Wire.obj().put("name", name))) {
                    mu.lock();
                    current = in;
                    mu.unlock();
                    if (closed) {
                        return;
                    }
                    BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8));
                    String line;
                    while ((line = r.readLine()) != null) {
                        if (line.isBlank()) {
                            continue;
                        }
                        JsonNode msg = Wire.JSON.readTree(line);
                        if (msg.hasNonNull("error")) {
                            err = Errors.fromBody(msg.get("error"), 0, "");
                            break;
                        }
                        t.remember(addr);
                        backoff = TimeUnit.MILLISECONDS.toNanos(50);
                        Grant g = Wire.grant(msg, "leader");
                        // A proclaim keeps the token and changes the value; a reopened
                        // stream repeats what was already seen.
                        String key = g == null ? "" : g.token() + ":" + Wire.b64(g.metadata());
                        if (!key.equals(last)) {
                            last = key;
                            listener.leaderChanged(Optional.ofNullable(g), null);
                        }
                    }
                    if (err == null) {
                        // Ended without an error item: the node went away.
                        t.forget(addr);
                    }
                } catch (IOException e) {
                    if (closed) {
                        return;
                    }
                    t.forget(addr);
                } catch (RaftlockException e) {
                    err = e;
                }
                if (closed || t.isClosed()) {
                    return;
                }
                if (err != null) {
                    if (!Transport.retryable(err)) {
                        listener.leaderChanged(Optional.empty(), err);
                        return;
                    }
                    if (t.learn(addr, err)) {
                        continue;
                    }
                }
                t.sleep(Transport.jitter(backoff));
                backoff = Math.min(backoff * 2, TimeUnit.MILLISECONDS.toNanos(800));
            }
        } catch (InterruptedException | RaftlockException e) {
            // Closed: the observation ends.
        } finally {
            mu.lock();
            try {
                thread = null;
                current = null;
            } finally {
                mu.unlock();
            }
            // The pool's next task must not inherit close()'s interrupt.
            Thread.interrupted();
        }
    }

    /** Stops the observation; the listener is not called after this returns on its thread. */
    @Override
    public void close() {
        closed = true;
        mu.lock();
        try {
            if (current != null) {
                try {
                    current.close();
                } catch (IOException e) {
                    // Hanging up is all that was wanted.
                }
            }
            if (thread != null) {
                thread.interrupt();
            }
        } finally {
            mu.unlock();
        }
    }
}
