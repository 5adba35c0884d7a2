package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.time.Duration;

/**
 * A token bucket kept by the cluster, exact through leader changes: over any span d it
 * admits at most rate × d/per + burst. Takes are not numbered: a take retried after a lost
 * answer may be counted twice, which only ever admits less, never more than the limit.
 *
 * <pre>{@code
 * RateLimit api = client.rateLimit("partner/api", new RateLimit.Spec(100, Duration.ofSeconds(1), 20));
 * RateLimit.Admission a = api.tryTake(1);
 * if (!a.admitted()) Thread.sleep(a.retryAfter().toMillis());
 * }</pre>
 */
public final class RateLimit {
    /**
     * What a limit allows: rate tokens per period, at most burst at once.
     *
     * <pre>{@code
     * new RateLimit.Spec(10, Duration.ofMinutes(1), 5)
     * }</pre>
     *
     * @param rate tokens per period (at least 1)
     * @param per the period (1 ms to 1 day)
     * @param burst the most tokens at once (at least 1)
     */
    public record Spec(long rate, Duration per, long burst) {}

    /**
     * The answer to a take.
     *
     * <pre>{@code
     * if (admission.admitted()) send();
     * }</pre>
     *
     * @param admitted the tokens were admitted
     * @param n how many (0 when not admitted)
     * @param remaining the tokens that could be taken at once after this
     * @param retryAfter when not admitted, after how long they would be
     */
    public record Admission(boolean admitted, long n, long remaining, Duration retryAfter) {}

    /**
     * A limit now, from {@link #describe()}.
     *
     * <pre>{@code
     * System.out.println(limit.describe().available() + " tokens available");
     * }</pre>
     *
     * @param name the limit's name
     * @param spec its parameters
     * @param available the whole tokens that could be taken at once now
     * @param admitted tokens admitted since it was defined
     * @param refused takes refused since it was defined
     * @param leases token leases outstanding
     */
    public record Info(String name, Spec spec, long available, long admitted, long refused, int leases) {}

    private final RaftlockClient client;
    private final String name;
    private final Spec spec;

    RateLimit(RaftlockClient client, String name, Spec spec) {
        this.client = client;
        this.name = name;
        this.spec = spec;
    }

    /**
     * The limit's name.
     *
     * @return the name
     */
    public String name() {
        return name;
    }

    private ObjectNode specJson() {
        return Wire.obj().put("rate", Wire.str(spec.rate())).put("perMs", Wire.ms(spec.per())).put("burst", Wire.str(spec.burst()));
    }

    private JsonNode take(long n, Duration wait, Duration lease) throws InterruptedException {
        client.checkOpen();
        if (n < 1) {
            throw Errors.invalidArgument("n must be at least 1");
        }
        if (wait != null && wait.isNegative()) {
            throw Errors.invalidArgument("the wait must not be negative");
        }
        long started = System.nanoTime();
        Transport.CallOpts o = wait == null ? Transport.CallOpts.plain() : Transport.CallOpts.waiting(wait);
        return client.transport().call("/v1/ratelimit/take", o, a -> {
            ObjectNode body = Wire.obj().put("name", name).put("n", Wire.str(n));
            if (spec != null) {
                body.set("limit", specJson());
            }
            if (wait != null) {
                // Each retry waits only what is left.
                body.put("waitTimeoutMs", Wire.ms(wait.minusNanos(System.nanoTime() - started)));
            }
            if (lease != null) {
                body.put("leaseMs", Wire.ms(lease));
            }
            return body;
        });
    }

    private static Admission admission(JsonNode r) {
        return new Admission(Wire.bool(r, "admitted"), Wire.u64(r, "n"), Wire.u64(r, "remaining"),
                Duration.ofMillis(Wire.u64(r, "retryAfterMs")));
    }

    /**
     * Takes n tokens now, or says after how long they would fit.
     *
     * @param n tokens (1 to the burst)
     * @return the admission
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public Admission tryTake(long n) throws InterruptedException {
        return admission(take(n, null, null));
    }

    /**
     * Takes n tokens, waiting on the server up to wait for them, in FIFO order with the
     * other waiting takes of this limit; not admitted when they would not fit within it.
     *
     * @param n tokens (1 to the burst)
     * @param wait how long to wait (at most the cluster's longest wait, an hour by default)
     * @return the admission
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public Admission take(long n, Duration wait) throws InterruptedException {
        return admission(take(n, wait, null));
    }

    /**
     * Reserves a block of n tokens (at most the burst) to spend locally within validity (at
     * most 10 s): one Raft write for the whole block. The cluster counts it as spent at
     * once; {@link TokenLease#finish()} returns what is left.
     *
     * @param n tokens
     * @param validity how long the block may be spent
     * @return the lease, or null when the block would not fit now
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public TokenLease reserve(long n, Duration validity) throws InterruptedException {
        if (validity.toMillis() < 1) {
            throw Errors.invalidArgument("the validity must be at least 1 ms, got " + validity);
        }
        long sent = System.nanoTime();
        JsonNode r = take(n, null, validity);
        if (!Wire.bool(r, "admitted")) {
            return null;
        }
        long until = sent + validity.toNanos() - Session.safetyMargin(validity).toNanos();
        return new TokenLease(this, Wire.u64(r, "leaseId"), Wire.u64(r, "n"), until);
    }

    /** Gives back unused tokens of a lease; what the cluster credited. */
    long giveBack(long leaseId, long unused) throws InterruptedException {
        JsonNode r = client.transport().call("/v1/ratelimit/return", Transport.CallOpts.plain(),
                a -> Wire.obj().put("name", name).put("leaseId", Wire.str(leaseId)).put("unused", Wire.str(unused)));
        return Wire.u64(r, "credited");
    }

    /**
     * Creates the limit with the spec given, or checks an existing one has it.
     *
     * @return true if this call created it
     * @throws LimitConflictException when it exists with other parameters
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public boolean define() throws InterruptedException {
        client.checkOpen();
        if (spec == null) {
            throw Errors.invalidArgument("give a spec to define a limit");
        }
        JsonNode r = client.transport().call("/v1/ratelimit/define", Transport.CallOpts.plain(),
                a -> {
                    ObjectNode b = Wire.obj().put("name", name);
                    b.set("limit", specJson());
                    return b;
                });
        return Wire.bool(r, "created");
    }

    /**
     * The limit's parameters, the tokens available now and totals (a linearizable read).
     *
     * @return the state now
     * @throws LimitNotFoundException when it does not exist
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public Info describe() throws InterruptedException {
        client.checkOpen();
        JsonNode r = client.transport().call("/v1/ratelimit/describe", Transport.CallOpts.plain(), a -> Wire.obj().put("name", name));
        JsonNode l = r.get("limit");
        Spec s = new Spec(Wire.u64(l, "rate"), Duration.ofMillis(Wire.u64(l, "perMs")), Wire.u64(l, "burst"));
        return new Info(name, s, Wire.u64(r, "available"), Wire.u64(r, "admitted"), Wire.u64(r, "refused"), (int) Wire.u64(r, "leases"));
    }

    /**
     * Forgets the limit (needs the admin right on the name).
     *
     * @return true if it existed
     * @throws InterruptedException if the calling thread is interrupted meanwhile
     */
    public boolean delete() throws InterruptedException {
        client.checkOpen();
        JsonNode r = client.transport().call("/v1/ratelimit/delete", Transport.CallOpts.plain(), a -> Wire.obj().put("name", name));
        return Wire.bool(r, "existed");
    }
}
