package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Several locks held together, from {@link Session#acquireAll(Collection, Duration)}: one
 * log entry granted them all, each its own grant (with that entry's index as its fencing
 * token). They share a session, so they are lost together. Closing releases those still
 * held, each on its own.
 *
 * <pre>{@code
 * try (LockSet set = session.acquireAll(List.of("accounts/17", "accounts/42"), Duration.ofSeconds(5))) {
 *     transfer(set.token("accounts/17"), set.token("accounts/42"));
 * }
 * }</pre>
 */
public final class LockSet implements AutoCloseable {
    private final Session s;
    private final List<LockGuard> guards;

    private LockSet(Session s, List<LockGuard> guards) {
        this.s = s;
        this.guards = guards;
    }

    /**
     * Acquires a set, waiting in turns of at most {@link DistributedLock#maxWaitTurn} as a
     * single lock does: the server refuses one wait longer than its {@code --max-wait-ms}.
     * wait null is a try.
     */
    static LockSet acquire(Session s, Collection<String> names, Duration wait, boolean interruptible)
            throws InterruptedException {
        if (wait == null) {
            return acquireOnce(s, names, null, interruptible);
        }
        long end = System.nanoTime() + wait.toNanos();
        while (true) {
            Duration max = DistributedLock.maxWaitTurn;
            Duration turn = max;
            long left = end - System.nanoTime();
            if (left < turn.toNanos()) {
                turn = Duration.ofNanos(Math.max(0, left));
            }
            try {
                return acquireOnce(s, names, turn, interruptible);
            } catch (WaitTimedOutException e) {
                // Only a full turn ends short of what was asked; a shorter one was the last.
                boolean more = end - System.nanoTime() > TimeUnit.MILLISECONDS.toNanos(1);
                if (turn.equals(max) && more && s.isValid()) {
                    continue;
                }
                throw e;
            }
        }
    }

    /**
     * One acquisition of a set, numbered and retried as one with one request id, as a
     * single lock's is. wait null is a try.
     */
    private static LockSet acquireOnce(Session s, Collection<String> rawNames, Duration wait, boolean interruptible)
            throws InterruptedException {
        List<String> names = Session.sortedUnique(rawNames);
        if (names.isEmpty()) {
            throw Errors.invalidArgument("a lock set needs names");
        }
        if (wait != null && wait.isNegative()) {
            throw Errors.invalidArgument("the wait must not be negative");
        }
        s.check();
        if (s.cancelsSettled(names, interruptible)) {
            Thread.currentThread().interrupt();
        }
        byte[] requestId = Wire.newRequestId();
        long started = System.nanoTime();
        Transport.CallOpts co = wait == null ? Transport.CallOpts.plain() : Transport.CallOpts.waiting(wait);
        // As a single lock's: an uninterruptible wait keeps its exchange, and its place.
        co.uninterruptible = !interruptible;
        JsonNode r;
        try (Session.Ticket t = s.ticket()) {
            r = s.client().transport().call("/v1/lock/acquire-all", co, a -> {
                ObjectNode body = Wire.obj().put("sessionId", Wire.str(s.id())).put("requestId", Wire.b64(requestId));
                ArrayNode arr = body.putArray("names");
                names.forEach(arr::add);
                t.fields(body);
                if (wait != null) {
                    body.put("waitTimeoutMs", Wire.ms(wait.minusNanos(System.nanoTime() - started)));
                }
                return body;
            });
        } catch (InterruptedException e) {
            s.cancelWaitSoon(names, requestId);
            throw e;
        } catch (RaftlockException e) {
            s.noteErr(e);
            if (DistributedLock.undecided(e)) {
                s.cancelWaitSoon(names, requestId);
            }
            throw e;
        }
        List<Grant> grants = Wire.grants(r, "grants");
        boolean acquired = Wire.bool(r, "acquired");
        if (acquired && grants.size() != names.size()) {
            s.cancelWaitSoon(names, requestId);
            throw Errors.of(new ErrorInfo("", "INTERNAL", "acquire of " + names.size() + " locks answered with " + grants.size() + " grants"));
        }
        if (!acquired) {
            if (wait == null) {
                List<Grant> holders = Wire.grants(r, "holders");
                String busy = holders.isEmpty() ? names.get(0) : holders.get(0).name();
                throw Errors.local(Errors.KIND_LOCKED, "FAILED_PRECONDITION", "lock set " + names + " is busy (\"" + busy + "\")");
            }
            throw Errors.reason(Reason.WAIT_TIMED_OUT, "DEADLINE_EXCEEDED", "timed out waiting for locks " + names);
        }
        // Granted after the session's local deadline: the server may already have expired
        // the session and granted the locks to others.
        s.check();
        List<LockGuard> guards = new ArrayList<>();
        for (Grant g : grants) {
            guards.add(new LockGuard(s, g, started, () -> { }));
        }
        return new LockSet(s, Collections.unmodifiableList(guards));
    }

    /**
     * The holds, one per lock, in name order: to fence or release them one at a time.
     *
     * @return the guards
     */
    public List<LockGuard> guards() {
        return guards;
    }

    /**
     * The lock names, in name order.
     *
     * @return the names
     */
    public List<String> names() {
        List<String> out = new ArrayList<>();
        guards.forEach(g -> out.add(g.name()));
        return out;
    }

    /**
     * Lock name's fencing token.
     *
     * @param name one of the set's names
     * @return its token, or 0 for a name not in the set
     */
    public long token(String name) {
        for (LockGuard g : guards) {
            if (g.name().equals(name)) {
                return g.token();
            }
        }
        return 0;
    }

    /**
     * Each lock's fencing token, by name. One log entry granted them, so they are equal;
     * each fences its own lock.
     *
     * @return the tokens
     */
    public Map<String, Long> tokens() {
        Map<String, Long> out = new LinkedHashMap<>();
        guards.forEach(g -> out.put(g.name(), g.token()));
        return out;
    }

    /**
     * Completes when the set can no longer be claimed: its session was lost or ended.
     *
     * @return the session's {@link Session#lost()}
     */
    public CompletableFuture<RaftlockException> lost() {
        return s.lost();
    }

    /**
     * Whether every lock of the set is still held and can be claimed (a local check).
     *
     * @return true while all are
     */
    public boolean isValid() {
        return guards.stream().allMatch(LockGuard::isValid);
    }

    /**
     * Releases every lock of the set still held (each its own release; the next waiters of
     * each are granted at once). It tries them all and throws the first failure.
     */
    @Override
    public void close() {
        RaftlockException first = null;
        for (LockGuard g : guards) {
            try {
                g.close();
            } catch (RaftlockException e) {
                if (first == null) {
                    first = e;
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }
}
