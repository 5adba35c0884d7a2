package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.IOException;
import java.io.InputStream;
import java.net.ConnectException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpConnectTimeoutException;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.IntFunction;

/**
 * The nodes of one cluster as a client knows them: the endpoints, the leader last seen,
 * and calls that follow the leader with jittered exponential backoff. A port of the Go
 * client's transport.go onto {@link HttpClient}.
 */
final class Transport {
    /** How long a node that stopped answering is tried last. */
    private static final long SUSPECT_NANOS = TimeUnit.SECONDS.toNanos(5);

    private final RaftlockClient.Config cfg;
    private final String scheme;
    private final HttpClient http;

    private final ReentrantLock mu = new ReentrantLock();
    // Signalled when the client closes, so that backoff sleeps end at once.
    private final Condition closedSignal = mu.newCondition();
    private final List<String> endpoints;
    private String leader = "";
    private int next;
    private final Map<String, Long> suspects = new HashMap<>();
    private boolean closed;
    // Every exchange in flight, so that close can end them.
    private final Set<CompletableFuture<?>> inFlight = ConcurrentHashMap.newKeySet();

    /**
     * Test seam: while set, every attempt fails as if no node could be reached (the
     * request never leaves this host). How the tests cut a client off from the cluster
     * without pausing the JVM that checks what it does meanwhile.
     */
    volatile boolean partitioned;

    private final java.util.concurrent.ScheduledExecutorService timer;
    private final java.util.concurrent.ExecutorService workers;

    Transport(RaftlockClient.Config cfg, java.util.concurrent.ScheduledExecutorService timer,
            java.util.concurrent.ExecutorService workers) {
        this.cfg = cfg;
        this.timer = timer;
        this.workers = workers;
        this.endpoints = new ArrayList<>(cfg.endpoints);
        this.scheme = cfg.sslContext != null ? "https" : "http";
        HttpClient.Builder b = HttpClient.newBuilder()
                // HTTP/2 would multiplex waiting acquires over one connection, and a
                // waiter's connection closing is one of the ways the server learns the
                // caller left; keep one request per connection.
                .version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(cfg.dialTimeout)
                // Every call goes to a node this client chose; a proxy from the
                // environment would hide the leader hint's address.
                .proxy(HttpClient.Builder.NO_PROXY);
        if (cfg.sslContext != null) {
            b.sslContext(cfg.sslContext);
        }
        this.http = b.build();
    }

    /** normalize turns "http://host:port/" into "host:port". */
    static String normalize(String endpoint) {
        String e = endpoint.trim();
        if (e.startsWith("http://")) {
            e = e.substring("http://".length());
        } else if (e.startsWith("https://")) {
            e = e.substring("https://".length());
        }
        while (e.endsWith("/")) {
            e = e.substring(0, e.length() - 1);
        }
        return e;
    }

    /**
     * Whether a is a {@code host:port} a URI can carry. Leader hints come from the network:
     * one that is not an address is ignored rather than learned as an endpoint every later
     * call could pick and fail on.
     */
    static boolean isAddress(String a) {
        int colon = a.lastIndexOf(':');
        if (colon <= 0 || colon == a.length() - 1) {
            return false;
        }
        try {
            int port = Integer.parseInt(a.substring(colon + 1));
            return port > 0 && port < 65536 && new java.net.URI("http://" + a + "/").getHost() != null;
        } catch (NumberFormatException | java.net.URISyntaxException e) {
            return false;
        }
    }

    List<String> endpoints() {
        mu.lock();
        try {
            return List.copyOf(endpoints);
        } finally {
            mu.unlock();
        }
    }

    /**
     * The node to try next: the leader last seen, else the endpoints in turn, passing over
     * nodes that recently stopped answering unless every node did.
     */
    String target() {
        mu.lock();
        try {
            if (!leader.isEmpty()) {
                return leader;
            }
            long now = System.nanoTime();
            for (int i = 0; i < endpoints.size(); i++) {
                String addr = endpoints.get(next % endpoints.size());
                next = (next + 1) % endpoints.size();
                Long until = suspects.get(addr);
                if (until == null || now - until >= 0) {
                    return addr;
                }
            }
            String addr = endpoints.get(next % endpoints.size());
            next = (next + 1) % endpoints.size();
            return addr;
        } finally {
            mu.unlock();
        }
    }

    /** remember takes addr for the leader: it just served a leader-only call. */
    void remember(String addr) {
        mu.lock();
        try {
            leader = addr;
            suspects.remove(addr);
        } finally {
            mu.unlock();
        }
    }

