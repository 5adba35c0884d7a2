package io.github.raftlock;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;

/**
 * A hold of a lock as the cluster recorded it. An election's leader is a grant too: its
 * value is {@link #metadata()}, its term of office {@link #token()}.
 *
 * <pre>{@code
 * for (Grant g : client.describe("jobs/a").holders()) {
 *     System.out.println(g.sessionId() + " holds it under token " + g.token());
 * }
 * }</pre>
 *
 * @param token the fencing token: strictly increasing per lock, in grant order; pass it
 *     with every write to the protected resource
 * @param name the lock's name
 * @param mode how it is held
 * @param sessionId the holding session
 * @param requestId the acquisition's request id (16 bytes)
 * @param grantedAt when it was granted, on the leader's wall clock (informational)
 * @param metadata what the holder attached (an election's value)
 * @param count the permits of a semaphore this hold takes (1 for an exclusive hold)
 * @param maxHold the hold cap ({@link Duration#ZERO}: none)
 * @param lockDelay the lock-delay this hold set ({@link Duration#ZERO}: none)
 */
public record Grant(
        long token,
        String name,
        LockMode mode,
        long sessionId,
        byte[] requestId,
        Instant grantedAt,
        byte[] metadata,
        int count,
        Duration maxHold,
        Duration lockDelay) {

    static Grant fromJson(JsonNode g) {
        int count = (int) Wire.u64(g, "count");
        return new Grant(
                Wire.u64(g, "token"),
                Wire.text(g, "name"),
                LockMode.fromWire(Wire.text(g, "mode")),
                Wire.u64(g, "sessionId"),
                Wire.bytes(g, "requestId"),
                Instant.ofEpochMilli(Wire.u64(g, "grantedAtMs")),
                Wire.bytes(g, "metadata"),
                // Absent from a node older than counted permits: one.
                count == 0 ? 1 : count,
                Duration.ofMillis(Wire.u64(g, "maxHoldMs")),
                Duration.ofMillis(Wire.u64(g, "lockDelayMs")));
    }

    /**
     * The metadata as UTF-8 text (an election's value).
     *
     * @return the decoded metadata
     */
    public String value() {
        return new String(metadata, StandardCharsets.UTF_8);
    }

    Grant withMetadata(byte[] m) {
        return new Grant(token, name, mode, sessionId, requestId, grantedAt, m, count, maxHold, lockDelay);
    }
}
