package io.github.raftlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Waits longer than the server allows one wait to be ({@code --max-wait-ms}) are waited in
 * turns, by a single lock and by a set alike. A cluster of its own, whose limit is 1 s.
 */
class WaitTurnsTest {
    @Test
    void aWaitLongerThanTheServersLimitIsWaitedInTurns() throws Exception {
        Duration before = DistributedLock.maxWaitTurn;
        DistributedLock.maxWaitTurn = Duration.ofSeconds(1);
        try (TestCluster c = TestCluster.start(List.of("--max-wait-ms", "1000"));
             RaftlockClient client = c.client();
             Session holder = client.newSession();
             Session waiter = client.newSession();
             Session setWaiter = client.newSession()) {
            // One wait of 3 s is refused outright: what the turns get around.
            DistributedLock held = holder.lock("turns/a");
            held.lock();
            assertThrows(InvalidArgumentException.class, () -> {
                DistributedLock.maxWaitTurn = Duration.ofSeconds(5);
                try {
                    waiter.lock("turns/a").acquire(Duration.ofSeconds(3));
                } finally {
                    DistributedLock.maxWaitTurn = Duration.ofSeconds(1);
                }
            });

            CompletableFuture<LockGuard> one = waiter.lock("turns/a").acquireAsync(Duration.ofSeconds(6));
            CompletableFuture<LockSet> set = CompletableFuture.supplyAsync(() -> {
                try {
                    return setWaiter.acquireAll(List.of("turns/a", "turns/b"), Duration.ofSeconds(8));
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            // Past two turns of each, then the lock is let go: the single wait, queued
            // first, gets it, and the set once that is let go too.
            Thread.sleep(2500);
            assertTrue(!one.isDone() && !set.isDone(), "both still waiting: " + one + " " + set);
            held.unlock();
            LockGuard g = one.get(10, TimeUnit.SECONDS);
            assertEquals("turns/a", g.name());
            g.close();
            try (LockSet s = set.get(10, TimeUnit.SECONDS)) {
                assertEquals(List.of("turns/a", "turns/b"), s.names());
            }
        } finally {
            DistributedLock.maxWaitTurn = before;
        }
    }
}