    void forget(String addr) {
        mu.lock();
        try {
            if (leader.equals(addr)) {
                leader = "";
            }
        } finally {
            mu.unlock();
        }
    }

    void suspect(String addr) {
        mu.lock();
        try {
            if (leader.equals(addr)) {
                leader = "";
            }
            suspects.put(addr, System.nanoTime() + SUSPECT_NANOS);
        } finally {
            mu.unlock();
        }
    }

    /** follow takes a hinted address for the leader, learning it as an endpoint if new. */
    void follow(String addr) {
        mu.lock();
        try {
            if (!endpoints.contains(addr)) {
                endpoints.add(addr);
            }
            leader = addr;
            suspects.remove(addr);
        } finally {
            mu.unlock();
        }
    }

    void hint(String leaderAddr) {
        String a = normalize(leaderAddr);
        if (isAddress(a)) {
            follow(a);
        }
    }

    /**
     * learn learns from a failed attempt at addr: follows a leader hint (true), or stops
     * taking addr for the leader.
     */
    boolean learn(String addr, RaftlockException e) {
        String h = normalize(e.leader());
        if (isAddress(h) && !h.equals(addr)) {
            follow(h);
            return true;
        }
        if (e.httpStatus() == 0) {
            suspect(addr);
        } else {
            forget(addr);
        }
        return false;
    }

    boolean isClosed() {
        mu.lock();
        try {
            return closed;
        } finally {
            mu.unlock();
        }
    }

    void close() {
        mu.lock();
        try {
            closed = true;
            closedSignal.signalAll();
        } finally {
            mu.unlock();
        }
        for (CompletableFuture<?> f : inFlight) {
            f.cancel(true);
        }
    }

    /** retryable: refusals that carry a verdict are final. */
    static boolean retryable(RaftlockException e) {
        return e instanceof UnavailableException;
    }

