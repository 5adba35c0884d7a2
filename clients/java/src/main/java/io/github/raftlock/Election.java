package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Leader election on top of a lock: the leader is the exclusive holder of the election's
 * lock, its value the grant's metadata, its token the term of office (fencing the leader's
 * writes like any lock token). Candidates are elected in the order they started
 * campaigning. {@link LeaderLatch} and {@link LeaderSelector} are the Curator shapes built
 * on it.
 *
 * <pre>{@code
 * Election e = session.election("svc/primary");
 * e.campaign("10.0.0.7:8080");          // waits until elected
 * try {
 *     serve(e.token());
 * } finally {
 *     e.resign();
 * }
 * }</pre>
 */
public final class Election {
    private final Session s;
    private final String name;
    private final ReentrantLock mu = new ReentrantLock();
    private Grant grant;

    Election(Session s, String name) {
        this.s = s;
        this.name = name;
    }

    /**
     * The election's name.
     *
     * @return the name
     */
    public String name() {
        return name;
    }

    /**
     * The candidate's session.
     *
     * @return the session
     */
    public Session session() {
        return s;
    }

    /**
     * Waits in line until this session leads, publishing value, for as long as the session
     * lives. An interrupt leaves the line at once (a leadership that raced it is given up).
     *
     * @param value what observers see (at most 4 KiB)
     * @throws InterruptedException when interrupted before being elected
     */
    public void campaign(String value) throws InterruptedException {
        campaignFor(value, null);
    }

    /**
     * Waits in line up to wait until this session leads, publishing value.
     *
     * @param value what observers see
     * @param wait how long to wait
     * @throws WaitTimedOutException when wait ran out
     * @throws InterruptedException when interrupted before being elected
     */
    public void campaign(String value, Duration wait) throws InterruptedException {
        campaignFor(value, wait);
    }

    private void campaignFor(String value, Duration wait) throws InterruptedException {
        long end = wait == null ? 0 : System.nanoTime() + wait.toNanos();
        while (true) {
            Duration max = DistributedLock.maxWaitTurn;
            Duration turn = max;
            if (wait != null && end - System.nanoTime() < turn.toNanos()) {
                turn = Duration.ofNanos(Math.max(0, end - System.nanoTime()));
            }
            try {
                campaignOnce(value.getBytes(StandardCharsets.UTF_8), turn);
                return;
            } catch (WaitTimedOutException e) {
                boolean more = wait == null || end - System.nanoTime() > TimeUnit.MILLISECONDS.toNanos(1);
                if (turn.equals(max) && more && s.isValid()) {
                    continue;
                }
                throw e;
            }
        }
    }

    private void campaignOnce(byte[] value, Duration wait) throws InterruptedException {
        s.check();
        s.cancelsSettled(name);
        byte[] requestId = Wire.newRequestId();
        long started = System.nanoTime();
        JsonNode r;
        try (Session.Ticket t = s.ticket()) {
            r = s.client().transport().call("/v1/election/campaign", Transport.CallOpts.waiting(wait), a -> {
                ObjectNode body = Wire.obj().put("name", name).put("sessionId", Wire.str(s.id()))
                        .put("requestId", Wire.b64(requestId)).put("value", Wire.b64(value))
                        .put("waitTimeoutMs", Wire.ms(wait.minusNanos(System.nanoTime() - started)));
                return t.fields(body);
            });
        } catch (InterruptedException e) {
            s.cancelWaitSoon(List.of(name), requestId);
            throw e;
        } catch (RaftlockException e) {
            s.noteErr(e);
            if (DistributedLock.undecided(e)) {
                s.cancelWaitSoon(List.of(name), requestId);
            }
            throw e;
        }
        Grant g = Wire.grant(r, "leader");
        if (g == null) {
            s.cancelWaitSoon(List.of(name), requestId);
            throw Errors.of(new ErrorInfo("", "INTERNAL", "campaign answered without a leadership"));
        }
        // Elected after the session's local deadline: the server may have expired the
        // session and elected another already.
        s.check();
        mu.lock();
        try {
            grant = g;
        } finally {
            mu.unlock();
        }
    }

