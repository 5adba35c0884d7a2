package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;

/**
 * A handle to a raftlock cluster. It finds the leader itself (following a follower's
 * leader hint), retries what carries no verdict (no leader, no quorum, a broken
 * connection) with jittered exponential backoff, and keeps its sessions alive in the
 * background. One client per process is enough; it is safe for concurrent use. Closing it
 * closes its sessions, releasing their locks at once.
 *
 * <pre>{@code
 * try (RaftlockClient client = RaftlockClient.fromEnv();
 *      Session session = client.newSession(Duration.ofSeconds(10))) {
 *     DistributedLock lock = session.lock("jobs/nightly");
 *     try (LockGuard g = lock.acquire()) {
 *         System.out.println("token " + g.token());
 *     }
 * }
 * }</pre>
 */
public final class RaftlockClient implements AutoCloseable {
    /** The environment variable with the endpoints (comma-separated); the CLI's too. */
    public static final String ENV_ENDPOINTS = "RAFTLOCK_ENDPOINTS";
    /** The environment variable with a PEM CA certificate file to trust (turns TLS on). */
    public static final String ENV_CACERT = "RAFTLOCK_CACERT";
    /** The environment variable with the bearer token sent with every call. */
    public static final String ENV_AUTH_TOKEN = "RAFTLOCK_AUTH_TOKEN";
    /** The environment variable with the client name shown by describe and server logs. */
    public static final String ENV_CLIENT_NAME = "RAFTLOCK_CLIENT_NAME";

    /** The settings a built client runs with. */
    static final class Config {
        List<String> endpoints = new ArrayList<>();
        SSLContext sslContext;
        String token = "";
        String clientName = "";
        Duration dialTimeout = Duration.ofSeconds(2);
        Duration requestTimeout = Duration.ofSeconds(15);
        Duration attemptTimeout = Duration.ofSeconds(6);
        Duration initialBackoff = Duration.ofMillis(25);
        Duration maxBackoff = Duration.ofMillis(800);
        Duration probeInterval = Duration.ofSeconds(2);
    }

    private final Config cfg;
    private final Transport transport;
    private final ScheduledExecutorService timer;
    private final ExecutorService workers;
    private final List<Session> sessions = new CopyOnWriteArrayList<>();
    private final java.util.concurrent.atomic.AtomicBoolean closed = new java.util.concurrent.atomic.AtomicBoolean();