    private HttpRequest.Builder request(String addr, String path, JsonNode body, Duration timeout, String accept) {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(scheme + "://" + addr + path))
                .timeout(timeout)
                .header("content-type", "application/json")
                .header("accept", accept)
                .POST(HttpRequest.BodyPublishers.ofString(body.toString()));
        if (!cfg.token.isEmpty()) {
            b.header("authorization", "Bearer " + cfg.token);
        }
        return b;
    }

    /**
     * One attempt of a unary call at addr: the decoded answer, or a typed refusal. Waits
     * interruptibly; an interrupt abandons the exchange (the connection closes, which is
     * also how a node learns a waiting caller left).
     */
    JsonNode post(String addr, String path, JsonNode body, Duration timeout) throws InterruptedException {
        return post(addr, path, body, timeout, true);
    }

    /**
     * post, or with interruptible false one an interrupt does not cut short: the exchange
     * is waited out and the flag set again afterwards. Closing a waiting acquire's
     * connection is how the server learns its caller left, so an uninterruptible wait
     * must keep it open or lose its place in the queue.
     */
    JsonNode post(String addr, String path, JsonNode body, Duration timeout, boolean interruptible) throws InterruptedException {
        if (isClosed()) {
            throw Errors.closed();
        }
        if (partitioned) {
            throw Errors.attempt(addr, new ConnectException("cut off from the cluster (test partition)"), true);
        }
        HttpRequest req = request(addr, path, body, timeout, "application/json").build();
        CompletableFuture<HttpResponse<byte[]>> f = http.sendAsync(req, HttpResponse.BodyHandlers.ofByteArray());
        inFlight.add(f);
        // A long call to a node that stops answering (frozen, cut off) would otherwise wait
        // out its whole timeout instead of moving on: it is watched with status probes.
        AtomicBoolean stalled = new AtomicBoolean();
        java.util.concurrent.ScheduledFuture<?> watch = null;
        if (timeout.compareTo(cfg.probeInterval) > 0 && !path.equals(STATUS)) {
            watch = watch(addr, () -> {
                stalled.set(true);
                f.cancel(true);
            });
        }
        HttpResponse<byte[]> res;
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    res = f.get();
                    break;
                } catch (InterruptedException ie) {
                    if (interruptible) {
                        f.cancel(true);
                        throw ie;
                    }
                    interrupted = true;
                }
            }
        } catch (CancellationException ce) {
            if (stalled.get()) {
                throw Errors.attempt(addr, new IOException("stopped answering"), false);
            }
            throw Errors.closed();
        } catch (ExecutionException ee) {
            if (isClosed()) {
                throw Errors.closed();
            }
            Throwable c = ee.getCause() == null ? ee : ee.getCause();
            throw Errors.attempt(addr, c, unsent(c));
        } finally {
            inFlight.remove(f);
            if (watch != null) {
                watch.cancel(false);
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        JsonNode data = null;
        try {
            if (res.body().length > 0) {
                data = Wire.JSON.readTree(res.body());
            }
        } catch (IOException e) {
            // A proxy's page is no JSON: the status alone speaks then.
            data = null;
        }
        int status = res.statusCode();
        if (status < 200 || status > 299) {
            throw Errors.fromBody(data, status, res.headers().firstValue("raftlock-leader").orElse(""));
        }
        if (data == null) {
            ErrorInfo i = new ErrorInfo("", "INTERNAL", "node " + addr + ": undecodable answer to " + path);
            i.httpStatus = status;
            throw Errors.of(i);
        }
        return data;
    }

    private static final String STATUS = "/v1/cluster/status";

    /**
     * Reads addr's status every probe interval, starting one interval in (most calls end
     * well before), and calls cut once if the node does not answer in time. Only silence
     * counts: a refusal is an answer. The probes run on the workers, never on the timer's
     * one thread, which session deadlines depend on.
     */
    private java.util.concurrent.ScheduledFuture<?> watch(String addr, Runnable cut) {
        AtomicBoolean probing = new AtomicBoolean();
        AtomicBoolean done = new AtomicBoolean();
        long every = cfg.probeInterval.toNanos();
        Runnable probe = () -> {
            if (done.get() || !probing.compareAndSet(false, true)) {
                return;
            }
            try {
                post(addr, STATUS, Wire.obj(), cfg.probeInterval);
            } catch (RaftlockException e) {
                if (e.httpStatus() == 0 && e instanceof UnavailableException && !isClosed() && done.compareAndSet(false, true)) {
                    suspect(addr);
                    cut.run();
                }
            } catch (InterruptedException e) {
                // The client is closing.
            } finally {
                probing.set(false);
            }
        };
        try {
            return timer.scheduleWithFixedDelay(() -> {
                try {
                    workers.execute(probe);
                } catch (java.util.concurrent.RejectedExecutionException e) {
                    // The client closed.
                }
            }, every, every, TimeUnit.NANOSECONDS);
        } catch (java.util.concurrent.RejectedExecutionException e) {
            return null;
        }
    }

    /** unsent tells whether a transport error means the request never left this host. */
    private static boolean unsent(Throwable t) {
        for (Throwable c = t; c != null; c = c.getCause()) {
            if (c instanceof ConnectException || c instanceof HttpConnectTimeoutException) {
                return true;
            }
        }
        return false;
    }

    /** One logical call's settings. */
    static final class CallOpts {
        /** The server-side wait the call asks for; extends the attempt timeout and budget. */
        Duration wait = Duration.ZERO;
        /** Retried only when the node surely did not act on it. */
        boolean notIdempotent;
        /** A success does not show the node leads. */
        boolean anyNode;
        /** The retry budget before the wait, when shorter than the request timeout. */
        Duration budget;
        /**
         * An interrupt neither ends the call nor its exchange; it is remembered and the
         * flag set again when the call returns.
         */
        boolean uninterruptible;

        static CallOpts plain() {
            return new CallOpts();
        }

        static CallOpts waiting(Duration wait) {
            CallOpts o = new CallOpts();
            o.wait = wait;
            return o;
        }
    }

    /**
     * call runs one logical call, retrying on other nodes with jittered exponential backoff
     * until it succeeds, is refused for good, or its budget (the request timeout plus the
     * wait) ends. build makes each attempt's body given the attempt number.
     */
    JsonNode call(String path, CallOpts o, IntFunction<ObjectNode> build) throws InterruptedException {
        if (!o.uninterruptible) {
            return attempts(path, o, build);
        }
        // Set again at the end, not now: a set flag would end every wait on the way.
        boolean interrupted = Thread.interrupted();
        try {
            return attempts(path, o, build);
        } finally {
            if (interrupted || Thread.interrupted()) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * call that an interrupt does not cut short, for what gives something up (a release,
     * a resignation, a cancellation, a session's close): skipped on an interrupted thread,
     * it would leave the lock or leadership held for the session's whole life. The flag is
     * cleared for the call and set again afterwards if it was set before or meanwhile.
     * Only for idempotent calls: they are retried as usual.
     */
    JsonNode callUninterruptibly(String path, CallOpts o, IntFunction<ObjectNode> build) {
        o.uninterruptible = true;
        try {
            return call(path, o, build);
        } catch (InterruptedException e) {
            // An uninterruptible call catches every interrupt; the compiler's path only.
            Thread.currentThread().interrupt();
            throw new IllegalStateException("an uninterruptible call was interrupted", e);
        }
    }

    private JsonNode attempts(String path, CallOpts o, IntFunction<ObjectNode> build) throws InterruptedException {
        Duration budget = o.budget != null && o.budget.compareTo(cfg.requestTimeout) < 0 ? o.budget : cfg.requestTimeout;
        long giveUp = System.nanoTime() + budget.toNanos() + o.wait.toNanos();
        long backoff = cfg.initialBackoff.toNanos();
        for (int attempt = 0; ; attempt++) {
            if (isClosed()) {
                throw Errors.closed();
            }
            if (!o.uninterruptible && Thread.interrupted()) {
                throw new InterruptedException();
            }
            String addr = target();
            ObjectNode body = build.apply(attempt);
            RaftlockException e;
            try {
                JsonNode r = post(addr, path, body, cfg.attemptTimeout.plus(o.wait), !o.uninterruptible);
                if (!o.anyNode) {
                    remember(addr);
                }
                return r;
            } catch (RaftlockException x) {
                e = x;
            }
            boolean again = retryable(e);
            if (o.notIdempotent) {
                again = e instanceof NotLeaderException || e.notSent();
            }
            if (!again) {
                throw e;
            }
            boolean hinted = learn(addr, e);
            long left = giveUp - System.nanoTime();
            if (left <= 0 || isClosed()) {
                if (e instanceof ClientClosedException) {
                    throw e;
                }
                ErrorInfo i = new ErrorInfo(e.wireReason(), e.code(),
                        "cluster unavailable: " + path + " not served in time; last: " + e.getMessage());
                i.kind = Errors.KIND_UNAVAILABLE;
                i.leader = e.leader();
                i.httpStatus = e.httpStatus();
                i.cause = e;
                throw Errors.of(i);
            }
            if (!hinted) {
                sleep(Math.min(jitter(backoff), left), !o.uninterruptible);
                backoff = Math.min(backoff * 2, cfg.maxBackoff.toNanos());
            }
        }
    }

    /** jitter scales d by a random factor in [0.5, 1.5), so that clients retry apart. */
    static long jitter(long nanos) {
        return (long) (nanos * (0.5 + ThreadLocalRandom.current().nextDouble()));
    }

    /** Sleeps, or less if the client closes. */
    void sleep(long nanos) throws InterruptedException {
        sleep(nanos, true);
    }

    /** sleep, or with interruptible false one that sets the flag again at the end. */
    void sleep(long nanos, boolean interruptible) throws InterruptedException {
        boolean interrupted = false;
        mu.lock();
        try {
            long end = System.nanoTime() + nanos;
            long left = nanos;
            while (!closed && left > 0) {
                try {
                    closedSignal.awaitNanos(left);
                } catch (InterruptedException e) {
                    if (interruptible) {
                        throw e;
                    }
                    interrupted = true;
                }
                left = end - System.nanoTime();
            }
            if (closed) {
                throw Errors.closed();
            }
        } finally {
            mu.unlock();
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Opens a streaming call (newline-delimited JSON) at addr; closing the stream hangs
     * up.
     */
    InputStream openStream(String addr, String path, JsonNode body) throws InterruptedException {
        if (isClosed()) {
            throw Errors.closed();
        }
        if (partitioned) {
            throw Errors.attempt(addr, new ConnectException("cut off from the cluster (test partition)"), true);
        }
        HttpRequest req = request(addr, path, body, cfg.attemptTimeout, "application/x-ndjson").build();
        CompletableFuture<HttpResponse<InputStream>> f = http.sendAsync(req, HttpResponse.BodyHandlers.ofInputStream());
        inFlight.add(f);
        HttpResponse<InputStream> res;
        try {
            res = f.get();
        } catch (InterruptedException ie) {
            f.cancel(true);
            throw ie;
        } catch (CancellationException ce) {
            throw Errors.closed();
        } catch (ExecutionException ee) {
            Throwable c = ee.getCause() == null ? ee : ee.getCause();
            throw Errors.attempt(addr, c, unsent(c));
        } finally {
            inFlight.remove(f);
        }
        int status = res.statusCode();
        if (status < 200 || status > 299) {
            JsonNode data = null;
            try (InputStream in = res.body()) {
                data = Wire.JSON.readTree(in.readNBytes(1 << 20));
            } catch (IOException e) {
                data = null;
            }
            throw Errors.fromBody(data, status, res.headers().firstValue("raftlock-leader").orElse(""));
        }
        return res.body();
    }
}
