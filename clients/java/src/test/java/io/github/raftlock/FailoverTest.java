package io.github.raftlock;

import static io.github.raftlock.Util.eventually;
import static io.github.raftlock.Util.waiters;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** A cluster of its own: this test kills its leader. */
class FailoverTest {
    private static void expect(BlockingQueue<String> seen, String value) throws InterruptedException {
        while (true) {
            String v = seen.poll(20, TimeUnit.SECONDS);
            if (v == null) {
                throw new AssertionError("never observed " + value);
            }
            assertFalse(v.startsWith("error"), "observe showed an error through the failover: " + v);
            if (v.equals(value)) {
                return;
            }
        }
    }

    @Test
    void theClientFollowsTheNewLeaderAndTheWaiterIsGrantedOnce() throws Exception {
        try (TestCluster c = TestCluster.start(); RaftlockClient client = c.client()) {
            BlockingQueue<String> seen = new LinkedBlockingQueue<>();
            try (Session sa = client.newSession(); Session sb = client.newSession();
                 Observer o = client.observe("kill/elect", (l, err) -> seen.add(err != null ? "error " + err : l.map(Grant::value).orElse("")))) {
                Election e = sa.election("kill/elect");
                e.campaign("node-a");
                expect(seen, "node-a");
                DistributedLock a = sa.lock("kill/wait");
                a.lock();
                CompletableFuture<LockGuard> b = sb.lock("kill/wait").acquireAsync(Duration.ofSeconds(60));
                eventually("b queued", Duration.ofSeconds(10), () -> waiters(client, "kill/wait").size() == 1);
                int leader = c.waitLeader(Duration.ofSeconds(10), 0);
                String oldLeader = c.clients.get(leader - 1);
                c.kill(leader);
                int next = c.waitLeader(Duration.ofSeconds(30), leader);
                long aToken = a.token();
                a.unlock();
                try (LockGuard g = b.get(30, TimeUnit.SECONDS)) {
                    assertTrue(g.token() > aToken, "tokens increase across the failover");
                    assertTrue(client.validate("kill/wait", g.token()).valid());
                    LockInfo info = client.describe("kill/wait");
                    assertEquals(List.of(sb.id()), info.holders().stream().map(Grant::sessionId).toList(), "granted once, to b");
                    assertEquals(0, info.waiters().size());
                }
                assertEquals(c.clients.get(next - 1), client.status().leaderAddr());
                assertTrue(!c.clients.get(next - 1).equals(oldLeader));
                assertTrue(sa.isValid() && sb.isValid(), "sessions survive a failover well inside their TTL");
                // The observation carried on through the failover, reopened on the new
                // leader, without reporting an error.
                e.proclaim("node-a2");
                expect(seen, "node-a2");
                assertEquals("node-a2", client.electionLeader("kill/elect").value());
            }
        }
    }

    /**
     * A leader that freezes (SIGSTOP) never closes the connections of the calls it serves:
     * the client's probes must notice the silence and move the waiting acquire (and the
     * release) to the new leader long before their timeouts (66 s for the wait).
     */
    @Test
    void aFrozenLeaderIsLeftForTheNewOneDuringAWait() throws Exception {
        try (TestCluster c = TestCluster.start(); RaftlockClient client = c.client()) {
            try (Session sa = client.newSession(); Session sb = client.newSession()) {
                DistributedLock a = sa.lock("freeze/wait");
                a.lock();
                CompletableFuture<LockGuard> b = sb.lock("freeze/wait").acquireAsync(Duration.ofSeconds(60));
                eventually("b queued", Duration.ofSeconds(10), () -> waiters(client, "freeze/wait").size() == 1);
                int leader = c.waitLeader(Duration.ofSeconds(10), 0);
                c.signal(leader, "STOP");
                try {
                    c.waitLeader(Duration.ofSeconds(30), leader);
                    long start = System.nanoTime();
                    a.unlock();
                    try (LockGuard g = b.get(20, TimeUnit.SECONDS)) {
                        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                        assertTrue(took < 15_000, "moved off the frozen leader in " + took + " ms");
                        assertTrue(g.validate());
                    }
                    assertTrue(sa.isValid() && sb.isValid());
                } finally {
                    c.signal(leader, "CONT");
                }
            }
        }
    }
}