    private RaftlockClient(Config cfg) {
        this.cfg = cfg;
        ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, daemon("raftlock-timer"));
        t.setRemoveOnCancelPolicy(true);
        this.timer = t;
        // Keep-alives, probes, background cancellations, listeners and campaigns block on
        // I/O or on user code: never on the timer's one thread.
        this.workers = Executors.newCachedThreadPool(daemon("raftlock-worker"));
        this.transport = new Transport(cfg, timer, workers);
    }

    private static ThreadFactory daemon(String prefix) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread th = new Thread(r, prefix + "-" + n.incrementAndGet());
            // Keep-alives must never keep a JVM from exiting.
            th.setDaemon(true);
            return th;
        };
    }

    /**
     * A builder with no endpoints set.
     *
     * @return a new builder
     */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * The client the raftlock CLI would make: {@code RAFTLOCK_ENDPOINTS} (default
     * {@code 127.0.0.1:7000}), {@code RAFTLOCK_CACERT}, {@code RAFTLOCK_AUTH_TOKEN} and
     * {@code RAFTLOCK_CLIENT_NAME}. An {@code https://} endpoint turns TLS on with the
     * JVM's trusted roots.
     *
     * @return a client; it does not contact the cluster until the first call
     */
    public static RaftlockClient fromEnv() {
        return builderFromEnv(System.getenv()).build();
    }

    /**
     * A builder set up from env as {@link #fromEnv()} reads the process environment, to
     * adjust before building.
     *
     * @param env the variables, e.g. {@code System.getenv()}
     * @return a builder
     */
    public static Builder builderFromEnv(Map<String, String> env) {
        Builder b = new Builder();
        String eps = env.getOrDefault(ENV_ENDPOINTS, "");
        if (eps.isBlank()) {
            eps = "127.0.0.1:7000";
        }
        b.endpoints(eps);
        String ca = env.getOrDefault(ENV_CACERT, "");
        if (!ca.isBlank()) {
            b.caCert(Path.of(ca));
        }
        b.authToken(env.getOrDefault(ENV_AUTH_TOKEN, ""));
        b.clientName(env.getOrDefault(ENV_CLIENT_NAME, ""));
        return b;
    }

    /**
     * Says how to reach a cluster. Only the endpoints are required.
     *
     * <pre>{@code
     * RaftlockClient client = RaftlockClient.builder()
     *         .endpoints("https://10.0.0.1:7000,10.0.0.2:7000")
     *         .caCert(Path.of("/etc/raftlock/ca.pem"))
     *         .authToken(System.getenv("RAFTLOCK_AUTH_TOKEN"))
     *         .requestTimeout(Duration.ofSeconds(10))
     *         .build();
     * }</pre>
     */
    public static final class Builder {
        private final List<String> raw = new ArrayList<>();
        private Path caCert;
        private SSLContext sslContext;
        private String token = "";
        private String clientName = "";
        private final Config durations = new Config();

        private Builder() {}

        /**
         * Adds client addresses of some nodes ({@code host:port}, with or without
         * {@code http://} or {@code https://}); an entry may hold several, comma-separated.
         * The client learns the others from leader hints.
         *
         * @param endpoints the addresses
         * @return this builder
         */
        public Builder endpoints(String... endpoints) {
            raw.addAll(List.of(endpoints));
            return this;
        }

        /**
         * Adds client addresses of some nodes, as {@link #endpoints(String...)}.
         *
         * @param endpoints the addresses
         * @return this builder
         */
        public Builder endpoints(Collection<String> endpoints) {
            raw.addAll(endpoints);
            return this;
        }

        /**
         * Trusts the PEM CA certificate(s) in file (instead of the JVM's roots) and turns
         * TLS on.
         *
         * @param file a PEM file
         * @return this builder
         */
        public Builder caCert(Path file) {
            this.caCert = file;
            return this;
        }

        /**
         * Speaks HTTPS with this context (for client certificates or a custom trust
         * setup); a {@link #caCert(Path)} given too takes precedence for trust.
         *
         * @param context the TLS context
         * @return this builder
         */
        public Builder sslContext(SSLContext context) {
            this.sslContext = context;
            return this;
        }

        /**
         * Sends {@code authorization: Bearer TOKEN} with every call, for clusters started
         * with {@code --auth-file}.
         *
         * @param token printable ASCII without spaces; empty sends none
         * @return this builder
         */
        public Builder authToken(String token) {
            this.token = token == null ? "" : token;
            return this;
        }

        /**
         * Names the client in describe output and server logs (default
         * {@code java:HOST:PID}).
         *
         * @param name the name
         * @return this builder
         */
        public Builder clientName(String name) {
            this.clientName = name == null ? "" : name;
            return this;
        }

        /**
         * Bounds opening a connection to one node (default 2 s).
         *
         * @param d the timeout
         * @return this builder
         */
        public Builder dialTimeout(Duration d) {
            durations.dialTimeout = d;
            return this;
        }

        /**
         * Bounds the retrying of one call, leader changes included (default 15 s); a
         * waiting call gets its wait on top.
         *
         * @param d the timeout
         * @return this builder
         */
        public Builder requestTimeout(Duration d) {
            durations.requestTimeout = d;
            return this;
        }

        /**
         * Bounds one attempt at one node (default 6 s); a waiting call gets its wait on top.
         *
         * @param d the timeout
         * @return this builder
         */
        public Builder attemptTimeout(Duration d) {
            durations.attemptTimeout = d;
            return this;
        }

        /**
         * Sets the first retry delay (default 25 ms) and the most it doubles to (default
         * 800 ms), both with jitter.
         *
         * @param initial the first delay
         * @param max the longest delay
         * @return this builder
         */
        public Builder backoff(Duration initial, Duration max) {
            durations.initialBackoff = initial;
            durations.maxBackoff = max;
            return this;
        }

        /**
         * Sets how often a node serving a long call (a waiting acquire, a campaign) is
         * checked for life, and how long the check may take (default 2 s): a frozen node
         * never closes the connection, so without it the call would wait out its whole
         * timeout.
         *
         * @param d the interval
         * @return this builder
         */
        public Builder probeInterval(Duration d) {
            durations.probeInterval = d;
            return this;
        }

        /** The normalized endpoints and whether one asked for TLS; checks their form. */
        List<String> parsedEndpoints() {
            List<String> out = new ArrayList<>();
            for (String e : raw) {
                for (String part : e.split(",")) {
                    String n = Transport.normalize(part);
                    if (n.isEmpty()) {
                        continue;
                    }
                    if (!Transport.isAddress(n)) {
                        throw Errors.invalidArgument("bad endpoint \"" + part.trim() + "\": expected host:port");
                    }
                    out.add(n);
                }
            }
            return out;
        }

        boolean wantsTls() {
            return caCert != null || sslContext != null
                    || raw.stream().flatMap(e -> List.of(e.split(",")).stream()).anyMatch(e -> e.trim().startsWith("https://"));
        }

        String token() {
            return token;
        }

        Path caCert() {
            return caCert;
        }

        /**
         * Makes the client. It does not contact the cluster: the first call does
         * ({@link RaftlockClient#status()} checks that the cluster answers and takes the
         * credentials).
         *
         * @return the client
         * @throws InvalidArgumentException for no or malformed endpoints, an unreadable CA
         *     file, or a token that is not printable ASCII
         */
        public RaftlockClient build() {
            Config c = new Config();
            c.endpoints = parsedEndpoints();
            if (c.endpoints.isEmpty()) {
                throw Errors.invalidArgument("no endpoints given");
            }
            for (char ch : token.toCharArray()) {
                if (ch < 0x21 || ch > 0x7e) {
                    throw Errors.invalidArgument("the token must be printable ASCII without spaces");
                }
            }
            c.token = token;
            c.clientName = clientName.isEmpty() ? defaultName() : clientName;
            c.dialTimeout = durations.dialTimeout;
            c.requestTimeout = durations.requestTimeout;
            c.attemptTimeout = durations.attemptTimeout;
            c.initialBackoff = durations.initialBackoff;
            c.maxBackoff = durations.maxBackoff;
            c.probeInterval = durations.probeInterval;
            if (caCert != null) {
                c.sslContext = trusting(caCert);
            } else if (sslContext != null) {
                c.sslContext = sslContext;
            } else if (wantsTls()) {
                try {
                    c.sslContext = SSLContext.getDefault();
                } catch (GeneralSecurityException e) {
                    throw Errors.invalidArgument("no default TLS context: " + e);
                }
            }
            return new RaftlockClient(c);
        }

        private static String defaultName() {
            String host;
            try {
                host = InetAddress.getLocalHost().getHostName();
            } catch (IOException e) {
                host = "unknown";
            }
            return "java:" + host + ":" + ProcessHandle.current().pid();
        }

        /** A TLS context trusting only the certificates in a PEM file. */
        private static SSLContext trusting(Path pem) {
            try (InputStream in = Files.newInputStream(pem)) {
                Collection<? extends Certificate> certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
                if (certs.isEmpty()) {
                    throw Errors.invalidArgument("no PEM certificate in " + pem);
                }
                KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
                ks.load(null, null);
                int i = 0;
                for (Certificate c : certs) {
                    ks.setCertificateEntry("ca-" + i++, c);
                }
                TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
                tmf.init(ks);
                SSLContext ctx = SSLContext.getInstance("TLS");
                ctx.init(null, tmf.getTrustManagers(), null);
                return ctx;
            } catch (IOException | GeneralSecurityException e) {
                throw Errors.invalidArgument("reading the CA file " + pem + ": " + e.getMessage());
            }
        }
    }

    Config config() {
        return cfg;
    }

    Transport transport() {
        return transport;
    }

    ScheduledExecutorService timer() {
        return timer;
    }

    ExecutorService workers() {
        return workers;
    }

    void checkOpen() {
        if (closed.get()) {
            throw Errors.closed();
        }
    }

    /**
     * The endpoints this client knows now: those given, and the leaders it learnt of.
     *
     * @return {@code host:port} addresses
     */
    public List<String> endpoints() {
        return transport.endpoints();
    }

    /**
     * Creates a session with this TTL and keeps it alive until it is closed, lost, or the
     * client closes. A retried creation reuses one creation key, so a lost answer never
     * leaves a second, orphaned session behind.
     *
     * @param ttl how long the session lives without keep-alives (the cluster allows 1 s to
     *     10 min by default)
     * @return the session
     * @throws TtlOutOfRangeException for a TTL the cluster refuses
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public Session newSession(Duration ttl) throws InterruptedException {
        return newSession(ttl, null);
    }

    /**
     * Creates a session as {@link #newSession(Duration)}, with a state listener registered
     * before it is created, so that it learns of {@link SessionState#CONNECTED} too.
     *
     * <pre>{@code
     * Session s = client.newSession(Duration.ofSeconds(10), (session, state) -> log.info("{}", state));
     * }</pre>
     *
     * @param ttl how long the session lives without keep-alives
     * @param listener the listener, or null
     * @return the session
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public Session newSession(Duration ttl, SessionStateListener listener) throws InterruptedException {
        checkOpen();
        Session s = Session.create(this, ttl, cfg.clientName, listener);
        sessions.add(s);
        if (closed.get()) {
            s.close();
        }
        return s;
    }

    /**
     * A session with a 10 s TTL, as {@link #newSession(Duration)}.
     *
     * @return the session
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public Session newSession() throws InterruptedException {
        return newSession(Duration.ofSeconds(10));
    }

    void forget(Session s) {
        sessions.remove(s);
    }

    /**
     * A node's view of the cluster (any node answers): a cheap way to check that the
     * cluster is reachable and the credentials are accepted.
     *
     * @return the answering node's status
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public ClusterStatus status() throws InterruptedException {
        checkOpen();
        Transport.CallOpts o = Transport.CallOpts.plain();
        o.anyNode = true;
        JsonNode r = transport.call("/v1/cluster/status", o, a -> Wire.obj());
        String leaderAddr = Wire.text(r, "leaderAddr");
        transport.hint(leaderAddr);
        String role = Wire.text(r, "role").replaceFirst("^ROLE_", "").toLowerCase(java.util.Locale.ROOT);
        return new ClusterStatus(Wire.u64(r, "nodeId"), role.isEmpty() ? "unspecified" : role,
                Wire.u64(r, "term"), Wire.u64(r, "leaderId"), leaderAddr);
    }

    /**
     * The holders (with tokens) and waiters (in FIFO order) of a lock: a linearizable
     * read.
     *
     * @param name the lock's name
     * @return its state now
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public LockInfo describe(String name) throws InterruptedException {
        checkOpen();
        JsonNode r = transport.call("/v1/lock/describe", Transport.CallOpts.plain(), a -> Wire.obj().put("name", name));
        List<LockInfo.Waiter> waiters = new ArrayList<>();
        JsonNode ws = r.get("waiters");
        if (ws != null && ws.isArray()) {
            for (JsonNode w : ws) {
                int c = (int) Wire.u64(w, "count");
                waiters.add(new LockInfo.Waiter(Wire.u64(w, "sessionId"), LockMode.fromWire(Wire.text(w, "mode")),
                        Wire.bytes(w, "requestId"), c == 0 ? 1 : c));
            }
        }
        return new LockInfo(name, (int) Wire.u64(r, "permits"), Wire.grants(r, "holders"), waiters,
                Duration.ofMillis(Wire.u64(r, "lockDelayMs")));
    }

    /**
     * Whether token belongs to a current holder of lock name (a linearizable read:
     * Chubby's CheckSequencer), and the highest token among the current holders.
     *
     * @param name the lock's name
     * @param token the fencing token to check
     * @return the verdict
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public Validation validate(String name, long token) throws InterruptedException {
        checkOpen();
        JsonNode r = transport.call("/v1/lock/validate", Transport.CallOpts.plain(),
                a -> Wire.obj().put("name", name).put("token", Wire.str(token)));
        return new Validation(Wire.bool(r, "valid"), Wire.u64(r, "currentToken"));
    }

    /**
     * Frees lock name whoever holds it (needs the admin right): the holders lose it and the
     * next waiters are granted in the same log entry. Not retried where it may already have
     * run, since a second run would free the next holder too.
     *
     * @param name the lock's name
     * @return the holds released
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public List<Grant> forceRelease(String name) throws InterruptedException {
        checkOpen();
        Transport.CallOpts o = Transport.CallOpts.plain();
        o.notIdempotent = true;
        JsonNode r = transport.call("/v1/lock/force-release", o, a -> Wire.obj().put("name", name));
        return Wire.grants(r, "released");
    }

    /**
     * Election name's current leader (a linearizable read).
     *
     * @param name the election's name
     * @return the leader's grant; its value is {@link Grant#value()}
     * @throws NoLeaderException when nobody leads
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public Grant electionLeader(String name) throws InterruptedException {
        checkOpen();
        JsonNode r = transport.call("/v1/election/leader", Transport.CallOpts.plain(), a -> Wire.obj().put("name", name));
        Grant g = Wire.grant(r, "leader");
        if (g == null) {
            throw Errors.local(Errors.KIND_NO_LEADER, "NOT_FOUND", "election \"" + name + "\" has no leader");
        }
        return g;
    }

    /**
     * Watches election name: calls listener with its leader now and at every change
     * (empty: none), through failovers of the cluster (the stream is reopened on the new
     * leader node, and a value already seen is not repeated), on a thread of its own until
     * the returned handle or the client closes.
     *
     * @param name the election's name
     * @param listener called with each leader
     * @return the handle that stops the observation
     */
    public Observer observe(String name, Observer.Listener listener) {
        checkOpen();
        return Observer.start(this, name, listener);
    }

    /**
     * The rate limit name. With a spec, takes create the limit with these parameters on
     * first use (an existing limit with others is refused with
     * {@link LimitConflictException}); with null it must exist already
     * ({@link LimitNotFoundException}). No call is made until it is used.
     *
     * @param name the limit's name
     * @param spec its parameters, or null
     * @return the limit's handle
     */
    public RateLimit rateLimit(String name, RateLimit.Spec spec) {
        return new RateLimit(this, name, spec);
    }

    /**
     * Closes every session of this client (releasing their locks at once; what cannot be
     * closed within about 5 s is left to expire) and ends the calls still in flight with
     * {@link ClientClosedException}. Closing twice does nothing.
     */
    @Override
    public void close() {
        // Two concurrent closes: only one does the work.
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        // In parallel, as the Go client's Close: each close is bounded (about 5 s), and a
        // cluster out of reach must not cost that once per session.
        List<java.util.concurrent.Future<?>> closing = new ArrayList<>();
        for (Session s : sessions) {
            try {
                closing.add(workers.submit(s::close));
            } catch (java.util.concurrent.RejectedExecutionException e) {
                s.close();
            }
        }
        long end = System.nanoTime() + java.util.concurrent.TimeUnit.SECONDS.toNanos(6);
        for (java.util.concurrent.Future<?> f : closing) {
            try {
                f.get(Math.max(0, end - System.nanoTime()), java.util.concurrent.TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
                // Left to expire on the server.
            }
        }
        transport.close();
        timer.shutdownNow();
        workers.shutdownNow();
    }
}
