package io.github.raftlock;

import java.time.Duration;
import java.util.List;

/**
 * The holders and waiters of one lock, from {@link RaftlockClient#describe(String)}.
 *
 * <pre>{@code
 * LockInfo info = client.describe("jobs/a");
 * System.out.println(info.holders().size() + " holding, " + info.waiters().size() + " waiting");
 * }</pre>
 *
 * @param name the lock's name
 * @param permits the shared capacity (0: not fixed)
 * @param holders holders in grant order
 * @param waiters waiters in FIFO order
 * @param lockDelay non-zero while the lock is in lock-delay
 */
public record LockInfo(String name, int permits, List<Grant> holders, List<Waiter> waiters, Duration lockDelay) {
    /**
     * A queued acquisition.
     *
     * <pre>{@code
     * for (LockInfo.Waiter w : client.describe("jobs/a").waiters()) System.out.println(w.sessionId());
     * }</pre>
     *
     * @param sessionId the waiting session
     * @param mode the requested mode
     * @param requestId the waiting acquisition's request id
     * @param count the permits it asks for
     */
    public record Waiter(long sessionId, LockMode mode, byte[] requestId, int count) {}
}
