package io.github.raftlock.jepsen;

import com.fasterxml.jackson.databind.ObjectMapper;
import io.github.raftlock.DistributedLock;
import io.github.raftlock.Election;
import io.github.raftlock.LockGuard;
import io.github.raftlock.LockedException;
import io.github.raftlock.NoLeaderException;
import io.github.raftlock.NotLeadingException;
import io.github.raftlock.RaftlockClient;
import io.github.raftlock.RaftlockException;
import io.github.raftlock.Reason;
import io.github.raftlock.Session;
import io.github.raftlock.SessionNotFoundException;
import io.github.raftlock.Validation;
import io.github.raftlock.WaitCancelledException;
import io.github.raftlock.WaitTimedOutException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A client process of the raftlock-jepsen harness that drives the Java client instead of
 * the Rust one: a drop-in for {@code raftlock-jepsen worker} for the mutex and election
 * workloads, as the Go client's {@code raftlock-jepsen-worker} is.
 *
 * <pre>{@code
 * clients/java/scripts/jepsen-worker worker --endpoints A,B,C --workload mutex --seed N \
 *     --clock-base NS --first-process P --local-address 127.0.0.61
 * }</pre>
 *
 * <p>It runs one logical client, as the harness's own worker does: acquire (or campaign
 * and proclaim), hold for a few milliseconds or, mostly, past the session's TTL while
 * asking the library every 100 ms whether the lease still holds, release (or resign).
 * Every op goes to stdout as one JSON line of the harness's Op, timed on the harness's
 * clock: nanoseconds since {@code --clock-base} on CLOCK_MONOTONIC, which is what
 * {@link System#nanoTime()} reads on Linux. On SIGTERM it finishes its round, closes its
 * session (recorded) and exits.
 *
 * <p>The JDK 17 HTTP client cannot choose its local address, so {@code --local-address}
 * is accepted and not used: the client nemesis's link cuts do not reach this process
 * (its pauses do), which it says on stderr.
 *
 * <p>{@code RAFTLOCK_JEPSEN_PLANT_CLIENT=ignore-lease} plants the harness's client bug:
 * holders never ask whether the lease holds, and act as if it did.
 */
public final class JepsenWorker {
    // The harness's constants (jepsen/src/workload/mod.rs, jepsen/src/run.rs).
    /** Session TTL of workers with an even seed. */
    static final Duration TTL = Duration.ofSeconds(3);
    /** For the others: outlives a failover, so sessions of one leader meet the next. */
    static final Duration LONG_TTL = Duration.ofSeconds(10);
    /** The share of grants held past the TTL by workers in client processes. */
    static final double LONG_HOLDS = 0.7;
    static final String PLANT_ENV = "RAFTLOCK_JEPSEN_PLANT_CLIENT";

    /**
     * The refusals that settle that a call did not take effect. Any other failure may
     * have taken effect: the harness's reading of the Rust client's errors (classify in
     * jepsen/src/backend/mod.rs), where a lost answer, a locally lost session, the server
     * saying the session is gone, a server fault or an unknown reason is indeterminate.
     */
    static final Set<Reason> DEFINITE = EnumSet.of(
            Reason.INVALID_NAME, Reason.TTL_OUT_OF_RANGE, Reason.INVALID_ARGUMENT,
            Reason.WAIT_NOT_FOUND, Reason.NOT_HOLDER, Reason.STALE_TOKEN,
            Reason.PERMITS_MISMATCH, Reason.REQUEST_RELEASED, Reason.REQUEST_FINISHED,
            Reason.REQUEST_ACKNOWLEDGED, Reason.ALREADY_HELD, Reason.ALREADY_WAITING,
            Reason.TOO_MANY_WAITERS, Reason.TOO_MANY_LOCKS, Reason.TOO_MANY_UNACKNOWLEDGED,
            Reason.LIMIT_EXCEEDED, Reason.NO_SPACE, Reason.UNAUTHENTICATED,
            Reason.PERMISSION_DENIED, Reason.MEMBERSHIP_CHANGE_REFUSED,
            Reason.LEARNER_NOT_CAUGHT_UP, Reason.WATCH_COMPACTED, Reason.LIMIT_NOT_FOUND,
            Reason.LIMIT_CONFLICT);

    private JepsenWorker() {}

    /** The parsed command line. */
    record Args(List<String> endpoints, String workload, long seed, long clockBase,
            long firstProcess, String localAddress) {}

    /**
     * Reads {@code [global flags] worker [flags]}: the harness's own command line, whose
     * global flags (which a worker has no use for) are accepted and ignored.
     */
    static Args parse(String[] argv) {
        List<String> endpoints = new ArrayList<>();
        String workload = null;
        String local = null;
        Long seed = null;
        Long clockBase = null;
        Long first = null;
        boolean sawWorker = false;
        for (int i = 0; i < argv.length; i++) {
            String a = argv[i];
            if (a.equals("worker")) {
                if (sawWorker) {
                    throw new IllegalArgumentException("unexpected argument \"worker\"");
                }
                sawWorker = true;
                continue;
            }
            if (a.equals("--strict")) {
                continue;
            }
            String flag = a;
            String value;
            int eq = a.indexOf('=');
            if (a.startsWith("--") && eq > 0) {
                flag = a.substring(0, eq);
                value = a.substring(eq + 1);
            } else if (a.startsWith("--")) {
                if (i + 1 >= argv.length) {
                    throw new IllegalArgumentException(a + " needs a value");
                }
                value = argv[++i];
            } else {
                throw new IllegalArgumentException("unexpected argument \"" + a + "\"");
            }
            switch (flag) {
                case "--endpoints" -> {
                    for (String p : value.split(",")) {
                        if (!p.isBlank()) {
                            endpoints.add(p.trim());
                        }
                    }
                }
                case "--workload" -> workload = value;
                case "--seed" -> seed = unsigned(flag, value);
                case "--clock-base" -> clockBase = unsigned(flag, value);
                case "--first-process" -> first = unsigned(flag, value);
                case "--local-address" -> local = value;
                // Global flags of raftlock-jepsen.
                case "--raftlockd", "--out", "--loopback-net", "--client-worker" -> { }
                default -> throw new IllegalArgumentException("unknown flag " + flag);
            }
        }
        if (!sawWorker) {
            throw new IllegalArgumentException("usage: jepsen-worker worker --endpoints A,B,C"
                    + " --workload mutex|election --seed N --clock-base NS --first-process P"
                    + " [--local-address IP]");
        }
        if (workload == null) {
            throw new IllegalArgumentException("--workload is required");
        }
        if (names(workload) == null) {
            throw new IllegalArgumentException("workload \"" + workload
                    + "\": this worker runs mutex and election only");
        }
        if (seed == null) {
            throw new IllegalArgumentException("--seed is required");
        }
        if (clockBase == null) {
            throw new IllegalArgumentException("--clock-base is required");
        }
        if (first == null) {
            throw new IllegalArgumentException("--first-process is required");
        }
        if (endpoints.isEmpty()) {
            throw new IllegalArgumentException("--endpoints is required");
        }
        return new Args(endpoints, workload, seed, clockBase, first, local);
    }

    private static long unsigned(String flag, String v) {
        try {
            return Long.parseUnsignedLong(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(flag + ": not an unsigned integer");
        }
    }

    /** The lock (or election) names a workload uses. */
    static List<String> names(String workload) {
        return switch (workload) {
            case "mutex" -> List.of("mutex/0", "mutex/1", "mutex/2");
            case "election" -> List.of("election/0", "election/1");
            default -> null;
        };
    }

    /**
     * Runs the worker until SIGTERM.
     *
     * @param argv the harness's command line
     */
    public static void main(String[] argv) throws Exception {
        Args a;
        try {
            a = parse(argv);
        } catch (IllegalArgumentException e) {
            System.err.println("jepsen-worker: " + e.getMessage());
            System.exit(2);
            return;
        }
        if (a.localAddress() != null) {
            System.err.println("jepsen-worker: --local-address " + a.localAddress()
                    + " is not used (the JDK 17 HTTP client cannot bind one): link cuts of"
                    + " this process's address do not reach it");
        }
        RaftlockClient client = RaftlockClient.builder()
                .endpoints(a.endpoints())
                .clientName("raftlock-jepsen-worker-java:" + a.firstProcess())
                // The Rust worker's settings: a call retries for 5 s at most, a connection
                // opens within 1 s.
                .requestTimeout(Duration.ofSeconds(5))
                .dialTimeout(Duration.ofSeconds(1))
                .build();
        // stdout is the history: one writer, lines whole, flushed at once.
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out),
                false, StandardCharsets.UTF_8);
        Recorder rec = new Recorder(a.clockBase(), a.firstProcess(), out);
        Worker w = new Worker(client, rec, a.workload(), a.seed(),
                "ignore-lease".equals(System.getenv(PLANT_ENV)));
        CountDownLatch done = new CountDownLatch(1);
        Thread main = new Thread(() -> {
            try {
                w.run();
            } finally {
                client.close();
                out.flush();
                done.countDown();
            }
        }, "jepsen-worker");
        main.start();
        // SIGTERM runs the shutdown hooks: the round finishes, the session is closed and
        // recorded, and only then does the JVM exit.
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            w.stop = true;
            try {
                done.await(25, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        main.join();
    }

    /** Writes ops as JSON lines on the harness's clock and numbers processes. */
    static final class Recorder {
        private static final ObjectMapper JSON = new ObjectMapper();
        private final long clockBase;
        private final PrintStream out;
        private final ReentrantLock mu = new ReentrantLock();
        private long nextProcess;

        Recorder(long clockBase, long firstProcess, PrintStream out) {
            this.clockBase = clockBase;
            this.nextProcess = firstProcess;
            this.out = out;
        }

        /** t (a {@link System#nanoTime()} reading) on the history's clock, never below 0. */
        long ns(long t) {
            return Math.max(0, t - clockBase);
        }

        long process() {
            mu.lock();
            try {
                return nextProcess++;
            } finally {
                mu.unlock();
            }
        }

        void record(String type, Spec s, String error) {
            recordAt(type, s, error, System.nanoTime());
        }

        /**
         * Records an op that happened at {@code at}. The harness numbers the ops it
         * reads, so every index is 0, as a child recorder writes them; the fields come in
         * the harness's order, the absent optional ones left out as serde does.
         */
        void recordAt(String type, Spec s, String error, long at) {
            Map<String, Object> o = new LinkedHashMap<>();
            o.put("index", 0);
            o.put("time_ns", ns(at));
            o.put("process", s.process);
            o.put("type", type);
            o.put("f", s.f);
            o.put("lock", s.lock);
            if (s.session != null) {
                o.put("session", s.session);
            }
            if (s.token != null) {
                o.put("token", s.token);
            }
            if (s.validUntil != null) {
                o.put("valid_until_ns", ns(s.validUntil));
            }
            if (s.value != null) {
                o.put("value", s.value);
            }
            if (error != null) {
                o.put("error", error);
            }
            String line;
            try {
                line = JSON.writeValueAsString(o);
            } catch (java.io.IOException e) {
                return;
            }
            mu.lock();
            try {
                // The harness reads whole lines; a write error means it is gone.
                out.print(line + "\n");
                out.flush();
            } finally {
                mu.unlock();
            }
        }
    }

    /** An op's fields besides its type, time and error. */
    static final class Spec {
        long process;
        String f;
        String lock;
        Long session;
        Long token;
        /** On the {@link System#nanoTime()} clock. */
        Long validUntil;
        Object value;

        Spec(long process, String f, String lock, Long session) {
            this.process = process;
            this.f = f;
            this.lock = lock;
            this.session = session;
        }
    }

    /** Whether a failed call may have taken effect all the same (info) or surely not (fail). */
    static boolean indeterminate(Throwable err) {
        if (!(err instanceof RaftlockException e)) {
            // Interrupted while the call was out.
            return true;
        }
        if (e.reason() != Reason.UNKNOWN) {
            return !DEFINITE.contains(e.reason());
        }
        // Verdicts of the client's own that nothing was sent.
        if (e instanceof NotLeadingException || e instanceof LockedException
                || e instanceof NoLeaderException) {
            return false;
        }
        // Unreachable, the session lost locally, an unreadable answer, a reason newer
        // than this client.
        return true;
    }

    /**
     * Whether an acquisition's wait ran out: a grant may have raced the timeout, so it is
     * recorded info without an error, as the harness records a timed-out wait.
     */
    static boolean timedOut(Throwable err) {
        return err instanceof WaitTimedOutException || err instanceof WaitCancelledException;
    }

    /** A call the worker times; it may throw. */
    interface Call {
        void run() throws Exception;
    }

    /** The one logical client of this process, over the Java client. */
    static final class Worker {
        private final RaftlockClient client;
        private final Recorder rec;
        private final List<String> names;
        private final boolean election;
        private final Random rng;
        private final Duration ttl;
        private final boolean ignoreLease;
        private long process;
        private Session session;
        volatile boolean stop;

        Worker(RaftlockClient client, Recorder rec, String workload, long seed, boolean ignoreLease) {
            this.client = client;
            this.rec = rec;
            this.names = names(workload);
            this.election = workload.equals("election");
            this.rng = new Random(seed);
            this.ttl = seed % 2 == 0 ? TTL : LONG_TTL;
            this.ignoreLease = ignoreLease;
            this.process = rec.process();
        }

        /** Steps until stopped, then closes the session, recorded. */
        void run() {
            while (!stop) {
                try {
                    step();
                } catch (InterruptedException e) {
                    break;
                }
            }
            if (session != null) {
                Session s = session;
                session = null;
                close(s);
            }
        }

        private Spec spec(String f, String lock, long session) {
            return new Spec(process, f, lock, session);
        }

        /** Ends the process after an op of unknown outcome; its successor is a new one. */
        private void retire() {
            if (session != null) {
                Session s = session;
                session = null;
                close(s);
            }
            process = rec.process();
        }

        /** Closes s, recorded: the checkers end the process's holds there. */
        private void close(Session s) {
            Spec sp = new Spec(process, "close", "", s.id());
            rec.record("invoke", sp, null);
            s.close();
            rec.record("ok", sp, null);
        }

        private static RaftlockException lostError(Session s) {
            try {
                s.check();
                return null;
            } catch (RaftlockException e) {
                return e;
            }
        }

        /**
         * Replaces a lost session (a process that lost its session starts over as a new
         * one) and creates one if there is none; null when the cluster would not create
         * one, after a moment.
         */
        private Session ensureSession() throws InterruptedException {
            if (session != null && !session.isValid()) {
                Session s = session;
                session = null;
                lost(s);
                close(s);
                process = rec.process();
            }
            if (session == null) {
                try {
                    session = client.newSession(ttl);
                } catch (RaftlockException e) {
                    Thread.sleep(100);
                    return null;
                }
            }
            return session;
        }

        /**
         * Records that the library reported s ended, and whether the server ended it: a
         * server that says "gone" before the client's deadline broke the lease promise.
         */
        private void lost(Session s) {
            Spec sp = spec("lost", "", s.id());
            sp.validUntil = s.validUntilNanos();
            RaftlockException why = lostError(s);
            sp.value = Map.of("by_server", why instanceof SessionNotFoundException
                    || (why != null && why.reason() == Reason.SESSION_NOT_FOUND));
            rec.record("invoke", sp, null);
            rec.record("ok", sp, null);
        }

        /** Records sp's invoke, runs call and how it ended; whether the process must retire. */
        private boolean timed(Spec sp, Call call) {
            rec.record("invoke", sp, null);
            try {
                call.run();
            } catch (Exception e) {
                if (e instanceof InterruptedException) {
                    Thread.currentThread().interrupt();
                }
                if (indeterminate(e)) {
                    rec.record("info", sp, String.valueOf(e.getMessage()));
                    return true;
                }
                rec.record("fail", sp, String.valueOf(e.getMessage()));
                return false;
            }
            rec.record("ok", sp, null);
            return false;
        }

        /**
         * One round: pick a name, acquire (or campaign), proclaim when leading, hold
         * briefly or long, release (or resign).
         */
        void step() throws InterruptedException {
            String name = names.get(rng.nextInt(names.size()));
            long holdMs = 10 + rng.nextInt(110);
            // Long enough that keep-alives, not luck, carry the lease through the faults.
            boolean isLong = rng.nextDouble() < LONG_HOLDS;
            long longMs = 0;
            if (isLong) {
                long lo = TTL.toMillis() / 2;
                long hi = TTL.toMillis() * 3;
                longMs = lo + (long) (rng.nextDouble() * (hi - lo));
            }
            Session s = ensureSession();
            if (s == null) {
                return;
            }
            long sid = s.id();
            Spec sp = spec(election ? "campaign" : "acquire", name, sid);
            // Longer than most holds: a wait that times out retires its process (the
            // grant may have raced the timeout).
            Duration wait = TTL.multipliedBy(3);
            String value = "p" + process;

            Election e = null;
            LockGuard guard = null;
            long token;
            rec.record("invoke", sp, null);
            try {
                if (election) {
                    e = s.election(name);
                    e.campaign(value, wait);
                    token = e.token();
                } else {
                    DistributedLock m = s.lock(name);
                    guard = m.acquire(wait);
                    token = guard.token();
                }
            } catch (Exception err) {
                if (timedOut(err)) {
                    rec.record("info", sp, null);
                    retire();
                } else if (indeterminate(err)) {
                    rec.record("info", sp, String.valueOf(err.getMessage()));
                    retire();
                } else {
                    rec.record("fail", sp, String.valueOf(err.getMessage()));
                    // A moment before the next try, so that a refusal that repeats is not
                    // a busy loop.
                    Thread.sleep(10);
                }
                if (err instanceof InterruptedException ie) {
                    throw ie;
                }
                return;
            }
            sp.token = token;
            rec.record("ok", sp, null);

            boolean retire = false;
            if (election) {
                Election el = e;
                Spec p = spec("proclaim", name, sid);
                p.token = token;
                p.validUntil = s.validUntilNanos();
                String v = value + "-1";
                p.value = v;
                retire = timed(p, () -> el.proclaim(v));
            }
            if (!retire) {
                if (isLong) {
                    holdLong(s, name, token, longMs);
                } else {
                    Thread.sleep(holdMs);
                }
                Spec r = spec(election ? "resign" : "release", name, sid);
                r.token = token;
                r.validUntil = s.validUntilNanos();
                Election el = e;
                LockGuard g = guard;
                retire = timed(r, () -> {
                    // For a session it knows is lost the library sends nothing; the hold
                    // ended at the session's deadline, not here, so this is recorded as
                    // the loss it is, not as a release.
                    RaftlockException lost = lostError(s);
                    if (el != null) {
                        el.resign();
                    } else {
                        g.close();
                    }
                    if (lost != null) {
                        throw lost;
                    }
                });
            }
            if (retire) {
                retire();
            }
        }

        /**
         * Holds token of name for ms as code in a critical section should: asks the library
         * every 100 ms whether the lease still holds before acting (an act op, dated before
         * the question), validates now and then, and stops at once when the library
         * reports the session lost. With the ignore-lease plant it never listens for the
         * loss and takes every answer for "valid".
         */
        private void holdLong(Session s, String name, long token, long ms) throws InterruptedException {
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
            int round = 0;
            while (end - System.nanoTime() > 0) {
                if (!ignoreLease) {
                    try {
                        s.lost().get(100, TimeUnit.MILLISECONDS);
                        lost(s);
                        Spec a = spec("act", name, s.id());
                        a.token = token;
                        a.validUntil = s.validUntilNanos();
                        rec.record("invoke", a, null);
                        rec.record("fail", a, "lost() fired");
                        return;
                    } catch (java.util.concurrent.TimeoutException | java.util.concurrent.ExecutionException t) {
                        // Still held: act.
                    }
                } else {
                    Thread.sleep(100);
                }
                long asked = System.nanoTime();
                boolean valid = s.isValid() || ignoreLease;
                Spec a = spec("act", name, s.id());
                a.token = token;
                // While valid, the deadline the answer was given under; else the last one.
                a.validUntil = s.validUntilNanos();
                rec.recordAt("invoke", a, null, asked);
                if (!valid) {
                    rec.recordAt("fail", a, "is_valid() is false", asked);
                    return;
                }
                rec.recordAt("ok", a, null, asked);
                round++;
                if (round % 5 == 0) {
                    validate(name, s.id(), token, s.validUntilNanos());
                }
            }
        }

        /** Records Validate(name, token) by the holder, whose lease holds until leaseUntil. */
        private void validate(String name, long sid, long token, long leaseUntil) {
            Spec v = spec("validate", name, sid);
            v.token = token;
            v.validUntil = leaseUntil;
            rec.record("invoke", v, null);
            try {
                Validation r = client.validate(name, token);
                v.value = Map.of("valid", r.valid());
                rec.record("ok", v, null);
            } catch (Exception e) {
                if (e instanceof InterruptedException) {
                    Thread.currentThread().interrupt();
                }
                rec.record(indeterminate(e) ? "info" : "fail", v, String.valueOf(e.getMessage()));
            }
        }
    }
}