    private Grant leadership() {
        mu.lock();
        try {
            if (grant == null) {
                throw Errors.local(Errors.KIND_NOT_LEADING, "FAILED_PRECONDITION", "not leading election \"" + name + "\"");
            }
            return grant;
        } finally {
            mu.unlock();
        }
    }

    /**
     * The term-of-office token while leading (strictly increasing per election).
     *
     * @return the token, or 0 when not leading
     */
    public long token() {
        mu.lock();
        try {
            return grant == null ? 0 : grant.token();
        } finally {
            mu.unlock();
        }
    }

    /**
     * Whether this client can still act as leader: elected, not resigned, and the session
     * within its local deadline.
     *
     * @return true while leading
     */
    public boolean isLeader() {
        mu.lock();
        boolean leading = grant != null;
        mu.unlock();
        return leading && s.isValid();
    }

    /**
     * Completes when the leadership can no longer be claimed because the session was lost
     * or ended.
     *
     * @return the session's {@link Session#lost()}
     */
    public CompletableFuture<RaftlockException> lost() {
        return s.lost();
    }

    /**
     * Publishes a new value for observers while leading.
     *
     * @param value the value (at most 4 KiB)
     * @throws NotLeadingException when not leading
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public void proclaim(String value) throws InterruptedException {
        Grant g = leadership();
        s.check();
        byte[] v = value.getBytes(StandardCharsets.UTF_8);
        try {
            // Setting a value is idempotent: a retry after a lost answer is harmless.
            s.client().transport().call("/v1/election/proclaim", Transport.CallOpts.plain(), a -> Wire.obj()
                    .put("name", name).put("sessionId", Wire.str(s.id())).put("token", Wire.str(g.token())).put("value", Wire.b64(v)));
        } catch (RaftlockException e) {
            s.noteErr(e);
            throw e;
        }
        mu.lock();
        try {
            if (grant == g) {
                grant = g.withMetadata(v);
            }
        } finally {
            mu.unlock();
        }
    }

    /**
     * Steps down; the next candidate in line is elected in the same log entry. Resigning
     * when not leading, or after the session ended, does nothing. An interrupt does not cut
     * the resignation short: it is sent all the same, and the thread's interrupt flag is
     * kept.
     *
     * @throws UnavailableException when the cluster did not answer in time; the
     *     resignation is then retried a few more times in the background
     * @throws InterruptedException never in fact (kept for compatibility)
     */
    public void resign() throws InterruptedException {
        Grant g;
        mu.lock();
        try {
            g = grant;
            grant = null;
        } finally {
            mu.unlock();
        }
        if (g == null || !s.isValid()) {
            return;
        }
        boolean[] retried = {false};
        try {
            s.client().transport().callUninterruptibly("/v1/election/resign", Transport.CallOpts.plain(), a -> {
                retried[0] |= a > 0;
                return resignBody(g);
            });
        } catch (NotHolderException e) {
            // Only a retry may find the leadership already given up.
            if (!retried[0]) {
                throw e;
            }
        } catch (SessionNotFoundException e) {
            s.markGone(e);
        } catch (UnavailableException e) {
            // Maybe not applied: the leadership would otherwise stay with this session.
            s.giveUpSoon("/v1/election/resign", () -> resignBody(g));
            throw e;
        }
    }

    private ObjectNode resignBody(Grant g) {
        return Wire.obj().put("name", name).put("sessionId", Wire.str(s.id())).put("token", Wire.str(g.token()));
    }

    /**
     * The election's current leader (a linearizable read).
     *
     * @return the leader's grant; its value is {@link Grant#value()}
     * @throws NoLeaderException when nobody leads
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public Grant leader() throws InterruptedException {
        return s.client().electionLeader(name);
    }

    /**
     * Watches the election's leader: see {@link RaftlockClient#observe(String, Observer.Listener)}.
     *
     * @param listener called with each leader
     * @return the handle that stops the observation
     */
    public Observer observe(Observer.Listener listener) {
        return s.client().observe(name, listener);
    }
}
